"""JSON Lines (and a JSON array of objects): numbers kept exactly as written, nested values as JSON text."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from iterate.io.errors import DatasetReadError
from iterate.io.limits import ReadLimits, refuse


class _Number(str):
    """A JSON number kept as its literal text ("6.0" stays "6.0", "1e3" stays "1e3")."""


# Numbers as their literal text. _FAST makes them plain str (several times quicker); nested values need
# _EXACT, whose str subclass tells a number from a string when the value is written back as JSON.
_FAST = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=str)
_EXACT = json.JSONDecoder(parse_float=_Number, parse_int=_Number, parse_constant=_Number)


def _nested(record: Any) -> bool:
    return isinstance(record, dict) and any(isinstance(v, dict | list) for v in record.values())


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


def read_json_records(
    path: Path, text: str, limits: ReadLimits | None = None
) -> tuple[pa.Table, list[str], list[int] | None]:
    """Rows from JSON Lines, or from one JSON array of objects; columns in first-seen key order; and the
    1-based line of each record (JSON Lines; None for an array, whose records have no line of their own).

    Before any column is built, the keys are held to `limits.max_columns`, records × keys to
    `limits.max_cells` (records that each bring new keys would make a huge sparse grid), and nested
    values to `limits.max_json_depth` levels (deeper ones would exhaust Python's recursion).
    """
    limits = limits or ReadLimits()
    # Millions of acyclic dicts and strs: the cycle collector would only rescan them (~25% of the time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_json_records(path, text, limits)
    except RecursionError:
        # Deeper than Python can follow (about a thousand levels), before the depth limit could look.
        raise _too_deep(path, None, None, limits) from None
    except _TooDeep as exc:
        raise _too_deep(path, exc.line, None, limits) from None
    finally:
        if enabled:
            gc.enable()


def _read_json_records(
    path: Path, text: str, limits: ReadLimits
) -> tuple[pa.Table, list[str], list[int] | None]:
    records = _array_records(path, text) if text.lstrip().startswith("[") else _line_records(path, text)
    if not records:
        raise DatasetReadError(path, "has no JSON records", "put one JSON object per line (JSON Lines)")
    keys: dict[str, None] = {}
    for line, record in records:
        if not isinstance(record, dict):
            raise DatasetReadError(
                path,
                f"the record is a JSON {type(record).__name__}, not an object",
                'make every record an object like {"column": "value"}',
                line=line,
            )
        keys.update(dict.fromkeys(record))
        if _nested(record):
            depth = _depth(record)
            if depth > limits.max_json_depth:
                raise _too_deep(path, line, depth, limits)
    names = list(keys)
    if len(names) > limits.max_columns:
        raise refuse(
            path,
            "max_columns",
            limits.max_columns,
            len(names),
            f"its records have {len(names):,} different keys (one column each),"
            f" more than the {limits.max_columns:,} columns allowed",
            advice="keep the same keys in every record, or nest the varying ones under one key",
        )
    if len(records) * len(names) > limits.max_cells:
        raise refuse(
            path,
            "max_cells",
            limits.max_cells,
            len(records) * len(names),
            f"has {len(records):,} records × {len(names):,} keys = {len(records) * len(names):,} cells,"
            f" more than the {limits.max_cells:,} allowed",
            advice="split the file into parts with fewer records or keys",
        )
    rows = [r for _, r in records]
    arrays = []
    for key in names:
        # A key missing from a record is blank there, like a null.
        column = [r.get(key) for r in rows]
        column = [v if type(v) is str else _text(v) for v in column]
        arrays.append(pa.array(column, pa.string()))
    lines = [n for n, _ in records]
    places = None if any(n is None for n in lines) else [int(n) for n in lines if n is not None]
    return pa.table(arrays, names=[f"c{i}" for i in range(len(names))]), names, places


def _depth(value: Any) -> int:
    """How many levels of objects and arrays `value` nests (a flat object is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


class _TooDeep(Exception):
    """A line whose JSON nests deeper than Python's recursion can decode."""

    def __init__(self, line: int | None) -> None:
        super().__init__(line)
        self.line = line


def _too_deep(path: Path, line: int | None, depth: int | None, limits: ReadLimits) -> DatasetReadError:
    measured = f"{depth:,} levels deep" if depth is not None else "deeper than Python can follow"
    return refuse(
        path,
        "max_json_depth",
        limits.max_json_depth,
        depth if depth is not None else limits.max_json_depth + 1,  # at least
        f"a record nests objects or arrays {measured}, more than the {limits.max_json_depth} levels allowed",
        line=line,
        advice="flatten the records (a table has one level of fields)",
    )


def _line_records(path: Path, text: str) -> list[tuple[int | None, Any]]:
    # Split on "\n" only: str.splitlines() would also split on U+2028, which JSON allows inside strings.
    numbered = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    try:
        # One C-speed decode of all lines as an array; the count check refuses lines holding two objects.
        values = _FAST.decode("[" + ",".join(line for _, line in numbered) + "]")
        if isinstance(values, list) and len(values) == len(numbered):
            # Braces or brackets beyond one per record hint at nested values (or at text holding them).
            if text.count("{") == len(numbered) and "[" not in text:
                return [(n, v) for (n, _), v in zip(numbered, values, strict=True)]
            return [
                (n, _EXACT.decode(line) if _nested(v) else v)
                for (n, line), v in zip(numbered, values, strict=True)
            ]
    except (ValueError, RecursionError):
        pass  # find the culprit line by line, for the message
    records: list[tuple[int | None, Any]] = []
    for number, line in numbered:
        try:
            records.append((number, _EXACT.decode(line)))
        except RecursionError:
            raise _TooDeep(number) from None
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
        data = _FAST.decode(text)
        if isinstance(data, list) and any(_nested(r) for r in data):
            data = _EXACT.decode(text)
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
