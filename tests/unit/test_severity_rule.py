"""The severity rule (issues.severity_of, issue 32): the kind of damage and the share of rows, one rule for all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iterate.detect import Finding
from iterate.io import read_table
from iterate.issues import SEVERITY_SHARES, severity_of, to_issue

pytestmark = pytest.mark.unit

ROWS = 200


@pytest.fixture
def table(tmp_path: Path):
    path = tmp_path / "orders.csv"
    path.write_text("id,qty,note,country\n" + "".join(f"{n},{n},,FR\n" for n in range(ROWS)))
    return read_table(path)


def finding(kind: str, column: int, rows: int, **extra) -> Finding:
    return Finding(
        type=kind,
        columns=[["id", "qty", "note", "country"][column]],
        rows=np.arange(rows),
        cols=np.full(rows, column),
        title="t",
        description="d",
        suggested_action="a",
        category="quick_fixes",
        detector="test",
        **extra,
    )


@pytest.mark.parametrize(
    ("rows", "expected"), [(1, "low"), (2, "medium"), (19, "medium"), (20, "high"), (30, "high")]
)
def test_wrong_values_rise_from_1_and_10_percent_of_rows(table, rows, expected):
    # 15% of a category misspelt is high; one typo in 200 rows is low
    issue = to_issue(finding("inconsistent_category", 1, rows), table, important=set())
    assert issue.severity == expected


@pytest.mark.parametrize(("rows", "expected"), [(9, "low"), (10, "medium"), (39, "medium"), (40, "high")])
def test_flagged_gaps_rise_from_5_and_20_percent_of_rows(table, rows, expected):
    issue = to_issue(finding("missing_values", 1, rows), table, important=set())
    assert issue.severity == expected


@pytest.mark.parametrize("rows", [1, 50, ROWS])
def test_a_value_written_unlike_its_column_is_low_at_any_share(table, rows):
    issue = to_issue(finding("format_violation", 1, rows, damage="format"), table, important={"qty"})
    assert issue.severity == "low"


def test_facts_that_flag_nothing_are_low_at_any_share(table):
    # A constant column: 100% of the rows, none of its values wrong
    constant = finding("constant_column", 3, ROWS, flag=False)
    assert to_issue(constant, table, important={"country"}).severity == "low"
    # A mostly-empty optional column, empty by its convention: not "high"
    empty = finding("missing_values", 2, ROWS, flag=False, stats={"convention": True})
    assert to_issue(empty, table, important=set()).severity == "low"
    # Blanks that follow a pattern another column explains (a survey's skip rule), reported unflagged
    skipped = finding("missing_together", 1, 150, flag=False)
    assert to_issue(skipped, table, important=set()).severity == "low"


def test_wrong_values_in_a_key_column_go_one_level_up_and_nothing_else_does(table):
    assert to_issue(finding("dependency_violation", 1, 1), table, important={"qty"}).severity == "medium"
    assert to_issue(finding("missing_values", 1, 1), table, important={"qty"}).severity == "low"


def test_gaps_in_a_free_text_column_are_a_fact(table):
    issue = to_issue(finding("missing_values", 2, 100), table, important=set(), minor={"note"})
    assert issue.severity == "low"


def test_what_blocks_the_analysis_is_high(table):
    ragged = finding("ragged_rows", 1, 1, flag=False, blocks_analysis=True)
    assert to_issue(ragged, table, important=set()).severity == "high"


def test_rows_counted_twice_are_wrong_rows():
    assert severity_of("wrong", 0.3) == "high"
    duplicates = Finding(
        type="duplicate_rows",
        columns=["a"],
        rows=np.arange(3),
        cols=np.full(3, -1),
        title="t",
        description="d",
        suggested_action="a",
        category="quick_fixes",
        detector="duplicates",
        flag=False,
        damage="wrong",
    )
    assert duplicates.damage_kind == "wrong"


def test_the_rule_has_one_table_of_shares():
    assert set(SEVERITY_SHARES) == {"wrong", "missing"}
    for medium, high in SEVERITY_SHARES.values():
        assert 0 < medium < high < 1
