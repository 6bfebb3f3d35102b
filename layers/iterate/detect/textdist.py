"""Bounded edit distances and a deletion index for finding near-identical spellings fast."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable

_DIGITS = re.compile(r"\d+")


def bounded_distance(a: str, b: str, k: int) -> int | None:
    """Optimal-string-alignment (Damerau) distance between a and b if it is at most k, else None."""
    if a == b:
        return 0
    la, lb = len(a), len(b)
    if abs(la - lb) > k:
        return None
    if la > lb:
        a, b, la, lb = b, a, lb, la
    big = k + 1
    prev2: list[int] = []
    prev = list(range(lb + 1))
    for i in range(1, la + 1):
        cur = [big] * (lb + 1)
        cur[0] = i
        lo, hi = max(1, i - k), min(lb, i + k)
        row_min = cur[0] if lo == 1 else big
        ai = a[i - 1]
        for j in range(lo, hi + 1):
            cost = 0 if ai == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ai == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
            if v < row_min:
                row_min = v
        if row_min > k:
            return None
        prev2, prev = prev, cur
    d = prev[lb]
    return d if d <= k else None


def deletes1(s: str) -> set[str]:
    """The string itself and every string one deletion away: two spellings one edit apart share one of these."""
    out = {s}
    for i in range(len(s)):
        out.add(s[:i] + s[i + 1 :])
    return out


class DeletionIndex:
    """Finds indexed strings within one edit (insert, delete, substitute, transpose) of a query."""

    def __init__(self, items: Iterable[tuple[int, str]]) -> None:
        self._by_key: dict[str, list[int]] = defaultdict(list)
        self._text: dict[int, str] = {}
        for ident, text in items:
            self._text[ident] = text
            for d in deletes1(text):
                self._by_key[d].append(ident)

    def near(self, query: str, accept: Callable[[int], bool] | None = None) -> list[int]:
        """Indexed ids within one edit of `query`, in ascending order; `accept` filters candidates cheaply
        before the distance.

        In order, not as a set: callers keep the first of equally good candidates, and a set's order follows
        the order its ids were added in, which follows the iteration of a set of strings (`deletes1`), which
        changes with Python's per-process string hashing. The same file then gave different findings from
        one run to the next (a 'MARKT' read as a slip of 'MART' in one run, of 'MARKET' in the next)."""
        found: set[int] = set()
        for d in deletes1(query):
            ids = self._by_key.get(d)
            if ids:
                found.update(ids)
        if accept is not None:
            found = {i for i in found if accept(i)}
        return sorted(i for i in found if bounded_distance(query, self._text[i], 1) is not None)


def qgrams(s: str, q: int = 3) -> set[str]:
    padded = f"\x02{s}\x03"
    return {padded[i : i + q] for i in range(max(1, len(padded) - q + 1))}


def _token_budget(length: int) -> int:
    return 2 if length >= 8 else 1


def digits_of(text: str) -> tuple[str, ...]:
    return tuple(_DIGITS.findall(text))


_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
_POS = {c: (r, i + 0.5 * r) for r, row in enumerate(_ROWS) for i, c in enumerate(row)}
# Characters read or typed for one another: 0/O, 1/I/L, 5/S, 8/B, 2/Z, 6/G.
_CONFUSABLE = {frozenset(p) for p in ("0o", "1i", "1l", "il", "5s", "8b", "2z", "6g")}


def _near_keys(a: str, b: str) -> bool:
    """Whether two characters sit next to each other on a QWERTY keyboard, or are read for one another."""
    a, b = a.casefold(), b.casefold()
    if frozenset((a, b)) in _CONFUSABLE:
        return True
    pa, pb = _POS.get(a), _POS.get(b)
    return pa is not None and pb is not None and abs(pa[0] - pb[0]) <= 1 and abs(pa[1] - pb[1]) <= 1.0


def _is_code(word: str) -> bool:
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


def _code_slip(a: str, b: str) -> bool:
    """In a code of letters and digits (737-7BX), one character put for another is another code unless the
    keys are neighbours or the characters look alike; a dropped, doubled or swapped character is a slip."""
    if len(a) != len(b):
        return True
    diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    if len(diff) == 2 and diff[0] == diff[1][::-1]:
        return True  # two neighbours swapped
    return all(_near_keys(x, y) for x, y in diff)


def plausible_typo(variant: str, reference: str) -> bool:
    """Whether `variant` reads as a mistyped `reference`: every changed word is changed only a little.

    Two different names that share most words ('Abita Brewing Company' / 'Uinta Brewing Company') fail: the
    word that differs is a different word, not a slip of the keyboard.
    """
    if " ".join(variant.casefold().split()) == " ".join(reference.casefold().split()):
        return True
    if _DIGITS.findall(variant) != _DIGITS.findall(reference):
        return False  # 37 vs 38 patients, 400 vs 401 Main St: different values, not slips
    va, rb = variant.split(), reference.split()
    if len(va) == len(rb):
        changed = 0
        for a, b in zip(va, rb, strict=True):
            if a == b:
                continue
            changed += 1
            if len(va) > 1 and max(len(a), len(b)) < 3:
                return False  # N vs S Wells St: a different short word, not a typo
            if bounded_distance(a, b, _token_budget(max(len(a), len(b)))) is None:
                return False
            if _is_code(a) and _is_code(b) and not _code_slip(a, b):
                return False
        return changed > 0
    # Words merged or split (a space lost or typed as a letter): compare the whole strings.
    if abs(len(va) - len(rb)) <= 2:
        k = 1 if max(len(variant), len(reference)) < 9 else 2
        return bounded_distance(variant, reference, k) is not None
    return False
