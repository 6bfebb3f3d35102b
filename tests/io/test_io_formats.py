"""Each format and encoding reads back every value exactly as written, with the source described."""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import gzip
import hashlib
import io
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iterate.io import read_table

pytestmark = pytest.mark.unit

HEADER = ["id", "zip", "note", "amount", "city"]
# Values a reader must not touch: leading zeros, NA markers, float text, padding, blanks, non-ASCII.
ROWS = [
    ["1", "01907", "N/A", "6.0", "Zürich"],
    ["2", "00501", "  x  ", "", "日本"],
    ["3", "", "NULL", "1e3", "é"],
    ["4", "02134", "-", "0007", "São Paulo"],
]
ROWS_LATIN = [[v.replace("日本", "Malmö") for v in row] for row in ROWS]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def csv_text(header: list[str], rows: list[list[str]], delimiter: str = ",") -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def as_rows(table) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [[c.value(r) for c in table.columns] for r in range(table.n_rows)]


@pytest.mark.parametrize(
    ("filename", "delimiter", "encoding", "bom", "rows", "expected_encoding", "expected_format"),
    [
        ("plain.csv", ",", "utf-8", b"", ROWS, "utf-8", "csv"),
        ("excel.csv", ";", "utf-8", codecs.BOM_UTF8, ROWS, "utf-8-sig", "csv"),
        ("wide.tsv", "\t", "utf-16-le", codecs.BOM_UTF16_LE, ROWS, "utf-16", "tsv"),
        ("big_endian.txt", "|", "utf-16-be", codecs.BOM_UTF16_BE, ROWS, "utf-16", "csv"),
        ("windows.csv", ",", "cp1252", b"", ROWS_LATIN, "cp1252", "csv"),
        ("no_bom_utf16.csv", ",", "utf-16-le", b"", ROWS, "utf-16-le", "csv"),
    ],
)
def test_delimited_files_round_trip_every_value_exactly(
    tmp_path: Path,
    filename: str,
    delimiter: str,
    encoding: str,
    bom: bytes,
    rows: list[list[str]],
    expected_encoding: str,
    expected_format: str,
) -> None:
    # Given a delimited file in some encoding, with values that look like numbers and NA markers
    path = tmp_path / filename
    path.write_bytes(bom + csv_text(HEADER, rows, delimiter).encode(encoding))
    before = sha256(path)

    # When it is read
    table = read_table(path)

    # Then names and every value are exactly as written, and the source says how it was read
    assert table.column_names == HEADER
    assert as_rows(table) == rows
    assert table.source.delimiter == delimiter
    assert table.source.encoding == expected_encoding
    assert table.source.format == expected_format
    assert table.source.content_hash == before == sha256(path)
    assert table.source.size_bytes == path.stat().st_size
    assert table.problems == []


def test_latin1_is_used_when_bytes_do_not_fit_cp1252(tmp_path: Path) -> None:
    # Given a file with a byte (0x81) that cp1252 leaves undefined
    path = tmp_path / "legacy.csv"
    path.write_bytes(b"name,code\ncaf\xe9,\x81x\n")

    # When it is read
    table = read_table(path)

    # Then latin-1 decodes it, every byte becoming one character
    assert table.source.encoding == "latin-1"
    assert as_rows(table) == [["café", "\x81x"]]


def test_invalid_utf8_after_the_sniffed_head_falls_back_to_cp1252_and_says_where(tmp_path: Path) -> None:
    # Given a UTF-8-looking file whose first non-UTF-8 byte comes long after the head
    lines = [f"{i},plain" for i in range(20_000)] + ["20000,café €"]
    path = tmp_path / "late.csv"
    path.write_bytes(("id,text\n" + "\n".join(lines) + "\n").encode("cp1252"))

    # When it is read
    table = read_table(path)

    # Then it is read as cp1252, the euro sign decoded, and the line where UTF-8 broke is recorded
    assert table.source.encoding == "cp1252"
    assert table.column("text").value(20_000) == "café €"
    [problem] = table.problems
    assert problem.kind == "encoding"
    assert problem.line == 20_002


@pytest.mark.parametrize("filename", ["orders.csv.gz", "orders.csv"])
def test_gzip_is_recognised_by_its_magic_bytes(tmp_path: Path, filename: str) -> None:
    # Given a gzip-compressed CSV, with or without a .gz extension
    path = tmp_path / filename
    path.write_bytes(gzip.compress(csv_text(HEADER, ROWS, ";").encode()))
    raw_hash = sha256(path)

    # When it is read
    table = read_table(path)

    # Then the content is read exactly and the hash is of the compressed bytes as stored
    assert as_rows(table) == ROWS
    assert table.source.compression == "gzip"
    assert table.source.delimiter == ";"
    assert table.source.content_hash == raw_hash
    assert table.name == "orders"


def test_quoted_fields_keep_delimiters_quotes_and_newlines(tmp_path: Path) -> None:
    # Given quoted values holding the delimiter, doubled quotes, CRLF and LF line breaks
    path = tmp_path / "quoted.csv"
    path.write_bytes(
        b'id,comment,tags\r\n1,"a, b and c","x;y"\r\n2,"he said ""hi""",\r\n3,"line one\r\nline two\nthree",z\r\n'
    )

    # When it is read
    table = read_table(path)

    # Then each value is the unquoted text, line breaks included
    assert as_rows(table) == [
        ["1", "a, b and c", "x;y"],
        ["2", 'he said "hi"', ""],
        ["3", "line one\r\nline two\nthree", "z"],
    ]


@pytest.mark.parametrize(
    ("content", "delimiter", "expected"),
    [
        # European export: decimal commas inside, semicolons between
        ("name;price;qty\nA;1,50;2\nB;2,75;10\n", ";", [["A", "1,50", "2"], ["B", "2,75", "10"]]),
        # Tabs win over commas that appear in free text
        ("a\tb\n1, 2\tx, y\n3\tz\n", "\t", [["1, 2", "x, y"], ["3", "z"]]),
        ("a|b|c\n1|2,5|x;y\n", "|", [["1", "2,5", "x;y"]]),
        # Commas win over a semicolon that sits in one text column of every row
        ('a,b,c\n1,"x;y",3\n4,"p;q",6\n', ",", [["1", "x;y", "3"], ["4", "p;q", "6"]]),
        # Excel's "sep=" line names the delimiter and is not the header
        ("sep=;\na;b\n1,5;2\n", ";", [["1,5", "2"]]),
        # Single quotes as the quote character, with the delimiter inside
        ("a,b\n'x, y',1\n'z, w',2\n", ",", [["x, y", "1"], ["z, w", "2"]]),
    ],
)
def test_delimiter_and_quoting_are_sniffed(
    tmp_path: Path, content: str, delimiter: str, expected: list
) -> None:
    # Given a file whose delimiter is not a comma, or is a comma among other candidates
    path = tmp_path / "data.txt"
    path.write_text(content, encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then the right delimiter was found and values split accordingly
    assert table.source.delimiter == delimiter
    assert as_rows(table) == expected


def test_many_rows_read_in_parallel_keep_their_order(tmp_path: Path) -> None:
    # Given a file larger than pyarrow's block size, so it is parsed in several blocks at once
    rows = [[str(i), f"{i:06d}", "x" * (i % 50)] for i in range(60_000)]
    path = tmp_path / "many.csv"
    path.write_text(csv_text(["i", "padded", "text"], rows), encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then every row is there, in file order
    assert table.n_rows == 60_000
    assert as_rows(table)[::997] == rows[::997]


def test_parquet_values_become_lossless_text(tmp_path: Path) -> None:
    # Given a typed Parquet file (ints with a null, floats, text, dates, timestamps, booleans, decimals)
    frame = pd.DataFrame(
        {
            "id": pd.array([1, None, 30_000_000_000], dtype="Int64"),
            "amount": [6.0, 0.1, None],
            "zip": ["01907", "N/A", "  x  "],
            "day": [dt.date(2024, 1, 5), dt.date(2024, 2, 29), None],
            "at": pd.to_datetime(["2024-01-05 10:30:00", "2024-01-05 10:30:00.250", None], format="ISO8601"),
            "ok": [True, False, None],
        }
    )
    path = tmp_path / "typed.parquet"
    frame.to_parquet(path, index=False)

    # When it is read
    table = read_table(path)

    # Then each value is text without information lost: ints bare, floats keep .0, ISO dates, nulls blank
    assert table.source.format == "parquet"
    assert table.column_names == ["id", "amount", "zip", "day", "at", "ok"]
    assert as_rows(table) == [
        ["1", "6.0", "01907", "2024-01-05", "2024-01-05T10:30:00", "true"],
        ["", "0.1", "N/A", "2024-02-29", "2024-01-05T10:30:00.25", "false"],
        ["30000000000", "", "  x  ", "", "", ""],
    ]


def test_parquet_nested_and_dictionary_columns_become_json_and_plain_text(tmp_path: Path) -> None:
    # Given Parquet with a list column and a dictionary-encoded column
    table = pa.table(
        {
            "tags": pa.array([["a", "b"], [], None]),
            "kind": pa.array(["x", "y", "x"]).dictionary_encode(),
        }
    )
    path = tmp_path / "nested.parquet"
    pq.write_table(table, path)

    # When it is read
    result = read_table(path)

    # Then lists are JSON text and dictionary values plain text
    assert as_rows(result) == [['["a", "b"]', "x"], ["[]", "y"], ["", "x"]]


def test_json_lines_keep_numbers_as_written(tmp_path: Path) -> None:
    # Given JSON Lines with numbers written in different ways, nulls, booleans, nested values, a late key
    lines = [
        '{"id": "01907", "amount": 6.0, "n": 1e3, "ok": true, "meta": {"w": 1.50, "t": [1, "a"]}}',
        "",
        '{"id": "N/A", "amount": null, "n": -0, "ok": false, "extra": "  x  "}',
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then numbers keep their literal text and keys missing in a record are blank
    assert table.source.format == "jsonl"
    assert table.column_names == ["id", "amount", "n", "ok", "meta", "extra"]
    assert as_rows(table) == [
        ["01907", "6.0", "1e3", "true", '{"w": 1.50, "t": [1, "a"]}', ""],
        ["N/A", "", "-0", "false", "", "  x  "],
    ]


def test_a_json_array_of_objects_is_read_like_json_lines(tmp_path: Path) -> None:
    # Given a .json file holding one array of records
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"a": "日本", "b": 2.50}, {"a": "é"}], ensure_ascii=False), encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then each object is a row
    assert as_rows(table) == [["日本", "2.5"], ["é", ""]]


def test_xlsx_first_sheet_is_read_as_displayed_text(tmp_path: Path) -> None:
    # Given a workbook with typed cells on its first sheet and a second sheet
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Orders"
    sheet.append(["zip", "qty", "price", "day", "at", "paid", "note"])
    sheet.append(["01907", 6, 6.5, dt.date(2024, 1, 5), dt.datetime(2024, 1, 5, 10, 30), True, "  x  "])
    sheet.append(["N/A", 7, 0.1, None, None, False, "日本"])
    workbook.create_sheet("Notes").append(["ignored"])
    path = tmp_path / "orders.xlsx"
    workbook.save(path)
    before = sha256(path)

    # When it is read
    table = read_table(path)

    # Then values are the text a person sees, and the other sheet is named in the problems
    assert table.source.format == "xlsx"
    assert table.column_names == ["zip", "qty", "price", "day", "at", "paid", "note"]
    assert as_rows(table) == [
        ["01907", "6", "6.5", "2024-01-05", "2024-01-05T10:30:00", "TRUE", "  x  "],
        ["N/A", "7", "0.1", "", "", "FALSE", "日本"],
    ]
    [problem] = table.problems
    assert problem.kind == "other_sheets"
    assert "'Orders'" in problem.detail and "'Notes'" in problem.detail
    assert sha256(path) == before == table.source.content_hash


def test_the_table_name_defaults_to_the_file_stem_and_can_be_given(tmp_path: Path) -> None:
    # Given a compressed CSV
    path = tmp_path / "sales_v1.2.csv.gz"
    path.write_bytes(gzip.compress(b"a\n1\n"))

    # When it is read with and without a name
    # Then the default drops only the format and compression suffixes, and an explicit name wins
    assert read_table(path).name == "sales_v1.2"
    assert read_table(path, name="Q1 sales").name == "Q1 sales"


def test_a_cp1252_guess_falls_back_to_latin1_when_a_later_byte_does_not_fit(tmp_path: Path) -> None:
    # Given a cp1252-looking head and, much later, a byte cp1252 leaves undefined
    body = b"".join(b"%d,x\n" % i for i in range(30_000))
    path = tmp_path / "legacy.csv"
    path.write_bytes(b"a,b\n1,caf\xe9\n" + body + b"2,\x81\n")

    # When it is read
    table = read_table(path)

    # Then latin-1 reads every byte, the head's text included
    assert table.source.encoding == "latin-1"
    assert table.column("b").value(0) == "café"
    assert table.column("b").value(30_001) == "\x81"


def test_rows_wider_than_the_sniffing_head_are_read_whole(tmp_path: Path) -> None:
    # Given a 78 KB header and 100 KB rows, so the first 64 KB hold only part of the header
    width = 2_000
    header = ";".join(f"a_rather_long_column_name_number_{i:05d}" for i in range(width))
    row = ";".join("x" * 50 for _ in range(width))
    path = tmp_path / "wide.csv"
    path.write_text(header + "\n" + row + "\n" + row + "\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then the delimiter and every column are found
    assert table.source.delimiter == ";"
    assert len(table.columns) == width
    assert table.n_rows == 2 and table.columns[-1].value(1) == "x" * 50


def test_parquet_blank_and_repeated_names_get_the_same_treatment_as_csv(tmp_path: Path) -> None:
    # Given Parquet columns named "a", "" and "a"
    path = tmp_path / "names.parquet"
    pq.write_table(
        pa.Table.from_arrays([pa.array([1]), pa.array(["x"]), pa.array([2.5])], names=["a", "", "a"]), path
    )

    # When it is read
    table = read_table(path)

    # Then the blank one is named by position and the repeat is recorded
    assert table.column_names == ["a", "column_2", "a"]
    assert as_rows(table) == [["1", "x", "2.5"]]
    assert [p.kind for p in table.problems] == ["blank_header", "duplicate_header"]


@pytest.mark.parametrize(("seed", "delimiter"), [(1, ","), (2, ";"), (3, "\t"), (4, "|")])
def test_random_awkward_values_survive_a_write_and_read(tmp_path: Path, seed: int, delimiter: str) -> None:
    # Given random values full of delimiters, quotes, line breaks, padding and non-ASCII, written by csv
    import random

    rng = random.Random(seed)
    alphabet = [
        "a",
        "Z",
        "0",
        "7",
        " ",
        ",",
        ";",
        "\t",
        "|",
        '"',
        "'",
        "\n",
        "\r\n",
        "é",
        "日",
        "-",
        ".",
        "N/A",
    ]

    def value() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))

    header = [f"h{i}" for i in range(6)]
    data = [[value() for _ in header] for _ in range(300)]
    path = tmp_path / "fuzz.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(data)

    # When it is read
    table = read_table(path)

    # Then every value comes back exactly, with no repairs needed
    assert table.source.delimiter == delimiter
    assert as_rows(table) == data
    assert table.problems == []


def test_a_tsv_with_bare_quotes_in_values_is_read_without_quoting(tmp_path: Path) -> None:
    # Given a TSV (no quoting convention) whose values start with a double quote that never closes
    path = tmp_path / "notes.tsv"
    path.write_text('id\tnote\tn\n1\t"quoted start\t5\n2\t12" ruler\t6\n3\tplain\t7\n', encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then quotes are ordinary characters and every row keeps its three fields
    assert as_rows(table) == [["1", '"quoted start', "5"], ["2", '12" ruler', "6"], ["3", "plain", "7"]]


def test_xlsx_title_rows_above_the_header_are_skipped_and_recorded(tmp_path: Path) -> None:
    # Given a sheet with a report title and a blank row above the header
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["Quarterly orders"])
    sheet.append([])
    sheet.append(["id", "city"])
    sheet.append([1, "Oslo"])
    path = tmp_path / "report.xlsx"
    workbook.save(path)

    # When it is read
    table = read_table(path)

    # Then the header is row 3 and the title is recorded, not read as a column name
    assert table.column_names == ["id", "city"]
    assert as_rows(table) == [["1", "Oslo"]]
    [problem] = table.problems
    assert problem.kind == "preamble" and "Quarterly orders" in problem.detail


def test_an_xlsx_header_with_one_name_is_not_mistaken_for_a_title(tmp_path: Path) -> None:
    # Given a header naming only its first column, directly above the data
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.Workbook()
    workbook.active.append(["id", None, None])
    workbook.active.append([1, "a", "b"])
    path = tmp_path / "sparse.xlsx"
    workbook.save(path)

    # When it is read / Then the first row stays the header and the blank names are generated
    table = read_table(path)
    assert table.column_names == ["id", "column_2", "column_3"]
    assert as_rows(table) == [["1", "a", "b"]]


@pytest.mark.parametrize(
    ("filename", "compress", "compression"),
    [
        ("events.jsonl.gz", gzip.compress, "gzip"),
        ("orders.tsv.bz2", None, "bz2"),
        ("orders.csv.xz", None, "xz"),
    ],
)
def test_other_compressions_and_compressed_json_lines(
    tmp_path: Path, filename: str, compress, compression: str
) -> None:  # type: ignore[no-untyped-def]
    # Given compressed files of each kind
    import bz2
    import lzma

    if filename.endswith(".jsonl.gz"):
        content = b'{"zip": "01907", "amount": 6.0}\n{"zip": "N/A", "amount": null}\n'
        expected = [["01907", "6.0"], ["N/A", ""]]
    else:
        delimiter = "\t" if ".tsv" in filename else ","
        content = csv_text(["zip", "amount"], [["01907", "6.0"], ["N/A", ""]], delimiter).encode()
        expected = [["01907", "6.0"], ["N/A", ""]]
    packer = compress or {"bz2": bz2.compress, "xz": lzma.compress}[compression]
    path = tmp_path / filename
    path.write_bytes(packer(content))

    # When it is read
    table = read_table(path)

    # Then the content is read as if it were not compressed
    assert table.source.compression == compression
    assert table.column_names == ["zip", "amount"]
    assert as_rows(table) == expected


def test_a_header_that_starts_like_a_magic_number_is_still_text(tmp_path: Path) -> None:
    # Given a CSV whose first column name begins with letters some binary formats start with
    path = tmp_path / "codes.csv"
    path.write_text("MZ_code,flag\nA1,yes\n", encoding="utf-8")
    gif = tmp_path / "gif8.csv"
    gif.write_text("GIF8 count;n\n3;4\n", encoding="utf-8")

    # When it is read / Then it is a table
    assert as_rows(read_table(path)) == [["A1", "yes"]]
    assert as_rows(read_table(gif)) == [["3", "4"]]


@pytest.mark.parametrize("header", ["PAR1_id,name", "BZh9_score,name"])
def test_a_text_header_starting_with_parquet_or_bzip2_letters_is_text(tmp_path: Path, header: str) -> None:
    # Given a CSV whose first bytes spell the start of a Parquet or bzip2 signature
    path = tmp_path / "data.csv"
    path.write_text(f"{header}\n1,Ann\n", encoding="utf-8")

    # When it is read / Then it is read as the CSV it is
    table = read_table(path)
    assert table.source.format == "csv" and table.source.compression is None
    assert as_rows(table) == [["1", "Ann"]]
