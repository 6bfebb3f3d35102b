"""Where each data row sits in the file: a line of a CSV or JSON Lines file, a row of a sheet, or not known."""

from __future__ import annotations

import gzip

import pytest

from iterate.io import read_table
from iterate.profile import profile_table

pytestmark = pytest.mark.unit


def places(path) -> list[int | None]:
    table = read_table(path)
    return [table.source.place_of(r) for r in range(table.n_rows)]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("a,b\n1,x\n2,y\n3,z\n", [2, 3, 4]),  # one header line: row r is on line r + 2
        ("a,b\r\n1,x\r\n2,y\r\n", [2, 3]),  # Windows line ends
        ("a,b\n1,x\n2,y", [2, 3]),  # no line end after the last row
        ("a,b\n1,x\n2,y\n\n\n", [2, 3]),  # blank lines after the last row change nothing
        ("Sales export\n\na,b\n1,x\n2,y\n", [4, 5]),  # title lines above the header are counted
        ('a,b\n1,"x\ny"\n2,y\n', [None, None]),  # a value spans two lines: the line of a row is not known
        ("a,b\n1,x\n\n2,y\n", [None, None]),  # a blank line between rows: not known either
    ],
)
def test_a_csv_row_has_a_line_only_when_every_row_is_one_line(tmp_path, content, expected):
    path = tmp_path / "t.csv"
    path.write_bytes(content.encode())
    assert places(path) == expected


def test_a_compressed_csv_gets_the_lines_of_its_text(tmp_path):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,x\n2,y\n"))
    assert places(path) == [2, 3]


def test_json_lines_keep_each_records_line_and_an_array_has_none(tmp_path):
    lines = tmp_path / "t.jsonl"
    lines.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}\n')
    assert places(lines) == [1, 3, 4]
    array = tmp_path / "t.json"
    array.write_text('[{"a": 1}, {"a": 2}]')
    assert places(array) == [None, None]


def test_a_sheet_row_is_the_number_the_spreadsheet_shows(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["a", "b"], [1, "x"], [None, None], [2, "y"]):  # a blank row between the data rows
        sheet.append(row)
    path = tmp_path / "t.xlsx"
    book.save(path)
    table = read_table(path)
    assert table.source.row_place == "sheet row"
    assert [table.source.place_of(r) for r in range(table.n_rows)] == [2, 4]


def test_parquet_rows_have_no_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": ["1", "2"]}), path)
    assert places(path) == [None, None]


def test_the_profile_says_how_rows_are_numbered(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("Report\na,b\n1,x\n2,y\n")
    numbering = profile_table(read_table(path)).rowNumbering
    assert numbering is not None
    assert (numbering.format, numbering.place, numbering.firstPlace) == ("csv", "line", 3)
