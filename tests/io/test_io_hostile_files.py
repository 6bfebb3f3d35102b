"""Hostile files at the reader: each one refused early, in one line naming the file, the limit and how to
raise it, within seconds and a capped amount of memory.

Bombs are read in a subprocess whose address space is capped (hostile_files.run_capped), so that a
regression fails its test instead of taking the machine down; small cases run in-process.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import lzma
import os
import pickle
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hostile_files import (
    big_cell_csv,
    compressed_bomb,
    deep_json,
    fifo,
    run_capped,
    unix_socket,
    wide_csv,
    xlsx_deflate_bomb,
    xlsx_dimension_bomb,
    xlsx_entity_bomb,
)
from pydantic import ValidationError

from iterate.io import DatasetReadError, LimitExceeded, ReadLimits, read_table
from iterate.settings import Settings

pytestmark = pytest.mark.unit

# Reads argv[1] with the ReadLimits in argv[2] (JSON) and prints what happened as one JSON line.
# The reading process reports its own peak (VmHWM: the high-water mark of its own memory since it started the
# interpreter). wait4's ru_maxrss would also count the test process's memory at the fork, which Linux carries
# across execve: a pytest worker of 537 MB made a bomb refused at 85 MB read as 537 MB.
READ = """
import json, sys
from iterate.io import DatasetReadError, ReadLimits, read_table

def peak_mb():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None

try:
    table = read_table(sys.argv[1], limits=ReadLimits(**json.loads(sys.argv[2])))
except DatasetReadError as err:
    limit = err.limit
    print(json.dumps({"message": str(err), "line": err.line, "setting": limit and limit.setting,
                      "measured": limit and limit.measured, "peak_mb": peak_mb()}))
    sys.exit(2)
longest = max(max((len(v) for v in c.uniques), default=0) for c in table.columns)
print(json.dumps({"rows": table.n_rows, "columns": len(table.columns), "longest": longest,
                  "peak_mb": peak_mb()}))
"""


def read_capped(
    path: Path, *, memory_gib: float = 2, env: dict[str, str] | None = None, **limits: float
) -> tuple[int, dict, float, float]:
    """(exit code, what the reader said, seconds, peak MB) of reading `path` in a capped subprocess."""
    done = run_capped(
        [sys.executable, "-c", READ, str(path), json.dumps(limits)],
        memory_gib=memory_gib,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode in (0, 2), done.stderr[-2000:]
    said = json.loads(done.stdout.splitlines()[-1])
    own = said.pop("peak_mb")
    return done.returncode, said, done.seconds, own if own is not None else done.max_rss_mb


def refused(path: Path, setting: str | None, *, line: int | None = None, **kwargs) -> dict:  # type: ignore[no-untyped-def]
    """Read `path` capped; it must be refused in one line naming it, by `setting`, within seconds."""
    code, said, seconds, peak_mb = read_capped(path, **kwargs)
    assert code == 2, said
    assert said["setting"] == setting, said
    assert said["line"] == line, said
    message = said["message"]
    assert message.startswith(path.name) and "\n" not in message
    if setting is not None:
        assert f"set {setting} above" in message  # how to raise it
    assert seconds < 20, f"took {seconds:.1f} s"
    return said | {"seconds": seconds, "peak_mb": peak_mb}


# ---- compressed files -------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["gzip", "bz2", "xz"])
def test_a_decompression_bomb_stops_on_its_ratio_after_a_few_mb(tmp_path: Path, compression: str) -> None:
    # Given 8 GiB of CSV rows in a few MB of gzip, bzip2 or xz (valid: every member/stream is complete)
    path = compressed_bomb(tmp_path / f"orders.csv.{compression}", compression, gib=8)
    # When it is read (in 2 GiB of address space) / Then it stops on the ratio, long before 8 GiB
    said = refused(path, "ITERATE_MAX_COMPRESSION_RATIO")
    assert said["measured"] > 100 and said["peak_mb"] < 1024


def test_the_decompressed_size_has_its_own_cap(tmp_path: Path) -> None:
    # Given a bomb whose ratio is allowed, the size cap stops it (at 200 MB here, 5 GB by default)
    path = compressed_bomb(tmp_path / "orders.csv.gz", "gzip", gib=1)
    said = refused(
        path,
        "ITERATE_MAX_DECOMPRESSED_BYTES",
        max_compression_ratio=1e6,
        max_decompressed_bytes=200_000_000,
    )
    assert 200_000_000 < said["measured"] < 220_000_000 and "200.0 MB" in said["message"]


@pytest.mark.parametrize(
    ("suffix", "pack"),
    [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)],
)
def test_concatenated_members_are_all_read(tmp_path: Path, suffix: str, pack) -> None:  # type: ignore[no-untyped-def]
    # Given a file of two members/streams (what `cat a.gz b.gz` makes), decompressed as a stream now
    path = tmp_path / f"orders.csv{suffix}"
    path.write_bytes(pack(b"id,v\n1,a\n") + pack(b"2,b\n3,c\n"))
    table = read_table(path)
    assert [c.value(2) for c in table.columns] == ["3", "c"]


@pytest.mark.parametrize(("suffix", "pack"), [(".bz2", bz2.compress), (".xz", lzma.compress)])
def test_a_truncated_bzip2_or_xz_names_the_line_where_it_stops(tmp_path: Path, suffix: str, pack) -> None:  # type: ignore[no-untyped-def]
    body = "".join(f"{i},{i * 7919 % 10007}\n" for i in range(50_000)).encode()
    whole = pack(b"id,v\n" + body)
    path = tmp_path / f"orders.csv{suffix}"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DatasetReadError) as caught:
        read_table(path)
    assert "truncated or corrupt" in caught.value.problem and caught.value.limit is None


# ---- .xlsx --------------------------------------------------------------------------------------------


def test_an_xlsx_deflate_bomb_is_refused_from_its_declared_sizes(tmp_path: Path) -> None:
    # Given a workbook whose sheet inflates 3 GB from 3 MB (declared honestly in the archive)
    path = xlsx_deflate_bomb(tmp_path / "orders.xlsx", gib=3)
    said = refused(path, "ITERATE_MAX_COMPRESSION_RATIO")
    assert "xl/worksheets/sheet1.xml" in said["message"] and said["measured"] > 100


def test_an_xlsx_member_with_a_forged_small_size_is_damaged_not_a_bomb(tmp_path: Path) -> None:
    # Given the same stream under a declared size of 1 MB: zipfile inflates 1 MB and finds the lie
    path = xlsx_deflate_bomb(tmp_path / "orders.xlsx", gib=3, forged_size=1_000_000)
    said = refused(path, None)
    assert "damaged" in said["message"] or "cannot be parsed" in said["message"]


def test_an_xlsx_dimension_bomb_is_refused_before_openpyxl_builds_a_row(tmp_path: Path) -> None:
    # Given 200,000 rows with one cell each in column XFD: as a grid, 3.3 billion cells
    path = xlsx_dimension_bomb(tmp_path / "orders.xlsx", rows=200_000, column="XFD")
    said = refused(path, "ITERATE_MAX_COLUMNS")
    assert said["measured"] == 16_384 and "A1:XFD1048576" in said["message"]


def test_an_xlsx_under_the_column_limit_is_held_to_the_cell_limit(tmp_path: Path) -> None:
    # Given 200,000 rows reaching column MHZ (9,022 columns, under the column limit): 1.8 billion cells
    path = xlsx_dimension_bomb(tmp_path / "orders.xlsx", rows=200_000, column="MHZ")
    said = refused(path, "ITERATE_MAX_CELLS")
    assert said["measured"] > 1_000_000_000


def test_the_in_reader_guard_holds_when_the_scan_is_blind(tmp_path: Path) -> None:
    # Given cells without references (legal XML the scan cannot size): the reader's own count refuses
    cells = "".join("<c><v>1</v></c>" for _ in range(30))
    sheet = (
        '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f"<sheetData><row>{cells}</row><row>{cells}</row></sheetData></worksheet>"
    ).encode()
    from hostile_files import xlsx

    path = xlsx(tmp_path / "orders.xlsx", xl__worksheets__sheet1_xml=sheet)
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_columns=20))
    assert caught.value.limit == LimitExceeded("ITERATE_MAX_COLUMNS", 20, 30) and caught.value.line == 1


def sheet_xml(cells: int, *, dimension: bool) -> bytes:
    """A sheet of `cells` cells, five a row (A-E), with or without a <dimension> before its data."""
    rows = "".join(
        f'<row r="{i}">' + "".join(f'<c r="{col}{i}"><v>{i}</v></c>' for col in "ABCDE") + "</row>"
        for i in range(1, cells // 5 + 1)
    )
    dim = '<dimension ref="A1:E9"/>' if dimension else ""
    return (
        '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f"{dim}<sheetData>{rows}</sheetData></worksheet>"
    ).encode()


@pytest.mark.parametrize(
    ("cells", "dimension", "refused"), [(30, True, True), (15, False, True), (15, True, False)]
)
def test_the_cells_openpyxl_would_parse_are_counted_before_it_starts(
    tmp_path: Path, cells: int, dimension: bool, refused: bool
) -> None:
    # Given a first sheet of `cells` cells: without a <dimension>, openpyxl parses it twice (once to size it)
    from hostile_files import xlsx

    path = xlsx(tmp_path / "orders.xlsx", xl__worksheets__sheet1_xml=sheet_xml(cells, dimension=dimension))
    limits = ReadLimits(max_xlsx_cells=20)
    if refused:
        with pytest.raises(DatasetReadError) as caught:
            read_table(path, limits=limits)
        assert caught.value.limit == LimitExceeded("ITERATE_MAX_XLSX_CELLS", 20, 30)
    else:
        assert read_table(path, limits=limits).n_rows == 2


def test_another_sheet_without_a_dimension_counts_too(tmp_path: Path) -> None:
    # Given a tiny first sheet and a second one of 30 cells that declares no size: openpyxl parses it whole
    from hostile_files import xlsx

    path = xlsx(tmp_path / "orders.xlsx", sheets=2, xl__worksheets__sheet2_xml=sheet_xml(30, dimension=False))
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_xlsx_cells=20))
    assert caught.value.limit is not None and caught.value.limit.setting == "ITERATE_MAX_XLSX_CELLS"
    sized = xlsx(tmp_path / "sized.xlsx", sheets=2, xl__worksheets__sheet2_xml=sheet_xml(30, dimension=True))
    assert read_table(sized, limits=ReadLimits(max_xlsx_cells=20)).n_rows == 1


@pytest.mark.parametrize("member", ["xl/worksheets/sheet1.xml", "xl/workbook.xml", "xl/styles.xml"])
def test_xml_entity_expansion_is_refused_unread(tmp_path: Path, member: str) -> None:
    # Given "billion laughs" (10^9 × "lol") in a sheet, the workbook part or the styles
    path = xlsx_entity_bomb(tmp_path / "orders.xlsx", member=member)
    said = refused(path, None)
    assert "declares entities" in said["message"] and said["peak_mb"] < 512


def test_without_defusedxml_expat_still_stops_it_in_one_line(tmp_path: Path) -> None:
    # Given openpyxl told not to use defusedxml: expat's own amplification limit ends it, still one line
    path = xlsx_entity_bomb(tmp_path / "orders.xlsx")
    said = refused(path, None, env={"OPENPYXL_DEFUSEDXML": "False"})
    assert "XML cannot be parsed" in said["message"]


def test_openpyxl_parses_through_defusedxml() -> None:
    from openpyxl.xml import DEFUSEDXML

    assert DEFUSEDXML is True


# ---- JSON ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("depth", "as_array", "line", "measured"),
    [
        (500, False, 2, 500),  # deep enough for the recursive writer, not for the parser: measured
        (100_000, False, 2, 101),  # deeper than Python's parser follows: "at least" the limit + 1
        (5_000, True, None, 101),  # a JSON array of records has no line per record
    ],
)
def test_deeply_nested_json_is_one_line_naming_the_limit(
    tmp_path: Path, depth: int, as_array: bool, line: int | None, measured: int
) -> None:
    path = deep_json(
        tmp_path / ("events.json" if as_array else "events.jsonl"), depth=depth, as_array=as_array
    )
    said = refused(path, "ITERATE_MAX_JSON_DEPTH", line=line)
    assert said["measured"] == measured


def test_nesting_within_the_limit_is_read_as_json_text(tmp_path: Path) -> None:
    table = read_table(deep_json(tmp_path / "events.jsonl", depth=60))
    assert table.columns[1].value(1).startswith('{"a": {"a": ')


def test_json_records_with_ever_new_keys_are_refused_before_a_column_is_built(tmp_path: Path) -> None:
    # Given 2,000 records that each bring a new key: 4 million cells once laid out as a table
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"id": i, f"k{i}": 1}) + "\n" for i in range(2_000)), encoding="utf-8")
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_cells=1_000_000))
    assert caught.value.limit == LimitExceeded("ITERATE_MAX_CELLS", 1_000_000, 2_000 * 2_001)
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_columns=1_000))
    assert caught.value.limit == LimitExceeded("ITERATE_MAX_COLUMNS", 1_000, 2_001)


# ---- wide tables and long values ------------------------------------------------------------------------


def test_a_20000_column_csv_is_refused_at_its_header(tmp_path: Path) -> None:
    path = wide_csv(tmp_path / "wide.csv", columns=20_000, rows=50)
    said = refused(path, "ITERATE_MAX_COLUMNS", line=1)
    assert said["measured"] == 20_000 and said["seconds"] < 10


def test_a_csv_at_the_column_limit_is_read(tmp_path: Path) -> None:
    table = read_table(
        wide_csv(tmp_path / "wide.csv", columns=200, rows=5), limits=ReadLimits(max_columns=200)
    )
    assert len(table.columns) == 200


def test_a_200_mb_value_is_refused_by_default_naming_its_line(tmp_path: Path) -> None:
    # Given a valid CSV whose line 3 holds a 200 MB value (pyarrow alone says "straddling object ...")
    path = big_cell_csv(tmp_path / "blobs.csv", cell_bytes=200_000_000)
    said = refused(path, "ITERATE_MAX_CELL_BYTES", line=3)
    assert "200.0 MB long" in said["message"] and "straddl" not in said["message"]


def test_a_long_value_is_read_whole_when_the_limit_allows_it(tmp_path: Path) -> None:
    # Given a 60 MB value (over the 16 MB default, 60 times pyarrow's 1 MB block) and a limit above it:
    # the blocks grow to hold the row and it is read whole (200 MB reads the same way, in ~4.5 s)
    path = big_cell_csv(tmp_path / "blobs.csv", cell_bytes=60_000_000)
    code, said, seconds, _ = read_capped(path, memory_gib=3, max_cell_bytes=100_000_000)
    assert code == 0 and said == {"rows": 3, "columns": 3, "longest": 60_000_000}
    assert seconds < 20


def test_rows_longer_than_pyarrows_block_are_read_with_the_defaults(tmp_path: Path) -> None:
    # Given a 5 MB value (pyarrow's default 1 MB block would fail on it)
    table = read_table(big_cell_csv(tmp_path / "blobs.csv", cell_bytes=5_000_000))
    assert table.n_rows == 3 and len(table.columns[1].value(1)) == 5_000_000


def test_a_long_value_over_the_limit_names_its_row_and_column(tmp_path: Path) -> None:
    # Given a 2 MB value in a row with many other fields (the line alone cannot prove one value too long)
    path = tmp_path / "blobs.csv"
    path.write_text("a,b,c\n1,2,3\n" + "x" * 2_000_000 + ",y,z\n", encoding="utf-8")
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_cell_bytes=1_000_000))
    err = caught.value
    assert err.limit == LimitExceeded("ITERATE_MAX_CELL_BYTES", 1_000_000, 2_000_000)
    assert "data row 2, column 'a'" in err.problem


# ---- not regular files, and the file size -------------------------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    said = refused(fifo(tmp_path / "orders.csv"), None)
    assert "named pipe" in said["message"] and said["seconds"] < 10


def test_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    link = tmp_path / "orders.csv"
    link.symlink_to("/dev/zero")  # an endless file behind an innocent name
    said = refused(link, None)
    assert "character device" in said["message"]


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path, sock = unix_socket(tmp_path / "orders.csv")
    try:
        with pytest.raises(DatasetReadError) as caught:
            read_table(path)
        assert "is a socket" in caught.value.problem
    finally:
        sock.close()


def test_a_file_over_the_size_limit_is_refused_before_it_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "orders.csv"
    path.write_text("a,b\n" + "1,2\n" * 1000, encoding="utf-8")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("opened")

    monkeypatch.setattr(os, "open", never)
    monkeypatch.setattr(Path, "open", never)
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(max_file_bytes=1000))
    assert caught.value.limit == LimitExceeded("ITERATE_MAX_FILE_BYTES", 1000, 4004)


# ---- Parquet: the footer is checked before any page is read ------------------------------------------


@pytest.mark.parametrize(
    ("limits", "setting"),
    [
        ({"max_cells": 1_000}, "ITERATE_MAX_CELLS"),
        ({"max_columns": 2}, "ITERATE_MAX_COLUMNS"),
    ],
)
def test_parquet_is_sized_from_its_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: dict, setting: str
) -> None:
    path = tmp_path / "orders.parquet"
    pd.DataFrame({"a": range(1000), "b": ["x"] * 1000, "c": [1.5] * 1000}).to_parquet(path)

    def never(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError("data pages read")

    monkeypatch.setattr(pq.ParquetFile, "read", never)
    with pytest.raises(DatasetReadError) as caught:
        read_table(path, limits=ReadLimits(**limits))
    assert caught.value.limit is not None and caught.value.limit.setting == setting


# ---- the settings -------------------------------------------------------------------------------------


def test_the_limits_come_from_iterate_max_settings_with_the_same_defaults() -> None:
    assert ReadLimits.from_settings(Settings()) == ReadLimits()
    env = {
        "ITERATE_MAX_COLUMNS": "50",
        "ITERATE_MAX_COMPRESSION_RATIO": "12.5",
        "ITERATE_MAX_CELL_BYTES": "9",
    }
    limits = ReadLimits.from_settings(Settings.from_env(env))
    assert (limits.max_columns, limits.max_compression_ratio, limits.max_cell_bytes) == (50, 12.5, 9)
    with pytest.raises(ValidationError):
        Settings.from_env({"ITERATE_MAX_COLUMNS": "0"})


def test_a_limit_error_keeps_its_limit_through_pickling() -> None:
    err = DatasetReadError(
        "a.csv", "too wide", "narrow it", line=1, limit=LimitExceeded("ITERATE_MAX_COLUMNS", 1, 2)
    )
    again = pickle.loads(pickle.dumps(err))
    assert again.limit == err.limit and str(again) == str(err)


@pytest.mark.parametrize("chunks", [1, 3])
def test_the_longest_coded_value_and_its_first_row_are_the_plain_scans(chunks: int) -> None:
    """A file read in ranges is checked per distinct value: the same (bytes, row, column) as the plain scan,
    ties going to the first row, whatever the number of values sharing the longest length."""
    import numpy as np
    import pyarrow as pa

    from iterate.io.reader import _longest_cell

    rng = np.random.default_rng(3)
    phones = [f"({a}) {b}-{c}" for a, b, c in rng.integers(100, 999, size=(500, 3))]  # all 13 bytes
    rows = 6_000
    columns = {
        "phone": [phones[i] for i in rng.integers(0, len(phones), rows)],
        "note": ["ok"] * rows,
        "code": [str(i % 97) for i in range(rows)],
    }
    columns["note"][4_321] = "a longer note"  # 13 bytes: ties the phones; the first column wins the tie
    columns["code"][5_000] = "x" * 20  # the longest value, held once
    columns["code"][5_500] = "y" * 20  # as long, later: not the one named
    plain = pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})
    bounds = np.linspace(0, rows, chunks + 1).astype(int)
    coded = pa.table(
        {
            k: pa.chunked_array(
                [pa.array(v[a:b], pa.string()).dictionary_encode() for a, b in itertools.pairwise(bounds)]
            )
            for k, v in columns.items()
        }
    )
    assert _longest_cell(coded) == _longest_cell(plain) == (20, 5_000, 2)
    # And one column alone: the first of its many longest phones
    first = next(i for i, v in enumerate(columns["phone"]) if len(v) == 13)
    assert _longest_cell(coded.select(["phone"])) == _longest_cell(plain.select(["phone"])) == (13, first, 0)


def test_a_dictionary_value_no_row_holds_is_not_the_longest() -> None:
    import pyarrow as pa

    from iterate.io.reader import _longest_cell

    dictionary = pa.array(["short", "never used by any row, and long"], pa.string())
    column = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), dictionary)
    assert _longest_cell(pa.table({"a": column})) == (5, 0, 0)
