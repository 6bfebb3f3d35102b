"""Offline templates run in the real sandbox recompute each issue type's claim; scripts rerun standalone."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iterate.agents.offline.investigation import (
    OfflineInvestigationAgent,
    UnsupportedIssue,
    supports,
    template_code,
)
from iterate.contracts import DatasetProfile, DuplicateStats, Evidence, Issue
from iterate.detect import Finding
from iterate.detect.numeric import NUMBER
from iterate.investigate import investigate_all, save_scripts
from iterate.io import write_parquet_text
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits, check_policy
from iterate.storage.local import LocalArtifactStore
from iterate.table import SourceInfo, Table

ROWS: dict[str, list[str]] = {
    "id": ["1", "2", "3", "4", "4", "6", "7", "8", "9"],
    "city": ["Paris", "paris ", "N/A", "Lyon", "Lyon", "Nice", "", "Lyon", "Lyon"],
    "amount": ["10", "12", "9999", "11", "11", "$1,000", "abc", "7", "-50"],
    "zip": ["75001", "7500", "", "69001", "69001", "06000", "n/a", "69001", "69002"],
    "country": ["FR", "FR", "FR", "FR", "FR", "FR", "FR", "FR", "FR"],
    "name": ["Ann Smith", "Bob Jones", "Cy Lee", "Dee Lee", "Dee Lee", "Eve", "Fay Jones", "Gus", "Hal"],
    "last": ["", "Jones", "", "Lee", "Lee", "", "", "Lee", "Jones"],
    "odd__name": ["a", "b", "c", "d", "d", "e", "f", "g", "h"],
    "ratio": ["0.5", "0.25", "0.453009067", "0.5", "0.5", "1.0", "6.904679999999999", "0.12345678", "0.2"],
    "when": ["09:15", "24:30", "12:75", "23:59", "23:59", "24:00", "", "13:00", "07:05"],
}
N = len(ROWS["id"])
PROFILE = DatasetProfile(
    name="t",
    rowCount=N,
    columnCount=len(ROWS),
    contentHash="h",
    nullMarker="",
    columns=[],
    duplicates=DuplicateStats(exactRows=1, exactGroups=1, nearRows=0),
)


def issue(issue_id: str, type_: str, rows: int, stats: dict[str, Any]) -> Issue:
    return Issue(
        id=issue_id,
        type=type_,
        severity="low",
        description="d",
        affectedColumns=[],
        suggestedAction="s",
        category="quick_fixes",
        affectedRows=rows,
        evidence=Evidence(affectedCells=rows, affectedRows=rows, affectedShare=rows / N, stats=stats),
    )


def count(values: list[str], predicate: Any) -> int:
    return sum(1 for v in values if predicate(v))


def fd_violations(lhs: str, rhs: str) -> int:
    """Rows whose rhs differs from the most frequent rhs of their lhs group (first seen wins a tie)."""
    groups: dict[str, list[str]] = {}
    for key, value in zip(ROWS[lhs], ROWS[rhs], strict=True):
        groups.setdefault(key, []).append(value)
    return sum(sum(1 for v in vals if v != max(vals, key=vals.count)) for vals in groups.values())


def is_number(text: str) -> bool:
    """Reads as a number with nothing left over, by Python's own float() (thousands groups allowed)."""
    text = text.strip()
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    try:
        float(text)
    except ValueError:
        return False
    return not re.search(r"[a-zA-Z]", text.replace("e", "").replace("E", ""))


def decimals_written(text: str) -> int:
    """Decimals once binary floating-point noise is gone: the shortest repr of the value rounded to 12 digits."""
    value = float(text)
    short = repr(float(f"{value:.12g}"))
    return len(short.split(".")[1]) if "." in short and short.split(".")[1] != "0" else 0


def significant_digits(text: str) -> int:
    """Significant digits once binary floating-point noise is gone: the value rounded to 12 digits."""
    return max(len(f"{float(text):.11e}".split("e")[0].lstrip("-").replace(".", "").rstrip("0")), 1)


def not_a_time(text: str) -> bool:
    try:
        datetime.strptime(text.strip(), "%H:%M")
    except ValueError:
        return True
    return False


def listed_cells(column: str, listed: list[str], predicate: Any) -> int:
    return sum(1 for v in ROWS[column] if v in listed and predicate(v))


def missing(value: str) -> bool:
    return value.strip().casefold() in {"", "n/a"}


def varied(x: str, y: str) -> set[int]:
    """Rows (both values present) whose x group holds more than one y."""
    groups: dict[str, set[str]] = {}
    for a, b in zip(ROWS[x], ROWS[y], strict=True):
        if not missing(a) and not missing(b):
            groups.setdefault(a, set()).add(b)
    return {
        r
        for r, (a, b) in enumerate(zip(ROWS[x], ROWS[y], strict=True))
        if not missing(a) and not missing(b) and len(groups[a]) > 1
    }


def sequence_breaks(column: str, step: float, reach: int, listed: list[int]) -> int:
    """Listed rows that a row before and a row after (within reach) bracket on the step, while the row keeps
    the step with none of the rows within reach."""
    values = [float(v) for v in ROWS[column]]

    def keeps(i: int, j: int) -> bool:
        return 0 <= i < N and 0 <= j < N and abs(values[j] - values[i] - (j - i) * step) <= 1e-3 * abs(step)

    def broken(r: int) -> bool:
        near = [j for j in range(r - reach, r + reach + 1) if j != r]
        through = any(keeps(r - a, r + b) for a in range(1, reach + 1) for b in range(1, reach + 1))
        return through and not any(keeps(min(r, j), max(r, j)) for j in near)

    return sum(1 for r in listed if broken(r))


def prefix2(value: str) -> str | None:
    value = value.strip()
    return value[:2] if re.fullmatch(r"[A-Za-z0-9]{3,}", value) else None


def sign(value: str) -> str | None:
    """The sign class of a plain number (no thousands groups, no units), None for anything else."""
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", value.strip()):
        return None
    number = float(value)
    return "<0" if number < 0 else "=0" if number == 0 else ">0"


def merged_rows(column: str, other: str) -> int:
    seen = {v for v in ROWS[other] if v.strip()}
    return sum(
        1
        for value, o in zip(ROWS[column], ROWS[other], strict=True)
        if not o.strip() and any(value.endswith(" " + s) for s in seen)
    )


# Each case: the issue as a detector would write it, with the count worked out here by plain Python.
CASES = [
    issue("missing", "missing_values", count(ROWS["city"], lambda v: v.strip().casefold() in {"", "n/a"}),
          {"column": "city", "markers": ["", "N/A"]}),
    issue("exact-dupes", "duplicate_rows", 1, {"columns": list(ROWS)}),
    issue("near-dupes", "near_duplicate_rows", 0, {"columns": ["city", "name"]}),
    issue("zip-format", "format_violation",
          count(ROWS["zip"], lambda v: v.strip() not in {"", "n/a"} and not re.fullmatch(r"\d{5}", v)),
          {"column": "zip", "expected_regex": r"\d{5}", "missing_markers": ["n/a"]}),
    issue("units", "unit_in_number", 1, {"column": "amount", "bad_values": ["$1,000"]}),
    issue("spelling", "inconsistent_category", 1,
          {"column": "city", "bad_values": ["paris "], "canonical": {"paris ": "Paris"}}),
    issue("outliers", "numeric_outlier",
          listed_cells("amount", ["9999", "-50", "$1,000", "10"], lambda v: is_number(v) and not 0 <= float(v) <= 100),
          {"column": "amount", "low": 0, "high": 100, "scale": "linear", "bad_values": ["9999", "-50", "$1,000", "10"]}),
    issue("not-a-number", "mixed_types",
          listed_cells("amount", ["abc", "$1,000", "12"], lambda v: not is_number(v)),
          {"column": "amount", "rule": "number", "bad_values": ["abc", "$1,000", "12"]}),
    issue("precision", "format_violation",
          listed_cells("ratio", ["0.453009067", "6.904679999999999", "0.5"], lambda v: decimals_written(v) >= 4),
          {"column": "ratio", "rule": "decimals", "min_decimals": 4,
           "bad_values": ["0.453009067", "6.904679999999999", "0.5"]}),
    issue("precision-digits", "format_violation",
          listed_cells("ratio", ["0.453009067", "6.904679999999999", "0.5"], lambda v: significant_digits(v) >= 9),
          {"column": "ratio", "rule": "digits", "min_digits": 9,
           "bad_values": ["0.453009067", "6.904679999999999", "0.5"]}),
    issue("width", "format_violation", listed_cells("zip", ["7500", "69002"], lambda v: len(v) != 5),
          {"column": "zip", "rule": "width", "width": 5, "bad_values": ["7500", "69002"]}),
    issue("float-int", "format_violation",
          listed_cells("ratio", ["1.0", "0.5"], lambda v: re.fullmatch(r"\d+\.0+", v) is not None),
          {"column": "ratio", "rule": "integer_written", "bad_values": ["1.0", "0.5"]}),
    issue("rare", "inconsistent_category",
          listed_cells("city", ["Nice", "Lyon"], lambda v: ROWS["city"].count(v) * 2 <= 4),
          {"column": "city", "rule": "rare", "typical_count": 4, "min_ratio": 2, "bad_values": ["Nice", "Lyon"]}),
    issue("impossible-time", "out_of_domain", listed_cells("when", ["24:30", "12:75", "23:59"], not_a_time),
          {"column": "when", "rule": "date", "formats": ["%H:%M"], "bad_values": ["24:30", "12:75", "23:59"]}),
    issue("gaps", "missing_values", sum(1 for r in (0, 2, 3) if missing(ROWS["last"][r])),
          {"column": "last", "rule": "missing", "rows": [0, 2, 3], "missing_markers": ["", "n/a"]}),
    issue("missing-row", "missing_together", 2,
          {"columns": ["city", "zip", "last"], "rule": "missing_row", "min_missing": 3, "rows": [2, 5, 6],
           "missing_markers": ["", "n/a"], "markers": ["", "n/a"]}),
    issue("consensus", "dependency_violation", len({0, 2, 5} & varied("country", "city")),
          {"rhs": "city", "rule": "consensus", "determinants": ["country"], "rows": [0, 2, 5],
           "missing_markers": ["", "n/a"]}),
    issue("key", "dependency_violation",
          sum(1 for r in (0, 1, 8) if sum(r in varied("last", y) for y in ("city", "name")) >= 2),
          {"lhs": "last", "rule": "determinant", "dependents": ["city", "name"], "rows": [0, 1, 8],
           "missing_markers": ["", "n/a"]}),
    issue("together", "missing_together",
          sum(1 for a, b in zip(ROWS["city"], ROWS["last"], strict=True) if missing(a) and missing(b)),
          {"columns": ["city", "last"], "markers": ["", "N/A"], "min_missing": 2}),
    issue("sequence", "dependency_violation", sequence_breaks("id", 1.0, 3, [0, 4, 8]),
          {"column": "id", "rule": "sequence", "step": 1.0, "reach": 3, "tolerance": 1e-3, "number_regex": NUMBER,
           "rows": [0, 4, 8]}),
    issue("prefix-rule", "dependency_violation",
          sum(1 for r in (0, 1, 3) if prefix2(ROWS["zip"][r]) == "75" and not missing(ROWS["city"][r]) and ROWS["city"][r] != "Paris"),
          {"column": "city", "rule": "conditional", "rows": [0, 1, 3], "missing_markers": ["", "n/a"],
           "facet": {"column": "zip", "kind": "prefix", "length": 2, "code_regex": r"^[A-Za-z0-9]{3,}$"},
           "rules": [{"when": "75", "then": "Paris"}]}),
    issue("sign-rule", "dependency_violation",
          sum(1 for r in (0, 2, 5, 8) if sign(ROWS["amount"][r]) == ">0" and ROWS["name"][r] != "Ann Smith"),
          {"column": "name", "rule": "conditional", "rows": [0, 2, 5, 8], "missing_markers": ["", "n/a"],
           "facet": {"column": "amount", "kind": "sign", "number_regex": NUMBER},
           "rules": [{"when": ">0", "then": "Ann Smith"}]}),
    issue("fd", "dependency_violation", fd_violations("country", "city"), {"lhs": ["country"], "rhs": "city", "min_support": 3}),
    issue("merged", "merged_columns", merged_rows("name", "last"), {"column": "name", "other": "last"}),
    issue("constant", "constant_column", N, {"column": "country"}),
    issue("unique", "all_unique_column", 0, {"column": "id"}),
    issue("dunder-name", "stray_whitespace", 1, {"column": "odd__name", "bad_values": ["e"]}),
]  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = Table.from_arrow(pa.table(ROWS), name="t", source=SourceInfo(path="t.csv", format="csv"))
    return write_parquet_text(table, tmp_path_factory.mktemp("tpl") / "data.parquet")


@pytest.fixture(scope="module")
def investigated(dataset: Path) -> dict[str, Issue]:
    sandbox = LocalSandbox(SandboxLimits(timeout_s=20))
    out = investigate_all(
        CASES,
        agent=OfflineInvestigationAgent(),
        sandbox=sandbox,
        data=DatasetRef(path=str(dataset)),
        profile=PROFILE,
    )
    return {i.id: i for i in out}


@pytest.mark.unit
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_template_recomputes_the_claim(case: Issue, investigated: dict[str, Issue]) -> None:
    # Given an issue of each type whose count was worked out independently
    # When its template ran in the sandbox
    found = investigated[case.id]
    inv = found.investigation
    # Then it succeeded, agreed with the count, and returned share and examples that match
    assert inv is not None and inv.success, (inv.stopped, inv.error) if inv else None
    assert inv.source == "template"
    assert inv.output["affected_rows"] == case.affectedRows
    assert found.status == "confirmed"
    assert inv.output["share"] == pytest.approx(case.affectedRows / N)
    assert len(inv.output["examples"]) == min(10, case.affectedRows)
    for example in inv.output["examples"]:
        assert ROWS[example["column"]][example["row"]] == example["value"]


@pytest.mark.unit
def test_every_template_passes_the_static_policy() -> None:
    for case in CASES:
        assert check_policy(template_code(case)) == [], case.id


@pytest.mark.unit
@pytest.mark.parametrize(
    "unsupported",
    [
        issue("ragged", "ragged_rows", 2, {"rows": [1, 2]}),
        issue("header", "blank_header", 1, {"column": "x"}),
        issue("llm", "seasonal_spike", 3, {}),
        issue("no-params", "numeric_outlier", 3, {"column": "amount"}),
        issue("no-values", "format_violation", 3, {"column": "amount", "rule": "number"}),
    ],
    ids=lambda i: i.id,
)
def test_issues_without_a_template_are_not_investigated(unsupported: Issue) -> None:
    assert supports(unsupported) is False
    with pytest.raises(UnsupportedIssue):
        template_code(unsupported)


@pytest.mark.unit
def test_saved_scripts_rerun_standalone_and_print_the_same_evidence(
    investigated: dict[str, Issue], dataset: Path, tmp_path: Path
) -> None:
    # Given the investigated issues and a local artifact store beside the report
    store = LocalArtifactStore(tmp_path / "run")
    failed = investigated["missing"].model_copy(
        update={
            "id": "failed-one",
            "investigation": investigated["missing"].investigation.model_copy(update={"success": False}),
        }  # type: ignore[union-attr]
    )
    # When the scripts are saved
    keys = save_scripts([*investigated.values(), failed], store)
    # Then there is one per successful investigation
    assert sorted(keys) == sorted(f"scripts/{c.id}.py" for c in CASES)
    # And a script run by hand on the Parquet file, or on a CSV of the same data, prints the sandbox's output
    csv_path = tmp_path / "data.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(list(ROWS))
        writer.writerows(zip(*ROWS.values(), strict=True))
    for issue_id in ("zip-format", "outliers", "dunder-name"):
        script = tmp_path / "run" / "scripts" / f"{issue_id}.py"
        expected = investigated[issue_id].investigation.output  # type: ignore[union-attr]
        for data in (dataset, csv_path):
            done = subprocess.run(
                [sys.executable, str(script), str(data)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout) == expected


@pytest.mark.slow
def test_detector_issues_on_a_real_benchmark_are_confirmed_by_their_templates(tmp_path: Path) -> None:
    # Given the issues the detectors find in a public benchmark file (units, merged columns, dependencies...)
    source = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "beers" / "dirty.csv"
    if not source.exists():
        pytest.skip("benchmark datasets not present")
    from iterate.detect import detect
    from iterate.io import read_table
    from iterate.issues import issues_from_findings

    table = read_table(source)
    issues = issues_from_findings(detect(table).findings, table, None)
    data = write_parquet_text(table, tmp_path / "beers.parquet")
    # When every supported issue is investigated offline
    out = investigate_all(
        issues,
        agent=OfflineInvestigationAgent(),
        sandbox=LocalSandbox(SandboxLimits(timeout_s=30)),
        data=DatasetRef(path=str(data)),
        profile=PROFILE,
    )
    # Then each one the templates cover is recounted to exactly the detector's number
    investigated = [i for i in out if i.investigation is not None]
    assert len(investigated) >= 10
    disagreements = [
        (i.id, i.affectedRows, i.investigation.output if i.investigation.success else i.investigation.error)  # type: ignore[union-attr]
        for i in investigated
        if i.status != "confirmed" or not i.investigation.success  # type: ignore[union-attr]
    ]
    assert disagreements == []


# Word slips: a claim names a value, the word in it, the column's word it slips from and the kind of slip; the
# template recounts the column's word vocabulary (distinct filled values holding each word) and re-checks it.
BREWERIES = [
    "Alpha Brewing Company", "Beta Brewing Company", "Gamma Brewing Company", "Delta Brewing Company",
    "Airways Brewing Cmopany", "Airways Brewing Cmopany", "Ska Brewin gCompany", "Hop Valley BRewing Company",
    "Zeta Brewing Compny", "n/a", "Epsilon Brewing Company", "",
]  # fmt: skip
WORD_SLIPS = {
    "Airways Brewing Cmopany": ["Cmopany", "Company", "swap"],
    "Ska Brewin gCompany": ["Brewin gCompany", "Brewing Company", "space"],
    "Hop Valley BRewing Company": ["BRewing", "Brewing", "case"],
    "Gamma Brewing Company": ["Gamma", "Company", "swap"],  # not one slip apart
    "Delta Brewing Company": ["Brewing", "Brewing", "drop"],  # an established word, not a rare one
    "Zeta Brewing Compny": ["Compny", "Company", "drop"],
}


def word_slip_rows(
    values: list[str], slips: dict[str, list[str]], listed: list[str], markers: set[str]
) -> int:
    """Rows of listed values whose claim holds, worked out with plain sets and an edit distance."""
    filled = {v for v in values if v.strip().casefold() not in markers and re.search(r"[^\W\d_]", v)}
    words = {v: re.findall(r"[^\W\d_]+", v) for v in filled}
    df = {w: sum(1 for v in filled if w in {x.casefold() for x in words[v]}) for v in filled for w in (x.casefold() for x in words[v])}  # fmt: skip
    forms = {w: sum(1 for v in filled if w in words[v]) for v in filled for w in words[v]}

    def distance(a: str, b: str) -> int:  # optimal string alignment
        d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
                if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
        return d[-1][-1]

    def ratio(n: int) -> float:
        return 20.0 if n <= 3 else 8.0 if n <= 5 else 3.0

    def holds(value: str) -> bool:
        written, reference, kind = slips[value]
        if kind == "space":
            a, b = written.split(" ")
            x, y = reference.split(" ")
            return (
                written in value
                and (a + b).casefold() == (x + y).casefold()
                and min(df.get(a.casefold(), 0), df.get(b.casefold(), 0)) <= 2
                and min(df.get(x.casefold(), 0), df.get(y.casefold(), 0)) >= 3
            )
        if kind == "case":
            return written in words[value] and forms.get(written, 0) <= 2 and forms.get(reference, 0) >= ratio(len(written)) * forms[written]  # fmt: skip
        w, r = written.casefold(), reference.casefold()
        return (
            written in words[value]
            and df.get(w, 0) <= 2
            and df.get(r, 0) >= max(3, ratio(len(w)) * df[w])
            and distance(w, r) == 1
        )

    return sum(1 for v in values if v in listed and v in filled and holds(v))


WORD_CASE = issue(
    "word-slips", "inconsistent_category",
    word_slip_rows(BREWERIES, WORD_SLIPS, list(WORD_SLIPS), {"", "n/a"}),
    {"column": "brewery", "rule": "word_slip", "bad_values": sorted(WORD_SLIPS), "slips": WORD_SLIPS,
     "established": 3, "rare": 2, "missing_markers": ["", "n/a"]},
)  # fmt: skip


@pytest.mark.unit
def test_word_slip_template_recomputes_the_claim(tmp_path: Path) -> None:
    # Given brewery names with a swap, a moved space, a held shift and a dropped letter, listed with two claims
    # that do not hold (two words that are not one slip apart, and an established word called rare)
    # When the template runs in the sandbox
    out = _investigated_on_one_column(WORD_CASE, "brewery", BREWERIES, tmp_path)
    inv = out.investigation
    # Then it counts exactly the rows whose claim holds (both Cmopany rows, the space, the shift, Compny)
    assert inv is not None and inv.success, (inv.stopped, inv.error) if inv else None
    assert WORD_CASE.affectedRows == 5
    assert inv.output["affected_rows"] == 5
    assert out.status == "confirmed"
    assert check_policy(template_code(WORD_CASE)) == []


def _investigated_on_one_column(case: Issue, name: str, values: list[str], tmp_path: Path) -> Issue:
    """The issue once its template ran in the sandbox on a one-column table of `values`."""
    table = Table.from_arrow(
        pa.table({name: values}), name="t", source=SourceInfo(path="t.csv", format="csv")
    )
    data = write_parquet_text(table, tmp_path / "t.parquet")
    return investigate_all(
        [case],
        agent=OfflineInvestigationAgent(),
        sandbox=LocalSandbox(SandboxLimits(timeout_s=20)),
        data=DatasetRef(path=str(data)),
        profile=PROFILE.model_copy(update={"rowCount": len(values), "columnCount": 1}),
    )[0]


@pytest.mark.unit
def test_a_template_with_thousands_of_listed_values_fits_the_policy_and_recomputes_the_claim(
    tmp_path: Path,
) -> None:
    from iterate.detect.findings import MAX_LISTED
    from iterate.sandbox.policy import MAX_CODE_CHARS

    # Given a long names column where the detector listed as many values with stray spaces as it may (each
    # with its trimmed spelling), and as many excluded values: 3M rows of the bench file made this 136 KB
    names = [f"CUSTOMER NUMBER {i:06d}" for i in range(2 * MAX_LISTED)]
    padded = [f"{n}  " for n in names[:MAX_LISTED]]
    column = padded + names[MAX_LISTED:]
    stats = {
        "column": "customer",
        "bad_values": sorted(padded),
        "canonical": {p: p.strip() for p in padded},
        "excluded_values": sorted(names[MAX_LISTED:]),
    }
    case = issue("ws-long", "stray_whitespace", 1, stats)
    case.affectedRows = MAX_LISTED
    assert case.evidence is not None
    case.evidence = case.evidence.model_copy(
        update={"affectedCells": MAX_LISTED, "affectedRows": MAX_LISTED, "affectedShare": 0.5}
    )
    code = template_code(case)
    # Then its code is within the policy's size and passes it, the display-only mapping left out
    assert len(code) < MAX_CODE_CHARS / 2
    assert check_policy(code) == []
    assert "CUSTOMER NUMBER" not in code  # the values travel deflated
    # and in the sandbox it counts exactly the padded rows
    out = _investigated_on_one_column(case, "customer", column, tmp_path)
    inv = out.investigation
    assert inv is not None and inv.success, (inv.stopped, inv.error) if inv else None
    assert inv.output["affected_rows"] == MAX_LISTED
    assert out.status == "confirmed"


def _padded_names(rows: np.ndarray, stats: dict[str, Any]) -> Finding:
    """A stray-whitespace finding on these rows of the column 'customer', with these stats."""
    return Finding(
        type="stray_whitespace",
        columns=["customer"],
        rows=rows,
        cols=np.zeros(rows.size, dtype=np.int64),
        title="t",
        description="d",
        suggested_action="a",
        category="quick_fixes",
        detector="text",
        stats={"column": "customer", **stats},
        key="whitespace:customer",
    )


@pytest.mark.unit
def test_an_issue_over_more_values_than_listed_is_confirmed_for_the_listed_rows_and_says_so(
    tmp_path: Path,
) -> None:
    from iterate.detect.findings import MAX_LISTED
    from iterate.issues import issues_from_findings

    # Given a names column where 6,000 distinct values carry stray spaces (two rows each), of which the detector
    # lists the first MAX_LISTED
    padded = [f"CUSTOMER NUMBER {i:06d}  " for i in range(MAX_LISTED + 1_000)]
    column = padded + padded + [f"CLEAN {i}" for i in range(500)]
    table = Table.from_arrow(
        pa.table({"customer": column}), name="c", source=SourceInfo(path="c.csv", format="csv")
    )
    finding = _padded_names(np.arange(2 * len(padded)), {"bad_values": sorted(padded)[:MAX_LISTED]})
    (case,) = issues_from_findings([finding], table, None)
    # Then the issue counts every row, and knows how many hold a listed value
    assert case.affectedRows == 2 * len(padded)
    assert case.evidence is not None and case.evidence.stats["listed_rows"] == 2 * MAX_LISTED
    # When its template recounts the listed values in the sandbox
    out = _investigated_on_one_column(case, "customer", column, tmp_path)
    inv = out.investigation
    assert inv is not None and inv.success, (inv.stopped, inv.error) if inv else None
    # Then the recount is the listed rows', the issue is confirmed for them, and both counts are kept, said
    assert inv.output["affected_rows"] == 2 * MAX_LISTED
    assert out.status == "confirmed"
    assert out.affectedRows == 2 * len(padded)
    stats = out.evidence.stats if out.evidence else {}
    assert stats["detector_affected_rows"] == 2 * len(padded)
    assert stats["recount"] == (
        f"the proof recounted the {MAX_LISTED:,} values the detector lists: {2 * MAX_LISTED:,} of the issue's "
        f"{2 * len(padded):,} rows"
    )


@pytest.mark.unit
def test_a_cut_list_shortened_by_the_decision_still_counts_the_rows_it_lists() -> None:
    from iterate.detect.findings import MAX_LISTED
    from iterate.issues import issues_from_findings

    # Given 6,000 padded names (two rows each): the detector listed the first MAX_LISTED, and the decision then
    # gave up 3,000 of those (excluded_values), leaving a list shorter than MAX_LISTED that still leaves out
    # the last 1,000 names, whose rows the finding keeps
    padded = [f"CUSTOMER NUMBER {i:06d}  " for i in range(MAX_LISTED + 1_000)]
    column = np.array(padded + padded)
    table = Table.from_arrow(
        pa.table({"customer": column.tolist()}), name="c", source=SourceInfo(path="c.csv", format="csv")
    )
    listed, given_up = sorted(padded)[3_000:MAX_LISTED], sorted(padded)[:3_000]

    def issue(rows: np.ndarray, stats: dict[str, object]) -> Issue:
        (made,) = issues_from_findings([_padded_names(rows, stats)], table, None)
        return made

    # When the issue is made from it
    kept = np.flatnonzero(~np.isin(column, given_up))
    case = issue(kept, {"bad_values": listed, "excluded_values": given_up})
    # Then it counts every row it keeps, and the rows holding a listed value apart
    assert case.affectedRows == kept.size == 2 * 3_000
    assert case.evidence is not None and case.evidence.stats["listed_rows"] == 2 * len(listed)
    # And a list that was never cut (no value given up, fewer than MAX_LISTED values) adds nothing
    whole = issue(np.flatnonzero(np.isin(column, listed)), {"bad_values": listed})
    assert whole.evidence is not None and "listed_rows" not in whole.evidence.stats
