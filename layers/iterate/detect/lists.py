"""Columns of lists: values that name several items of one vocabulary, separated by a delimiter ('IT,FR',
'fr,en', '1, 5, 8'). Their items are the column's vocabulary, not the whole values: 'IT,BR' is another
co-production than 'IT,FR', not a slip for it, and an empty value is an empty list."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts

DELIMITERS = (",", ";", "|")
MIN_LIST_SHARE = 0.05  # rows holding two items or more, among the filled ones
MIN_LIST_VALUES = 3  # distinct values holding two items or more
MIN_KNOWN_ITEMS = 0.8  # share of their items (by rows) the column also writes alone or in other lists
MAX_ITEM_CHARS = 40  # items are names or codes, not clauses of a sentence
# A number in any convention (1,234.5; 3,5; 1.234,5): a delimiter inside it is not one between items.
_NUMBER = re.compile(r"^[-+]?[\d.,]+$")


def split_items(value: str, delimiter: str) -> list[str]:
    """The items of a list value, trimmed, empty ones left out."""
    return [t.strip() for t in value.split(delimiter) if t.strip()]


def list_delimiter(f: ColumnFacts) -> str | None:
    """The delimiter of a column of lists, or None when the column holds single values (worked out once per
    column: ColumnFacts.list_delimiter)."""
    return f.list_delimiter


def find_delimiter(f: ColumnFacts) -> str | None:
    """The delimiter of a column of lists, or None when the column holds single values.

    A column of lists writes several items in a good share of its rows, and those items are the column's own
    vocabulary: they stand alone as values, or recur in other lists. Free text with commas fails (its
    clauses do not recur), and so do numbers with thousands separators or decimal commas.
    """
    if not f.pairwise_ok:
        return None  # a column of that many distinct values is free text or identifiers
    ids = np.flatnonzero(f.present & (f.counts > 0))
    if ids.size < MIN_LIST_VALUES or f.n_present == 0:
        return None
    texts: list[str] | None = None
    counts = f.counts[ids].tolist()
    for delimiter in DELIMITERS:
        holding = pc.fill_null(pc.match_substring(f.column.dictionary, delimiter), False).to_numpy(
            zero_copy_only=False
        )
        if f.counts[np.asarray(holding, dtype=bool) & f.present].sum() < MIN_LIST_SHARE * f.n_present:
            continue  # a cheap screen: too few rows hold the delimiter at all
        if texts is None:
            texts = f.column.texts(ids)
        multi = [
            (t, int(c))
            for t, c in zip(texts, counts, strict=True)
            if delimiter in t and not _NUMBER.match(t.strip()) and len(split_items(t, delimiter)) >= 2
        ]
        if len(multi) < MIN_LIST_VALUES or sum(c for _, c in multi) < MIN_LIST_SHARE * f.n_present:
            continue
        singles = {t.strip() for t in texts if delimiter not in t}
        holders: Counter[str] = Counter()  # item -> distinct list values holding it
        for t, _ in multi:
            for item in set(split_items(t, delimiter)):
                holders[item] += 1
        items = [(item, c) for t, c in multi for item in split_items(t, delimiter)]
        if any(len(item) > MAX_ITEM_CHARS for item, _ in items):
            continue  # clauses of a sentence, not items
        total = sum(c for _, c in items)
        known = sum(c for item, c in items if item in singles or holders[item] >= 2)
        if known >= MIN_KNOWN_ITEMS * total:
            return delimiter
    return None
