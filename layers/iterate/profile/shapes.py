"""Value shapes: a value's character classes (letters → a/A, digits → 9), computed on a column's dictionary."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

# Python's `re` has no \p{..}: letters are "word characters that are neither digits nor underscore".
PY_LETTER = r"[^\W\d_]"
_LETTERS = {"python": PY_LETTER, "re2-ascii": "[A-Za-z]", "re2": r"\p{L}"}
_DIGITS = {"python": r"\d", "re2-ascii": "[0-9]", "re2": r"\p{Nd}"}

# Missing-value tokens recognised anywhere (compared after strip + casefold).
MISSING_TOKENS = frozenset(
    {
        "",
        "n/a",
        "na",
        "nan",
        "null",
        "none",
        "nil",
        "-",
        "--",
        "?",
        "empty",
        "missing",
        "#n/a",
        "n.a.",
        "undefined",
    }
)


def shape_of(value: str, *, collapse: bool = True, keep_case: bool = False) -> str:
    """The shape of one value, e.g. `12.0 oz` → `9.9 a`, `al_pn-3b` → `a_a-9a` (runs collapsed)."""
    return str(shapes(pa.array([value], pa.string()), collapse=collapse, keep_case=keep_case)[0].as_py())


def shapes(values: pa.Array, *, collapse: bool = True, keep_case: bool = False) -> pa.Array:
    """Vectorised shapes of a string array (usually a column's dictionary of distinct values).

    collapse: a run of letters or digits becomes one symbol (`35233` → `9`); otherwise one symbol per character
    (`35233` → `99999`), which keeps lengths. keep_case: upper-case letters → `A`, lower-case → `a`.
    Whitespace runs become one space; other characters (punctuation, symbols) are kept as they are.
    """
    plus = "+" if collapse else ""
    s = values
    if keep_case:
        s = pc.replace_substring_regex(s, pattern=rf"\p{{Lu}}{plus}", replacement="A")
        s = pc.replace_substring_regex(
            s, pattern=rf"[\p{{Ll}}\p{{Lt}}\p{{Lm}}\p{{Lo}}]{plus}", replacement="a"
        )
    else:
        s = pc.replace_substring_regex(s, pattern=rf"\p{{L}}{plus}", replacement="a")
    s = pc.replace_substring_regex(s, pattern=rf"\p{{Nd}}{plus}", replacement="9")
    s = pc.replace_substring_regex(s, pattern=r"\s+", replacement=" ")
    return s


def shape_regex(
    shapes: Iterable[str], *, words: bool, engine: str = "python", extra: Iterable[str] = ()
) -> str:
    r"""A regex a value fully matches when its shape is one of `shapes` (or it matches one of `extra`).

    The shapes are those of `shapes()` (collapsed, case-free: `a` letters, `9` digits, one space for any
    whitespace, other characters as they are). words=False: `a` is one run of letters (the profile's shapes, so
    `a-9` matches `ab-12`, not `ab cd-12`); words=True: `a` is a run of words, for the coarse shapes the
    format detector merges `a a a` into. engine: "python" (Unicode classes of `re`), "re2" (pyarrow, DuckDB)
    or "re2-ascii" (the same for values known to be ASCII: RE2 compiles \p{L} into an automaton that costs up
    to 25 ms per call, and on ASCII text it means [A-Za-z]); `extra` regexes must mean the same in all.
    """
    letters, digits = _LETTERS[engine], _DIGITS[engine]
    letter_run = rf"{letters}+(?:\s+{letters}+)*" if words else rf"{letters}+"
    parts = []
    for shape in shapes:
        out = []
        for ch in shape:
            if ch == "a":
                out.append(letter_run)
            elif ch == "9":
                out.append(rf"{digits}+")
            elif ch == " ":
                out.append(r"\s+")
            else:
                out.append(re.escape(ch))
        parts.append("".join(out))
    return "^(?:" + "|".join([*parts, *extra]) + ")$"


def digit_masked(values: pa.Array, *, ascii_only: bool = False) -> pa.Array:
    r"""Digit runs replaced by `#`, everything else kept: `619 paxienxs` → `# paxienxs` (for typo checks on units).

    ascii_only: the values are known to be ASCII, where [0-9] means \p{Nd} and costs RE2 far less to compile.
    """
    return pc.replace_substring_regex(
        values, pattern=r"[0-9]+" if ascii_only else r"\p{Nd}+", replacement="#"
    )


def missing_mask(values: pa.Array, tokens: frozenset[str] = MISSING_TOKENS) -> pa.Array:
    """True where a value is blank or a missing-value token (after strip and casefold)."""
    folded = pc.utf8_lower(pc.utf8_trim_whitespace(values))
    return pc.is_in(folded, value_set=pa.array(sorted(tokens), pa.string()))
