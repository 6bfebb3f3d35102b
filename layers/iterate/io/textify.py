"""Typed columns (Parquet, Arrow) to text without losing information: ints bare, floats keep '.0', ISO dates."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def column_to_text(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One column as a string array; nulls become "" (a blank, as a CSV would have it)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    text = _to_text(values)
    return pc.fill_null(text, "") if text.null_count else text


def _to_text(values: pa.Array) -> pa.Array:
    t = values.type
    if pa.types.is_dictionary(t):
        return _to_text(values.dictionary_decode())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pc.cast(values, pa.string())
    if pa.types.is_null(t):
        return pa.array([""] * len(values), pa.string())
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_date(t):
        return pc.cast(values, pa.string())
    if pa.types.is_floating(t):
        return _floats(values)
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        text = pc.cast(values, pa.string())
        # Arrow pads fractions to the unit ("10:00:00.250000"); trailing zeros carry nothing, so drop them.
        text = pc.replace_substring_regex(text, pattern=r"(\.\d*[1-9])0+(Z?)$", replacement=r"\1\2")
        text = pc.replace_substring_regex(text, pattern=r"\.0+(Z?)$", replacement=r"\1")
        return pc.replace_substring(text, " ", "T") if pa.types.is_timestamp(t) else text
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.array([_bytes_text(v) for v in values.to_pylist()], pa.string())
    # Lists, structs, maps, durations, ...: JSON text keeps the whole value readable.
    return pa.array([None if v is None else _json_text(v) for v in values.to_pylist()], pa.string())


def _floats(values: pa.Array) -> pa.Array:
    text = pc.cast(values, pa.string())
    # Arrow prints 6.0 as "6"; keep the ".0" so a float column still reads as one, like pandas writes it.
    filled = pc.fill_null(values, 0.5)
    integral = pc.and_(pc.is_finite(filled), pc.equal(filled, pc.floor(filled)))
    plain = pc.invert(pc.match_substring(pc.fill_null(text, ""), "e"))
    needs_dot = pc.and_(integral, plain)
    return pc.if_else(needs_dot, pc.binary_join_element_wise(text, ".0", ""), text)


def _bytes_text(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
