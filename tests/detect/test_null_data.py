"""Null data (issue 32): tables where every flag is false.

- A table whose columns are shuffled independently keeps each column's values and loses every relation
  between columns and every order: the detectors that read relations or order (dependencies, co-occurrence,
  numbers against their context, sequences, neighbours, rules, derived columns, sources) must flag nothing,
  and the detectors that read one column at a time no more than on the table as it was.
- The clean file of every study pair: at most 0.2% of its cells flagged.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from iterate.detect import detect
from iterate.io import read_table
from iterate.issues import flags_of, issue_id

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
STUDY = sorted(p.name for p in SHARED.iterdir() if (p / "clean.csv").exists()) if SHARED.exists() else []
RELATIONS = {
    "dependencies",
    "cooccur",
    "numcontext",
    "arithmetic",
    "sequence",
    "neighbours",
    "rules",
    "derived",
    "sources",
}
MAX_ROWS = 3000  # the head of each file: enough rows for every detector, quick enough for make test
CLEAN_SHARE = 0.002

pytestmark = [
    pytest.mark.skipif(not STUDY, reason="../shared/datasets is not beside the repository"),
    pytest.mark.fitted,
]

# Known debt, measured with the committed fit (layers/iterate/detect/fitted.json): cells the single-column
# detectors flag on the shuffled table beyond the table as it was, and cells flagged on the clean file. A
# table listed here fails when it flags more than its budget (a regression) and is an expected failure while
# it is above the target; once it meets the target, the strict xfail fails: take it off the list.
SHUFFLE_DEBT = {
    # blanks a grouping column explained (a kind of record) lose their explanation when shuffled
    "beers": 21,
    # values vouched for by their entity (a hospital's own spelling) or held close by their group lose it
    "hospital": 120,
    # modes of multi-modal sensor readings, held by their machine state, are read as outliers once shuffled (2,343
    # cells, as before; the clean file's own flags fell from 1,012 to 960 in the refit of the small-sample rule,
    # and to 942 in the refit with arithmetic between columns)
    "smartfactory": 1416,
}
CLEAN_DEBT = {
    "airfoil": 138,  # '2500.0' among whole numbers in the clean file itself: a convention break, flagged by decision 1
    "restaurants": 25,  # rare shapes and spellings among restaurant names and types
    "smartfactory": 942,  # modes of multi-modal sensor readings read as outliers
}


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [r for _, r in zip(range(MAX_ROWS), reader, strict=False)]
    return header, rows


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _flags_by_detector(path: Path) -> tuple[Counter[str], int]:
    table = read_table(path)
    findings = detect(table).findings
    flags = flags_of(findings, table)
    by_issue = Counter(str(i) for i in flags.issue_ids)
    out: Counter[str] = Counter()
    for f in findings:
        out[f.detector] += by_issue.get(issue_id(f), 0)
    return out, table.n_rows * len(table.columns)


@pytest.mark.parametrize("name", STUDY)
def test_a_shuffled_table_has_no_relations_to_break(name: str, tmp_path: Path) -> None:
    # Given the clean file of a study pair, and the same file with each column shuffled on its own
    header, rows = _rows(SHARED / name / "clean.csv")
    rng = np.random.default_rng(32)
    columns = [[r[j] if j < len(r) else "" for r in rows] for j in range(len(header))]
    shuffled = [list(col[i] for i in rng.permutation(len(col))) for col in columns]
    as_is = _write(tmp_path / "clean.csv", header, rows)
    mixed = _write(tmp_path / "shuffled.csv", header, [list(t) for t in zip(*shuffled, strict=True)])
    # When detection runs on both
    before, _ = _flags_by_detector(as_is)
    after, _ = _flags_by_detector(mixed)
    # Then nothing that reads relations or order flags a cell of the shuffled table
    assert {d: n for d, n in after.items() if d in RELATIONS and n} == {}
    # And the single-column detectors flag no more than on the table as it was
    extra = sum(n for d, n in after.items() if d not in RELATIONS) - sum(
        n for d, n in before.items() if d not in RELATIONS
    )
    if name in SHUFFLE_DEBT:
        assert extra <= SHUFFLE_DEBT[name], (dict(before), dict(after))
        if extra > 0:
            pytest.xfail(
                f"known debt: {extra} more cells flagged once shuffled ({dict(before)} -> {dict(after)})"
            )
        pytest.fail(f"{name} meets the target now: take it off SHUFFLE_DEBT", pytrace=False)
    assert extra <= 0, (dict(before), dict(after))


@pytest.mark.parametrize("name", STUDY)
def test_a_clean_study_file_has_at_most_0_2_percent_of_its_cells_flagged(name: str, tmp_path: Path) -> None:
    header, rows = _rows(SHARED / name / "clean.csv")
    flagged, cells = _flags_by_detector(_write(tmp_path / "clean.csv", header, rows))
    n = sum(flagged.values())
    if name in CLEAN_DEBT:
        assert n <= CLEAN_DEBT[name], dict(flagged)
        if n > CLEAN_SHARE * cells:
            pytest.xfail(f"known debt: {n} of {cells} cells flagged ({dict(flagged)})")
        pytest.fail(f"{name} meets the target now: take it off CLEAN_DEBT", pytrace=False)
    assert n <= CLEAN_SHARE * cells, dict(flagged)
