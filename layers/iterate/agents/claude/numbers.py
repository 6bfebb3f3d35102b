"""Numbers in LLM text are not trusted: count, percentage and row claims are kept only when code agrees."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_NOUNS = (
    r"rows?|records?|cells?|values?|entries|entry|lines?|duplicates?|items?|occurrences?|instances?|cases?|"
    r"customers?|orders?|transactions?|products?|people|users?|accounts?|times"
)
PERCENT = re.compile(rf"(?<![\w.,])({_NUM})\s*(?:%|percent\b|per cent\b)", re.IGNORECASE)
COUNT = re.compile(rf"(?<![\w.,])({_NUM})(\s+(?:[a-z-]+\s+)?)({_NOUNS})\b", re.IGNORECASE)
ROW_REF = re.compile(r"\b(rows?|lines?)\s+#?\d+(?:\s*(?:,|and|-|–|to)\s*#?\d+)*", re.IGNORECASE)


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def scrub(text: str, *, counts: Iterable[int] = (), share: float | None = None) -> str:
    """`text` with every count/percentage/row-number claim that code did not measure taken out.

    counts: figures code measured (affected rows, cells, row count); share: affected rows / all rows.
    """
    trusted = {float(c) for c in counts}
    pct = None if share is None else share * 100

    def percent(m: re.Match[str]) -> str:
        claimed = _value(m.group(1))
        if pct is not None and abs(claimed - pct) <= 0.05 * max(1.0, pct) + 0.05:
            return m.group(0)
        return "a share"

    def count(m: re.Match[str]) -> str:
        if _value(m.group(1)) in trusted:
            return m.group(0)
        return f"some{m.group(2)}{m.group(3)}"

    text = ROW_REF.sub(lambda m: m.group(1), text)
    text = PERCENT.sub(percent, text)
    text = COUNT.sub(count, text)
    return re.sub(r"\s{2,}", " ", text).strip()
