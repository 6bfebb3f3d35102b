"""Bad input: repaired and recorded where that helps, else one clear line naming the file, the line and what to do."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
from pathlib import Path

import pandas as pd
import pytest

from iterate.io import DatasetReadError, read_table
from iterate.io.errors import DatasetReadError as ErrorsModuleError

pytestmark = pytest.mark.unit


def sha256(path: Path) -> str:
    with open(path, "rb") as fh:  # builtin open: one test denies Path.open
        return hashlib.sha256(fh.read()).hexdigest()


def read_error(path: Path, *, line: int | None, says: str) -> DatasetReadError:
    """Read a file that must be refused; check the one-line message and that the file is untouched."""
    before = sha256(path) if path.is_file() else None
    with pytest.raises(DatasetReadError) as caught:
        read_table(path)
    err = caught.value
    message = str(err)
    assert "\n" not in message
    assert message.startswith(path.name if line is None else f"{path.name}, line {line}: ")
    assert err.line == line
    assert err.path == str(path)
    assert says in err.problem
    assert " — " in message and len(err.hint) > 10  # says what to do
    if before is not None:
        assert sha256(path) == before
    return err


def rows(table) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [[c.value(r) for c in table.columns] for r in range(table.n_rows)]


# ---- repaired and recorded ---------------------------------------------------------------------------------


def test_ragged_rows_are_kept_in_place_and_recorded_with_their_line_and_row(tmp_path: Path) -> None:
    # Given a file with a short row and a long row, after a multi-line quoted value and a blank line
    good = "".join(f"{i},ok,fine\n" for i in range(40))
    path = tmp_path / "orders.csv"
    path.write_text(
        'id,status,note\n1,"multi\nline",x\n\n2,short\n' + good + "3,too,many,fields,here\n" + good,
        encoding="utf-8",
    )
    before = sha256(path)

    # When it is read
    table = read_table(path)

    # Then the short row is padded, the long row's extra text is folded into the last column,
    # both stay at their position, and each problem names its physical line and data row
    assert table.n_rows == 83
    data = rows(table)
    assert data[0] == ["1", "multi\nline", "x"]
    assert data[1] == ["2", "short", ""]
    assert data[42] == ["3", "too", "many,fields,here"]
    assert data[43] == ["0", "ok", "fine"]
    short, long = table.problems
    assert (short.kind, short.line, short.row) == ("ragged_row", 5, 1)
    assert (long.kind, long.line, long.row) == ("ragged_row", 46, 42)
    assert "2 fields but the header has 3" in short.detail
    assert "5 fields but the header has 3" in long.detail
    assert sha256(path) == before


def test_ragged_rows_in_a_large_file_are_placed_correctly(tmp_path: Path) -> None:
    # Given a file parsed in several parallel blocks, with ragged rows near the end
    lines = [f"{i},v{i}" for i in range(50_000)]
    lines[30_000] = "30000"
    lines[49_998] = "49998,a,b"
    path = tmp_path / "big.csv"
    path.write_text("n,v\n" + "\n".join(lines) + "\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then rows keep their order and the problems point at the right lines
    assert table.n_rows == 50_000
    assert table.column("n").value(30_000) == "30000" and table.column("v").value(30_000) == ""
    assert table.column("v").value(49_998) == "a,b"
    assert table.column("n").value(49_999) == "49999"
    assert [(p.row, p.line) for p in table.problems] == [(30_000, 30_002), (49_998, 50_000)]


def test_too_many_ragged_rows_mean_a_wrong_delimiter_and_are_refused(tmp_path: Path) -> None:
    # Given a file whose rows mostly disagree with the header's field count
    path = tmp_path / "orders.csv"
    path.write_text("id,name,city\n1,Ann,Oslo\n2,Bob\n3,Cy,Rome,Italy\n4,Di\n5,Ed,Bonn\n", encoding="utf-8")

    # When it is read / Then it is refused at the first ragged row
    err = read_error(path, line=3, says="row has 2 fields but the header has 3")
    assert "3 of 5 rows" in err.problem


def test_blank_header_names_are_named_by_position(tmp_path: Path) -> None:
    # Given a header with a blank and a whitespace-only name
    path = tmp_path / "export.csv"
    path.write_text("id,, ,total\n1,a,b,9\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then they are named column_<position> and recorded
    assert table.column_names == ["id", "column_2", "column_3", "total"]
    assert [(p.kind, p.column, p.line) for p in table.problems] == [
        ("blank_header", "column_2", 1),
        ("blank_header", "column_3", 1),
    ]


def test_duplicate_header_names_are_kept_as_written(tmp_path: Path) -> None:
    # Given two columns with the same name
    path = tmp_path / "export.csv"
    path.write_text("id,amount,amount\n1,5,6\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then both keep the name and their own values, and the repeat is recorded
    assert table.column_names == ["id", "amount", "amount"]
    assert [c.value(0) for c in table.columns] == ["1", "5", "6"]
    [problem] = table.problems
    assert (problem.kind, problem.column) == ("duplicate_header", "amount")
    assert "columns 2 and 3" in problem.detail


# ---- refused -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"   \n\n\t\r\n"])
def test_an_empty_file_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "orders.csv"
    path.write_bytes(content)
    read_error(path, line=None, says="file is empty")


def test_a_header_without_rows_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "orders.csv"
    path.write_text("id,name,city\n", encoding="utf-8")
    read_error(path, line=1, says="has a header but no data rows")


def test_an_xlsx_header_without_rows_is_refused(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.Workbook()
    workbook.active.append(["id", "name"])
    path = tmp_path / "orders.xlsx"
    workbook.save(path)
    read_error(path, line=1, says="has a header but no data rows")


def test_an_image_is_not_a_text_table(tmp_path: Path) -> None:
    path = tmp_path / "orders.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(200))
    read_error(path, line=None, says="not a text table")


def test_random_bytes_are_not_a_text_table(tmp_path: Path) -> None:
    path = tmp_path / "blob.dat"
    path.write_bytes(bytes(range(1, 256)) * 20)  # no NUL: caught by the control characters
    read_error(path, line=None, says="not a text table")


def test_a_nul_byte_deep_in_a_text_file_is_refused_with_its_line(tmp_path: Path) -> None:
    # Given a text file with a NUL byte far beyond the sniffed head
    body = "".join(f"{i},value\n" for i in range(20_000))
    path = tmp_path / "orders.csv"
    path.write_bytes(("id,v\n" + body).encode() + b"20000,bad\x00value\n")
    read_error(path, line=20_002, says="not a text table")


def test_a_truncated_gzip_is_refused_with_the_line_where_it_stops(tmp_path: Path) -> None:
    # Given a gzip file cut in the middle
    body = "".join(f"{i},{hashlib.md5(str(i).encode()).hexdigest()}\n" for i in range(5_000))
    compressed = gzip.compress(("id,h\n" + body).encode())
    path = tmp_path / "orders.csv.gz"
    path.write_bytes(compressed[: len(compressed) // 2])

    # When it is read / Then the line where the content stops is named
    err = read_error(path, line=_partial_line_count(path), says="truncated")
    assert err.line is not None and 100 < err.line < 5_000


def _partial_line_count(path: Path) -> int:
    import zlib

    return zlib.decompressobj(wbits=31).decompress(path.read_bytes()).count(b"\n") + 1


def test_a_truncated_parquet_is_refused(tmp_path: Path) -> None:
    whole = io.BytesIO()
    pd.DataFrame({"a": range(1000), "b": ["x"] * 1000}).to_parquet(whole)
    path = tmp_path / "orders.parquet"
    path.write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
    read_error(path, line=None, says="truncated")


def test_an_unterminated_quote_names_the_line_where_it_opened(tmp_path: Path) -> None:
    # Given a quote opened in a middle column that never closes
    path = tmp_path / "orders.csv"
    path.write_text('id,note,qty\n1,ok,2\n2,"broken,3\n3,after,4\n4,more,5\n', encoding="utf-8")
    read_error(path, line=3, says="closing quote is missing")


def test_an_unterminated_quote_in_the_last_column_is_caught(tmp_path: Path) -> None:
    # Given a quote opened in the last column: the rest of the file fits in it without a ragged row
    path = tmp_path / "orders.csv"
    path.write_text('id,note\n1,ok\n2,ok\n3,"cut off\n4,lost\n5,lost\n', encoding="utf-8")
    read_error(path, line=4, says="closing quote is missing")


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    read_error(tmp_path / "nowhere.csv", line=None, says="does not exist")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    read_error(folder, line=None, says="is a directory")


def test_an_unreadable_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a file the process may not open (simulated: tests may run as root, where chmod does not bite)
    path = tmp_path / "secret.csv"
    path.write_text("a\n1\n", encoding="utf-8")
    real_open = Path.open

    def deny(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    real_os_open = os.open

    def deny_fd(name, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(name) == path:
            raise PermissionError(13, "Permission denied", str(name))
        return real_os_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    monkeypatch.setattr(os, "open", deny_fd)  # the reader opens the head without blocking on a FIFO
    read_error(path, line=None, says="permission denied")


def test_a_legacy_xls_workbook_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "orders.xls"
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + os.urandom(512))
    err = read_error(path, line=None, says=".xls")
    assert ".xlsx" in err.hint


def test_an_unsupported_binary_extension_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "survey.sav"
    path.write_bytes(b"$FL2@(#) SPSS DATA FILE\x00\x00\x02" + os.urandom(256))
    err = read_error(path, line=None, says="'.sav'")
    assert "SPSS" in err.hint


def test_a_csv_saved_with_an_xls_extension_is_read_by_its_content(tmp_path: Path) -> None:
    # Given a CSV renamed to .xls (common with exports from web apps)
    path = tmp_path / "report.xls"
    path.write_text("a;b\n1;2\n", encoding="utf-8")

    # Then the content decides
    assert rows(read_table(path)) == [["1", "2"]]


def test_invalid_json_lines_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": \n', encoding="utf-8")
    read_error(path, line=3, says="not valid JSON")


def test_the_error_survives_pickling_with_all_its_fields() -> None:
    # Given an error as a worker process would raise it
    err = DatasetReadError("/data/orders.csv", "row has 5 fields but the header has 4", "fix the row", line=7)

    # When it crosses a process boundary
    copy = pickle.loads(pickle.dumps(err))

    # Then nothing is lost, and the class is the one the state machine routes on
    assert str(copy) == "orders.csv, line 7: row has 5 fields but the header has 4 — fix the row"
    assert (copy.path, copy.line, copy.problem, copy.hint) == (err.path, 7, err.problem, err.hint)
    assert type(copy) is ErrorsModuleError and type(copy).__name__ == "DatasetReadError"


def test_a_trailing_delimiter_on_every_row_is_ignored_and_recorded(tmp_path: Path) -> None:
    # Given rows that all end with a delimiter the header does not have
    path = tmp_path / "export.csv"
    path.write_text("id;name\n1;Ann;\n2;Bob;\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then the empty trailing field is not a column, no row is ragged, and the quirk is recorded
    assert table.column_names == ["id", "name"]
    assert rows(table) == [["1", "Ann"], ["2", "Bob"]]
    assert [p.kind for p in table.problems] == ["trailing_delimiter"]


def test_a_trailing_field_that_sometimes_holds_text_is_kept_as_an_unnamed_column(tmp_path: Path) -> None:
    # Given rows with one field more than the header, empty in the head but filled further down
    filler = "".join(f"{i},x,\n" for i in range(3_000))
    path = tmp_path / "export.csv"
    path.write_text("id,name\n" + filler + "9,y,surprise\n", encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then no text is lost: the extra field is a column named by its position
    assert table.column_names == ["id", "name", "column_3"]
    assert table.column("column_3").value(3_000) == "surprise"
    assert [p.kind for p in table.problems] == ["blank_header"]


def test_old_mac_line_endings_are_lines(tmp_path: Path) -> None:
    # Given a file whose lines end with a bare carriage return, with a ragged row
    path = tmp_path / "mac.csv"
    path.write_bytes(b"a,b\r1,2\r3\r" + b"".join(b"%d,x\r" % i for i in range(30)))

    # When it is read
    table = read_table(path)

    # Then rows split on \r and the ragged row's line is right
    assert rows(table)[:2] == [["1", "2"], ["3", ""]]
    assert [(p.line, p.row) for p in table.problems] == [(3, 1)]


def test_an_unterminated_quote_near_the_end_of_a_large_file_is_caught(tmp_path: Path) -> None:
    # Given a file parsed in parallel blocks, with a quote opened in a middle column near the end
    body = "".join(f"{i},fine,{i}\n" for i in range(40_000))
    path = tmp_path / "big.csv"
    path.write_text("id,note,n\n" + body + '40000,"open,1\n40001,x,2\n', encoding="utf-8")
    read_error(path, line=40_002, says="closing quote is missing")


def test_title_lines_above_the_header_are_skipped_and_recorded(tmp_path: Path) -> None:
    # Given a report export with a title and a note above the real header
    path = tmp_path / "report.csv"
    path.write_text(
        "Sales report 2024\nExported by: Bob\n\nid;name;city\n1;Ann;Oslo\n2;Bob;Rome\n", encoding="utf-8"
    )

    # When it is read
    table = read_table(path)

    # Then the header is the first split line, and the skipped text is recorded
    assert table.source.delimiter == ";"
    assert table.column_names == ["id", "name", "city"]
    assert rows(table) == [["1", "Ann", "Oslo"], ["2", "Bob", "Rome"]]
    [problem] = table.problems
    assert problem.kind == "preamble" and "Sales report 2024" in problem.detail


def test_a_single_column_file_keeps_commas_inside_values(tmp_path: Path) -> None:
    # Given one column whose values hold unquoted commas
    path = tmp_path / "names.csv"
    path.write_text("name\nSmith, Ann\nBob\nCy\n", encoding="utf-8")

    # When it is read / Then each line is one value
    table = read_table(path)
    assert rows(table) == [["Smith, Ann"], ["Bob"], ["Cy"]]
    assert table.problems == []


def test_random_ragged_rows_among_multiline_values_are_placed_and_located_exactly(tmp_path: Path) -> None:
    # Given 20,000 rows parsed in parallel blocks: multi-line quoted values, blank lines, ~2% ragged rows
    import csv
    import random

    rng = random.Random(7)
    width = 4
    records: list[list[str]] = []
    for i in range(20_000):
        row = [str(i), rng.choice(["x", "a\nb", "q, r", 'say "hi"', ""]), rng.choice(["1", "2\r\n3"]), "z"]
        roll = rng.random()
        if roll < 0.01:
            row = row[: rng.randint(1, width - 1)]
        elif roll < 0.02:
            row = [*row, *(["extra"] * rng.randint(1, 3))]
        records.append(row)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "text", "num", "end"])
    starts = []  # the physical line each record starts on
    line = 2
    for n, row in enumerate(records):
        if n % 1000 == 999:
            buffer.write("\n")  # a blank line: skipped, but it still counts for line numbers
            line += 1
        starts.append(line)
        before = buffer.tell()
        writer.writerow(row)
        line += buffer.getvalue()[before:].count("\n")
    path = tmp_path / "messy.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")

    # When it is read
    table = read_table(path)

    # Then every record is in place, padded or folded, and each ragged one names its own line
    expected = [
        row + [""] * (width - len(row))
        if len(row) <= width
        else [*row[: width - 1], ",".join(row[width - 1 :])]
        for row in records
    ]
    assert rows(table) == expected
    ragged = [n for n, row in enumerate(records) if len(row) != width]
    assert [p.row for p in table.problems] == ragged
    assert [p.line for p in table.problems] == [starts[n] for n in ragged]


def test_a_one_name_header_over_wider_rows_is_not_taken_for_a_title(tmp_path: Path) -> None:
    # Given a header with one name directly above rows of three fields (no blank line between)
    path = tmp_path / "orders.csv"
    path.write_text("id\n1,a,b\n2,c,d\n3,e,f\n", encoding="utf-8")

    # When it is read / Then it is refused at the first row rather than silently re-headed
    read_error(path, line=2, says="row has 3 fields but the header has 1")


def test_title_lines_directly_above_a_header_of_names_are_skipped(tmp_path: Path) -> None:
    # Given two title lines with no blank line before a header made of names
    path = tmp_path / "report.csv"
    path.write_text(
        "Sales report 2024\nExported by: Bob\nid;name;city\n1;Ann;Oslo\n2;Bob;Rome\n", encoding="utf-8"
    )

    # When it is read
    table = read_table(path)

    # Then the header of names is found and the title lines are recorded
    assert table.column_names == ["id", "name", "city"]
    assert rows(table) == [["1", "Ann", "Oslo"], ["2", "Bob", "Rome"]]
    assert [p.kind for p in table.problems] == ["preamble"]
