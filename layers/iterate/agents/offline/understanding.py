"""Offline understanding agent: business-ish descriptions from semantic types, patterns and column names."""

from __future__ import annotations

import re

from iterate.contracts import ColumnProfile, DatasetProfile, DatasetSummary, DatasetUnderstanding
from iterate.contracts.understanding import ColumnSummary

# (name pattern, description). Matched on the column name split into lowercase words; first match wins.
NAME_RULES: tuple[tuple[str, str], ...] = (
    (r"zip|zipcode|postcode|postal", "Postal code of the location"),
    (r"e-?mail", "Contact email address"),
    (r"phone|tel|mobile|telephone|fax", "Contact phone number"),
    (r"(first|given) ?name|fname", "First name of the {entity}"),
    (r"(last|family) ?name|surname|lname", "Last name of the {entity}"),
    (r"city|town", "City of the address"),
    (r"state|province|region", "State or region of the address"),
    (r"country", "Country of the address"),
    (r"address|street", "Street address"),
    (r"lat|latitude", "Latitude of the location"),
    (r"lon|lng|longitude", "Longitude of the location"),
    (r"price|cost|amount|total|revenue|salary|fee|balance|payment|spend|value", "Monetary amount"),
    (r"qty|quantity|units|count", "Number of units"),
    (r"age", "Age in years"),
    (r"gender|sex", "Gender as recorded"),
    (r"status", "Current status of the {entity}"),
    (r"category|type|kind|class|segment|group", "Category the {entity} belongs to"),
    (r"description|comment|notes?|remarks?", "Free-text description or notes"),
    (r"url|link|website", "Web address"),
    (r"created|updated|modified|timestamp|time", "When the {entity} was recorded or changed"),
    (r"date|day|dob|birth", "Calendar date of the event"),
    (r"name|title", "Name of the {entity}"),
    (r"id|key|code|number|no|num|sku|ref", "Identifier of each {entity}"),
)

TYPE_PHRASES = {
    "integer": "whole numbers",
    "decimal": "decimal numbers",
    "boolean": "yes/no flag",
    "date": "dates",
    "datetime": "timestamps",
    "categorical": "a small set of categories",
    "text": "free text",
    "identifier": "unique identifiers",
    "email": "email addresses",
    "phone": "phone numbers",
    "postal_code": "postal codes",
    "url": "web addresses",
    "quantity": "quantities with a unit",
    "currency": "money amounts",
    "percent": "percentages",
    "empty": "no values at all",
}


def words(name: str) -> list[str]:
    """snake_case, camelCase, kebab-case and spaces → lowercase words."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def entity_of(profile: DatasetProfile) -> str:
    """The thing one row describes, guessed from the file name ("orders.csv" → "order")."""
    stem = re.sub(r"\.[A-Za-z0-9]+$", "", profile.name.rsplit("/", 1)[-1])
    ws = words(stem)
    if not ws:
        return "record"
    w = ws[-1]
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        return w[:-1]
    return w


def detail(col: ColumnProfile) -> str:
    """A format hint from the profile: dominant pattern, date format, unit or currency."""
    t = col.semanticType
    if t == "postal_code" and col.patterns and re.fullmatch(r"9{5}(-9{4})?", col.patterns[0].value):
        return "5-digit US ZIP"
    if t in {"date", "datetime"} and col.format:
        return f"format {col.format}"
    if t in {"currency", "quantity"} and col.format:
        return f"in {col.format}"
    if t == "boolean" and col.topValues:
        return "/".join(v.value for v in col.topValues[:2])
    if t == "categorical" and col.topValues:
        return "e.g. " + ", ".join(v.value[:30] for v in col.topValues[:3])
    if col.numeric is not None:
        return f"from {_fmt(col.numeric.min)} to {_fmt(col.numeric.max)}"
    return ""


def describe_column(col: ColumnProfile, entity: str) -> str:
    ws = words(col.name)
    joined = " ".join(ws)
    base = None
    for pattern, text in NAME_RULES:
        if any(re.fullmatch(pattern, w) for w in ws) or re.fullmatch(pattern, joined):
            base = text.format(entity=entity)
            break
    phrase = TYPE_PHRASES.get(col.semanticType, "values")
    if base is None:
        base = f"{col.name.strip() or 'Unnamed column'}: {phrase}"
    elif col.semanticType not in {"text", "categorical", "identifier"} and not any(
        w.rstrip("s") in base.lower() for w in phrase.split() if len(w) > 3
    ):
        base = f"{base} ({phrase})"
    extra = detail(col)
    return f"{base}; {extra}" if extra else base


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
        share, name = gaps[-1]
        out.append(
            f"{len(gaps)} of {profile.columnCount} columns have missing values; most in '{name}' ({share:.1%})."
        )
    else:
        out.append("No column has missing values.")
    if profile.duplicates.exactRows:
        out.append(f"{profile.duplicates.exactRows} rows repeat an earlier row exactly.")
    if profile.candidateKeys:
        out.append(
            "Each row is identified by " + " + ".join(f"'{c}'" for c in profile.candidateKeys[0]) + "."
        )
    for fd in profile.functionalDependencies[:3]:
        out.append(
            f"'{fd.rhs}' is determined by "
            + " + ".join(f"'{c}'" for c in fd.lhs)
            + f" in {fd.confidence:.1%} of rows."
        )
    kinds = sorted({c.semanticType for c in profile.columns})
    out.append("Column kinds: " + ", ".join(kinds) + ".")
    return out


class OfflineUnderstandingAgent:
    """UnderstandingAgent without an LLM: deterministic, instant, and honest about what it can infer."""

    def understand(self, profile: DatasetProfile, *, instructions: str | None = None) -> DatasetUnderstanding:
        entity = entity_of(profile)
        columns = [
            ColumnSummary(
                name=c.name,
                dataType=c.dataType,
                description=describe_column(c, entity),
                sampleValues=[v.value[:60] for v in c.topValues[:5]],
                semanticType=c.semanticType,
            )
            for c in profile.columns
        ]
        description = f"A table of {profile.rowCount} {entity} records with {profile.columnCount} columns" + (
            f", such as {', '.join(c.name for c in profile.columns[:4])}." if profile.columns else "."
        )
        context = f"Each row is one {entity}."
        if instructions:
            context += " The owner asked: " + instructions.strip()[:500]
        return DatasetUnderstanding(
            summary=DatasetSummary(
                name=profile.name,
                description=description,
                rowCount=profile.rowCount,
                columnCount=profile.columnCount,
                observations=observations(profile),
            ),
            columns=columns,
            suggested_context=context,
        )


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"
