"""Functional dependencies: columns that determine others (zip → city), and the cells that break them.

Each column X that determines a column Y (nearly every group of rows sharing an X value agrees on Y) casts a
vote against a row's Y value when the row disagrees with its group's clear majority. A cell is flagged when at
least half of the dependencies that can judge it vote against it. A typo in X itself puts its row in a group of
its own, so X's typos never vote; they are caught when X is judged as the dependent side of another column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.findings import Finding

MIN_GROUP = 3  # a group needs this many rows to have a majority worth trusting
MIN_SHARE = 0.7  # the majority value must hold this share of its group
MAX_DEVIANT_SHARE = (
    0.1  # a repeated deviant value must be this rare next to the majority (else: a real split)
)
MIN_CONFIDENCE = 0.9  # share of rows (in groups of 2+) agreeing with their group's majority
MIN_VOTE_SHARE = 0.5  # share of the judging dependencies that must vote against a cell
SAMPLE_ROWS = 50_000
MAX_COLUMNS = 80  # dependencies are searched among at most this many columns on each side
DENSE_LIMIT = 262_144


@dataclass
class GroupMajority:
    """Per X-code: group size, majority Y-code, its count, the runner-up count."""

    size: np.ndarray
    major: np.ndarray
    major_count: np.ndarray
    second_count: np.ndarray


def group_majority(x: np.ndarray, y: np.ndarray, n_x: int, n_y: int) -> GroupMajority:
    """Majority of y within each x group (x, y: per-row dictionary codes; x may hold -1 for excluded rows)."""
    keep = x >= 0
    x, y = x[keep], y[keep]
    if n_x * n_y <= max(DENSE_LIMIT, 2 * x.size):
        table = np.bincount(x * n_y + y, minlength=n_x * n_y).reshape(n_x, n_y)
        major = table.argmax(axis=1)
        rows = np.arange(n_x)
        major_count = table[rows, major]
        size = table.sum(axis=1)
        table[rows, major] = 0  # the table is ours: the runner-up is the max of what is left
        second_count = table.max(axis=1) if n_y > 1 else np.zeros(n_x, dtype=np.int64)
        return GroupMajority(size, major, major_count, second_count)
    combined = x * n_y + y
    pairs, counts = np.unique(combined, return_counts=True)
    gx, gy = pairs // n_y, pairs % n_y
    order = np.lexsort((-counts, gx))
    gx, gy, counts = gx[order], gy[order], counts[order]
    first = np.r_[True, gx[1:] != gx[:-1]]
    size = np.bincount(gx, weights=counts, minlength=n_x).astype(np.int64)
    major = np.full(n_x, -1, dtype=np.int64)
    major_count = np.zeros(n_x, dtype=np.int64)
    major[gx[first]] = gy[first]
    major_count[gx[first]] = counts[first]
    second_count = np.zeros(n_x, dtype=np.int64)
    second_pos = np.flatnonzero(~first & np.r_[False, first[:-1]])
    second_count[gx[second_pos]] = counts[second_pos]
    return GroupMajority(size, major, major_count, second_count)


def _confidence(gm: GroupMajority) -> tuple[float, int]:
    multi = gm.size >= 2
    rows = int(gm.size[multi].sum())
    if rows == 0:
        return 0.0, 0
    return float(gm.major_count[multi].sum() / rows), rows


@dataclass
class Dependency:
    lhs: int
    rhs: int
    confidence: float
    support_rows: int


def _lhs_codes(f: ColumnFacts) -> np.ndarray:
    """Row codes of a determinant column, with missing values excluded (-1)."""
    missing = f.is_missing
    codes = f.column.codes
    return np.where(missing[codes], -1, codes) if missing.any() else codes


def _informative(conf: float, xs: np.ndarray, fy: ColumnFacts) -> bool:
    """X tells more about Y than Y's most common value does: the error left must fall by a quarter at least."""
    y = fy.column.codes[xs >= 0]
    if y.size == 0:
        return False
    baseline = np.bincount(y).max() / y.size
    return (1.0 - conf) <= 0.75 * (1.0 - baseline)


def discover(facts: list[ColumnFacts], n_rows: int, *, seed: int = 7) -> list[Dependency]:
    """Approximate single-column dependencies X → Y, found on a sample then confirmed on all rows."""
    if n_rows < 2 * MIN_GROUP:
        return []
    rng = np.random.default_rng(seed)
    sample = None if n_rows <= SAMPLE_ROWS else np.sort(rng.choice(n_rows, SAMPLE_ROWS, replace=False))
    # Pairs grow with the square of the width: a very wide table is searched among its first columns only.
    lhs_cols = [f for f in facts if 2 <= f.column.n_unique <= 0.8 * n_rows and f.n_present >= MIN_GROUP]
    rhs_cols = [f for f in facts if f.column.n_unique >= 2]
    lhs_cols, rhs_cols = lhs_cols[:MAX_COLUMNS], rhs_cols[:MAX_COLUMNS]

    def compact(codes: np.ndarray) -> tuple[np.ndarray, int]:
        """The sample's codes renumbered 0..k-1 (so tables scale with the sample, not the column)."""
        part = codes if sample is None else codes[sample]
        valid = part >= 0
        uniq, inverse = np.unique(part[valid], return_inverse=True)
        out = np.full(part.size, -1, dtype=np.int64)
        out[valid] = inverse.reshape(-1)
        return out, max(int(uniq.size), 1)

    rhs_sample = {fy.index: compact(fy.column.codes) for fy in rhs_cols}
    found: list[Dependency] = []
    for fx in lhs_cols:
        xs = _lhs_codes(fx)
        x_s, n_xs = compact(xs)
        groups = np.bincount(x_s[x_s >= 0], minlength=n_xs)
        if groups[groups >= 2].sum() < max(2 * MIN_GROUP, 0.1 * x_s.size):
            continue  # nearly every value is unique in the sample: nothing to learn from it
        for fy in rhs_cols:
            if fy.index == fx.index:
                continue
            y_s, n_ys = rhs_sample[fy.index]
            gm = group_majority(x_s, y_s, n_xs, n_ys)
            conf, support = _confidence(gm)
            if conf < MIN_CONFIDENCE - 0.03 or support < max(2 * MIN_GROUP, 0.1 * len(x_s)):
                continue
            if sample is not None:
                gm = group_majority(xs, fy.column.codes, fx.column.n_unique, fy.column.n_unique)
                conf, support = _confidence(gm)
            if conf >= MIN_CONFIDENCE and _informative(conf, xs, fy):
                found.append(Dependency(fx.index, fy.index, conf, support))
    return found


@dataclass
class Judgement:
    """Per row, for one dependent column: how many dependencies judged the cell, and how many voted against."""

    cover: np.ndarray
    votes: np.ndarray

    def consistent(self, rows: np.ndarray) -> np.ndarray:
        """Rows whose value every judging dependency agrees with (judged at least once)."""
        return (self.cover[rows] >= 1) & (self.votes[rows] == 0)


def detect_dependency_violations(
    facts: list[ColumnFacts], n_rows: int
) -> tuple[list[Finding], list[Dependency], dict[int, Judgement]]:
    """The dependencies `discover` finds, the cells that break them, and each dependent's votes."""
    deps = discover(facts, n_rows)
    judgements: dict[int, Judgement] = {}
    by_rhs: dict[int, list[Dependency]] = {}
    for d in deps:
        by_rhs.setdefault(d.rhs, []).append(d)
    findings: list[Finding] = []
    for rhs, group in by_rhs.items():
        fy = facts[rhs]
        y = fy.column.codes
        votes = np.zeros(n_rows, dtype=np.int32)
        cover = np.zeros(n_rows, dtype=np.int32)
        expected = np.full(n_rows, -1, dtype=np.int64)
        best_conf = np.zeros(n_rows)
        y_missing = fy.is_missing
        for d in sorted(group, key=lambda d: d.confidence):
            fx = facts[d.lhs]
            xs = _lhs_codes(fx)
            gm = group_majority(xs, y, fx.column.n_unique, fy.column.n_unique)
            strong = (
                (gm.size >= MIN_GROUP)
                & (gm.major_count >= 2)
                & (gm.major_count >= MIN_SHARE * gm.size)
                & (gm.major_count > gm.second_count)
                & ~y_missing[np.maximum(gm.major, 0)]
            )
            valid = xs >= 0
            in_strong = np.zeros(n_rows, dtype=bool)
            in_strong[valid] = strong[xs[valid]]
            cover += in_strong
            maj = np.full(n_rows, -1, dtype=np.int64)
            maj[valid] = gm.major[xs[valid]]
            # How often the row's own (X, Y) pair occurs: a typo is a lone deviation, not a second faction.
            pair_count = np.zeros(n_rows, dtype=np.int64)
            combined = xs[valid] * fy.column.n_unique + y[valid]
            _, inverse, pc_counts = np.unique(combined, return_inverse=True, return_counts=True)
            pair_count[valid] = pc_counts[inverse.reshape(-1)]
            major_count = np.zeros(n_rows, dtype=np.int64)
            major_count[valid] = gm.major_count[xs[valid]]
            lone = (pair_count == 1) | (pair_count <= MAX_DEVIANT_SHARE * major_count)
            against = in_strong & (y != maj) & lone
            votes += against
            better = against & (d.confidence >= best_conf)
            expected[better] = maj[better]
            best_conf[better] = d.confidence
        judgements[rhs] = Judgement(cover, votes)
        flagged = (votes >= 1) & (votes >= MIN_VOTE_SHARE * cover)
        rows = np.flatnonzero(flagged)
        if rows.size == 0:
            continue
        names = [facts[d.lhs].name for d in sorted(group, key=lambda d: -d.confidence)]
        uniq = fy.column.uniques
        exp_values = [uniq[int(expected[r])] for r in rows]
        shown = ", ".join(names[:3]) + (" and others" if len(names) > 3 else "")
        examples = "; ".join(
            f"row {int(r)}: '{uniq[int(y[r])]}' where its group has '{uniq[int(expected[r])]}'"
            for r in rows[:3]
        )
        findings.append(
            Finding(
                type="dependency_violation",
                columns=[fy.name],
                rows=rows,
                cols=np.full(rows.size, fy.index, dtype=np.int64),
                title=f"Conflicting values of {fy.name} for the same entity",
                description=(
                    f"'{fy.name}' is determined by {shown} (rows that share those values agree on it "
                    f"{max(d.confidence for d in group):.1%} of the time), yet {rows.size:,} rows carry a different "
                    f"value than the rest of their group: {examples}."
                ),
                suggested_action="Check these rows against the source; where the group's value is right, "
                "replace the odd value with it.",
                category="smart_fixes",
                detector="dependencies",
                stats={
                    "rhs": fy.name,
                    "determinants": names,
                    "min_group": MIN_GROUP,
                    "min_share": MIN_SHARE,
                    "min_vote_share": MIN_VOTE_SHARE,
                    "max_deviant_share": MAX_DEVIANT_SHARE,
                    "missing_markers": missing_markers(fy.null_marker),
                },
                expected=exp_values,
                key=f"fd:{fy.name}",
                value_level=False,
            )
        )
    return findings, deps, judgements
