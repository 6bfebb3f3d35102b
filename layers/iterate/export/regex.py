"""Regexes for exported rules: written once in Python's `re` flavour, translated for RE2 (DuckDB) and Java (Glue)."""

from __future__ import annotations

import re

from iterate.profile.shapes import PY_LETTER

# A number as pandas' to_numeric and DuckDB's TRY_CAST both read it (no thousands separators, no units).
INTEGER = r"^[+-]?\d+$"
DECIMAL = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"
# No space, tab or newline at either end.
TRIMMED = r"^\S(?:[\s\S]*\S)?$"


def _tokens(regex: str) -> list[str]:
    """The regex cut into escapes (`\\d`), the letter class and single characters."""
    out: list[str] = []
    i = 0
    while i < len(regex):
        if regex.startswith(PY_LETTER, i):
            out.append(PY_LETTER)
            i += len(PY_LETTER)
        elif regex.startswith("\\u", i) and re.fullmatch(r"[0-9A-Fa-f]{4}", regex[i + 2 : i + 6]):
            out.append(regex[i : i + 6])
            i += 6
        elif regex[i] == "\\" and i + 1 < len(regex):
            out.append(regex[i : i + 2])
            i += 2
        else:
            out.append(regex[i])
            i += 1
    return out


def flavour(regex: str, target: str) -> str:
    """`regex` (Python flavour) for `target`: "python" (end anchored with \\Z, so a trailing newline does not
    slip past `$`), "re2" (DuckDB) or "java" (Glue / Spark): Unicode classes spelled \\p{L} and \\p{Nd}, end \\z."""
    tokens = _tokens(regex)
    # `$` is only ever used as the final anchor in the regexes built here and by the detectors.
    if tokens and tokens[-1] == "$":
        tokens[-1] = r"\Z" if target == "python" else r"\z"
    if target == "python":
        return "".join(tokens)
    table = {PY_LETTER: r"\p{L}", r"\d": r"\p{Nd}"}
    out = []
    for t in tokens:
        if target == "re2" and len(t) == 6 and t.startswith("\\u"):
            t = "\\x{" + t[2:] + "}"  # RE2 has no \uXXXX
        out.append(table.get(t, t))
    return "".join(out)


def is_python_regex(regex: str) -> bool:
    try:
        re.compile(regex)
    except re.error:
        return False
    return True
