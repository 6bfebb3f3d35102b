"""Headlines that do not mislead: how much of the data is wrong, columns ranked without whole-row issues,
and the run's own timings kept out of the user's summary."""

from __future__ import annotations

import re

import pytest

from iterate.agents.offline.analysis import summarize
from iterate.contracts import Evidence, Issue
from iterate.report import render_html

pytestmark = pytest.mark.unit


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


def whole_table_issue(columns: list[str], rows: int, *, type_: str, severity: str = "low") -> Issue:
    return Issue(
        id=f"{type_}-x", type=type_, severity=severity, description=f"{type_} everywhere",  # type: ignore[arg-type]
        affectedColumns=columns, suggestedAction="look", category="quick_fixes",
        evidence=Evidence(affectedCells=rows, affectedRows=rows, affectedShare=1.0),
    )  # fmt: skip


def test_the_summary_counts_rows_flagged_as_wrong_not_the_widest_issue(build):
    # Given a table of 336,776 rows with a constant column (a low issue over every row) and 1,204 flagged rows
    analysis, profile, understanding = build(rows=336_776, issues=2)
    analysis.issues.append(whole_table_issue([profile.columns[2].name], 336_776, type_="constant_column"))
    analysis.run = analysis.run.model_copy(update={"flaggedRows": 1204, "flaggedCells": 1310})
    # When rendered
    summary = section(render_html(analysis, profile, understanding), "summary")
    # Then the headline is the flagged rows, with the share the rest of the page would write
    assert (
        "<b>1,204 of 336,776 rows (0.4%)</b> hold at least one value flagged as wrong (1,310 flagged cells)"
        in summary
    )
    assert "336,776 of 336,776" not in summary and "widest issue" not in summary


def test_a_run_that_flags_nothing_says_so(build):
    analysis, profile, understanding = build()
    analysis.run = analysis.run.model_copy(update={"flaggedRows": 0, "flaggedCells": 0})
    assert "No value is flagged as wrong" in section(render_html(analysis, profile, understanding), "summary")


def test_a_duplicate_rows_issue_is_not_counted_against_every_column(build):
    # Given two issues on col_1 and a duplicate-rows issue over all six columns
    analysis, profile, understanding = build(columns=6, issues=0)
    names = [c.name for c in profile.columns]
    analysis.issues = [
        whole_table_issue(["col_1"], 10, type_="missing_values"),
        whole_table_issue(["col_1"], 5, type_="numeric_outlier", severity="medium"),
        whole_table_issue(names, 3, type_="duplicate_rows"),
    ]
    page = render_html(analysis, profile, understanding)
    heat = section(page, "columns-heat")
    # Then the chart ranks col_1 alone, with its 2 issues, and says what it left out
    labels = re.findall(r'<span class="hb-l"[^>]*>([^<]*)</span>', heat)
    assert labels == ["col_1"]
    assert "Not counted per column: 1 issue about whole rows (duplicate rows)." in heat
    # and no other column card claims an issue
    assert page.count("issue</a>") + page.count("issues</a>") == 1
    # And the offline summary names the same column with the same count
    assert "'col_1' has the most issues (2)." in summarize(analysis.issues, profile)


def test_the_summary_names_no_column_when_none_has_more_than_one_issue(build):
    analysis, profile, _ = build(columns=6, issues=0)
    analysis.issues = [whole_table_issue([f"col_{i}"], 1, type_="missing_values") for i in range(1, 4)]
    assert "most issues" not in summarize(analysis.issues, profile)


def test_time_per_step_is_a_run_detail_with_each_steps_parts_under_it(build):
    analysis, profile, understanding = build()
    timings = {"profile": 398.7, "understand": 2.3, "analyze": 2.0, "investigate": 236.8, "read": 32.0,
               "detect": 302.1, "profile_table": 38.6, "report": 5.1}  # fmt: skip
    analysis.run = analysis.run.model_copy(update={"timingsMs": timings})
    page = render_html(analysis, profile, understanding)
    assert "Time per step" not in section(page, "summary")
    run = section(page, "run")
    labels = re.findall(r'<span class="hb-l"[^>]*>([^<]*)</span>', run)
    assert labels == [
        "profile", "↳ read the file", "↳ detectors", "↳ column statistics", "understand", "analyze", "investigate",
        "report",
    ]  # fmt: skip
    assert re.findall(r'<span class="hb-v">([^<]*)</span>', run)[:2] == ["399 ms", "32 ms"]
    assert '<a href="#run">Run details</a>' in page
