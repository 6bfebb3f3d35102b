"""Conflicting sources: the reliable sources' vote is each entity's truth; reports off it are listed, and
reports of the truth in another spelling are a format question. Tables that do not name a source column,
or whose 'sources' report an entity many times, are left to the other detectors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iterate.agents.offline.investigation import template_code
from iterate.detect import detect
from iterate.detect.context import facts_for
from iterate.detect.discovery import discover
from iterate.detect.sources import detect_source_conflicts, discover_truth
from iterate.io import read_parquet_text, write_parquet_text
from iterate.issues import issues_from_findings
from iterate.sandbox import check_policy
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def clock(minutes: int, style: int) -> str:
    h, m = divmod(minutes % 1440, 60)
    half, h12 = ("a.m." if h < 12 else "p.m."), (h % 12 or 12)
    return [f"{h12}:{m:02d} {half}", f"{h12}:{m:02d}{half[0]}m"][style]


def flights(seed: int = 4) -> tuple[dict[str, list[str]], set[int], set[int]]:
    """80 flights reported by 12 sources of varied accuracy; some sources write times their own way.
    Returns the columns, the rows with a wrong time, and the rows with the right time written otherwise."""
    rng = np.random.default_rng(seed)
    accuracy = np.linspace(0.55, 0.98, 12)
    style = [1 if k % 4 == 0 else 0 for k in range(12)]
    cols: dict[str, list[str]] = {"src": [], "flight": [], "dep": []}
    wrong, restyled = set(), set()
    for f in range(80):
        truth = int(rng.integers(300, 1300))
        for k in range(12):
            r = len(cols["src"])
            cols["src"].append(f"site{k}")
            cols["flight"].append(f"AA-{1000 + f}")
            if rng.random() > accuracy[k]:
                cols["dep"].append(clock(truth + int(rng.choice([-30, -5, 5, 15, 60])), style[k]))
                wrong.add(r)
            else:
                cols["dep"].append(clock(truth, style[k]))
                if style[k]:
                    restyled.add(r)
    return cols, wrong, restyled


def table_of(cols: dict[str, list[str]]) -> Table:
    return Table.from_arrow(pa.table(cols), name="t", source=SourceInfo(path="t.csv", format="csv"))


def found(table: Table) -> dict[str, set[int]]:
    facts = facts_for(table, "")
    out: dict[str, set[int]] = {}
    for f in detect_source_conflicts(facts, table.n_rows, discover(facts, table.n_rows)):
        out.setdefault(f.type, set()).update(int(r) for r in f.rows)
    return out


def test_the_weighted_vote_learns_which_sources_to_trust() -> None:
    # Given three entities, a reliable source and two that copy one wrong value
    x = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2])
    s = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3, 3])
    y = np.array([5, 5, 5, 6, 6, 6, 7, 7, 7, 9, 6, 7])
    truth, wrong, accuracy = discover_truth(x, y, s, 3, 10, 4)
    assert truth.tolist()[:9] == [5, 5, 5, 6, 6, 6, 7, 7, 7]
    assert wrong[9] > 0.5 and wrong[0] < 0.5
    assert accuracy[0] > accuracy[3]


def test_reports_off_the_truth_and_truth_written_otherwise_are_listed() -> None:
    cols, wrong, restyled = flights()
    got = found(table_of(cols))
    listed = got.get("dependency_violation", set())
    # Then most wrong reports are listed, and hardly anything else
    assert len(listed & wrong) >= 0.8 * len(wrong)
    assert len(listed - wrong) <= 0.02 * len(listed)
    # And the right time written another way is a format question, listed as such
    assert restyled <= got.get("format_violation", set())


def test_without_a_column_named_as_a_source_nothing_is_judged_as_sources() -> None:
    cols, _, _ = flights()
    cols["airport"] = cols.pop("src")
    assert found(table_of(cols)) == {}


def test_sources_that_report_an_entity_many_times_are_not_a_merged_table() -> None:
    # Given a 'source' column that is a category of the rows, not one report per entity
    cols, _, _ = flights()
    cols["source"] = ["web" if i % 3 else "phone" for i in range(len(cols["src"]))]
    cols.pop("src")
    assert found(table_of(cols)) == {}


def run(code: str, df: Any) -> Any:
    scope: dict[str, Any] = {"df": df, "result": None}
    exec(code, scope)
    return json.loads(json.dumps(scope["result"]))


def test_the_templates_recount_what_the_sources_findings_claim(tmp_path: Any) -> None:
    cols, _, _ = flights()
    table = table_of(cols)
    issues = [
        i
        for i in issues_from_findings(detect(table).findings, table, None)
        if i.detector in ("sources", "sources-format")
    ]
    assert {i.type for i in issues} == {"dependency_violation", "format_violation"}
    df = read_parquet_text(write_parquet_text(table, tmp_path / "data.parquet"))
    for issue in issues:
        code = template_code(issue)
        assert check_policy(code) == []
        assert run(code, df.copy())["affected_rows"] == issue.affectedRows, issue.id
