"""Evidence statistics and investigation outputs as a reader sees them: labelled in words, numbers formatted."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from iterate.report.charts import fmt_num, fmt_share

# What the detectors' statistics and the investigations' outputs call their fields, in words.
LABELS = {
    "affected_rows": "Rows affected",
    "affected_cells": "Cells affected",
    "share": "Share of rows",
    "column": "Column",
    "columns": "Columns",
    "other": "Other column",
    "rule": "Rule",
    "bad_values": "Values found",
    "values_listed": "Values listed",
    "values_holding": "Listed values found in the data",
    "rows_listed": "Rows listed",
    "rows_holding": "Listed rows confirmed",
    "rows": "Rows (0-based data rows)",
    "by_value": "Rows per value",
    "groups": "Groups of repeated rows",
    "lhs": "Determining column(s)",
    "determinants": "Determining column(s)",
    "rhs": "Determined column",
    "conflicting_groups": "Groups with conflicting values",
    "pasted": "Values pasted across entities (groups)",
    "min_group": "Smallest group judged",
    "reach": "Rows compared on each side",
    "min_agree": "Neighbours that must agree",
    "chance": "Largest chance of that agreement",
    "canonical": "Suggested replacements",
    "slips": "Word as written, the column's usual word, kind of slip",
    "established": "Values holding a word before it is the column's own",
    "rare": "Values holding a word at most, for it to be rare",
    "markers": "Written for missing",
    "missing_markers": "Treated as missing",
    "convention": "The column's own way to write missing",
    "units": "Units seen",
    "main_format": "Main format",
    "other_formats": "Other formats",
    "low": "Usual range from",
    "high": "Usual range to",
    "median": "Median",
    "nonnegative": "Never negative",
    "edge": "Edge",
    "scale": "Scale",
    "expected_regex": "Expected pattern (regular expression)",
    "dominant_shapes": "Usual shapes",
    "excluded_values": "Values left out (explained otherwise)",
    "numeric_share": "Share of rows that read as numbers",
    "partners": "Missing together with",
    "homes": "Column where these values belong",
    "context": "Judged within groups of",
    "min_missing": "Fewest missing columns per row",
    "flagged": "Cells listed in flags.csv as wrong",
    "investigation_affected_rows": "Rows the proof recounts",
    "listed_rows": "Rows holding a listed value",
    "detector_affected_rows": "Rows the detector found",
    "recount": "What the proof recounted",
    "detector": "Detector",
    "statistic": "Statistic",
    "statisticRange": "Statistic (lowest to highest)",
    "scoreRange": "Probability the value is wrong (lowest to highest)",
    "alsoSeenBy": "Also seen by",
}
# Fields whose items may be several columns read together (a composite determinant).
TOGETHER = {"determinants", "lhs"}
# Fields that are internal bookkeeping or repeat what the issue already says.
HIDDEN = {"title", "examples"}
# What a rule code means.
RULES = {
    "bad_values": "the values the detector listed",
    "listed": "the values the detector listed",
    "number": "reads as a number",
    "consensus": "agrees with its group's usual value",
    "neighbours": "holds the value most of the rows around it hold",
}
_SHARE_KEY = re.compile(r"(^|_)(share|ratio|rate|confidence|conformity)$|Share$|Ratio$", re.I)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
LIST_ITEMS = 12


def label(key: str) -> str:
    """A field's name in words: known ones from LABELS, any other by its parts ("conflicting_groups" →
    "Conflicting groups", "scoreRange" → "Score range")."""
    if key in LABELS:
        return LABELS[key]
    words = _CAMEL.sub(r"\1 \2", key).replace("_", " ").replace("-", " ").strip().lower()
    return words[:1].upper() + words[1:] if words else key


def number(key: str, value: float) -> str:
    """A number as the page writes it: shares as percentages, the rest with at most 4 significant decimals."""
    if _SHARE_KEY.search(key) and 0.0 <= value <= 1.0 and not isinstance(value, bool):
        return fmt_share(value, 1.0)
    return fmt_num(value)


def value_text(key: str, value: Any) -> str:
    """One field's value in words (not yet escaped: the caller escapes and clips)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return number(key, value)
    if isinstance(value, str):
        if key == "rule":
            return RULES.get(value, value.replace("_", " "))
        return value
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = "; ".join(f"{k}: {value_text(key, v)}" for k, v in items[:LIST_ITEMS])
        return shown + (f"; … (+{len(items) - LIST_ITEMS} more)" if len(items) > LIST_ITEMS else "")
    if isinstance(value, list | tuple):
        if key.endswith("Range") and len(value) == 2 and all(isinstance(v, int | float) for v in value):
            lo, hi = (number(key, v) for v in value)
            return lo if lo == hi else f"{lo} to {hi}"
        # Among determining columns, a list is several columns read together (a team's stadium and name).
        together = key in TOGETHER
        shown = ", ".join(
            " + ".join(str(x) for x in v) if together and isinstance(v, list | tuple) else value_text(key, v)
            for v in value[:LIST_ITEMS]
        )
        return shown + (f", … (+{len(value) - LIST_ITEMS} more)" if len(value) > LIST_ITEMS else "")
    return str(value)


def fact_rows(fields: Mapping[str, Any], *, limit: int, scalars_only: bool = False) -> list[tuple[str, str]]:
    """(label, value) pairs for a table: nested evidence flattened one level, internal fields left out."""
    out: list[tuple[str, str]] = []
    for key, value in fields.items():
        if key in HIDDEN:
            continue
        if key == "evidence" and isinstance(value, Mapping):
            out += fact_rows(value, limit=limit)
            continue
        if scalars_only and not (isinstance(value, str | int | float | bool) or value is None):
            continue
        out.append((label(key), value_text(key, value)))
    return out[:limit]


def rounded(value: Any, digits: int = 4) -> Any:
    """A JSON value with every float kept to `digits` significant digits (0.978709248170326 → 0.9787)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if abs(value) < 1 else round(value, digits)
    if isinstance(value, Mapping):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value


_ONE_MANY = re.compile(r"(?<![\d.,])1 (value|row|cell|group|column|issue|record|line|time)s\b")


def singular_counts(text: str) -> str:
    """Prose written for counts ("1 values in 'x'") with the noun after a lone 1 in the singular."""
    return _ONE_MANY.sub(r"1 \1", text)
