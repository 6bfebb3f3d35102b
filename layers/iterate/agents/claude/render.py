"""Data for prompts: delimited, escaped and capped, so a cell can neither change the task nor blow the budget."""

from __future__ import annotations

import json
from typing import Any

from iterate.contracts import ColumnProfile, DatasetProfile, Issue

MAX_VALUE_CHARS = 40
MAX_NAME_CHARS = 120
TOP_VALUES = 5
PATTERNS = 3


def truncate(value: str, limit: int = MAX_VALUE_CHARS) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def safe_json(obj: Any) -> str:
    """Compact JSON in which no string can close a tag: <, > and & are written as \\u escapes."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def tagged(tag: str, obj: Any) -> str:
    """`obj` as JSON between <tag> and </tag>: data the prompt tells the model never to obey."""
    return f"<{tag}>\n{safe_json(obj)}\n</{tag}>"


def column_brief(col: ColumnProfile, *, top: int = TOP_VALUES) -> dict[str, Any]:
    """One column in a few dozen tokens: sizes grow with columns, never with rows."""
    brief: dict[str, Any] = {
        "name": truncate(col.name, MAX_NAME_CHARS),
        "type": col.semanticType,
        "missing": col.missing + col.disguisedMissing,
        "distinct": col.distinct,
    }
    if col.format:
        brief["format"] = truncate(col.format)
    if col.topValues:
        brief["top"] = [[truncate(v.value), v.count] for v in col.topValues[:top]]
    if col.patterns:
        brief["patterns"] = [truncate(p.value) for p in col.patterns[:PATTERNS]]
    if col.numeric:
        n = col.numeric
        brief["range"] = [_num(n.min), _num(n.median), _num(n.max)]
    if col.dates:
        brief["dates"] = [truncate(col.dates.min), truncate(col.dates.max)]
    return brief


def profile_brief(profile: DatasetProfile, *, top: int = TOP_VALUES) -> dict[str, Any]:
    brief: dict[str, Any] = {
        "file": truncate(profile.name, MAX_NAME_CHARS),
        "rows": profile.rowCount,
        "columns": [column_brief(c, top=top) for c in profile.columns],
    }
    if profile.candidateKeys:
        brief["keys"] = profile.candidateKeys[:3]
    if profile.functionalDependencies:
        brief["dependencies"] = [
            {"lhs": fd.lhs, "rhs": fd.rhs, "confidence": round(fd.confidence, 3)}
            for fd in profile.functionalDependencies[:10]
        ]
    return brief


def issue_brief(
    issue: Issue, *, examples: int = 3, rows: bool = True, description_chars: int = 300
) -> dict[str, Any]:
    """An issue as the model needs it: what, where, how much (measured), a few distinct examples."""
    brief: dict[str, Any] = {
        "id": issue.id,
        "type": issue.type,
        "severity": issue.severity,
        "columns": [truncate(c, MAX_NAME_CHARS) for c in issue.affectedColumns],
        "description": truncate(issue.description, description_chars),
    }
    if issue.affectedRows is not None:
        brief["rows"] = issue.affectedRows
    if issue.evidence is not None:
        brief["share"] = round(issue.evidence.affectedShare, 4)
        shown: list[dict[str, Any]] = []
        seen: set[tuple[str, str | None]] = set()
        for e in issue.evidence.examples:
            if len(shown) >= examples:
                break
            if (e.value, e.expected) in seen:  # "empty", "empty", "empty" teaches nothing new
                continue
            seen.add((e.value, e.expected))
            item: dict[str, Any] = {"row": e.row} if rows else {}
            item["value"] = truncate(e.value)
            if e.expected:
                item["expected"] = truncate(e.expected)
            shown.append(item)
        brief["examples"] = shown
    return brief


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 4)
