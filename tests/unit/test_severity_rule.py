"""The severity rule as the README states it (issues.to_issue): share of rows, then the documented exceptions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iterate.detect import Finding
from iterate.io import read_table
from iterate.issues import to_issue

pytestmark = pytest.mark.unit


@pytest.fixture
def table(tmp_path: Path):
    path = tmp_path / "orders.csv"
    path.write_text("id,qty,note,country\n" + "".join(f"{n},{n},,FR\n" for n in range(10)))
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


@pytest.mark.parametrize(("rows", "expected"), [(6, "high"), (5, "medium"), (2, "medium"), (1, "low")])
def test_the_share_of_rows_sets_the_level(table, rows, expected):
    issue = to_issue(finding("format_violation", 1, rows), table, important=set())
    assert issue.severity == expected


def test_wrong_values_in_a_key_column_go_one_level_up(table):
    assert to_issue(finding("format_violation", 1, 1), table, important={"qty"}).severity == "medium"


def test_malformed_numbers_follow_the_share_whatever_the_decimal_separator(table):
    # Given malformed numbers in 60% of the rows, whose finding records the column's decimal separator
    parse = finding("mixed_types", 1, 6, stats={"convention": "point"})
    # Then the issue is high, as the share says (the separator under the key "convention" made it "low")
    assert to_issue(parse, table, important=set()).severity == "high"


def test_a_columns_own_conventions_are_low_at_any_share(table):
    # A constant column: 100% of the rows, none of its values wrong
    constant = finding("constant_column", 3, 10, flag=False)
    assert to_issue(constant, table, important={"country"}).severity == "low"
    # A mostly-empty column, empty by its convention
    empty = finding("missing_values", 2, 10, flag=False, stats={"convention": True})
    assert to_issue(empty, table, important=set()).severity == "low"
