"""CSV/TSV: sniff the dialect on a small head with the csv module, then let multithreaded pyarrow read it all as text."""

from __future__ import annotations

import _csv
import csv
import functools
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from iterate.io.chunked import Chunking, read_chunked
from iterate.io.detect import legacy_encoding
from iterate.io.errors import DatasetReadError
from iterate.io.header import internal_names, normalize_header
from iterate.io.limits import ReadLimits, refuse, size_text
from iterate.table import ReadProblem

DELIMITERS = (",", "\t", ";", "|")
_SNIFF_RECORDS = 200
_MAX_PREAMBLE = 10  # title lines above a header
_QUOTE_SCAN = 1024 * 1024  # characters of the head checked for a quote left open
# More ragged rows than this share of all rows means the file was misread, not that a few rows are bad.
RAGGED_LIMIT = 0.10
_SEP_LINE = re.compile(r"^sep=(.)$")
_NUMBER = re.compile(r"^\s*[-+]?(\d[\d,. ]*|\.\d+)([eE][-+]?\d+)?%?\s*$")
_DATE = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}")
# pyarrow parses in blocks (1 MiB by default) and a row must fit in one. A file with longer lines is read
# again with blocks twice its longest line, up to this (pyarrow's block size is a 32-bit int).
_MAX_BLOCK = 1 << 30
_SCAN = 64 * 1024 * 1024


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    quotechar: str | None  # None: quotes are ordinary characters


@dataclass
class TextSource:
    """The text file: what pyarrow reads (a path or decompressed bytes) and, lazily, its whole text as UTF-8."""

    path: Path
    encoding: str  # Python codec name
    data: bytes | None = None  # decompressed content when the file was compressed
    block_size: int | None = None  # pyarrow's block size, when its default was too small for a row
    _utf8: bytes | None = field(default=None, repr=False)

    def pyarrow_input(self) -> str | pa.Buffer:
        return pa.py_buffer(self.data) if self.data is not None else str(self.path)

    def raw(self) -> bytes:
        return self.data if self.data is not None else self.path.read_bytes()

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The raw content in pieces of at most 64 MB, without reading the whole file at once."""
        if self.data is not None:
            view = memoryview(self.data)
            for start in range(0, len(view), _SCAN):
                yield view[start : start + _SCAN]
            return
        with self.path.open("rb") as fh:
            while chunk := fh.read(_SCAN):
                yield chunk

    def utf8(self) -> bytes:
        """The whole content as UTF-8 bytes, for locating lines; only needed when something went wrong."""
        if self._utf8 is None:
            raw = self.raw()
            self._utf8 = (
                raw if self.encoding in ("utf-8", "utf-8-sig") else raw.decode(self.encoding).encode()
            )
        return self._utf8


@dataclass
class DelimitedResult:
    table: pa.Table
    names: list[str]
    problems: list[ReadProblem]
    dialect: Dialect
    encoding: str
    header_lines: int = 1  # physical lines up to and including the header (title lines, sep= line included)


def sniff_dialect(head: str, *, complete: bool, prefer_tab: bool = False) -> tuple[Dialect, int]:
    """The delimiter and quote character that split the head into the most consistent rows.

    Also returns how many leading one-field records (a title above the header) to skip: only when no
    delimiter splits the first record, and a later record starts consistently split rows.
    """
    order = ("\t", ",", ";", "|") if prefer_tab else DELIMITERS
    candidates: list[tuple[int, int, Dialect, _Counts]] = []
    for rank, delimiter in enumerate(order):
        quoted = _field_counts(head, Dialect(delimiter, '"'), complete=complete)
        candidates.append((rank, 0, Dialect(delimiter, '"'), quoted))
        if quoted.multiline and _unclosed_quote(head[:_QUOTE_SCAN], Dialect(delimiter, '"')) is None:
            # Quotes that pair up across lines may be bare quotes in unquoted text (common in TSV):
            # reading without quoting wins ties then; a quote left open is a broken file, not this.
            bare = _field_counts(head, Dialect(delimiter, None), complete=complete)
            candidates.append((rank, 1, Dialect(delimiter, None), bare))
        if '"' not in head and "'" in head:
            single = _field_counts(head, Dialect(delimiter, "'"), complete=complete)
            candidates.append((rank, -1, Dialect(delimiter, "'"), single))
    best: tuple[tuple[float, ...], Dialect, int] | None = None
    for rank, qrank, dialect, parsed in candidates:
        if parsed.counts:
            key = (*_score(parsed.counts), qrank, -rank)
            if best is None or key > best[0]:
                best = (key, dialect, 0)
    if best is None:
        return Dialect(",", '"'), 0
    if best[0][0] == 0:  # nothing splits the first record: look for a header below a title
        for rank, qrank, dialect, parsed in candidates:
            counts = parsed.counts
            skip = next((i for i, (c, _) in enumerate(counts[: _MAX_PREAMBLE + 1]) if c > 1), None)
            if skip is None or skip == 0 or len(counts) < skip + 2:
                continue
            # A title is set apart by a blank line, or sits above a row that reads as names; otherwise
            # the first line may be a header with one name over wider data rows.
            if not (parsed.after_blank[skip] or _looks_like_names(parsed.first[skip])):
                continue
            key = (*_score(counts[skip:]), qrank, -rank)
            if key[1] >= 0.9 and key > best[0]:
                best = (key, dialect, skip)
        if best[2] == 0:
            # Rows that agree among themselves on several fields under one delimiter: the header is
            # what is short, not a one-column file; that delimiter lets the ragged-row check speak.
            for _, _, dialect, parsed in candidates:
                widths = [c for c, _ in parsed.counts[1:]]
                if widths and dialect.quotechar == '"':
                    common = max(set(widths), key=widths.count)
                    if common > 1 and widths.count(common) >= 0.9 * len(widths):
                        return dialect, 0
    return best[1], best[2]


def _looks_like_names(fields: list[str]) -> bool:
    """Header-like: distinct, and no value that reads as a number or a date."""
    named = [f.strip() for f in fields if f.strip()]
    return (
        len(named) > 1
        and len(set(named)) == len(named)
        and not any(_NUMBER.match(f) or _DATE.match(f) for f in named)
    )


def _score(counts: list[tuple[int, bool]]) -> tuple[float, float, float]:
    """(header splits, share of rows agreeing with the header's width, width) — higher is better."""
    width, rows = counts[0][0], counts[1:]
    # Rows ending in one extra empty field (a trailing delimiter the header lacks) still agree.
    agree = sum(1 for c, empty_last in rows if c == width or (c == width + 1 and empty_last))
    consistency = agree / len(rows) if rows else 1.0
    return float(width > 1), round(consistency, 2), float(width)


def _reader(text: str, dialect: Dialect) -> _csv.Reader:
    if dialect.quotechar is None:
        return csv.reader(io.StringIO(text, newline=""), delimiter=dialect.delimiter, quoting=csv.QUOTE_NONE)
    return csv.reader(io.StringIO(text, newline=""), delimiter=dialect.delimiter, quotechar=dialect.quotechar)


@dataclass
class _Counts:
    counts: list[tuple[int, bool]]  # (number of fields, last field empty) per non-blank record
    multiline: bool = False  # some value holds a line break (a quoted value spanning lines)
    after_blank: list[bool] = field(default_factory=list)  # per record: a blank line comes right before it
    first: list[list[str]] = field(default_factory=list)  # the first records' fields


def _field_counts(head: str, dialect: Dialect, *, complete: bool) -> _Counts:
    """How the head splits into records under this dialect."""
    result = _Counts([])
    blank = False
    try:
        for record in _reader(head, dialect):
            if not record:
                blank = True
            else:
                result.counts.append((len(record), record[-1] == ""))
                result.after_blank.append(blank)
                if len(result.first) <= _MAX_PREAMBLE + 1:
                    result.first.append(record)
                blank = False
                if not result.multiline and any("\n" in f or "\r" in f for f in record):
                    result.multiline = True
            if len(result.counts) > _SNIFF_RECORDS:
                break
    except csv.Error:
        pass  # score what parsed
    if not complete and len(result.counts) > 2:
        result.counts.pop()  # the head may end in the middle of a record
    return result


@dataclass(frozen=True)
class Header:
    fields: list[str]
    lines: int  # physical lines up to and including the header (leading blank lines count)
    dialect: Dialect
    preamble_lines: int = 0  # lines of title text above the header, skipped


def read_header(head: str, dialect: Dialect, *, skip_records: int = 0) -> Header | None:
    """The first non-blank record after `skip_records` others; None when the head has none."""
    reader = _reader(head, dialect)
    seen = 0
    preamble_lines = 0
    try:
        for record in reader:
            if not record:
                continue
            if seen < skip_records:
                seen += 1
                preamble_lines = reader.line_num
                continue
            return Header(record, reader.line_num, dialect, preamble_lines)
    except csv.Error:
        return None
    return None


@dataclass(frozen=True)
class Layout:
    """What the head of a delimited file decides before any data row is read: dialect, header, names."""

    dialect: Dialect
    header: Header
    names: list[str]
    problems: list[ReadProblem]
    trailing: bool  # every row ends in one more, empty field: read it too, drop it after


def read_layout(path: Path, head: str, *, complete: bool, prefer_tab: bool, limits: ReadLimits) -> Layout:
    """The dialect, header and column names the head gives; refuses a file with no header or too many
    columns. Shared by the single pass, the local chunked read and the AWS chunked read."""
    sep_line = _SEP_LINE.match(head.split("\n", 1)[0].rstrip("\r"))
    if sep_line:  # Excel's "sep=;" first line names the delimiter
        dialect, preamble = Dialect(sep_line.group(1), '"'), 0
        header = read_header(head, dialect, skip_records=1)
    else:
        dialect, preamble = sniff_dialect(head, complete=complete, prefer_tab=prefer_tab)
        header = read_header(head, dialect, skip_records=preamble)
    if header is None:
        raise DatasetReadError(
            path, "has no header row", "the first line must name the columns; add it or re-export"
        )
    dialect = header.dialect
    fields = header.fields
    if len(fields) > limits.max_columns:
        raise refuse(
            path,
            "max_columns",
            limits.max_columns,
            len(fields),
            f"the header has {len(fields):,} columns, more than the {limits.max_columns:,} allowed",
            line=header.lines,
            advice="keep only the columns you need, in a narrower file",
        )
    above = 1 if sep_line else preamble
    trailing = _has_trailing_delimiter(head, dialect, len(fields), complete=complete, above=above)
    if trailing:  # read the extra field too, so no row counts as ragged; dropped below if always empty
        fields = [*fields, ""]
    names, problems = normalize_header(fields, line=header.lines)
    if header.preamble_lines and not sep_line:
        problems.insert(0, _preamble_problem(head, header.preamble_lines))
    return Layout(dialect, header, names, problems, trailing)


def read_delimited(
    source: TextSource,
    head: str,
    *,
    complete: bool,
    prefer_tab: bool,
    limits: ReadLimits | None = None,
    chunking: Chunking | None = None,
) -> DelimitedResult:
    """Read every value as text; pad or fold ragged rows and record them; refuse what cannot be a table.

    The header's width is held to `limits.max_columns` before a single data row is read. With `chunking`,
    a large plain UTF-8 file is read in byte ranges (iterate.io.chunked) into dictionary-encoded columns;
    a file that does not fit that path (ragged or blank lines, values spanning lines, another encoding)
    is read in one pass, so both give the same table.
    """
    limits = limits or ReadLimits()
    path = source.path
    layout = read_layout(path, head, complete=complete, prefer_tab=prefer_tab, limits=limits)
    dialect, header, names, problems = layout.dialect, layout.header, layout.names, layout.problems
    trailing, width = layout.trailing, len(names)

    try:
        table, invalid = _read(
            source,
            dialect,
            width,
            header.lines,
            source.encoding,
            limits,
            chunking=None if trailing else chunking,
        )
    except _WrongEncoding:
        # The head decoded but a later byte did not: UTF-8 falls back to cp1252 (or latin-1, which
        # decodes anything); a cp1252 guess falls back to latin-1.
        raw = source.raw()
        was_utf8 = source.encoding in ("utf-8", "utf-8-sig")
        source.encoding = legacy_encoding(raw) if was_utf8 else "latin-1"
        if was_utf8:
            problems.append(_encoding_problem(raw, source.encoding))
        table, invalid = _read(source, dialect, width, header.lines, source.encoding, limits)
    encoding = source.encoding

    if table.num_rows:
        _check_last_row_quote(source, table, dialect)
    if invalid:
        _check_unterminated(source, [text for _, text in invalid], dialect)
        total = table.num_rows + len(invalid)
        if len(invalid) >= 2 and len(invalid) > RAGGED_LIMIT * total:
            _raise_too_ragged(source, dialect, width, header.lines, len(invalid), total)
        table, ragged = _repair_ragged(source, table, dialect, names, header.lines)
        problems.extend(ragged)
    if trailing:
        table, names, problems = _drop_trailing_column(table, names, problems, dialect)
    if table.num_rows == 0:
        raise DatasetReadError(
            path,
            "has a header but no data rows",
            "add the data rows, or export the complete table again",
            line=header.lines,
        )
    return DelimitedResult(table, names, problems, dialect, encoding, header.lines)


def _preamble_problem(head: str, lines: int) -> ReadProblem:
    title = " / ".join(line.strip() for line in head.splitlines()[:lines] if line.strip())
    return ReadProblem(
        kind="preamble",
        line=1,
        row=None,
        column=None,
        detail=f"line(s) 1-{lines} above the header are not table rows and were skipped: {title[:200]!r}",
    )


def _has_trailing_delimiter(head: str, dialect: Dialect, width: int, *, complete: bool, above: int) -> bool:
    """Every sniffed data row has one more field than the header, and that field is empty."""
    rows = _field_counts(head, dialect, complete=complete).counts[above + 1 :]
    return bool(rows) and all(c == width + 1 and empty_last for c, empty_last in rows)


def _drop_trailing_column(
    table: pa.Table, names: list[str], problems: list[ReadProblem], dialect: Dialect
) -> tuple[pa.Table, list[str], list[ReadProblem]]:
    last = table.column(table.num_columns - 1)
    generated = names[-1]
    blank_problem = [p for p in problems if p.kind == "blank_header" and p.column == generated]
    if table.num_rows and pc.max(pc.utf8_length(last)).as_py() > 0:
        return table, names, problems  # some rows do have a value there: keep it as an unnamed column
    kept = [p for p in problems if p not in blank_problem]
    kept.append(
        ReadProblem(
            kind="trailing_delimiter",
            line=blank_problem[0].line if blank_problem else None,
            row=None,
            column=None,
            detail=f"rows end with an extra {dialect.delimiter!r} that the header does not have;"
            " the empty field after it was ignored",
        )
    )
    return table.remove_column(table.num_columns - 1), names[:-1], kept


class _WrongEncoding(Exception):
    """A byte after the sniffed head does not decode in the guessed 8-bit or UTF-8 encoding."""


def _options(
    dialect: Dialect,
    width: int,
    skip: int,
    encoding: str,
    *,
    threads: bool,
    handler: Callable[[pacsv.InvalidRow], str],
    columns: list[str] | None = None,
    block_size: int | None = None,
) -> dict[str, object]:
    column_names = internal_names(width)
    sized = {"block_size": block_size} if block_size else {}
    return {
        "read_options": pacsv.ReadOptions(
            **sized,
            use_threads=threads,
            skip_rows=skip,
            column_names=column_names,
            encoding="utf8" if encoding in ("utf-8", "utf-8-sig") else encoding,
        ),
        "parse_options": pacsv.ParseOptions(
            delimiter=dialect.delimiter,
            quote_char=dialect.quotechar or False,
            double_quote=True,
            escape_char=False,
            # Without this, the parallel chunker may split a quoted value that holds a newline.
            newlines_in_values=True,
            ignore_empty_lines=True,
            invalid_row_handler=handler,
        ),
        "convert_options": pacsv.ConvertOptions(
            column_types=dict.fromkeys(column_names, pa.string()),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
            true_values=[],
            false_values=[],
            check_utf8=True,
            include_columns=columns,
        ),
    }


def chunk_options(
    dialect: Dialect,
    width: int,
    encoding: str,
    skip: int,
    handler: Callable[[pacsv.InvalidRow], str],
    threads: bool,
) -> dict[str, object]:
    """The single pass's parse options for one byte range (a module function: it goes to worker processes)."""
    return _options(dialect, width, skip, encoding, threads=threads, handler=handler)


def _read(
    source: TextSource,
    dialect: Dialect,
    width: int,
    skip: int,
    encoding: str,
    limits: ReadLimits,
    *,
    chunking: Chunking | None = None,
) -> tuple[pa.Table, list[tuple[int, str]]]:
    if (
        chunking is not None
        and source.data is None
        and source.block_size is None
        and encoding in ("utf-8", "utf-8-sig")
        and chunking.splits(source.path.stat().st_size)
    ):
        table, _ = read_chunked(
            source.path,
            skip=skip,
            names=internal_names(width),
            options=functools.partial(chunk_options, dialect, width, encoding),
            chunking=chunking,
            limits=limits,
        )
        if table is not None:
            return table, []
    invalid: list[tuple[int, str]] = []

    def collect(row: pacsv.InvalidRow) -> str:
        invalid.append((row.actual_columns, row.text))
        return "skip"

    options = _options(
        dialect, width, skip, encoding, threads=True, handler=collect, block_size=source.block_size
    )
    try:
        table = pacsv.read_csv(source.pyarrow_input(), **options)  # type: ignore[arg-type]
    except pa.ArrowInvalid as exc:
        if "invalid UTF8" in str(exc) and encoding in ("utf-8", "utf-8-sig"):
            raise _WrongEncoding from exc
        if source.block_size is None and _fit_block_size(source, width, limits):
            # rows longer than a block: once more, with blocks that hold them
            return _read(source, dialect, width, skip, encoding, limits, chunking=chunking)
        raise DatasetReadError(
            source.path,
            f"could not be parsed as delimited text ({_first_line(exc)})",
            "check it is a CSV/TSV file and re-export it",
        ) from exc
    except UnicodeDecodeError as exc:
        if encoding == "cp1252":
            raise _WrongEncoding from exc
        raise DatasetReadError(
            source.path,
            f"is not valid {encoding} text ({exc.reason})",
            "re-save it as UTF-8",
        ) from exc
    return table, invalid


def _fit_block_size(source: TextSource, width: int, limits: ReadLimits) -> bool:
    """After a failed parse: whether a line is longer than pyarrow's default block, and if so a block
    size that holds it (set on `source`); refuses a line too long for any block, or one so long that a
    value in it must be over `limits.max_cell_bytes` (its fields cannot share it more evenly).

    Measured in the file rather than read from pyarrow's message, which is not an interface.
    """
    length, line = _longest_line(source)
    if length < pacsv.ReadOptions().block_size // 2:
        return False  # lines fit: the failure is something else
    least = (length - (width - 1)) // width  # the largest of `width` fields is at least this long
    if least > limits.max_cell_bytes:
        raise refuse(
            source.path,
            "max_cell_bytes",
            limits.max_cell_bytes,
            least,
            f"this line is {size_text(length)} long for {width} column(s), so one of its values is at least"
            f" {size_text(least)}, more than the {size_text(limits.max_cell_bytes)} allowed for one value",
            line=line,
            advice="store such long values outside the table (a file per value, and its name in the table)",
        )
    if length > _MAX_BLOCK // 2:
        raise DatasetReadError(
            source.path,
            f"this line is {size_text(length)} long; the CSV reader holds rows up to"
            f" {size_text(_MAX_BLOCK // 2)}",
            "store such long values outside the table (a file per value, and its name in the table)",
            line=line,
        )
    source.block_size = min(max(2 * length + (1 << 20), 16 << 20), _MAX_BLOCK)
    return True


def _longest_line(source: TextSource) -> tuple[int, int]:
    """(bytes, 1-based physical line) of the longest line, streamed: only asked after a failed parse."""
    best, best_line = 0, 1
    line, run = 1, 0  # the current line's number, and its bytes before this chunk
    for chunk in source.chunks():
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
        if not len(ends):
            run += len(chunk)
            continue
        lengths = np.diff(ends, prepend=-1) - 1
        lengths[0] += run
        i = int(np.argmax(lengths))
        if int(lengths[i]) > best:
            best, best_line = int(lengths[i]), line + i
        line += len(ends)
        run = len(chunk) - int(ends[-1]) - 1
    if run > best:
        best, best_line = run, line
    return best, best_line


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _encoding_problem(raw: bytes, encoding: str) -> ReadProblem:
    try:
        raw.decode("utf-8")
        line = None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
    return ReadProblem(
        kind="encoding",
        line=line,
        row=None,
        column=None,
        detail=f"the file is not valid UTF-8 from line {line}; it was read as {encoding}",
    )


class _Lines:
    """Physical line numbers of byte offsets in the file's UTF-8 text."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        eol = 10 if b"\n" in data else 13  # old Mac files end lines with \r only
        self.eol = bytes([eol])
        self.ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == eol)

    def line_of(self, offset: int) -> int:
        return int(np.searchsorted(self.ends, offset, side="left")) + 1

    def start_of(self, line: int) -> int:
        if line <= 1:
            return 0
        if line - 2 >= len(self.ends):
            return len(self.data)
        return int(self.ends[line - 2]) + 1

    def find_record(self, text: str, at_least_line: int) -> int | None:
        """Line where a record with this text starts, searching from the earliest line it could be on."""
        needle = text.encode()
        start = self.start_of(at_least_line)
        while True:
            i = self.data.find(needle, start)
            if i < 0:
                return None
            if i == 0 or self.data[i - 1 : i] in (b"\n", b"\r"):
                return self.line_of(i)
            start = i + 1


def _numbered_invalid_rows(
    source: TextSource,
    dialect: Dialect,
    width: int,
    skip: int,
    *,
    stop_at_first: bool,
    all_columns: bool = False,
) -> tuple[list[tuple[int, int, str]], pa.Table | None]:
    """Invalid rows as (1-based record number counting skipped lines, field count, text), read serially
    because only a serial read numbers them; also the valid rows read (one column unless asked)."""
    rows: list[tuple[int, int, str]] = []

    def collect(row: pacsv.InvalidRow) -> str:
        rows.append((row.number if row.number is not None else -1, row.actual_columns, row.text))
        return "error" if stop_at_first else "skip"

    columns = None if all_columns else internal_names(1)
    options = _options(
        dialect,
        width,
        skip,
        source.encoding,
        threads=False,
        handler=collect,
        columns=columns,
        block_size=source.block_size,
    )
    try:
        return rows, pacsv.read_csv(source.pyarrow_input(), **options)  # type: ignore[arg-type]
    except pa.ArrowInvalid:
        if not (stop_at_first and rows):
            raise
    return rows, None


def _raise_too_ragged(
    source: TextSource, dialect: Dialect, width: int, skip: int, ragged: int, total: int
) -> None:
    number, actual, text = _numbered_invalid_rows(source, dialect, width, skip, stop_at_first=True)[0][0]
    data_row = number - skip - 1
    line = _Lines(source.utf8()).find_record(text, skip + 1 + data_row)
    shown = "tab" if dialect.delimiter == "\t" else f"'{dialect.delimiter}'"
    raise DatasetReadError(
        source.path,
        f"row has {actual} fields but the header has {width}, and {ragged} of {total} rows"
        f" ({100 * ragged / total:.0f}%) are like that when split on {shown}",
        "quote values that contain the delimiter, or re-export the file with one consistent delimiter",
        line=line,
    )


def _split(text: str, dialect: Dialect) -> list[str]:
    fields: list[str] = []
    try:
        for record in _reader(text, dialect):
            if fields and record:
                fields[-1] += "\n" + record[0]
                fields.extend(record[1:])
            else:
                fields.extend(record)
    except csv.Error:
        fields = text.split(dialect.delimiter)
    return fields


def _repair_ragged(
    source: TextSource, table: pa.Table, dialect: Dialect, names: list[str], skip: int
) -> tuple[pa.Table, list[ReadProblem]]:
    """Put ragged rows back where they were: short rows padded with "", extra fields folded into the last column."""
    width = len(names)
    numbered, serial = _numbered_invalid_rows(source, dialect, width, skip, stop_at_first=False)
    if serial is None or serial.num_rows != table.num_rows:
        # The parallel read split the file differently: trust the serial read for every column.
        numbered, serial = _numbered_invalid_rows(
            source, dialect, width, skip, stop_at_first=False, all_columns=True
        )
        table = serial if serial is not None else table  # (never None: only stop_at_first returns None)
    lines = _Lines(source.utf8())
    problems: list[ReadProblem] = []
    fixed: list[list[str]] = [[] for _ in range(width)]
    positions: list[int] = []
    line = skip + 1
    for number, actual, text in numbered:
        data_row = number - skip - 1
        found = lines.find_record(text, max(line, skip + 1 + data_row))
        line = found if found is not None else skip + 1 + data_row
        fields = _split(text, dialect)
        if len(fields) < width:
            detail = (
                f"row has {actual} fields but the header has {width};"
                f" the missing {width - len(fields)} value(s) were left blank"
            )
            fields = fields + [""] * (width - len(fields))
        else:
            detail = (
                f"row has {actual} fields but the header has {width}; the extra {len(fields) - width} field(s)"
                f" were kept at the end of the last column '{names[-1]}', joined with {dialect.delimiter!r}"
            )
            fields = [*fields[: width - 1], dialect.delimiter.join(fields[width - 1 :])]
        for i, value in enumerate(fields):
            fixed[i].append(value)
        positions.append(data_row)
        problems.append(ReadProblem(kind="ragged_row", line=line, row=data_row, column=None, detail=detail))

    total = table.num_rows + len(positions)
    pos = np.asarray(positions, dtype=np.int64)
    if len(np.unique(pos)) != len(pos) or (len(pos) and (pos.min() < 0 or pos.max() >= total)):
        raise DatasetReadError(  # pyarrow numbered rows we cannot place: refuse rather than misplace
            source.path,
            "has ragged rows that could not be placed back in order",
            "fix the rows with the wrong number of fields",
            line=problems[0].line if problems else None,
        )
    is_fixed = np.zeros(total, dtype=bool)
    is_fixed[pos] = True
    order = np.empty(total, dtype=np.int64)
    order[~is_fixed] = np.arange(table.num_rows)
    order[pos] = table.num_rows + np.arange(len(pos))
    extra = pa.table([pa.array(col, pa.string()) for col in fixed], names=table.column_names)
    combined = pa.concat_tables([table, extra]).take(pa.array(order))
    return combined, problems


def _unclosed_quote(text: str, dialect: Dialect) -> int | None:
    """Offset of a quote that opens a field and is never closed, parsing like pyarrow does."""
    q, d = dialect.quotechar, dialect.delimiter
    if q is None:
        return None
    i, n, field_start, opened = 0, len(text), True, None
    while i < n:
        ch = text[i]
        if opened is not None:
            if ch == q:
                if i + 1 < n and text[i + 1] == q:
                    i += 2
                    continue
                opened = None
        elif field_start and ch == q:
            opened = i
        field_start = ch in (d, "\n", "\r") and opened is None
        i += 1
    return opened


def _raise_unterminated(source: TextSource, quote_offset: int) -> None:
    lines = _Lines(source.utf8())
    raise DatasetReadError(
        source.path,
        "a quoted value starts here and its closing quote is missing, so the rest of the file ran into it",
        "add the closing quote (or remove the stray one), or get the complete file if it was cut off",
        line=lines.line_of(quote_offset),
    )


def _check_unterminated(source: TextSource, invalid_texts: list[str], dialect: Dialect) -> None:
    """An open quote at the end of the file swallows the rest: pyarrow then reports one short last row.

    Parallel blocks report invalid rows in any order, so look at every row with an unclosed quote.
    """
    for text in invalid_texts:
        opened = _unclosed_quote(text, dialect)
        if opened is None:
            continue
        data = source.utf8().rstrip(b"\r\n")
        tail = text.encode().rstrip(b"\r\n")
        if data.endswith(tail):
            _raise_unterminated(source, len(data) - len(tail) + len(text[:opened].encode()))


def _check_last_row_quote(source: TextSource, table: pa.Table, dialect: Dialect) -> None:
    """An open quote in the last column swallows the rest of the file into a value that still 'fits'."""
    if dialect.quotechar is None:
        return
    last = table.slice(table.num_rows - 1, 1).to_pylist()[0]
    suspects = [v for v in last.values() if "\n" in v or "\r" in v]
    if not suspects:
        return
    data = source.utf8()
    value = suspects[-1].encode()
    start = len(data) - len(value)
    if start > 0 and data.endswith(value) and data[start - 1 : start] == dialect.quotechar.encode():
        _raise_unterminated(source, start - 1)
