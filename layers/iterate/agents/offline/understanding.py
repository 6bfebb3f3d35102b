"""Offline understanding agent: what the data shows about each column (its kind of values, range, spread,
gaps), never a meaning guessed from a column's name, which the profile cannot check."""

from __future__ import annotations

import re

from iterate.contracts import ColumnProfile, DatasetProfile, DatasetSummary, DatasetUnderstanding
from iterate.contracts.understanding import ColumnSummary
from iterate.keys import dependency_sentence, reads_as_rule
from iterate.wording import fmt_num, fmt_share

# What the profile found the values to be (from the values themselves, not the name).
KIND = {
    "integer": "Whole numbers",
    "decimal": "Decimal numbers",
    "boolean": "Yes/no values",
    "date": "Dates",
    "datetime": "Timestamps",
    "categorical": "Labels",
    "text": "Free text",
    "identifier": "Identifiers",
    "email": "E-mail addresses",
    "phone": "Phone numbers",
    "postal_code": "Postal codes",
    "url": "Web addresses",
    "quantity": "Quantities with a unit",
    "currency": "Money amounts",
    "percent": "Percentages",
    "empty": "No values at all",
}
# Kinds whose values are listed as examples (numbers and dates get a range instead).
LISTED = {"categorical", "boolean", "identifier", "text", "email", "phone", "postal_code", "url"}


def words(name: str) -> list[str]:
    """snake_case, camelCase, kebab-case and spaces → lowercase words."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def describe_column(col: ColumnProfile, profile: DatasetProfile | None = None) -> str:
    """One sentence of what the column holds, every fact from its profile: the kind of values, their range or
    examples, how many distinct values and how many rows each, and how often it is missing (blank or a placeholder), as the report counts it."""
    rows = profile.rowCount if profile is not None else col.count + col.missing
    kind = KIND.get(col.semanticType, "Values")
    if col.semanticType == "empty" or col.count == 0:
        return f"No values at all: missing in every one of {fmt_num(rows)} rows."
    spread = _spread(col)
    parts = [spread[:1].upper() + spread[1:]] if col.distinct <= 1 else [kind + _detail(col), spread]
    gaps = col.missing + col.disguisedMissing
    if gaps:
        parts.append(f"missing in {fmt_share(gaps, rows)} of rows")
    return "; ".join(p for p in parts if p) + "."


def _detail(col: ColumnProfile) -> str:
    t = col.semanticType
    if col.numeric is not None and t not in LISTED:
        unit = f" {col.format}" if t in {"currency", "quantity"} and col.format else ""
        return (
            f" from {fmt_num(col.numeric.min)} to {fmt_num(col.numeric.max)}{unit} "
            f"(median {fmt_num(col.numeric.median)})"
        )
    if col.dates is not None:
        written = f", written {col.format}" if col.format else ""
        return f" from {col.dates.min[:30]} to {col.dates.max[:30]}{written}"
    if col.topValues and col.distinct > 1:
        shown = ", ".join(_short(v.value) for v in col.topValues[:3])
        return f" such as {shown}"
    return ""


def _short(value: str, limit: int = 30) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _spread(col: ColumnProfile) -> str:
    """How the filled values repeat: one per row, a few shared by many rows, or a single one."""
    filled, distinct = col.count, col.distinct
    if distinct <= 1:
        only = _short(col.topValues[0].value) if col.topValues else ""
        return f"always '{only}'" if only else "always the same value"
    if distinct == filled:
        return "a different value in every filled row"
    if distinct >= 0.95 * filled:
        return f"nearly a different value per row ({fmt_num(distinct)} distinct in {fmt_num(filled)})"
    per = round(filled / distinct)
    if per < 2:
        return f"most values in a single row ({fmt_num(distinct)} distinct in {fmt_num(filled)})"
    return f"{fmt_num(distinct)} distinct values, about {fmt_num(per)} rows each"


def observations(profile: DatasetProfile) -> list[str]:
    """Facts computed from the profile (every number here comes from code)."""
    out: list[str] = []
    rows = max(profile.rowCount, 1)
    gaps = sorted(
        ((c.missing + c.disguisedMissing) / rows, c.name)
        for c in profile.columns
        if c.missing + c.disguisedMissing
    )
    if gaps:
        _, name = gaps[-1]
        worst = next(c for c in profile.columns if c.name == name)
        out.append(
            f"{len(gaps)} of {profile.columnCount} columns have missing values; most in '{name}' "
            f"({fmt_share(worst.missing + worst.disguisedMissing, rows)})."
        )
    else:
        out.append("No column has missing values.")
    if profile.duplicates.exactRows:
        n = profile.duplicates.exactRows
        out.append(
            f"{fmt_num(n)} row{'s' if n != 1 else ''} repeat{'s' if n == 1 else ''} an earlier row exactly."
        )
    if profile.candidateKeys:
        out.append(
            "Each row is identified by " + " + ".join(f"'{c}'" for c in profile.candidateKeys[0]) + "."
        )
    out += dependency_observations(profile)
    kinds = sorted({c.semanticType for c in profile.columns})
    out.append("Column kinds: " + ", ".join(kinds) + ".")
    return out


def dependency_observations(profile: DatasetProfile, limit: int = 3) -> list[str]:
    """Dependencies in words: "determines" only where the determining column reads as a key; other ones
    (a price that goes with one product) are said as what the data shows, and only when they hold fully."""
    columns = {c.name: c for c in profile.columns}
    rules = [fd for fd in profile.functionalDependencies if reads_as_rule(fd, columns)]
    patterns = [
        fd
        for fd in profile.functionalDependencies
        if not reads_as_rule(fd, columns) and fd.violatingRows == 0
    ]
    chosen = (rules + patterns)[:limit]
    return [dependency_sentence(fd, columns, share=fmt_share(fd.confidence, 1.0)) for fd in chosen]


def dataset_description(profile: DatasetProfile) -> str:
    """What the table is, as far as its profile shows: its size and what identifies a row."""
    text = (
        f"The table '{profile.name}': {fmt_num(profile.rowCount)} row{'s' if profile.rowCount != 1 else ''} × "
        f"{profile.columnCount} column{'s' if profile.columnCount != 1 else ''}."
    )
    if not profile.candidateKeys:
        return text + " No column, nor pair of columns, tells every row apart."
    key = profile.candidateKeys[0]
    named = " + ".join(f"'{c}'" for c in key)
    column = next((c for c in profile.columns if len(key) == 1 and c.name == key[0]), None)
    repeats = profile.duplicates.exactRows
    if column is not None and column.distinct == profile.rowCount:
        return text + f" {named} is different in every row."
    if repeats:
        return text + (
            f" {named} tell{'s' if len(key) == 1 else ''} the rows apart, except "
            f"{fmt_num(repeats)} row{'s' if repeats != 1 else ''} that repeat an earlier row exactly."
        )
    return text + f" {named} tell{'s' if len(key) == 1 else ''} the rows apart."


class OfflineUnderstandingAgent:
    """UnderstandingAgent without an LLM: deterministic, instant, and says only what the data shows."""

    def understand(self, profile: DatasetProfile, *, instructions: str | None = None) -> DatasetUnderstanding:
        columns = [
            ColumnSummary(
                name=c.name,
                dataType=c.dataType,
                description=describe_column(c, profile),
                sampleValues=[v.value[:60] for v in c.topValues[:5]],
                semanticType=c.semanticType,
            )
            for c in profile.columns
        ]
        context = "Described from the data alone (no LLM): what each column holds, not what it means to the business."
        if instructions:
            context += " The owner asked: " + instructions.strip()[:500]
        return DatasetUnderstanding(
            summary=DatasetSummary(
                name=profile.name,
                description=dataset_description(profile),
                rowCount=profile.rowCount,
                columnCount=profile.columnCount,
                observations=observations(profile),
            ),
            columns=columns,
            suggested_context=context,
        )
