"""The all-text Parquet the sandbox reads as `df`: names as written (repeats too), every value a str, no NaN."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iterate.io import read_parquet_text, read_table, write_parquet_text
from iterate.io.parquet_text import NAMES_KEY, unique_names

pytestmark = pytest.mark.unit


def test_a_read_table_round_trips_through_text_parquet(tmp_path: Path) -> None:
    # Given a CSV with repeated and generated names and values pandas would normally turn into NaN or numbers
    source = tmp_path / "orders.csv"
    source.write_text('id,amount,amount,,note\n01907,6.0,,N/A,"  x  "\n2,NULL,7,,日本\n', encoding="utf-8")
    table = read_table(source)

    # When it is written as text Parquet and read back for the sandbox
    target = write_parquet_text(table, tmp_path / "data.parquet")
    frame = read_parquet_text(target)

    # Then names are as the table shows them, and every value is the same str, blanks included
    assert list(frame.columns) == ["id", "amount", "amount", "column_4", "note"]
    assert frame.shape == (2, 5)
    assert [list(r) for r in frame.itertuples(index=False)] == [
        ["01907", "6.0", "", "N/A", "  x  "],
        ["2", "NULL", "7", "", "日本"],
    ]
    assert not frame.isna().any().any()
    assert all(isinstance(v, str) for col in range(5) for v in frame.iloc[:, col])


def test_the_file_itself_has_unique_string_columns_and_the_names_in_metadata(tmp_path: Path) -> None:
    # Given a table whose names repeat, including a name that looks like a generated suffix
    source = tmp_path / "dup.csv"
    source.write_text("a,a,a__2,a\n1,2,3,4\n", encoding="utf-8")

    # When it is written
    path = write_parquet_text(read_table(source), tmp_path / "dup.parquet")

    # Then Parquet sees unique, non-null string columns, and the names as written travel in the metadata
    schema = pq.read_schema(path)
    assert len(set(schema.names)) == 4
    assert all(f.type == pa.string() and not f.nullable for f in schema)
    assert json.loads(schema.metadata[NAMES_KEY]) == ["a", "a", "a__2", "a"]
    assert list(read_parquet_text(path).columns) == ["a", "a", "a__2", "a"]


def test_a_parquet_file_written_elsewhere_is_read_as_text_too(tmp_path: Path) -> None:
    # Given a typed Parquet file without Iterate's metadata (nulls included)
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"n": pa.array([1, None]), "s": pa.array(["x", None])}), path)

    # When the sandbox reader opens it
    frame = read_parquet_text(path)

    # Then values are text and nulls are blanks, never NaN
    assert frame.to_dict("list") == {"n": ["1", ""], "s": ["x", ""]}


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["a", "b"], ["a", "b"]),
        (["a", "a", "a"], ["a", "a__2", "a__3"]),
        (["a", "a__2", "a"], ["a", "a__2", "a__3"]),
    ],
)
def test_unique_names_suffix_repeats_without_colliding(names: list[str], expected: list[str]) -> None:
    assert unique_names(names) == expected


def test_pandas_sees_plain_strings(tmp_path: Path) -> None:
    # Given a written table
    source = tmp_path / "s.csv"
    source.write_text("x\n1\n\n2\n", encoding="utf-8")
    frame = read_parquet_text(write_parquet_text(read_table(source), tmp_path / "s.parquet"))

    # Then string operations behave as on str values
    assert frame["x"].str.len().tolist() == [1, 1]
    assert pd.api.types.is_string_dtype(frame["x"])


def test_a_table_is_written_a_row_group_at_a_time_with_the_same_content(tmp_path: Path, monkeypatch) -> None:
    import iterate.io.parquet_text as parquet_text
    from iterate.io.parquet_text import text_arrow

    # Given a table of 2,500 rows, with repeated names, and row groups of 1,000 rows
    source = tmp_path / "long.csv"
    rows = "\n".join(f"{k},{k % 7},x{k % 3},{'' if k % 5 else 'gap'}" for k in range(2500))
    source.write_text("id,v,v,note\n" + rows + "\n", encoding="utf-8")
    table = read_table(source)
    monkeypatch.setattr(parquet_text, "ROW_GROUP", 1000)

    # When it is written
    path = write_parquet_text(table, tmp_path / "data.parquet")

    # Then the file holds three row groups, the whole table's text and its names, as a single write gives
    with pq.ParquetFile(path) as parquet:
        assert [parquet.metadata.row_group(i).num_rows for i in range(3)] == [1000, 1000, 500]
        assert parquet.read().equals(text_arrow(table))
    assert text_arrow(table, 1000, 2000).equals(text_arrow(table).slice(1000, 1000))
    single = pq.read_table(write_parquet_text(text_arrow(table), tmp_path / "single.parquet"))
    assert pq.read_table(path).equals(single)
    assert list(read_parquet_text(path).columns) == ["id", "v", "v", "note"]


def test_columns_whose_values_fit_a_dictionary_page_are_stored_as_one_and_the_rest_plainly(
    tmp_path: Path,
) -> None:
    from iterate.sandbox.frames import ColumnReader

    # Given a column of a few repeated values, one of distinct ids, and one of few values, 30 of them long
    rows = 100_000
    source = tmp_path / "t.csv"
    lines = ["status,id,blob"] + [
        f"s{i % 5},id-{i:09d},{'x' * 40_000 + str(i) if i < 30 else 'short'}" for i in range(rows)
    ]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = read_table(source)
    # When it is written for the sandbox
    target = write_parquet_text(table, tmp_path / "data.parquet")
    # Then only the short dictionary is stored as one (30 values of 40 KB overflow a 1 MiB page, 100,000 ids too)
    chunks = [pq.ParquetFile(target).metadata.row_group(0).column(i) for i in range(3)]
    assert [c.has_dictionary_page for c in chunks] == [True, False, False]
    # And the content, and the codes the sandbox takes from the dictionary pages, are the table's
    frame = read_parquet_text(target)
    for i, column in enumerate(table.columns):
        assert frame.iloc[:, i].tolist() == column.values.to_pylist()
    import os

    reader = ColumnReader.open(os.open(target, os.O_RDONLY))
    assert reader is not None and reader._dictionary_encoded(0) and not reader._dictionary_encoded(1)
    codes, uniques = reader.factorized(0, slice(None))
    assert list(uniques) == table.columns[0].uniques and (codes == table.columns[0].codes).all()
