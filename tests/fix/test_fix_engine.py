"""The fix engine: each action a real transformation of the cells it is given, logged cell by cell."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.contracts import FixAction
from iterate.fix import FixError, FixStep, apply_fixes, needs_confirmation

pytestmark = pytest.mark.unit


def table(**cols: list[str]) -> pa.Table:
    return pa.table({k: pa.array(v, pa.string()) for k, v in cols.items()})


def step(action: str, rows: list[int], issue: str = "i1", column: str | None = "c", **params) -> FixStep:
    return FixStep(issue, FixAction(action=action, parameters=params), np.array(rows, dtype=np.int64), column)


def test_trim_touches_only_the_evidence_cells():
    t = table(c=[" a", "b  ", "  c  ", " d"])
    r = apply_fixes(t, [step("trim_whitespace", [0, 1, 2])])
    assert r.table.column("c").to_pylist() == ["a", "b", "c", " d"]  # row 3 was not in the evidence
    assert [(c.row, c.old, c.new) for c in r.changes] == [(0, " a", "a"), (1, "b  ", "b"), (2, "  c  ", "c")]
    assert t.column("c").to_pylist()[0] == " a"  # the input table is not changed


def test_mapping_applies_after_a_trim_of_the_same_cell():
    t = table(c=["Delivered ", "delivred", "x"])
    r = apply_fixes(
        t,
        [
            step(
                "standardize_values",
                [0, 1],
                issue="typos",
                mapping={"Delivered ": "delivered", "delivred": "delivered"},
            ),
            step("trim_whitespace", [0], issue="ws"),
        ],
    )
    assert r.table.column("c").to_pylist() == ["delivered", "delivered", "x"]
    assert r.counts == {"ws": {"trim_whitespace": 1}, "typos": {"standardize_values": 2}}


def test_strip_units_keeps_the_number_as_written():
    t = table(c=["$12.00", "1,200 kg", "7", "n/a"])
    r = apply_fixes(t, [step("standardize_values", [0, 1, 3], strategy="strip_units")])
    assert r.table.column("c").to_pylist() == ["12.00", "1200", "7", "n/a"]
    assert r.skipped == {"i1": {"no single number in the value": 1}}


def test_convert_unit_converts_to_the_most_common_unit():
    t = table(c=["2 kg", "3 kg", "500 g", "4 kg", "1 lb"])
    r = apply_fixes(t, [step("convert_unit", [0, 1, 2, 3, 4], to="most_common")])
    assert r.table.column("c").to_pylist() == ["2", "3", "0.5", "4", "0.45359237"]


def test_convert_unit_leaves_units_it_cannot_convert():
    t = table(c=["2 kg", "3 m"])
    r = apply_fixes(t, [step("convert_unit", [0, 1], to="kg")])
    assert r.table.column("c").to_pylist() == ["2", "3 m"]
    assert r.skipped["i1"] == {"no conversion from 'm' to 'kg'": 1}


def test_dates_are_normalised_to_one_format():
    t = table(c=["2026-01-05", "13/01/2026", "bad"])
    r = apply_fixes(t, [step("convert_dates", [1, 2], to="%Y-%m-%d", formats=["%d/%m/%Y"])])
    assert r.table.column("c").to_pylist() == ["2026-01-05", "2026-01-13", "bad"]


def test_group_majority_follows_the_other_rows_of_the_group():
    t = table(zip=["1", "1", "1", "2", "2"], c=["A", "A", "B", "C", "C"])
    r = apply_fixes(t, [step("standardize_values", [2], strategy="group_majority", by=["zip"])])
    assert r.table.column("c").to_pylist() == ["A", "A", "A", "C", "C"]


def test_set_null_clears_and_fill_fills():
    t = table(c=["N/A", "x", "x", "y", "N/A"])
    cleared = apply_fixes(t, [step("set_null", [0, 4], values=["N/A"])])
    assert cleared.table.column("c").to_pylist() == [None, "x", "x", "y", None]
    filled = apply_fixes(t, [step("fill_value", [0, 4], strategy="most_frequent")])
    assert filled.table.column("c").to_pylist() == ["x", "x", "x", "y", "x"]


def test_split_moves_the_tail_into_the_empty_column():
    t = table(c=["Gary IN", "Austin"], s=["", "TX"])
    r = apply_fixes(t, [step("split_column", [0], into=["c", "s"])])
    assert r.table.column("c").to_pylist() == ["Gary", "Austin"]
    assert r.table.column("s").to_pylist() == ["IN", "TX"]


def test_drops_and_their_confirmation():
    t = table(c=["a", "b", "a"], d=["1", "1", "1"])
    steps = [
        step("drop_rows", [2], issue="dup", column=None),
        step("drop_column", [], issue="const", column="d"),
    ]
    r = apply_fixes(t, steps)
    assert r.table.column_names == ["c"] and r.table.column("c").to_pylist() == ["a", "b"]
    assert r.dropped_rows.tolist() == [2] and r.dropped_columns == ["d"]
    assert [s.issue_id for s in needs_confirmation(r, steps, set())] == ["dup", "const"]
    assert needs_confirmation(r, steps, {"drop"}) == []


def test_review_changes_no_value_and_keep_does_nothing():
    t = table(c=["a", "b"])
    r = apply_fixes(t, [step("flag_for_review", [1]), step("keep", [0], issue="i2")])
    assert r.table.equals(t)
    assert [(c.row, c.old, c.new, c.action) for c in r.changes] == [(1, "b", "b", "flag_for_review")]


def test_an_unknown_action_or_column_is_a_clear_error():
    with pytest.raises(FixError, match="not one Iterate can apply"):
        apply_fixes(table(c=["a"]), [step("burn", [0])])
    with pytest.raises(FixError, match="column 'nope' is not in the data"):
        apply_fixes(table(c=["a"]), [step("trim_whitespace", [0], column="nope")])
