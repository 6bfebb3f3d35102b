"""Typed formats (Parquet, .xlsx) read into text columns, each value in the text form a person would expect."""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from iterate.io.errors import DatasetReadError
from iterate.io.textify import column_to_text
from iterate.table import ReadProblem

_PANDAS_INDEX = re.compile(r"^__index_level_\d+__$")
_MAX_PREAMBLE = 10  # title rows above a header


def read_parquet(path: Path) -> tuple[pa.Table, list[str], list[ReadProblem]]:
    """Every column as text; nulls blank; pandas' unnamed index columns dropped (they are not data)."""
    try:
        # ParquetFile, not pq.read_table: the dataset layer refuses repeated column names.
        with pq.ParquetFile(path) as parquet:
            table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise DatasetReadError(
            path,
            f"is a damaged or truncated Parquet file ({str(exc).strip().splitlines()[0]})",
            "re-export the Parquet file or upload the complete file",
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


def read_xlsx(path: Path) -> tuple[pa.Table, list[str], list[ReadProblem], int]:
    """The first sheet: header = first non-empty row; returns (table, header, problems, header row number)."""
    import openpyxl  # heavy; only needed for workbooks

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise DatasetReadError(
            path,
            f"is a damaged .xlsx workbook ({exc})",
            "open it in Excel or LibreOffice and save it again as .xlsx or CSV",
        ) from exc
    try:
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
        for number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
            cells = [_cell_text(v) for v in values]
            if any(c != "" for c in cells):  # fully blank rows are skipped, as blank lines are in a CSV
                rows.append((number, cells))
    finally:
        workbook.close()
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
    return table, names, problems, header_line


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
