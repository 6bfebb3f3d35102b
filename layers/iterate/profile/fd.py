"""Approximate functional dependencies (zip → city) between single columns, computed on dictionary codes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from iterate.grouping import unique

DENSE_LIMIT = 4_000_000  # lhs × rhs distinct pairs up to which a dense count table is cheaper than sorting
MIN_CONFIDENCE = 0.9  # share of rows agreeing with their lhs group's majority rhs
MIN_GAIN = 0.5  # the lhs must explain at least this share of what the rhs's own mode gets wrong
MIN_MEAN_GROUP = 10.0  # rows per lhs value: fewer and agreement is mostly chance
MIN_SUPPORT = 0.5  # share of rows that sit in lhs groups of two or more
SAMPLE_ROWS = 50_000
MIN_NEIGHBOUR_PAIRS = 100  # neighbouring rows of one lhs group needed to judge a pair
MAX_COLUMNS = 250  # columns searched on each side of a dependency
MAX_REPORTED = 50


@dataclass
class GroupMajority:
    """Per-row and per-group view of how a column (rhs) agrees within groups of another (lhs).

    Rows where either side is excluded (code < 0, e.g. missing) are `considered == False` and agree.
    """

    agrees: np.ndarray  # bool per row
    considered: np.ndarray  # bool per row
    majority: np.ndarray  # per lhs code: its majority rhs code (-1 when the group is empty)
    majority_count: np.ndarray  # per lhs code: rows holding the majority rhs
    group_size: np.ndarray  # per lhs code: considered rows
    rhs_rows: np.ndarray  # per rhs code: considered rows

    @property
    def violating_rows(self) -> np.ndarray:
        """0-based rows whose rhs differs from their group's majority."""
        return np.flatnonzero(~self.agrees)

    def confidence(self, min_group: int = 2) -> tuple[float, int]:
        """(share of rows in groups of `min_group`+ that agree with the majority, rows in such groups)."""
        big = self.group_size >= min_group
        rows = int(self.group_size[big].sum())
        return (float(self.majority_count[big].sum() / rows) if rows else 0.0), rows


def group_majority(
    lhs_codes: np.ndarray, rhs_codes: np.ndarray, n_lhs: int | None = None, n_rhs: int | None = None
) -> GroupMajority:
    """For each row, whether its rhs equals the most common rhs among rows sharing its lhs.

    Codes are per-row dictionary positions (int64, -1 to exclude a row). Ties between equally common rhs
    values go to the smaller code, so the answer is deterministic.
    """
    lhs = np.asarray(lhs_codes, dtype=np.int64)
    rhs = np.asarray(rhs_codes, dtype=np.int64)
    n_lhs = int(lhs.max()) + 1 if n_lhs is None else n_lhs
    n_rhs = int(rhs.max()) + 1 if n_rhs is None else n_rhs
    n_lhs, n_rhs = max(n_lhs, 1), max(n_rhs, 1)
    considered = (lhs >= 0) & (rhs >= 0)
    all_in = bool(considered.all())
    x = lhs if all_in else lhs[considered]
    y = rhs if all_in else rhs[considered]
    if n_lhs * n_rhs <= DENSE_LIMIT:
        table = np.bincount(x * n_rhs + y, minlength=n_lhs * n_rhs).reshape(n_lhs, n_rhs)
        majority = table.argmax(axis=1)
        majority_count = table[np.arange(n_lhs), majority]
        size = table.sum(axis=1)
        rhs_rows = table.sum(axis=0)
    else:
        pairs, counts = unique(x * n_rhs + y, return_counts=True)
        gx, gy = pairs // n_rhs, pairs % n_rhs
        order = np.lexsort((gy, -counts, gx))
        gx, gy, counts = gx[order], gy[order], counts[order]
        first = np.r_[True, gx[1:] != gx[:-1]]
        majority = np.full(n_lhs, -1, dtype=np.int64)
        majority_count = np.zeros(n_lhs, dtype=np.int64)
        majority[gx[first]] = gy[first]
        majority_count[gx[first]] = counts[first]
        size = np.bincount(gx, weights=counts, minlength=n_lhs).astype(np.int64)
        rhs_rows = np.bincount(gy, weights=counts, minlength=n_rhs).astype(np.int64)
    majority = np.where(size > 0, majority, -1)
    if all_in:
        agrees = np.take(majority, x) == y
    else:
        agrees = np.ones(len(lhs), dtype=bool)
        agrees[considered] = np.take(majority, x) == y
    return GroupMajority(agrees, considered, majority, majority_count, size, rhs_rows)


@dataclass
class CodedColumn:
    """What dependency search needs of a column: per-row codes with missing rows set to -1."""

    name: str
    codes: np.ndarray
    n_codes: int
    n_distinct: int  # distinct present values
    eligible_lhs: bool
    eligible_rhs: bool


@dataclass
class Dependency:
    """lhs → rhs holds for `confidence` of the rows in lhs groups of two or more (`support_rows`)."""

    lhs: str
    rhs: str
    confidence: float
    violating_rows: int
    support_rows: int


def _change_rate(sorted_lhs: np.ndarray, rhs_sorted: np.ndarray) -> float:
    """Among neighbouring rows of the same lhs group (rows sorted by lhs), how often the rhs changes."""
    same = (sorted_lhs[1:] == sorted_lhs[:-1]) & (rhs_sorted[1:] >= 0) & (rhs_sorted[:-1] >= 0)
    pairs = int(same.sum())
    if pairs < MIN_NEIGHBOUR_PAIRS:
        return 1.0
    return float(((rhs_sorted[1:] != rhs_sorted[:-1]) & same).sum() / pairs)


Mapper = Callable[
    [Callable[[CodedColumn], list[Dependency]], Iterable[CodedColumn]], Iterable[list[Dependency]]
]


def find_dependencies(
    columns: list[CodedColumn], n_rows: int, *, seed: int = 0, mapper: Mapper | None = None
) -> list[Dependency]:
    """Single-column approximate dependencies lhs → rhs worth reporting.

    A sample of rows rules out most pairs cheaply (in a dependency the rhs rarely changes between rows of
    the same lhs group); survivors are measured exactly on every row with `group_majority`. `mapper`
    (e.g. a thread pool's map) spreads the lhs columns over workers.
    """
    if n_rows < 20 or min(n_rows, SAMPLE_ROWS) <= MIN_NEIGHBOUR_PAIRS:
        return []  # too few rows for a group's neighbours to say anything (see _change_rate)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n_rows, size=SAMPLE_ROWS, replace=False)) if n_rows > SAMPLE_ROWS else None
    lhs_cols = [
        c for c in columns if c.eligible_lhs and c.n_distinct >= 2 and n_rows / c.n_distinct >= MIN_MEAN_GROUP
    ]
    rhs_cols = [c for c in columns if c.eligible_rhs and 2 <= c.n_distinct <= n_rows / 2]
    # Pairs grow with columns squared: a wide table is searched among its first MAX_COLUMNS on each side
    # (10,000 columns took 33 s here; the detectors search their own dependencies, see iterate.detect).
    lhs_cols, rhs_cols = lhs_cols[:MAX_COLUMNS], rhs_cols[:MAX_COLUMNS]
    # The rate at which rhs changes between neighbours of a group is about 2 × (1 - confidence) at most.
    max_rate = 2 * (1 - MIN_CONFIDENCE) + 0.05
    sampled = {id(c): (c.codes if sample is None else np.take(c.codes, sample)) for c in lhs_cols + rhs_cols}

    def dependents(lhs: CodedColumn) -> list[Dependency]:
        l_codes = sampled[id(lhs)]
        # Small codes sort by radix (int16), several times faster than a comparison sort.
        key = l_codes.astype(np.int16) if lhs.n_codes < 2**15 else l_codes
        order = np.argsort(key, kind="stable")
        l_sorted = l_codes[order]
        valid = l_sorted >= 0
        order, l_sorted = order[valid], l_sorted[valid]
        out = []
        for rhs in rhs_cols:
            if rhs is lhs or rhs.n_distinct > 2 * lhs.n_distinct:
                continue
            if _change_rate(l_sorted, np.take(sampled[id(rhs)], order)) > max_rate:
                continue
            dep = _measure(lhs, rhs, n_rows)
            if dep is not None:
                out.append(dep)
        return out

    found = [d for deps in (mapper or map)(dependents, lhs_cols) for d in deps]
    found.sort(key=lambda d: (-d.confidence, d.violating_rows, d.lhs, d.rhs))
    return found[:MAX_REPORTED]


def _measure(lhs: CodedColumn, rhs: CodedColumn, n_rows: int) -> Dependency | None:
    gm = group_majority(lhs.codes, rhs.codes, lhs.n_codes, rhs.n_codes)
    confidence, support = gm.confidence(2)
    if support < MIN_SUPPORT * n_rows or confidence < MIN_CONFIDENCE:
        return None
    # Baseline: how often rows agree with rhs's single most common value; the lhs must do much better.
    total = int(gm.rhs_rows.sum())
    base = float(gm.rhs_rows.max() / total) if total else 1.0
    if base >= 1.0 or (confidence - base) / (1 - base) < MIN_GAIN:
        return None
    return Dependency(lhs.name, rhs.name, confidence, int((~gm.agrees).sum()), support)
