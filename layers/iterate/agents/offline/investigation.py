"""Offline investigation agent: one pandas template per issue type that recomputes the detector's claim from `df`."""

from __future__ import annotations

import json

from iterate.contracts import CodeInvestigation, DatasetProfile, Issue

# Read-level issues (the reader repaired the file) cannot be re-proven from the loaded frame.
READ_LEVEL_TYPES = frozenset({"ragged_rows", "blank_header"})

# Shared by every template: where the parameters come from and how examples and the result are built.
PRELUDE = '''\
import json
import re

import numpy as np
import pandas as pd

PARAMS = json.loads({params})
ROWS = len(df)
NAMES = list(df.columns)


def col(name):
    """The column as text, by position so duplicate names stay addressable."""
    return df.iloc[:, NAMES.index(name)].astype(str)


def examples(mask, name):
    rows = np.flatnonzero(np.asarray(mask, dtype=bool))[:10]
    values = col(name)
    return [{{"row": int(r), "column": name, "value": str(values.iloc[int(r)])}} for r in rows]


def summary(row_mask, cells, name, **extra):
    affected = int(np.asarray(row_mask, dtype=bool).sum())
    out = {{
        "affected_rows": affected,
        "affected_cells": int(cells),
        "share": (affected / ROWS) if ROWS else 0.0,
        "examples": examples(row_mask, name),
    }}
    out.update(extra)
    return out

'''

MARKERS = """\
name = PARAMS["column"]
values = col(name)
markers = {str(m).strip().casefold() for m in PARAMS["markers"]}
mask = values.str.strip().str.casefold().isin(markers)
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, by_value={str(k): int(v) for k, v in found.items()})
"""

DUPLICATES = """\
columns = PARAMS["columns"]
frame = pd.concat([col(c) for c in columns], axis=1, keys=range(len(columns)))
mask = frame.duplicated(keep="first")
groups = int(frame[frame.duplicated(keep=False)].drop_duplicates().shape[0])
result = summary(mask, mask.sum() * len(columns), columns[0], groups=groups)
"""

NEAR_DUPLICATES = """\
columns = PARAMS["columns"]
exact = pd.concat([col(c) for c in columns], axis=1, keys=range(len(columns)))


def normalise(s):
    s = s.str.casefold().str.strip().str.replace(r"\\s+", " ", regex=True)
    return s.str.replace(r"[^\\w\\s]", "", regex=True).str.replace(r"\\s+", " ", regex=True).str.strip()


near = pd.concat([normalise(exact[i]) for i in exact.columns], axis=1)
mask = near.duplicated(keep="first") & ~exact.duplicated(keep="first")
result = summary(mask, mask.sum() * len(columns), columns[0])
"""

PATTERN = """\
name = PARAMS["column"]
values = col(name)
stripped = values.str.strip()
missing = set(PARAMS.get("missing_markers", []))
present = (stripped != "") & ~stripped.isin(missing)
if PARAMS.get("expected_regex"):
    pattern = re.compile(PARAMS["expected_regex"])
    bad = [u for u in values[present].unique() if not pattern.fullmatch(str(u))]
    rule = "expected_regex"
else:
    bad = list(PARAMS["bad_values"])
    rule = "bad_values"
mask = present & values.isin(bad)
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, rule=rule, by_value={str(k): int(v) for k, v in found.items()})
"""

BAD_VALUES = """\
name = PARAMS["column"]
values = col(name)
mask = values.isin(list(PARAMS["bad_values"]))
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, by_value={str(k): int(v) for k, v in found.items()})
"""

OUTLIER = """\
name = PARAMS["column"]
values = col(name)
numbers = pd.to_numeric(values.str.replace(r"[,%$\\s]", "", regex=True), errors="coerce")
low, high = float(PARAMS["low"]), float(PARAMS["high"])
mask = numbers.notna() & ((numbers < low) | (numbers > high))
flagged = numbers[mask]
result = summary(
    mask,
    mask.sum(),
    name,
    column=name,
    low=low,
    high=high,
    min_flagged=float(flagged.min()) if len(flagged) else None,
    max_flagged=float(flagged.max()) if len(flagged) else None,
)
"""

DEPENDENCY = """\
lhs = list(PARAMS["lhs"])
rhs = PARAMS["rhs"]
support = int(PARAMS.get("min_support", 1))
frame = pd.concat([col(c) for c in [*lhs, rhs]], axis=1, keys=[*range(len(lhs)), "rhs"])
keys = list(range(len(lhs)))
sizes = frame.groupby(keys, sort=False)["rhs"].transform("size")
counts = frame.groupby([*keys, "rhs"], sort=False).size().reset_index(name="n")
modes = counts.loc[counts.groupby(keys, sort=False)["n"].idxmax(), [*keys, "rhs"]]
modes = modes.rename(columns={"rhs": "mode"})
joined = frame.merge(modes, on=keys, how="left")
mask = (sizes.to_numpy() >= support) & (joined["rhs"].to_numpy() != joined["mode"].to_numpy())
conflicting = int(frame[mask].drop_duplicates(subset=keys).shape[0])
result = summary(mask, mask.sum(), rhs, lhs=lhs, rhs=rhs, conflicting_groups=conflicting)
"""

MERGED = """\
name = PARAMS["column"]
other = PARAMS["other"]
values = col(name)
others = col(other)
blank = others.str.strip() == ""
seen = set(others[~blank].str.strip().unique())


def merged(value):
    parts = str(value).split(" ")
    return any(" ".join(parts[i:]) in seen for i in range(1, len(parts)))


hits = {v for v in values[blank].unique() if merged(v)}
mask = blank & values.isin(hits)
result = summary(mask, mask.sum(), name, column=name, other=other)
"""

CONSTANT = """\
name = PARAMS["column"]
distinct = int(col(name).nunique(dropna=False))
mask = pd.Series([distinct == 1] * ROWS)
result = summary(mask, mask.sum(), name, column=name, distinct=distinct)
"""

ALL_UNIQUE = """\
name = PARAMS["column"]
distinct = int(col(name).nunique(dropna=False))
mask = pd.Series([distinct == ROWS and ROWS > 0] * ROWS)
result = summary(mask, mask.sum(), name, column=name, distinct=distinct)
"""

TEMPLATES: dict[str, str] = {
    "missing_values": MARKERS,
    "disguised_missing": MARKERS,
    "duplicate_rows": DUPLICATES,
    "near_duplicate_rows": NEAR_DUPLICATES,
    "mixed_types": PATTERN,
    "format_violation": PATTERN,
    "unit_in_number": PATTERN,
    "out_of_domain": PATTERN,
    "inconsistent_category": BAD_VALUES,
    "encoding_damage": BAD_VALUES,
    "stray_whitespace": BAD_VALUES,
    "numeric_outlier": OUTLIER,
    "dependency_violation": DEPENDENCY,
    "merged_columns": MERGED,
    "constant_column": CONSTANT,
    "all_unique_column": ALL_UNIQUE,
}

# The parameters each template reads from `issue.evidence.stats`; an issue without them is not supported.
REQUIRED_STATS: dict[str, tuple[str, ...]] = {
    "missing_values": ("column", "markers"),
    "disguised_missing": ("column", "markers"),
    "duplicate_rows": ("columns",),
    "near_duplicate_rows": ("columns",),
    "inconsistent_category": ("column", "bad_values"),
    "encoding_damage": ("column", "bad_values"),
    "stray_whitespace": ("column", "bad_values"),
    "numeric_outlier": ("column", "low", "high"),
    "dependency_violation": ("lhs", "rhs"),
    "merged_columns": ("column", "other"),
    "constant_column": ("column",),
    "all_unique_column": ("column",),
}
PATTERN_TYPES = frozenset({"mixed_types", "format_violation", "unit_in_number", "out_of_domain"})


class UnsupportedIssue(ValueError):
    """No template can investigate this issue (read-level, unknown type, or parameters missing)."""


def supports(issue: Issue) -> bool:
    """True when a template can recompute this issue's claim from the loaded frame."""
    if issue.type in READ_LEVEL_TYPES or issue.type not in TEMPLATES:
        return False
    stats = issue.evidence.stats if issue.evidence else {}
    if issue.type in PATTERN_TYPES:
        return "column" in stats and ("expected_regex" in stats or "bad_values" in stats)
    return all(k in stats for k in REQUIRED_STATS[issue.type])


def _params_literal(params: dict) -> str:
    """A Python literal of the JSON parameters that the sandbox policy accepts whatever the column names."""
    text = json.dumps(params, ensure_ascii=True, sort_keys=True)
    # The policy refuses string constants containing "__"; JSON decodes \\u005f back to "_".
    if "__" in text:
        text = text.replace("_", "\\u005f")
    return repr(text)


def template_code(issue: Issue) -> str:
    """The investigation script for an issue; raises UnsupportedIssue when there is no template for it."""
    if not supports(issue):
        raise UnsupportedIssue(f"no offline template for issue {issue.id!r} of type {issue.type!r}")
    stats = issue.evidence.stats if issue.evidence else {}
    return PRELUDE.format(params=_params_literal(stats)) + TEMPLATES[issue.type]


class OfflineInvestigationAgent:
    """Implements `InvestigationAgent` with templates; the code is the same on every attempt by design."""

    source = "template"

    def supports(self, issue: Issue) -> bool:
        return supports(issue)

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        """The template for the issue's type (a retry yields the same code, which the loop detects)."""
        return template_code(issue)
