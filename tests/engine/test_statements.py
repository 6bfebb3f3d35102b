"""Every engine statement, run on DuckDB over a small file with known answers, and its Trino rendering parsed."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot

from iterate.engine import statements as sql
from iterate.engine.duck import DuckSource

pytestmark = pytest.mark.unit

HEADER = ["id", "city", "zip", "amount", 'odd "name", really']
ROWS = [
    ["1", "Boston", "02101", "10", "a"],
    ["2", "Boston", "02101", "20", ""],
    ["3", "Bostn", "02101", "30", "it's"],
    ["4", "Denver", "80201", "", ""],
    ["5", "Denver", "80201", "50", "b"],
    ["2", "Boston", "02101", "20", ""],  # an exact repeat of row 1
    ["7", "Denver", "8O201", "x", "c"],
]


@pytest.fixture
def source(tmp_path: Path) -> DuckSource:
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        w.writerows(ROWS)
    with DuckSource(path, memory_mb=256, threads=1) as src:
        yield src


def test_the_relation_keeps_every_value_as_text_in_file_order(source: DuckSource) -> None:
    # Given a file with a leading-zero zip and blank cells; When it is read; Then text is as written, blanks ''
    assert source.columns == HEADER
    got = source.rows(f"SELECT {sql.ROW}, zip, amount FROM {sql.RELATION} ORDER BY {sql.ROW}")
    assert got[0] == (0, "02101", "10")
    assert got[3] == (3, "80201", "")
    assert [r[0] for r in got] == list(range(len(ROWS)))


def test_column_stats_counts_every_row(source: DuckSource) -> None:
    stats = source.one(sql.column_stats(HEADER, numeric=["amount"]))
    assert stats["n_rows"] == 7
    i = HEADER.index("amount")
    assert stats[f"c{i}_missing"] == 1
    assert stats[f"c{i}_numbers"] == 5  # 'x' and '' do not read as numbers
    assert stats[f"c{i}_min"] == 10.0 and stats[f"c{i}_max"] == 50.0
    assert stats[f"c{i}_mean"] == pytest.approx(26.0)
    assert stats[f"c{i}_quartiles"][1] == pytest.approx(20.0, abs=10)
    c = HEADER.index("city")
    assert stats[f"c{c}_distinct"] == 3
    assert (stats[f"c{c}_min_length"], stats[f"c{c}_max_length"]) == (5, 6)
    q = HEADER.index('odd "name", really')
    assert stats[f"c{q}_missing"] == 3
    assert stats[f"c{q}_min_length"] == 1  # blanks are missing, not values of length 0


def test_value_counts_give_every_value_its_count_and_first_row(source: DuckSource) -> None:
    got = source.rows(sql.value_counts(["city", "zip"]))
    counts = {(col, value): (n, first) for col, value, n, first in got}
    assert counts == {
        (0, "Boston"): (3, 0),
        (0, "Bostn"): (1, 2),
        (0, "Denver"): (3, 3),
        (1, "02101"): (4, 0),
        (1, "80201"): (2, 3),
        (1, "8O201"): (1, 6),
    }
    top = source.rows(sql.value_counts(["city", "zip"], limit=1))
    assert sorted((c, v) for c, v, _, _ in top) == [(0, "Boston"), (1, "02101")]


def test_shapes_map_letters_and_digits(source: DuckSource) -> None:
    got = {shape: (n, distinct) for shape, n, distinct, _ in source.rows(sql.shapes("zip"))}
    assert got == {"99999": (6, 2), "9A999": (1, 1)}


def test_duplicate_rows_count_repeats(source: DuckSource) -> None:
    assert source.one(sql.duplicate_rows(HEADER)) == {"groups": 1, "repeats": 1, "largest": 2}


def test_missing_patterns_name_the_columns_missing_together(source: DuckSource) -> None:
    got = dict(source.rows(sql.missing_patterns(HEADER)))
    amount, odd = 1 << HEADER.index("amount"), 1 << HEADER.index('odd "name", really')
    assert got == {0: 4, odd: 2, amount | odd: 1}


def test_flag_predicates_find_rows_by_value_and_by_combination(source: DuckSource) -> None:
    assert [r[0] for r in source.rows(sql.flagged_rows(["city"], ["Bostn"]))] == [2]
    both = sql.row_key(["Denver", "8O201"])
    assert [r[0] for r in source.rows(sql.flagged_rows(["city", "zip"], [both]))] == [6]
    # A value holding a quote is a literal, not SQL.
    assert source.one(sql.flag_counts(['odd "name", really'], ["it's"]))["n"] == 1
    assert source.one(sql.flag_counts(["city"], []))["n"] == 0


def test_flags_by_keys_join_every_row_to_its_key_and_score(source: DuckSource) -> None:
    keys = pa.table({"k": [sql.row_key(["Denver", "8O201"]), "nothing"], "score": [0.9, 0.1]})
    source.con.register("keys", keys)
    got = source.rows(sql.flags_by_keys(["city", "zip"], "keys", "zip", "fd-zip"))
    assert got == [(6, "zip", "fd-zip", 0.9)]
    source.con.register("keys", pa.table({"k": ["Boston"], "score": [0.5]}))
    rows = sorted(r[0] for r in source.rows(sql.flags_by_keys(["city"], "keys", "city", "x")))
    assert rows == [0, 1, 5]


def test_sample_is_every_row_or_a_bounded_draw_in_file_order(source: DuckSource) -> None:
    everything = source.rows(sql.sample(100, n_rows=7))
    assert [r[0] for r in everything] == list(range(7))
    drawn = [r[0] for r in source.rows(sql.sample(3, n_rows=7))]
    assert len(drawn) == 3 and drawn == sorted(drawn)
    source.con.register("wanted", pa.table({"row": [5, 1]}))
    assert [r[0] for r in source.rows(sql.rows_at("wanted"))] == [1, 5]


STATEMENTS = [
    sql.column_stats(HEADER, numeric=["amount"]),
    sql.value_counts(HEADER),
    sql.value_counts(HEADER, limit=10),
    sql.shapes("zip"),
    sql.missing_patterns(HEADER),
    sql.flagged_rows(["city", "zip"], [sql.row_key(["a", "b"])]),
    sql.flag_counts(["city"], ["it's"]),
    sql.rows_at("wanted"),
    sql.flags_by_keys(["city", "zip"], "keys", "zip", "fd-zip"),
    sql.sample(10, n_rows=20),
    sql.row_count(),
    sql.column_distinct(HEADER),
    sql.column_stats(HEADER, numeric=["amount"], distinct=False, skip=["city"]),
]


@pytest.mark.parametrize("statement", STATEMENTS, ids=lambda s: s.name)
def test_trino_rendering_parses(statement: sql.Statement) -> None:
    rendered = statement.sql("trino")
    assert sqlglot.parse_one(rendered, read="trino") is not None


def test_trino_gets_its_own_spelling_where_the_dialects_differ() -> None:
    stats = sql.column_stats(["a"], numeric=["a"]).sql("trino")
    assert "APPROX_DISTINCT(" in stats and "APPROX_PERCENTILE(" in stats and "APPROX_QUANTILE" not in stats
    drawn = sql.sample(10, n_rows=1000, dialect="trino").sql("trino")
    assert "TABLESAMPLE BERNOULLI (1.0" in drawn and "RESERVOIR" not in drawn
    sqlglot.parse_one(drawn, read="trino")
    dup = sql.duplicate_rows(["a", "b"], dialect="trino").sql("trino")
    assert "XXHASH64(" in dup and "HASH(" not in dup.replace("XXHASH64(", "")
    sqlglot.parse_one(dup, read="trino")


def test_row_groups_give_duplicates_and_missing_patterns_in_one_scan(source: DuckSource) -> None:
    got = source.rows(sql.row_groups(HEADER))
    dups = [n for g, _, _, n in got if g == 1]
    patterns = {p: n for g, _, p, n in got if g == 2}
    assert dups == [2]  # one group of two identical rows
    assert patterns == dict(source.rows(sql.missing_patterns(HEADER)))
    rendered = sql.row_groups(HEADER, dialect="trino").sql("trino")
    assert "XXHASH64(" in rendered
    sqlglot.parse_one(rendered, read="trino")


def test_column_stats_leave_out_the_counted_columns(source: DuckSource) -> None:
    distinct = source.one(sql.column_distinct(HEADER))
    full = source.one(sql.column_stats(HEADER, numeric=["amount"]))
    assert distinct == {"n_rows": 7, **{k: v for k, v in full.items() if k.endswith("_distinct")}}
    rest = source.one(sql.column_stats(HEADER, numeric=["amount"], distinct=False, skip=["city"]))
    c = HEADER.index("city")
    assert not any(k.startswith(f"c{c}_") or k.endswith("_distinct") for k in rest)
    assert {
        k: v for k, v in full.items() if not k.startswith(f"c{c}_") and not k.endswith("_distinct")
    } == rest
