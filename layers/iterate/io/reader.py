"""read_table: any supported file in, a text Table out (or one clear DatasetReadError); the file is never modified."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.io.chunked import Chunking, ParseOptions, cut_ranges
from iterate.io.delimited import Layout, TextSource, chunk_options, read_delimited, read_layout
from iterate.io.detect import (
    HEAD_BYTES,
    SUPPORTED,
    check_text,
    legacy_encoding,
    sniff_compression,
    sniff_container,
    sniff_text_encoding,
    unsupported_extension,
)
from iterate.io.errors import DatasetReadError
from iterate.io.header import internal_names, normalize_header
from iterate.io.inflate import inflate
from iterate.io.jsonl import read_json_records
from iterate.io.limits import ReadLimits, cells_refusal, refuse, size_text
from iterate.io.typed import read_parquet, read_xlsx
from iterate.table import ReadProblem, SourceInfo, Table, one_array, row_places

_CHUNK = 8 * 1024 * 1024
_MAX_HEAD_BYTES = 32 * 1024 * 1024
_JSON_SUFFIXES = {".jsonl", ".ndjson", ".json"}
_TAB_SUFFIXES = {".tsv", ".tab"}
_COMPRESSION_SUFFIXES = {".gz", ".gzip", ".bz2", ".xz"}
_FORMAT_SUFFIXES = (
    ".csv",
    ".tsv",
    ".tab",
    ".txt",
    ".dat",
    ".psv",
    ".jsonl",
    ".ndjson",
    ".json",
    ".parquet",
    ".pq",
    ".xlsx",
)


@dataclass(frozen=True)
class _Digest:
    sha256: str
    nul_offset: int | None  # first NUL byte in the raw file, when asked to look
    line_ends: _LineEnds | None = None  # the raw file's line breaks, when asked to count them


@dataclass(frozen=True)
class _LineEnds:
    """How many LF and CR bytes a text holds, and how many of them end it (blank lines at the very end)."""

    lf: int
    cr: int
    trailing: int | None  # None: the end is a run of line breaks too long to have been looked at

    @classmethod
    def of(cls, data: bytes | memoryview) -> _LineEnds:
        raw = bytes(data)
        return cls(raw.count(b"\n"), raw.count(b"\r"), _trailing_breaks(raw[-_TAIL:], len(raw) > _TAIL))

    def lines(self) -> int | None:
        """Physical lines up to the last one holding anything; None when line ends are mixed (a lone CR in a
        LF file is a line break to the CSV parser but not to an editor) or the count is unsure."""
        if self.trailing is None or (self.cr and self.lf and self.cr != self.lf):
            return None
        breaks = self.lf or self.cr
        return breaks - self.trailing + 1


_TAIL = 4096


def _trailing_breaks(tail: bytes, more_before: bool) -> int | None:
    """Line-break bytes (of the kind the text uses) in the run of CR/LF at the end of `tail`."""
    kept = tail.rstrip(b"\r\n")
    if not kept and more_before:
        return None
    run = tail[len(kept) :]
    return run.count(b"\n") or run.count(b"\r")


def _unreadable(path: Path, exc: OSError) -> DatasetReadError:
    """What an OS error opening or reading the file means to its owner."""
    if isinstance(exc, PermissionError):
        return DatasetReadError(path, "cannot be opened (permission denied)", "check the file's permissions")
    return DatasetReadError(path, f"cannot be read ({exc.strerror or exc})", "check the path and try again")


def _digest(path: Path, *, find_nul: bool, stop: threading.Event) -> _Digest:
    """sha256 of the raw bytes, streamed in chunks (hashlib releases the GIL, so this overlaps the parse).

    With `find_nul` (a plain text file) it also finds the first NUL byte and counts the line breaks, which
    tell whether every data row is one line of the file (bytes.count runs at memory speed).
    """
    with path.open("rb") as fh:
        return stream_digest(iter(lambda: fh.read(_CHUNK), b""), find_nul=find_nul, stop=stop)


def stream_digest(pieces: Iterable[bytes], *, find_nul: bool, stop: threading.Event | None = None) -> _Digest:
    """`_digest` of a file given as its consecutive pieces (a local file, or an S3 object's body)."""
    sha = hashlib.sha256()
    nul: int | None = None
    offset = 0
    lf = cr = 0
    tail = b""
    for chunk in pieces:
        if stop is not None and stop.is_set():
            break
        sha.update(chunk)
        if find_nul:
            if nul is None:
                at = chunk.find(b"\x00")
                if at >= 0:
                    nul = offset + at
            lf += chunk.count(b"\n")
            cr += chunk.count(b"\r")
            tail = (tail + chunk[-_TAIL:])[-_TAIL:]
        offset += len(chunk)
    ends = _LineEnds(lf, cr, _trailing_breaks(tail, offset > _TAIL)) if find_nul else None
    return _Digest(sha.hexdigest(), nul, ends)


def read_table(
    path: str | Path,
    *,
    name: str | None = None,
    limits: ReadLimits | None = None,
    chunking: Chunking | None = None,
) -> Table:
    """Read CSV/TSV (any delimiter, gzip/bz2/xz), Parquet, JSON Lines or .xlsx into a Table of text columns.

    Every value is kept exactly as written ("01907", "N/A", " x ", ""); typed formats are turned into
    lossless text. Repairs are listed in `table.problems` (ReadProblem kinds): "ragged_row" (a short
    row is padded with ""; a long row keeps its extra fields at the end of the last column, joined
    with the delimiter, so no text is lost; either way the row stays at its place), "blank_header",
    "duplicate_header", "trailing_delimiter", "preamble" (title lines skipped), "encoding" (not UTF-8
    from some line on), "other_sheets" (.xlsx), "dropped_index_column" (Parquet from pandas).
    Anything that cannot be a table — including more than 10% ragged rows — raises DatasetReadError
    naming the file, the line when known, and what to do. The file itself is only ever read.

    Only regular files are opened (a FIFO or a device is refused before it can block or stream forever),
    and a file over one of `limits` (size, decompressed size and ratio, columns, cells, cell size, JSON
    nesting; the ReadLimits defaults when None) is refused as early as its format allows, with
    `err.limit` naming the ITERATE_MAX_* setting that raises it.

    With `chunking`, a plain UTF-8 delimited file larger than one chunk is read in byte ranges by worker
    processes and merged into the same Table (iterate.io.chunked); the raw text is never all in memory.
    """
    path = Path(path)
    limits = limits or ReadLimits()
    check_source(path, limits)
    try:
        head = _open_head(path)
    except DatasetReadError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    size = path.stat().st_size
    if size == 0 or (size <= len(head) and head.strip() == b""):
        raise DatasetReadError(path, "file is empty", "export it again with its header and data rows")

    container = sniff_container(path, head)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="iterate-hash") as pool:
        compression = None if container else sniff_compression(head)
        scan_nul = container is None and compression is None
        digest = pool.submit(_digest, path, find_nul=scan_nul, stop=stop)
        try:
            table, info, problems, names = _read(path, head, container, compression, digest, limits, chunking)
            _check_shape(path, table, names, limits)
        except BaseException:
            stop.set()  # a refused file needs no hash: do not make the error wait for it
            raise
        hashed = digest.result()
    return _finish(path, table, info, problems, names, size=size, digest=hashed, name=name)


def _finish(
    path: Path,
    table: pa.Table,
    info: _Info,
    problems: list[ReadProblem],
    names: list[str],
    *,
    size: int,
    digest: _Digest,
    name: str | None,
) -> Table:
    """The read arrow table as a Table, with where it came from (format, size, hash, row places)."""
    source = SourceInfo(
        path=str(path),
        format=info.format,
        encoding=info.encoding,
        delimiter=info.delimiter,
        compression=info.compression,
        size_bytes=size,
        content_hash=digest.sha256,
        **_places(info, digest, table.num_rows),
    )
    result = Table.from_arrow(
        table, name=name or _default_name(path), source=source, problems=problems, names=names
    )
    del table
    # The parse's buffers are free now but the allocator keeps them (500 MB after 3M rows): hand them back,
    # or they stay in the process's footprint through detection.
    pa.default_memory_pool().release_unused()
    return result


@dataclass(frozen=True)
class TextLayout:
    """What the head of a plain UTF-8 CSV/TSV decides, for a read in byte ranges elsewhere (the AWS chunk
    functions): the single pass's layout, its encoding, and so the parse options of every range."""

    layout: Layout
    encoding: str

    def parse_options(self) -> ParseOptions:
        """What `parse_bytes` is given for every range: the single pass's parse options for this file."""
        return functools.partial(chunk_options, self.layout.dialect, len(self.layout.names), self.encoding)


def text_layout(
    path: Path, size: int, read_at: Callable[[int, int], bytes], *, limits: ReadLimits
) -> TextLayout | None:
    """The layout of a file `read_table` would read in chunks (a plain UTF-8 CSV/TSV, no trailing delimiter),
    decided from its head exactly as `read_table` decides it; None for every other file, which is read in one
    pass (its errors included). `path` names the file (its suffix, messages); its bytes come from
    `read_at(offset, length)` (ranged S3 GETs)."""
    head = read_at(0, min(HEAD_BYTES, size))
    if head.strip() == b"" or sniff_compression(head):
        return None
    try:
        if sniff_container(path, head) is not None:
            return None
    except (DatasetReadError, OSError):  # a binary file, or a "PAR1" text file checked against its end
        return None
    limit = HEAD_BYTES
    while head.count(b"\n") + head.count(b"\r") < 6 and len(head) < size and limit < _MAX_HEAD_BYTES:
        limit *= 8  # as _long_enough_head
        head = read_at(0, min(limit, size))
    encoding = sniff_text_encoding(head)
    if encoding not in ("utf-8", "utf-8-sig"):
        return None
    head_text = _decode_head(head, encoding)
    suffixes = [s.lower() for s in path.suffixes]
    stem_suffix = next((s for s in reversed(suffixes) if s not in _COMPRESSION_SUFFIXES), "")
    starts_json = head_text.lstrip()[:1] in ("{", "[")
    if (
        not head_text.strip()
        or _looks_like_jsonl(head_text)
        or (stem_suffix in _JSON_SUFFIXES and starts_json)
    ):
        return None
    try:
        check_text(path, head_text, encoding=encoding)
        layout = read_layout(
            path,
            head_text,
            complete=size <= len(head),
            prefer_tab=stem_suffix in _TAB_SUFFIXES,
            limits=limits,
        )
    except DatasetReadError:
        return None
    return None if layout.trailing else TextLayout(layout, encoding)


def plan_ranges(
    path: Path, size: int, read_at: Callable[[int, int], bytes], *, limits: ReadLimits, chunk_bytes: int
) -> tuple[TextLayout, list[tuple[int, int]]] | None:
    """The layout and byte ranges of a file larger than `chunk_bytes` that `read_table` would read in
    chunks, cut as `line_ranges` cuts it; None when it is read in one pass (one range, or another file)."""
    if size <= chunk_bytes:
        return None
    text = text_layout(path, size, read_at, limits=limits)
    if text is None:
        return None
    ranges = cut_ranges(read_at, size, chunk_bytes, window=_RANGE_WINDOW)
    return (text, ranges) if len(ranges) > 1 else None


# The window a range cut reads past its target to find the next line feed (a ranged GET on S3): a line is
# rarely longer; a longer one takes more windows.
_RANGE_WINDOW = 64 * 1024


def table_from_ranges(
    path: Path,
    text: TextLayout,
    columns: list[pa.DictionaryArray],
    *,
    size: int,
    digest: _Digest,
    limits: ReadLimits,
    name: str | None = None,
) -> Table | None:
    """The Table `read_table` gives the file, from its ranges' columns merged in file order (merge_columns)
    and the digest of its bytes (`stream_digest`); None where the single pass must read it after all (no
    data row, a NUL byte, a line break in the last row's values), as `read_table` would decide."""
    names, layout = text.layout.names, text.layout
    table = pa.Table.from_arrays(columns, names=internal_names(len(names)))
    if table.num_rows == 0 or digest.nul_offset is not None:
        return None
    last = table.slice(table.num_rows - 1, 1).to_pylist()[0]
    if any("\n" in v or "\r" in v for v in last.values()):
        return None  # a quote left open at the end of the file: the single pass says where
    _check_shape(path, table, names, limits)
    info = _Info(
        "tsv" if layout.dialect.delimiter == "\t" else "csv",
        encoding=text.encoding,
        delimiter=layout.dialect.delimiter,
        header_lines=layout.header.lines,
    )
    return _finish(path, table, info, list(layout.problems), names, size=size, digest=digest, name=name)


@dataclass
class _Info:
    format: str
    encoding: str | None = None
    delimiter: str | None = None
    compression: str | None = None
    places: dict[str, Any] = field(default_factory=dict)  # SourceInfo's row places, when known at parse time
    header_lines: int | None = None  # delimited text: lines up to and including the header
    line_ends: _LineEnds | None = None  # delimited text held in memory (decompressed): its line breaks


# Encodings in which a 0x0A or 0x0D byte is always a line break (not so in UTF-16/32).
_BYTE_LINES = {"utf-8", "utf-8-sig", "cp1252", "latin-1", "iso-8859-1", "ascii"}


def _places(info: _Info, digest: _Digest, n_rows: int) -> dict[str, Any]:
    """Where data rows sit in the file. For delimited text only when every data row is exactly one line
    (no value spans lines, no blank line between rows): then row r is on line header_lines + 1 + r."""
    if info.places or info.header_lines is None or info.encoding not in _BYTE_LINES:
        return info.places
    ends = info.line_ends or digest.line_ends
    lines = ends.lines() if ends is not None else None
    if lines is None or lines != info.header_lines + n_rows:
        return {}
    return row_places("line", [info.header_lines + 1]) if n_rows else {}


_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory", "pass the path of a data file inside it"),
    (stat.S_ISFIFO, "a named pipe (FIFO)", "write the data to a regular file and pass that"),
    (stat.S_ISCHR, "a character device", "pass the path of a data file"),
    (stat.S_ISBLK, "a block device", "pass the path of a data file"),
    (stat.S_ISSOCK, "a socket", "pass the path of a data file"),
)


def check_source(path: str | Path, limits: ReadLimits | None = None) -> None:
    """Refuse, without opening it, a path that is missing, not a regular file, or over the size limit.

    A FIFO would block the reader until someone writes to it, and a device can stream forever: both are
    told apart by `stat` before anything opens them. Symbolic links are followed.
    """
    path = Path(path)
    limits = limits or ReadLimits()
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DatasetReadError(path, "does not exist", "check the path and the file name") from None
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    _require_regular(path, info.st_mode)
    if info.st_size > limits.max_file_bytes:
        raise refuse(
            path,
            "max_file_bytes",
            limits.max_file_bytes,
            info.st_size,
            f"is {size_text(info.st_size)}, more than the {size_text(limits.max_file_bytes)} allowed",
            advice="split the file and analyze the parts",
        )


def _require_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    for test, kind, hint in _NOT_REGULAR:
        if test(mode):
            raise DatasetReadError(path, f"is {kind}, not a regular file", hint)
    raise DatasetReadError(path, "is not a regular file", "pass the path of a data file")


def _open_head(path: Path, limit: int = HEAD_BYTES) -> bytes:
    # O_NONBLOCK: should the path have become a FIFO since it was checked, opening it does not wait for
    # a writer, and fstat on the open file refuses it (the check that counts: it is about what was opened).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        _require_regular(path, os.fstat(fd).st_mode)
        return fh.read(limit)


def _check_shape(path: Path, table: pa.Table, names: list[str], limits: ReadLimits) -> None:
    """What every format is held to once read: the number of cells, and the size of the largest one."""
    too_many = cells_refusal(path, table.num_rows, table.num_columns, limits)
    if too_many is not None:
        raise too_many
    longest = _longest_cell(table)
    if longest is not None and longest[0] > limits.max_cell_bytes:
        size, row, column = longest
        raise refuse(
            path,
            "max_cell_bytes",
            limits.max_cell_bytes,
            size,
            f"the value in data row {row + 1:,}, column {names[column]!r} is {size_text(size)},"
            f" more than the {size_text(limits.max_cell_bytes)} allowed for one value",
            advice="store such values outside the table (a file per value, and its name in the table)",
        )


def _longest_cell(table: pa.Table) -> tuple[int, int, int] | None:
    """(bytes, 0-based row, column index) of the largest value, None for an empty table."""
    best: tuple[int, int, int] | None = None
    for index, column in enumerate(table.columns):
        if not len(column):
            continue
        if pa.types.is_dictionary(column.type):  # read in chunks: measure each distinct value once
            size, row = _longest_coded(column)
            if best is None or size > best[0]:
                best = (size, row, index)
            continue
        lengths = pc.binary_length(column)
        size = pc.max(lengths).as_py() or 0
        if best is None or size > best[0]:
            row = pc.index(lengths, size).as_py()
            best = (size, row, index)
    return best


def _longest_coded(column: pa.ChunkedArray | pa.DictionaryArray) -> tuple[int, int]:
    """(bytes, first row) of the largest value of a dictionary-encoded column, as the plain scan finds it.

    Each distinct value is measured once; the row is the first whose code is one of the longest, found by a
    lookup per row and a scan that stops at the first hit (np.isin over 10M codes and the row-long array of
    every hit took 1.2 s for the 20 columns of 10M rows, most of it where many values share the longest
    length, as phone numbers do)."""
    array = one_array(column) if isinstance(column, pa.ChunkedArray) else column  # one chunk: no copy
    codes = array.indices.to_numpy(zero_copy_only=False)
    lengths = pc.binary_length(array.dictionary).to_numpy(zero_copy_only=False).astype(np.int64)
    size = int(lengths.max()) if len(lengths) else 0
    hits = (lengths == size)[codes]
    row = int(np.argmax(hits))
    if not hits[row]:  # the longest values are in the dictionary but in no row: measure only those held
        lengths[np.bincount(codes, minlength=len(lengths)) == 0] = -1
        size = int(lengths.max())
        row = int(np.argmax((lengths == size)[codes]))
    return size, row


def _default_name(path: Path) -> str:
    """The file name without its format and compression extensions ("orders_v1.2.csv.gz" -> "orders_v1.2")."""
    name = path.name
    lowered = name.lower()
    for suffix in sorted(_COMPRESSION_SUFFIXES):
        if lowered.endswith(suffix):
            name, lowered = name[: -len(suffix)], lowered[: -len(suffix)]
            break
    for suffix in _FORMAT_SUFFIXES:
        if lowered.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name or path.name


def _read(
    path: Path,
    head: bytes,
    container: str | None,
    compression: str | None,
    digest: Future[_Digest],
    limits: ReadLimits,
    chunking: Chunking | None = None,
) -> tuple[pa.Table, _Info, list[ReadProblem], list[str]]:
    if container == "parquet":
        table, raw_names, problems = read_parquet(path, limits)
        names, header_problems = normalize_header(raw_names, line=None)
        problems = header_problems + problems
        if table.num_rows == 0:
            raise DatasetReadError(
                path, "has columns but no data rows", "export the Parquet file again with its rows"
            )
        return table, _Info("parquet"), problems, names
    if container == "xlsx":
        table, names, problems, header_line, sheet_rows = read_xlsx(path, limits)
        names, header_problems = normalize_header(names, line=header_line)
        if table.num_rows == 0:
            raise DatasetReadError(
                path,
                "has a header but no data rows",
                "put the data rows on the first sheet",
                line=header_line,
            )
        return (
            table,
            _Info("xlsx", places=row_places("sheet row", sheet_rows)),
            header_problems + problems,
            names,
        )

    data: bytes | None = None
    if compression:
        data = inflate(path, compression, limits)
        head = data[:HEAD_BYTES]
        if not data or data.isspace():
            raise DatasetReadError(
                path, "file is empty (once decompressed)", "compress the complete file again"
            )
        if sniff_container(path, head) == "parquet":
            raise DatasetReadError(
                path,
                f"is a {compression}-compressed Parquet file",
                "decompress it and analyze the .parquet file itself",
            )

    head = _long_enough_head(path, data, head)
    encoding = sniff_text_encoding(head)
    head_text = _decode_head(head, encoding)
    try:
        check_text(path, head_text, encoding=encoding)
    except DatasetReadError:
        # Content first: a text ".xls" (a CSV renamed) is read; a binary one gets the extension's advice.
        if data is None:
            unsupported_extension(path)
        raise
    if not head_text.strip():
        raise DatasetReadError(
            path, "file is empty (only blank lines)", "export it again with its header and data rows"
        )
    # UTF-16/32 text is full of NUL bytes; anything else with one is binary or mis-encoded.
    nul_matters = encoding not in ("utf-16", "utf-16-le", "utf-16-be", "utf-32")
    try:
        parsed = _read_text(path, data, head, head_text, encoding, compression, limits, chunking)
    except DatasetReadError:
        if nul_matters:
            _check_nul(path, data, digest)  # the NUL is the real problem, when there is one
        raise
    if nul_matters:
        # Checked after the parse, which the hashing thread (that also looks for NULs) overlaps.
        _check_nul(path, data, digest)
    return parsed


def _read_text(
    path: Path,
    data: bytes | None,
    head: bytes,
    head_text: str,
    encoding: str,
    compression: str | None,
    limits: ReadLimits,
    chunking: Chunking | None = None,
) -> tuple[pa.Table, _Info, list[ReadProblem], list[str]]:
    suffixes = [s.lower() for s in path.suffixes]
    stem_suffix = next((s for s in reversed(suffixes) if s not in _COMPRESSION_SUFFIXES), "")
    starts_json = head_text.lstrip()[:1] in ("{", "[")
    if _looks_like_jsonl(head_text) or (stem_suffix in _JSON_SUFFIXES and starts_json):
        return _read_json(path, data, head, encoding, compression, limits)

    source = TextSource(path=path, encoding=encoding, data=data)
    complete = (len(data) if data is not None else path.stat().st_size) <= len(head)
    result = read_delimited(
        source,
        head_text,
        complete=complete,
        prefer_tab=stem_suffix in _TAB_SUFFIXES,
        limits=limits,
        chunking=chunking,
    )
    fmt = "tsv" if result.dialect.delimiter == "\t" else "csv"
    info = _Info(
        fmt,
        encoding=result.encoding,
        delimiter=result.dialect.delimiter,
        compression=compression,
        header_lines=result.header_lines,
        line_ends=_LineEnds.of(data) if data is not None else None,
    )
    return result.table, info, result.problems, result.names


def _long_enough_head(path: Path, data: bytes | None, head: bytes) -> bytes:
    """Grow the sniffing head until it holds a few lines: very wide rows can outgrow 64 KB."""
    size = len(data) if data is not None else path.stat().st_size
    limit = HEAD_BYTES
    while head.count(b"\n") + head.count(b"\r") < 6 and len(head) < size and limit < _MAX_HEAD_BYTES:
        limit *= 8
        head = data[:limit] if data is not None else _open_head(path, limit)
    return head


def _looks_like_jsonl(head_text: str) -> bool:
    first = next((line.strip() for line in head_text.split("\n") if line.strip()), "")
    if not first.startswith("{"):
        return False
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _decode_head(head: bytes, encoding: str) -> str:
    # errors="replace" only matters at the cut: the head may end inside a multi-byte character.
    text = head.decode(encoding, errors="replace")
    if text.endswith("\ufffd"):
        text = text.rstrip("\ufffd")
    return text.removeprefix("\ufeff")


def _check_nul(path: Path, data: bytes | None, digest: Future[_Digest]) -> None:
    """A NUL anywhere means binary, or an encoding we did not recognise: refuse rather than misread."""
    if data is not None:
        offset = data.find(b"\x00")
        content = data
    else:
        found = digest.result().nul_offset
        offset = -1 if found is None else found
        content = b""
    if offset < 0:
        return
    if not content:
        with path.open("rb") as fh:
            content = fh.read(offset)
    raise DatasetReadError(
        path,
        "contains NUL bytes, so it is not a text table (it is binary, or saved in an unrecognised encoding)",
        f"save the data as {SUPPORTED}, in UTF-8",
        line=content.count(b"\n", 0, offset) + 1,
    )


def _read_json(
    path: Path, data: bytes | None, head: bytes, encoding: str, compression: str | None, limits: ReadLimits
) -> tuple[pa.Table, _Info, list[ReadProblem], list[str]]:
    raw = data if data is not None else path.read_bytes()
    problems: list[ReadProblem] = []
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        encoding = legacy_encoding(raw)
        text = raw.decode(encoding)
        problems.append(
            ReadProblem(
                kind="encoding",
                line=line,
                row=None,
                column=None,
                detail=f"the file is not valid UTF-8 from line {line}; it was read as {encoding}",
            )
        )
    table, raw_names, lines = read_json_records(path, text.removeprefix("\ufeff"), limits)
    if not raw_names:
        raise DatasetReadError(
            path, "has records but none has a field", 'give each record fields, like {"a": 1}'
        )
    names, header_problems = normalize_header(raw_names, line=None)
    return (
        table,
        _Info(
            "jsonl",
            encoding=encoding,
            compression=compression,
            places=row_places("line", lines) if lines is not None else {},
        ),
        header_problems + problems,
        names,
    )
