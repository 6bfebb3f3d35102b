"""Which dependencies between columns may be read as a key setting a value ("determines"), and which are only
patterns of this data (a price that happens to go with one product): contracts only, no data."""

from __future__ import annotations

import re

from iterate.contracts import ColumnProfile, FunctionalDependency

# Values that name or code a thing (an entity's key), by what the profile found in them.
KEY_TYPES = frozenset({"identifier", "email", "phone", "postal_code"})
# Measures, times, flags and prose: a value of these is never a key, whatever it happens to go with.
NEVER_KEY_TYPES = frozenset(
    {"decimal", "currency", "quantity", "percent", "date", "datetime", "boolean", "text", "empty", "url"}
)
# A code-like name on a column of repeated labels or whole numbers ("brewery_id", "product code").
_CODE_NAME = re.compile(r"(^|[_\s-])(id|key|code|no|number|num|ref|sku|uuid)$|[a-z]Id$|ID$", re.I)


def key_like(column: ColumnProfile) -> bool:
    """Whether a column's values read as keys of an entity: identifiers, e-mails, phones and postal codes as
    the profile recognised them, or labels and whole numbers under a code-like name; never a measure,
    a date, a flag or free text."""
    if column.semanticType in NEVER_KEY_TYPES or column.distinct < 2:
        return False
    if column.semanticType in KEY_TYPES:
        return True
    return column.semanticType in {"categorical", "integer"} and bool(_CODE_NAME.search(column.name.strip()))


def reads_as_rule(fd: FunctionalDependency, columns: dict[str, ColumnProfile]) -> bool:
    """Whether "<lhs> determines <rhs>" may be said: every determining column reads as a key, and it has
    more distinct values than the column it determines (many records of one entity share its attributes)."""
    lhs = [columns.get(name) for name in fd.lhs]
    rhs = columns.get(fd.rhs)
    if rhs is None or any(c is None or not key_like(c) for c in lhs):
        return False
    return all(c is not None and c.distinct >= rhs.distinct for c in lhs)


def dependency_phrase(fd: FunctionalDependency, columns: dict[str, ColumnProfile]) -> str:
    """The dependency in words: "'customer_id' determines 'email'" for a key; otherwise only what the data
    shows: "each 'unit_price' value goes with one 'product'"."""
    left = " + ".join(f"'{c}'" for c in fd.lhs)
    if reads_as_rule(fd, columns):
        return f"{left} determines '{fd.rhs}'"
    return f"each {left} value goes with one '{fd.rhs}'"


def dependency_sentence(fd: FunctionalDependency, columns: dict[str, ColumnProfile], *, share: str) -> str:
    """dependency_phrase as a sentence, with the share of rows that agree (`share` as the caller writes it)."""
    phrase = dependency_phrase(fd, columns)
    if reads_as_rule(fd, columns):
        return f"{phrase[:1].upper()}{phrase[1:]} ({share} of rows agree)."
    return f"{phrase[:1].upper()}{phrase[1:]} in this data ({share} of rows)."
