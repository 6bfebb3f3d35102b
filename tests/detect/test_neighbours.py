"""Neighbours in file order: a value off a block column's local majority is evidence, a column's own changes
and records unlike their neighbours are not, and the template recounts exactly the rows the detector lists."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iterate.agents.offline.investigation import template_code
from iterate.detect import detect
from iterate.detect.context import facts_for
from iterate.detect.order import detect_neighbour_breaks, excursions, neighbour_majority
from iterate.io import read_parquet_text, write_parquet_text
from iterate.issues import issues_from_findings
from iterate.sandbox import check_policy
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

N = 2400


def ordered_table(seed: int = 3) -> tuple[dict[str, list[str]], dict[str, set[int]]]:
    """An hourly log: month and day run in blocks, the weather changes on its own (one-hour and two-hour
    spells alike), a sensor id is constant for long stretches. Planted: a few pasted months and sensor ids.
    Rows 1000 and 2000 are records unlike their neighbours on every block column (another site's row)."""
    rng = np.random.default_rng(seed)
    hours = np.arange(N)
    month = (hours // 200 % 12 + 1).astype(str).tolist()
    day = (hours // 24 + 1).astype(str).tolist()
    sensor = [f"S-{100 + h // 300}" for h in hours]
    weather = []
    state = "sunny"
    while len(weather) < N:
        spell = int(rng.choice([1, 2, 3, 6, 12]))
        weather += [state] * spell
        state = str(rng.choice(["sunny", "cloudy", "rain"]))
    weather = weather[:N]
    reading = [f"{v:.2f}" for v in rng.normal(20, 3, N)]
    planted: dict[str, set[int]] = {"month": set(), "sensor": set()}
    for r in rng.choice(np.arange(20, N - 20), 30, replace=False).tolist():
        if r in (999, 1000, 1001, 1999, 2000, 2001):
            continue
        column = "month" if r % 2 else "sensor"
        if column == "month":
            month[r] = str((int(month[r]) + 5) % 12 + 1)
        else:
            sensor[r] = f"S-{(int(sensor[r][2:]) + 3 - 100) % 8 + 100}"
        planted[column].add(r)
    for r in (1000, 2000):
        month[r], day[r], sensor[r] = "12", "999", "S-999"
    cols = {"month": month, "day": day, "sensor": sensor, "weather": weather, "reading": reading}
    return cols, planted


def table_of(cols: dict[str, list[str]]) -> Table:
    return Table.from_arrow(pa.table(cols), name="log", source=SourceInfo(path="log.csv", format="csv"))


def test_majority_of_neighbours_counts_only_present_values() -> None:
    codes = np.array([0, 0, 0, 0, 1, 0, 0, -1, 0, 2], dtype=np.int64)
    mode, count, voters = neighbour_majority(codes, reach=4)
    # Row 4 (value 1) sees 0, 0, 0, 0 before and 0, 0, (missing), 0 after
    assert (mode[4], count[4], voters[4]) == (0, 7, 7)


def test_one_row_departures_are_told_from_the_columns_own_changes() -> None:
    # A A B A A is one one-row departure; A A B B A A a two-row one; C at the end departs nowhere
    codes = np.array([0, 0, 1, 0, 0, 1, 1, 0, 0, 2], dtype=np.int64)
    blocky = np.array([True, True, False])
    assert excursions(codes, blocky) == (1, 1, 1)


def test_pasted_values_in_block_columns_are_listed_and_nothing_else() -> None:
    # Given an ordered log with pasted months and sensor ids
    cols, planted = ordered_table()
    table = table_of(cols)
    # When the neighbours detector judges it
    found = {f.columns[0]: set(f.rows.tolist()) for f in detect_neighbour_breaks(facts_for(table, ""), N)}
    # Then it lists the pasted cells of the block columns
    assert found.get("month") == planted["month"]
    assert found.get("sensor") == planted["sensor"]
    # And not the weather, whose one-hour spells are as common as its two-hour ones
    assert "weather" not in found
    # Nor the records unlike their neighbours on every block column
    assert not ({1000, 2000} & set().union(*found.values()))


def test_a_column_that_does_not_run_in_blocks_is_not_judged() -> None:
    cols, _ = ordered_table()
    rng = np.random.default_rng(5)
    order = rng.permutation(N)
    shuffled = {k: [v[i] for i in order] for k, v in cols.items()}
    assert detect_neighbour_breaks(facts_for(table_of(shuffled), ""), N) == []


def test_a_number_written_another_way_is_the_same_value() -> None:
    cols, _ = ordered_table()
    hourly = [f"{(h // 24) * 24 + 0.0167:.4f}" for h in range(N)]
    for r in range(110, N - 100, 150):
        hourly[r] = f"{(r // 24) * 24 + 0.0167:.6f}"  # the same number with more digits
    pasted = set(range(140, N - 100, 150))
    for r in pasted:
        hourly[r] = f"{(r // 24) * 24 + 7.0167:.4f}"  # another number
    cols = {"stamp": hourly, "sensor": cols["sensor"]}
    found = {
        f.columns[0]: set(f.rows.tolist()) for f in detect_neighbour_breaks(facts_for(table_of(cols), ""), N)
    }
    assert found.get("stamp") == pasted


def run(code: str, df: Any) -> Any:
    scope: dict[str, Any] = {"df": df, "result": None}
    exec(code, scope)
    return json.loads(json.dumps(scope["result"]))


def test_the_template_recounts_the_listed_rows_and_refuses_rows_that_do_not_break(tmp_path: Any) -> None:
    # Given the issues made of the detector's neighbours findings on the ordered log
    cols, _ = ordered_table()
    table = table_of(cols)
    issues = [
        i
        for i in issues_from_findings(detect(table).findings, table, None)
        if i.evidence is not None and i.evidence.stats.get("rule") == "neighbours"
    ]
    assert {i.affectedColumns[0] for i in issues} >= {"month", "sensor"}
    df = read_parquet_text(write_parquet_text(table, tmp_path / "data.parquet"))
    for issue in issues:
        assert issue.evidence is not None
        rows = list(issue.evidence.stats["rows"])
        # When its template runs as written
        code = template_code(issue)
        assert check_policy(code) == []
        got = run(code, df.copy())
        # Then it confirms every row the detector listed
        assert got["rows_holding"] == got["rows_listed"] == len(rows) == issue.affectedRows
        # And listed with rows that hold their neighbours' value, it confirms none of those
        stats = dict(issue.evidence.stats, rows=[*rows, 5, 6, 7])
        padded = issue.model_copy(update={"evidence": issue.evidence.model_copy(update={"stats": stats})})
        assert run(template_code(padded), df.copy())["rows_holding"] == len(rows)


def test_a_few_one_row_departures_are_not_enough_to_call_them_wrong() -> None:
    from iterate.detect.order import _beyond_own

    # A column's own changes make about two one-row departures per two-row one
    assert not _beyond_own(40, 20)
    # A handful with none of two rows could be chance; a dozen and more could not
    assert not _beyond_own(5, 0)
    assert _beyond_own(12, 0)
    assert _beyond_own(60, 3)
