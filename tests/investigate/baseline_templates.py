"""The offline investigation templates as first written: plain, slow pandas over every row.

They are the reference the fast templates (iterate.agents.offline.investigation) are held to: on any frame,
with any parameters, both must return exactly the same result (see test_template_equivalence.py). Frozen
on purpose; only a deliberate change of what a template computes should touch this file.
"""

from __future__ import annotations

import json

from iterate.contracts import READ_LEVEL_TYPES, Issue
from iterate.profile.shapes import MISSING_TOKENS

# Shared by every template: where the parameters come from and how examples and the result are built.
PRELUDE = '''\
import json
import re

import numpy as np
import pandas as pd

PARAMS = json.loads({params})
ROWS = len(df)
NAMES = list(df.columns)
# Cells another, more specific issue already explains: the detector left them out, so does the recount.
EXCLUDED = list(PARAMS.get("excluded_values", []))


def col(name):
    """The column as text, by position so duplicate names stay addressable."""
    return df.iloc[:, NAMES.index(name)].astype(str)


def left_out(values):
    """Cells the detector leaves out: explained by a more specific issue, or equal to their row's derivation."""
    out = values.isin(EXCLUDED)
    rule = PARAMS.get("derivation")
    if rule:
        out = out | (values == col(rule["left"]) + rule["separator"] + col(rule["right"]))
    return out


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
# Rows compared as integer codes (one per distinct value): the same answer as comparing text, far faster.
keys = pd.DataFrame({i: pd.factorize(col(c))[0] for i, c in enumerate(columns)})
mask = keys.duplicated(keep="first")
groups = int(keys[keys.duplicated(keep=False)].drop_duplicates().shape[0])
result = summary(mask, mask.sum() * len(columns), columns[0], groups=groups)
"""

NEAR_DUPLICATES = """\
columns = PARAMS["columns"]


def near_codes(values):
    # Lower case, every run of characters other than ASCII letters, digits and "_" becomes one space;
    # worked out once per distinct value, then spread to the rows.
    codes, uniques = pd.factorize(values)
    normal = pd.Series(uniques, dtype=str).str.lower().str.replace(r"[^0-9A-Za-z_]+", " ", regex=True).str.strip()
    return pd.factorize(normal)[0][codes]


# Exact copies are judged on every column; near ones on the columns given (identifiers left out).
everything = pd.DataFrame({i: pd.factorize(df.iloc[:, i].astype(str))[0] for i in range(len(NAMES))})
near = pd.DataFrame({i: near_codes(col(c)) for i, c in enumerate(columns)})
mask = near.duplicated(keep="first") & ~everything.duplicated(keep="first")
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
mask = present & values.isin(bad) & ~left_out(values)
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, rule=rule, by_value={str(k): int(v) for k, v in found.items()})
"""

BAD_VALUES = """\
name = PARAMS["column"]
values = col(name)
mask = values.isin(list(PARAMS["bad_values"])) & ~left_out(values)
found = values[mask].value_counts().head(20)
result = summary(mask, mask.sum(), name, column=name, by_value={str(k): int(v) for k, v in found.items()})
"""

OUTLIER = """\
name = PARAMS["column"]
values = col(name)
numbers = pd.to_numeric(values.str.replace(r"[,%$\\s]", "", regex=True), errors="coerce")
low, high = float(PARAMS["low"]), float(PARAMS["high"])
mask = numbers.notna() & ((numbers < low) | (numbers > high)) & ~left_out(values)
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

DEPENDENCY_VOTES = """\
rhs = PARAMS["rhs"]
determinants = list(PARAMS["determinants"])
min_group = int(PARAMS.get("min_group", 3))
min_share = float(PARAMS.get("min_share", 0.7))
min_vote_share = float(PARAMS.get("min_vote_share", 0.5))
max_deviant_share = float(PARAMS.get("max_deviant_share", 0.1))
missing = {str(m).strip().lower() for m in PARAMS["missing_markers"]}
y = col(rhs)
votes = np.zeros(ROWS, dtype=np.int64)
cover = np.zeros(ROWS, dtype=np.int64)
voted = []
for name in determinants:
    x = col(name)
    valid = ~x.str.strip().str.lower().isin(missing)
    pairs = pd.DataFrame({"x": x[valid], "y": y[valid]})
    counts = pairs.groupby(["x", "y"], sort=False).size().rename("n").reset_index()
    counts = counts.sort_values(["x", "n"], ascending=[True, False], kind="stable")
    ranked = counts.groupby("x", sort=False)
    groups = pd.DataFrame({"size": ranked["n"].sum(), "major": ranked["y"].first(), "major_count": ranked["n"].first()})
    runner_up = counts[ranked.cumcount().to_numpy() == 1].set_index("x")["n"]
    groups["second_count"] = runner_up.reindex(groups.index).fillna(0).astype(int)
    major_missing = groups["major"].str.strip().str.lower().isin(missing)
    strong = (
        (groups["size"] >= min_group)
        & (groups["major_count"] >= 2)
        & (groups["major_count"] >= min_share * groups["size"])
        & (groups["major_count"] > groups["second_count"])
        & ~major_missing
    )
    in_strong = (valid & x.map(strong).fillna(False).astype(bool)).to_numpy()
    major = x.map(groups["major"])
    major_count = x.map(groups["major_count"]).fillna(0).to_numpy()
    pair_count = pd.MultiIndex.from_arrays([x, y]).map(counts.set_index(["x", "y"])["n"])
    pair_count = pd.Series(pair_count).fillna(0).to_numpy()
    lone = (pair_count == 1) | (pair_count <= max_deviant_share * major_count)
    against = in_strong & (y.to_numpy() != major.to_numpy()) & lone
    cover += in_strong
    votes += against
    voted.append((x, against))
mask = (votes >= 1) & (votes >= min_vote_share * cover) & ~left_out(y).to_numpy()
# Groups (of any determinant) whose majority a flagged row contradicts.
conflicting = sum(int(x[mask & against].nunique()) for x, against in voted)
result = summary(mask, mask.sum(), rhs, rhs=rhs, determinants=determinants, conflicting_groups=conflicting)
"""

DERIVED = """\
name = PARAMS["column"]
values = col(name)
built = col(PARAMS["left"]) + PARAMS["separator"] + col(PARAMS["right"])
missing = {str(m).strip().lower() for m in PARAMS.get("missing_markers", [""])}
broken = (values != built) & ~values.str.strip().str.lower().isin(missing)
excused = np.zeros(ROWS, dtype=bool)
excused[[int(r) for r in PARAMS.get("excused_rows", []) if 0 <= int(r) < ROWS]] = True
mask = broken.to_numpy() & ~excused & ~values.isin(EXCLUDED).to_numpy()
result = summary(mask, mask.sum(), name, column=name, rule=PARAMS["left"] + " + separator + " + PARAMS["right"])
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
mask = blank & values.isin(hits) & ~left_out(values)
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
    "dependency_violation": DEPENDENCY,  # or DEPENDENCY_VOTES, by the parameters given (see template_code)
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


def supports(issue: Issue) -> bool:
    """True when a template can recompute this issue's claim from the loaded frame."""
    if issue.type in READ_LEVEL_TYPES or issue.type not in TEMPLATES:
        return False
    stats = issue.evidence.stats if issue.evidence else {}
    if issue.type in PATTERN_TYPES:
        return "column" in stats and ("expected_regex" in stats or "bad_values" in stats)
    if issue.type == "dependency_violation" and "determinants" in stats:
        return "rhs" in stats
    if issue.type == "dependency_violation" and "separator" in stats:
        return all(k in stats for k in ("column", "left", "right"))
    return all(k in stats for k in REQUIRED_STATS[issue.type])


def _params_literal(params: dict) -> str:
    """A Python literal of the JSON parameters that the sandbox policy accepts whatever the column names."""
    text = json.dumps(params, ensure_ascii=True, sort_keys=True)
    # The policy refuses string constants containing "__"; JSON decodes \\u005f back to "_".
    if "__" in text:
        text = text.replace("_", "\\u005f")
    return repr(text)


def template_code(issue: Issue) -> str:
    """The investigation script for an issue; raises ValueError when there is no template for it."""
    if not supports(issue):
        raise ValueError(f"no offline template for issue {issue.id!r} of type {issue.type!r}")
    stats = dict(issue.evidence.stats) if issue.evidence else {}
    template = TEMPLATES[issue.type]
    if issue.type == "dependency_violation" and "determinants" in stats:
        # The detector's vote across every determinant of the column (see iterate.detect.dependencies).
        template = DEPENDENCY_VOTES
        stats.setdefault("missing_markers", sorted(MISSING_TOKENS))
    elif issue.type == "dependency_violation" and "separator" in stats:
        template = DERIVED  # a column built from two others (state_average = state + "_" + measure_code)
    params = {k: v for k, v in stats.items() if k not in ("title", "examples")}
    return PRELUDE.format(params=_params_literal(params)) + template
