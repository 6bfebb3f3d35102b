"""JSON Lines (and a JSON array of objects): numbers kept exactly as written, nested values as JSON text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from iterate.io.errors import DatasetReadError


class _Number(str):
    """A JSON number kept as its literal text ("6.0" stays "6.0", "1e3" stays "1e3")."""


def _loads(text: str) -> Any:
    return json.loads(text, parse_float=_Number, parse_int=_Number, parse_constant=_Number)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return str(value)
    return _dump(value)


def _dump(value: Any) -> str:
    """Nested value back to JSON text, numbers as written."""
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dump(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def read_json_records(path: Path, text: str) -> tuple[pa.Table, list[str]]:
    """Rows from JSON Lines, or from one JSON array of objects; columns in first-seen key order."""
    stripped = text.lstrip()
    records = _array_records(path, text) if stripped.startswith("[") else _line_records(path, text)
    if not records:
        raise DatasetReadError(path, "has no JSON records", "put one JSON object per line (JSON Lines)")
    columns: dict[str, list[str]] = {}
    for n, (line, record) in enumerate(records):
        if not isinstance(record, dict):
            raise DatasetReadError(
                path,
                f"the record is a JSON {type(record).__name__}, not an object",
                'make every record an object like {"column": "value"}',
                line=line,
            )
        for key, value in record.items():
            col = columns.get(key)
            if col is None:
                # A key first seen late is blank in every earlier record.
                col = columns[key] = [""] * n
            col.append(_text(value))
        for col in columns.values():
            if len(col) == n:
                col.append("")
    names = list(columns)
    table = pa.table(
        [pa.array(columns[k], pa.string()) for k in names], names=[f"c{i}" for i in range(len(names))]
    )
    return table, names


def _line_records(path: Path, text: str) -> list[tuple[int | None, Any]]:
    records: list[tuple[int | None, Any]] = []
    # Split on "\n" only: str.splitlines() would also split on U+2028, which JSON allows inside strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, _loads(line)))
        except json.JSONDecodeError as exc:
            raise DatasetReadError(
                path,
                f"is not valid JSON ({exc.msg} at column {exc.colno})",
                "put one complete JSON object on each line, or re-export the file",
                line=number,
            ) from exc
    return records


def _array_records(path: Path, text: str) -> list[tuple[int | None, Any]]:
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetReadError(
            path,
            f"is not valid JSON ({exc.msg} at column {exc.colno})",
            "fix the JSON or export the data as JSON Lines or CSV",
            line=exc.lineno,
        ) from exc
    if not isinstance(data, list):
        raise DatasetReadError(
            path, "is a JSON value, not a list of records", "export the rows as JSON Lines"
        )
    return [(None, r) for r in data]
