"""The AWS chunked read's engine half (plan_ranges, parse_bytes, partials, table_from_ranges) over byte reads
gives the single pass's Table, or sends the file to the single pass, exactly as the local chunked read does."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest
from test_io_chunked import _rows, _write, assert_same_table, bench_file  # noqa: F401  (a fixture)

from iterate.io import read_table
from iterate.io.chunked import line_ranges, merge_columns, parse_bytes, read_partial, write_partial
from iterate.io.limits import ReadLimits
from iterate.io.reader import plan_ranges, stream_digest, table_from_ranges, text_layout
from iterate.table import Table


def _reader(path: Path, reads: list[tuple[int, int]] | None = None) -> Callable[[int, int], bytes]:
    """`read_at` over the file, as ObjectRanges gives it over S3 (clamped at the end); records each read."""
    data = path.read_bytes()

    def read_at(offset: int, length: int) -> bytes:
        if reads is not None:
            reads.append((offset, length))
        return data[offset : offset + max(0, length)]

    return read_at


def read_by_ranges(path: Path, chunk_bytes: int) -> tuple[Table | None, str]:
    """What ProfileDataset, the chunk functions and MergeChunks do, with the bytes read from the local file:
    (the Table, "") or (None, why) when the single pass reads it."""
    size = path.stat().st_size
    read_at = _reader(path)
    planned = plan_ranges(path, size, read_at, limits=ReadLimits(), chunk_bytes=chunk_bytes)
    if planned is None:
        return None, "not planned"
    text, ranges = planned
    parts = []
    for k, (start, end) in enumerate(ranges):
        part = parse_bytes(
            read_at(start, end - start),
            last=k == len(ranges) - 1,
            skip=text.layout.header.lines if k == 0 else 0,
            options=text.parse_options(),
            threads=False,
        )
        stored = read_partial(write_partial(part))  # through the Arrow IPC file the chunk function PUTs
        if stored.columns is None:
            return None, stored.reason
        parts.append(stored.columns)
    merged = merge_columns(parts)
    again = text_layout(path, size, read_at, limits=ReadLimits())  # MergeChunks reads the head again
    assert again is not None and again.layout == text.layout
    digest = stream_digest(
        iter([path.read_bytes()[i : i + 4096] for i in range(0, size, 4096)]), find_nul=True
    )
    table = table_from_ranges(path, again, merged, size=size, digest=digest, limits=ReadLimits())
    return table, "" if table is not None else "table_from_ranges"


def test_the_cut_from_byte_reads_is_the_local_cut_and_reads_little(bench_file: Path) -> None:  # noqa: F811
    # Given the bench file read only through small ranged reads
    reads: list[tuple[int, int]] = []
    size = bench_file.stat().st_size
    planned = plan_ranges(
        bench_file, size, _reader(bench_file, reads), limits=ReadLimits(), chunk_bytes=1_000_000
    )
    # Then the ranges are exactly line_ranges', and the plan read the head and a window per cut, not the file
    assert planned is not None
    assert planned[1] == line_ranges(bench_file, 1_000_000) and len(planned[1]) >= 3
    assert sum(length for _, length in reads) < size / 4


def test_the_bench_file_by_ranges_is_the_single_pass_table(bench_file: Path) -> None:  # noqa: F811
    table, why = read_by_ranges(bench_file, 200_000)
    assert table is not None, why
    assert_same_table(read_table(bench_file), table)


@pytest.mark.parametrize(
    "case",
    ["plain", "crlf", "bom", "trailing_blank_lines", "spanning_values", "ragged_rows", "lone_cr", "nul"],
)
def test_hostile_files_by_ranges_match_the_single_pass_or_go_to_it(tmp_path: Path, case: str) -> None:
    # Given a 3,000-row file with the case's trouble in it
    path = tmp_path / f"{case}.csv"
    rows = _rows(
        3000,
        spanning={1234} if case == "spanning_values" else set(),
        ragged={2500} if case == "ragged_rows" else set(),
    )
    _write(
        path,
        rows,
        newline="\r\n" if case == "crlf" else "\n",
        encoding="utf-8-sig" if case == "bom" else "utf-8",
    )
    data = path.read_bytes()
    if case == "trailing_blank_lines":
        path.write_bytes(data + b"\n\n\r\n")
    elif case == "lone_cr":
        lines = data.split(b"\n")
        path.write_bytes(b"\n".join(lines[:1500]) + b"\r" + b"\n".join(lines[1500:]))
    elif case == "nul":
        at = data.index(b"\n2000,") + 3
        path.write_bytes(data[:at] + b"\x00" + data[at:])
    # When it is read by ranges of 8 KB as on AWS
    table, why = read_by_ranges(path, 8_000)
    # Then a clean file gives the single pass's table; a troubled one says why and goes to the single pass
    if case in {"plain", "crlf", "bom", "trailing_blank_lines"}:
        assert table is not None, why
        assert_same_table(read_table(path), table)
    else:
        assert table is None and why, case


def test_files_the_local_reader_never_chunks_are_not_planned(tmp_path: Path) -> None:
    base = _write(tmp_path / "plain.csv", _rows(3000))
    data = base.read_bytes()
    small = base
    zipped = tmp_path / "zipped.csv"
    zipped.write_bytes(gzip.compress(data, compresslevel=0))
    latin = _write(tmp_path / "latin.csv", [[*r[:1], "café", *r[2:]] for r in _rows(3000)], encoding="cp1252")
    trailing = tmp_path / "trailing.csv"
    header, body = data.split(b"\n", 1)
    trailing.write_bytes(header + b"\n" + body.replace(b"\n", b",\n"))  # every data row ends in a delimiter
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_bytes(b"".join(b'{"a": %d, "b": "x"}\n' % i for i in range(5000)))
    for path, chunk_bytes in [
        (small, 10**9),
        (zipped, 8_000),
        (latin, 8_000),
        (trailing, 8_000),
        (jsonl, 8_000),
    ]:
        size = path.stat().st_size
        assert plan_ranges(path, size, _reader(path), limits=ReadLimits(), chunk_bytes=chunk_bytes) is None, (
            path
        )
