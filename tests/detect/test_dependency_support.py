"""A dependency needs enough rows to be learned from, and a group whose consensus is unusual does not condemn
the column's usual value when such groups often hold it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.detect.calibration import DEFAULT
from iterate.detect.context import facts_for
from iterate.detect.dependencies import consensus, detect_dependency_violations, entities
from iterate.detect.discovery import discover
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def table_of(cols: dict[str, list[str]]) -> Table:
    return Table.from_arrow(pa.table(cols), name="t", source=SourceInfo(path="t.csv", format="csv"))


def listed(table: Table, column: str) -> set[int]:
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    return {int(r) for f in findings if f.columns == [column] for r in f.rows}


def flagged(table: Table, column: str) -> set[int]:
    """Rows whose cell of `column` the whole detection flags (every detector, one decision)."""
    return {
        int(r)
        for f in detect(table).findings
        if f.flag
        for r, c in zip(f.rows, f.cols, strict=True)
        if table.column_names[int(c)] == column
    }


def test_a_rule_read_off_a_few_dozen_rows_flags_nothing() -> None:
    # Given 9 makers of 5 cars each, each maker's cars of one year but one car
    maker = [f"M{i // 5}" for i in range(45)]
    year = [str(2000 + i // 5) for i in range(45)]
    year[7] = "1990"
    # Then 45 rows are too few to learn that the maker determines the year
    assert listed(table_of({"maker": maker, "year": year}), "year") == set()


def test_the_same_rule_over_hundreds_of_rows_flags_the_odd_cell() -> None:
    maker = [f"M{i // 10}" for i in range(400)]
    year = [str(2000 + i // 10) for i in range(400)]
    year[15] = "1999"
    assert listed(table_of({"maker": maker, "year": year}), "year") == {15}


def test_the_usual_value_in_a_group_that_often_holds_it_is_not_condemned() -> None:
    # Given businesses nearly always inspected on weekdays, and stands inspected mostly on weekends: an
    # inspection's attribute, so a stand's weekday inspection is an ordinary record
    rng = np.random.default_rng(2)
    business, weekend = [], []
    for b in range(300):
        stand = b % 20 == 0
        for _ in range(10):
            business.append(f"B{b}")
            weekend.append("TRUE" if (stand and rng.random() < 0.85) else "FALSE")
    table = table_of({"business": business, "weekend": weekend})
    stand_weekdays = {
        r
        for r, (b, w) in enumerate(zip(business, weekend, strict=True))
        if int(b[1:]) % 20 == 0 and w == "FALSE"
    }
    # Then the evidence against a stand's weekday inspection stays weak (such groups often hold FALSE)
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    against = [
        float(llr)
        for f in findings
        if f.columns == ["weekend"]
        for r, llr in zip(f.rows, f.llr, strict=True)
        if r in stand_weekdays
    ]
    assert against and max(against) < 2.0
    assert not (flagged(table, "weekend") & stand_weekdays)


def test_a_rare_value_in_a_group_of_the_usual_one_is_still_condemned() -> None:
    # Given hospitals of one state but a few, and a typo'd state in one hospital's rows
    hospital = [f"H{i // 20}" for i in range(1000)]
    state = ["AL" if i < 940 else "AK" for i in range(1000)]
    state[45] = "AxL"
    assert 45 in listed(table_of({"hospital": hospital, "state": state}), "state")


def players(n_players: int = 120, rows_each: int = 20, seed: int = 3) -> dict[str, list[str]]:
    rng = np.random.default_rng(seed)
    cols: dict[str, list[str]] = {"name": [], "surname": [], "born": [], "team": []}
    for p in range(n_players):
        for _ in range(rows_each):
            cols["name"].append(f"N{p}")
            cols["surname"].append(f"S{p}")
            cols["born"].append(str(1970 + p % 25))
            cols["team"].append(f"T{int(rng.integers(12))}")
    return cols


def test_surnames_swapped_one_at_a_time_into_every_player_are_strong_evidence() -> None:
    # Given one surname swapped in from another player in every player's rows
    cols = players()
    rng = np.random.default_rng(4)
    swapped = []
    for p in range(120):
        r = p * 20 + int(rng.integers(20))
        cols["surname"][r] = f"S{(p + 37) % 120}"
        swapped.append(r)
    table = table_of(cols)
    facts = facts_for(table, "")
    deps = discover(facts, table.n_rows)
    dep = next(d for d in deps if (d.lhs, d.rhs) == (0, 1))
    partner = entities(facts, deps)[0]
    # When the name's consensus judges the surnames
    judged = consensus(facts[0], facts[1], dep, DEFAULT, entity=partner)
    # Then a surname of another player is strong evidence: such rows are 1 in 20, although every player
    # hosts one (counting hosts, they would look ordinary)
    assert judged.llr[swapped].min() >= 2.5
    assert judged.rates["foreign_groups"] <= 0.06


def test_a_row_under_the_wrong_name_has_its_name_blamed_not_its_other_values() -> None:
    # Given a few rows whose name was swapped (their surname and birth year are their true player's)
    cols = players()
    moved = set(range(5, 2400, 80))
    for r in moved:
        cols["name"][r] = f"N{(r // 20 + 51) % 120}"
    table = table_of(cols)
    # Then the names are what is flagged, not the surnames and years that contradict them
    assert moved <= flagged(table, "name")
    # (not even as evidence: the name's group does not judge a row whose name is blamed)
    assert not (moved & (listed(table, "surname") | listed(table, "born")))


@pytest.mark.parametrize("dense", [True, False])
def test_group_majority_of_row_states_with_their_counts_is_that_of_the_rows(
    dense: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iterate.detect.discovery as dependencies

    # Given rows of X groups and Y values (some excluded: X = -1), a few hundred distinct pairs among 5,000 rows
    rng = np.random.default_rng(11)
    x = rng.integers(-1, 60, 5_000)
    y = (np.maximum(x, 0) * 7 + (rng.random(5_000) < 0.2) * rng.integers(0, 30, 5_000)) % 30
    n_x = 60
    if not dense:  # a table of groups x values over twice the rows: counted per distinct pair
        monkeypatch.setattr(dependencies, "DENSE_LIMIT", 0)
        n_x = 1_000
    # When the majority is taken over the rows, and over their distinct (X, Y) states counted by their rows
    states, counts = np.unique(np.stack([x, y]), axis=1, return_counts=True)
    by_rows = dependencies.group_majority(x, y, n_x, 30)
    by_states = dependencies.group_majority(states[0], states[1], n_x, 30, weights=counts)
    # Then every group's size, majority, its count and the runner-up's count are the same, as integers
    for field in ("size", "major", "major_count", "second_count"):
        a, b = getattr(by_rows, field), getattr(by_states, field)
        assert np.array_equal(a, b), field
        assert b.dtype.kind == "i", field
