"""Typed formats (Parquet, .xlsx) read into text columns, each value in the text form a person would expect."""

from __future__ import annotations

import datetime as dt
import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

import pyarrow as pa
import pyarrow.parquet as pq

from iterate.io.errors import DatasetReadError
from iterate.io.limits import ReadLimits, check_expansion, refuse, size_text
from iterate.io.textify import column_to_text
from iterate.table import ReadProblem

_PANDAS_INDEX = re.compile(r"^__index_level_\d+__$")
_MAX_PREAMBLE = 10  # title rows above a header


def read_parquet(
    path: Path, limits: ReadLimits | None = None
) -> tuple[pa.Table, list[str], list[ReadProblem]]:
    """Every column as text; nulls blank; pandas' unnamed index columns dropped (they are not data).

    The footer's row count, column count and uncompressed size are held to `limits` before any data
    page is read: a few KB of Parquet can describe a billion repeated values.
    """
    limits = limits or ReadLimits()
    try:
        # ParquetFile, not pq.read_table: the dataset layer refuses repeated column names.
        with pq.ParquetFile(path) as parquet:
            _check_parquet_shape(path, parquet, limits)
            table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DatasetReadError(
            path,
            f"is a damaged or truncated Parquet file ({str(exc).strip().splitlines()[0]})",
            "export the Parquet file again, or get the complete file if it was cut off",
        ) from exc
    problems: list[ReadProblem] = []
    keep: list[int] = []
    for i, name in enumerate(table.column_names):
        if _PANDAS_INDEX.match(name):
            problems.append(
                ReadProblem(
                    kind="dropped_index_column",
                    line=None,
                    row=None,
                    column=name,
                    detail=f"'{name}' is a pandas index saved with the data, not a column; it was left out",
                )
            )
        else:
            keep.append(i)
    names = [table.column_names[i] for i in keep]
    arrays = [column_to_text(table.column(i)) for i in keep]
    return pa.table(arrays, names=[f"c{i}" for i in range(len(arrays))]), names, problems


def _check_parquet_shape(path: Path, parquet: pq.ParquetFile, limits: ReadLimits) -> None:
    meta = parquet.metadata
    columns = len(parquet.schema_arrow)
    if columns > limits.max_columns:
        raise _too_many_columns(path, columns, limits)
    cells = meta.num_rows * columns
    if cells > limits.max_cells:
        raise _too_many_cells(path, meta.num_rows, columns, limits)
    unpacked = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    check_expansion(
        path,
        unpacked,
        path.stat().st_size,
        limits,
        what="its data pages",
        advice="save the data as CSV instead",
    )


def read_xlsx(
    path: Path, limits: ReadLimits | None = None
) -> tuple[pa.Table, list[str], list[ReadProblem], int, list[int]]:
    """The first sheet: header = first non-empty row; returns (table, header, problems, header row number,
    the sheet's row number of each data row).

    Before openpyxl parses anything, the archive's members are held to the decompressed size and ratio
    limits (their sizes bound what zipfile will ever inflate: it stops at the declared size), and the
    sheets' XML is scanned for how many rows, columns and cells openpyxl would build and parse. XML with
    entity declarations is refused: openpyxl parses through defusedxml when installed (a dependency).
    """
    import openpyxl  # heavy; only needed for workbooks

    limits = limits or ReadLimits()
    try:
        _check_archive(path, limits)
        _check_sheets(path, limits)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, ParseError) as exc:
        raise _workbook_error(path, exc) from exc
    # An open file, not the path: given a path, openpyxl judges the workbook by its extension and refuses
    # an .xlsx saved as ".xls" (InvalidFileException), though its content was just sniffed as .xlsx.
    with path.open("rb") as fh:
        try:
            workbook = openpyxl.load_workbook(fh, read_only=True, data_only=True)
        except (zipfile.BadZipFile, KeyError, OSError, ValueError, ParseError) as exc:
            raise _workbook_error(path, exc) from exc
        try:
            return _read_first_sheet(path, workbook, limits)
        except (zipfile.BadZipFile, KeyError, OSError, ValueError, ParseError) as exc:
            raise _workbook_error(path, exc) from exc
        finally:
            workbook.close()


def _read_first_sheet(
    path: Path, workbook: Any, limits: ReadLimits
) -> tuple[pa.Table, list[str], list[ReadProblem], int, list[int]]:
    sheets = workbook.worksheets
    if not sheets:
        raise DatasetReadError(path, "has no worksheets", "save the data on a sheet, or export it as CSV")
    sheet = sheets[0]
    problems: list[ReadProblem] = []
    if len(sheets) > 1:
        others = ", ".join(f"'{s.title}'" for s in sheets[1:])
        problems.append(
            ReadProblem(
                kind="other_sheets",
                line=None,
                row=None,
                column=None,
                detail=f"read the first sheet '{sheet.title}'; the workbook also has {others}, which were not read",
            )
        )
    # Some writers store a wrong sheet size, which would cut rows short in read-only mode.
    sheet.reset_dimensions()
    rows: list[tuple[int, list[str]]] = []
    width = 0  # the widest row so far: the table will be len(rows) × width cells
    for number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
        # A second guard behind the scan (cells without a reference escape it): the reader's own grid.
        if len(values) > width:
            width = len(values)
            if width > limits.max_columns:
                raise _too_many_columns(path, width, limits, line=number)
        if (len(rows) + 1) * width > limits.max_cells:
            raise _too_many_cells(path, len(rows) + 1, width, limits, line=number)
        cells = [_cell_text(v) for v in values]
        if any(c != "" for c in cells):  # fully blank rows are skipped, as blank lines are in a CSV
            rows.append((number, cells))
    if not rows:
        raise DatasetReadError(
            path, f"sheet '{sheet.title}' is empty", "put the header and data on the first sheet"
        )
    start = _header_index(rows)
    if start:
        title = " / ".join(c for _, cells in rows[:start] for c in cells if c)
        problems.insert(
            0,
            ReadProblem(
                kind="preamble",
                line=rows[0][0],
                row=None,
                column=None,
                detail=f"row(s) {rows[0][0]}-{rows[start - 1][0]} above the header are not table rows"
                f" and were skipped: {title[:200]!r}",
            ),
        )
        rows = rows[start:]
    header_line, header = rows[0]
    data = rows[1:]
    # Formatting can stretch a sheet's dimension; columns empty everywhere (name included) are not columns.
    width = max(_last_filled(cells) for _, cells in rows)
    names = (header + [""] * width)[:width]
    columns: list[list[str]] = [[] for _ in range(width)]
    for _, cells in data:
        cells = (cells + [""] * width)[:width]
        for i, value in enumerate(cells):
            columns[i].append(value)
    table = pa.table([pa.array(c, pa.string()) for c in columns], names=[f"c{i}" for i in range(width)])
    return table, names, problems, header_line, [number for number, _ in data]


_XML_REFUSALS: tuple[type[BaseException], ...] = ()
try:  # openpyxl parses through defusedxml when it is installed; its refusals are ValueErrors
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring as _parse_xml

    _XML_REFUSALS = (DefusedXmlException,)
except ImportError:  # pragma: no cover - defusedxml is a dependency
    from xml.etree.ElementTree import fromstring as _parse_xml

# What the first sheet's XML is scanned for: rows that hold cells, the cell references, the declared size.
_NS = rb"(?:[A-Za-z_][\w.-]*:)?"
_ROW_TAG = re.compile(rb"<" + _NS + rb"row\b[^>]*?(/?)>")
_CELL_TAG = re.compile(rb"<" + _NS + rb"c[\s/>]")
_SHEET_DATA = re.compile(rb"<" + _NS + rb"sheetData[\s/>]")
_CELL_REF = re.compile(rb"<" + _NS + rb"c\s[^>]*?\br\s*=\s*[\"']([A-Z]{1,3})[0-9]+[\"']")
_DIMENSION = re.compile(rb"<" + _NS + rb"dimension\s[^>]*?ref\s*=\s*[\"']([A-Z0-9:$]+)[\"']")
_SCAN_CHUNK = 4 * 1024 * 1024


def _check_archive(path: Path, limits: ReadLimits) -> None:
    """Every member's declared size and ratio, before anything is inflated (zipfile never inflates more)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise DatasetReadError(
            path,
            f"is a damaged .xlsx workbook ({exc})",
            "open it in Excel or LibreOffice and save it again as .xlsx or CSV",
        ) from exc
    total = sum(m.file_size for m in members)
    if total > limits.max_decompressed_bytes:
        raise refuse(
            path,
            "max_decompressed_bytes",
            limits.max_decompressed_bytes,
            total,
            f"the workbook's parts unpack to {size_text(total)},"
            f" more than the {size_text(limits.max_decompressed_bytes)} allowed",
            advice="save the data as CSV instead",
        )
    for member in members:
        check_expansion(
            path,
            member.file_size,
            member.compress_size,
            limits,
            what=f"its part {member.filename!r}",
            advice="save the data as CSV instead",
        )


@dataclass
class _SheetScan:
    """What a worksheet's XML holds, counted with regular expressions (C speed, no tree)."""

    rows: int = 0  # <row> elements with content
    present: int = 0  # <c> elements: what openpyxl parses one by one
    widest: bytes = b""  # the furthest column letters referenced
    declared: str | None = None  # the <dimension ref> it declares, if any
    sized: bool = False  # a <dimension> comes before <sheetData>: openpyxl stops reading there to size it

    @property
    def columns(self) -> int:
        return _column_index(self.widest.decode()) if self.widest else 0


def _scan(archive: zipfile.ZipFile, member: str, *, whole: bool) -> _SheetScan:
    """Scan a worksheet in chunks; unless `whole`, stop at <sheetData> when a dimension came before it."""
    scan = _SheetScan()
    carry = b""
    data_seen = False
    with archive.open(member) as fh:
        while chunk := fh.read(_SCAN_CHUNK):
            buf = carry + chunk
            cut = buf.rfind(b"<")  # a tag cut by the chunk boundary is scanned with the next chunk
            body, carry = (buf[:cut], buf[cut:]) if cut > 0 else (buf, b"")
            if not data_seen:
                data_at = _SHEET_DATA.search(body)
                head = body if data_at is None else body[: data_at.start()]
                if scan.declared is None and (found := _DIMENSION.search(head)):
                    scan.declared = found.group(1).decode()
                if data_at is not None:
                    data_seen = True
                    scan.sized = scan.declared is not None
                    if scan.sized and not whole:
                        return scan
            scan.rows += sum(1 for m in _ROW_TAG.finditer(body) if not m.group(1))
            scan.present += len(_CELL_TAG.findall(body))
            refs = set(_CELL_REF.findall(body))
            if refs:
                scan.widest = max([*refs, scan.widest], key=lambda ref: (len(ref), ref))
    return scan


def _worksheets(archive: zipfile.ZipFile) -> list[str]:
    """The workbook's worksheet parts in workbook order (the first is the one read); [] if unresolvable.

    Read from xl/workbook.xml and its relationships, through defusedxml, by local names (the strict
    OOXML flavour uses other namespaces).
    """
    try:
        workbook = _parse_xml(archive.read("xl/workbook.xml"))
        rels = _parse_xml(archive.read("xl/_rels/workbook.xml.rels"))
    except KeyError:
        return []
    targets = {
        rel.get("Id"): rel.get("Target", "")
        for rel in rels
        if _local(rel.tag) == "Relationship" and rel.get("Type", "").endswith("/worksheet")
    }
    members = []
    for element in workbook.iter():
        if _local(element.tag) != "sheet":
            continue
        rid = next((v for k, v in element.attrib.items() if _local(k) == "id"), None)
        target = targets.get(rid)
        if target:
            member = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
            members.append(posixpath.normpath(member))
    return members


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _check_sheets(path: Path, limits: ReadLimits) -> None:
    """The sheets' real size, from their XML, before openpyxl parses any: a sheet of a few KB can put
    one cell in column XFD of every row, which the reader would pad into billions of empty cells, and
    openpyxl parses 40,000-70,000 cells a second, so a plain large sheet takes minutes.

    The first sheet is read: its cell references (not its declared `<dimension ref>`, which writers get
    wrong and the reader ignores) are held to the column and cell limits. openpyxl also parses every
    other sheet that declares no dimension, to size it: their cells count toward the parsing budget.
    """
    with zipfile.ZipFile(path) as archive:
        members = [m for m in _worksheets(archive) if m in set(archive.namelist())]
        if not members:
            return  # openpyxl will say what is missing
        first = _scan(archive, members[0], whole=True)
        parsed = first.present * (1 if first.sized else 2)  # sized by a full pass, then read
        for member in members[1:]:
            other = _scan(archive, member, whole=False)
            parsed += 0 if other.sized else other.present
    said = f" (it declares the range {first.declared})" if first.declared else ""
    if first.columns > limits.max_columns:
        raise refuse(
            path,
            "max_columns",
            limits.max_columns,
            first.columns,
            f"the first sheet has cells up to column {first.widest.decode()}, {first.columns:,} columns{said},"
            f" more than the {limits.max_columns:,} columns allowed",
            advice="keep the table's columns at the left of the sheet, or save it as CSV",
        )
    grid = first.rows * first.columns
    if grid > limits.max_cells:
        raise refuse(
            path,
            "max_cells",
            limits.max_cells,
            grid,
            f"the first sheet spans {first.rows:,} rows × {first.columns:,} columns = {grid:,} cells{said},"
            f" more than the {limits.max_cells:,} allowed",
            advice="split the sheet, or save the table as CSV",
        )
    if parsed > limits.max_xlsx_cells:
        raise refuse(
            path,
            "max_xlsx_cells",
            limits.max_xlsx_cells,
            parsed,
            f"reading it means parsing {parsed:,} cells of XML one by one (about 50,000 a second),"
            f" more than the {limits.max_xlsx_cells:,} allowed, which would take minutes",
            advice="save the sheet as CSV, which is read a hundred times faster",
        )


def _column_index(letters: str) -> int:
    index = 0
    for ch in letters:
        index = index * 26 + ord(ch) - ord("A") + 1
    return index


def _workbook_error(path: Path, exc: BaseException) -> DatasetReadError:
    """One line for whatever openpyxl raised, by the type of the error or of the one it wraps."""
    if isinstance(exc, DatasetReadError):
        return exc
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(chain) < 10:  # openpyxl re-raises XML errors as a ValueError
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(e, _XML_REFUSALS) for e in chain):
        return DatasetReadError(
            path,
            "the workbook's XML declares entities (a DTD), which Excel never writes; it was refused unread"
            " because entities can expand to gigabytes (an XML bomb)",
            "open it in Excel or LibreOffice and save it again as .xlsx or CSV",
        )
    parse = next((e for e in chain if isinstance(e, ParseError)), None)
    if parse is not None:
        return DatasetReadError(
            path,
            f"the workbook's XML cannot be parsed ({_first_line(parse)})",
            "open it in Excel or LibreOffice and save it again as .xlsx or CSV",
        )
    return DatasetReadError(
        path,
        f"is a damaged .xlsx workbook ({_first_line(exc)})",
        "open it in Excel or LibreOffice and save it again as .xlsx or CSV",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _too_many_columns(
    path: Path, columns: int, limits: ReadLimits, *, line: int | None = None
) -> DatasetReadError:
    return refuse(
        path,
        "max_columns",
        limits.max_columns,
        columns,
        f"has {columns:,} columns, more than the {limits.max_columns:,} allowed",
        line=line,
        advice="keep only the columns you need, in a narrower file",
    )


def _too_many_cells(
    path: Path, rows: int, columns: int, limits: ReadLimits, *, line: int | None = None
) -> DatasetReadError:
    return refuse(
        path,
        "max_cells",
        limits.max_cells,
        rows * columns,
        f"has at least {rows:,} rows × {columns:,} columns = {rows * columns:,} cells,"
        f" more than the {limits.max_cells:,} allowed",
        line=line,
        advice="split the file into parts with fewer rows or columns",
    )


def _header_index(rows: list[tuple[int, list[str]]]) -> int:
    """Title rows (one filled cell, then an empty row) above a header with several cells: how many to skip."""
    filled = [sum(1 for c in cells if c != "") for _, cells in rows[: _MAX_PREAMBLE + 2]]
    if not filled or filled[0] != 1:
        return 0
    for i, count in enumerate(filled[1:], start=1):
        if count > 1:
            # Only a title set apart by an empty row: a header with blank cells looks the same otherwise.
            set_apart = rows[i][0] > rows[i - 1][0] + 1
            return i if set_apart and i < len(rows) - 1 else 0
    return 0


def _last_filled(cells: list[str]) -> int:
    for i in range(len(cells) - 1, -1, -1):
        if cells[i] != "":
            return i + 1
    return 0


def _cell_text(value: Any) -> str:
    """What the cell holds, as text: integral numbers without '.0', dates in ISO form, TRUE/FALSE as Excel shows."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # Excel stores every number as a float; 5 typed in a cell is 5, not 5.0.
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    return str(value)
