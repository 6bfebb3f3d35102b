"""How numbers are written for people: counts, shares, and nouns in the number their count takes.

One place for the report and the offline agents, so the same count is written the same way everywhere.
"""

from __future__ import annotations

import math


def fmt_num(x: float) -> str:
    """A compact, readable number: thousands separators, at most 4 significant decimals."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.1f}"


def fmt_share(part: float, whole: float) -> str:
    """`part` as a share of `whole`, the one way every share on the page is written.

    One decimal; never "0.0%" for something that happened nor "100.0%" for less than all (a single row in
    a million is "<0.1%", all but one is ">99.9%"); "n/a" when there is nothing to divide by.
    """
    if not whole or whole < 0:
        return "n/a"
    share = part / whole
    if part <= 0:
        return "0%"
    if part >= whole:
        return "100%"
    if share < 0.001:
        return "<0.1%"
    if share > 0.999:
        return ">99.9%"
    return f"{share:.1%}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and the word in the number it takes: "1 row", "2 rows", "1,503 rows"."""
    return f"{fmt_num(n)} {word if n == 1 else (many or word + 's')}"


def agree(n: int, one: str, many: str) -> str:
    """The verb (or phrase) in the number of its subject's count: agree(1, "is", "are") -> "is"."""
    return one if n == 1 else many
