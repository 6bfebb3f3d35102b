"""Quoting for each language an export writes: no column name or value can end its string and start a rule."""

from __future__ import annotations

import math
from decimal import Decimal

# Characters a YAML reader may fold, drop or refuse inside a double-quoted scalar, or that act on a terminal.
_YAML_ESCAPED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _yaml_char(ch: str) -> str:
    if ch in _YAML_ESCAPED:
        return _YAML_ESCAPED[ch]
    code = ord(ch)
    printable = ch.isprintable() and code not in (0x85, 0xFEFF) and not 0x2028 <= code <= 0x202E
    printable = printable and not 0x2066 <= code <= 0x2069 and not 0xD800 <= code <= 0xDFFF
    if printable:
        return ch
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def yaml_str(text: str) -> str:
    """A YAML double-quoted scalar holding exactly `text` (escapes for quotes, backslashes and controls)."""
    return '"' + "".join(_yaml_char(ch) for ch in text) + '"'


def sql_ident(name: str) -> str:
    """An ANSI SQL quoted identifier (DuckDB, Postgres, Snowflake): `"` doubled."""
    return '"' + name.replace('"', '""') + '"'


def sql_str(text: str) -> str:
    """An ANSI SQL string literal: `'` doubled; backslashes are plain characters in DuckDB and Postgres."""
    return "'" + text.replace("'", "''") + "'"


def spark_ident(name: str) -> str:
    """A Spark SQL identifier (Glue's CustomSql and where clauses): backticks, a backtick doubled."""
    return "`" + name.replace("`", "``") + "`"


def spark_str(text: str) -> str:
    """A Spark SQL string literal: Spark reads backslash escapes in literals, so both `\\` and `'` are escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def dqdl_str(text: str) -> str:
    """A DQDL quoted string: the grammar's only escapes are `\\"` and `\\\\`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def number(value: float) -> str:
    """A plain decimal numeral (no exponent: DQDL's grammar has none), e.g. 1e-05 → 0.00001."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".") or "0"
    return "0" if text == "-0" else text
