"""Which columns determine which: functional dependencies read off the table (zip → city, player → birth year).

A dependency X → Y is kept when most rows sit in X groups whose most common Y value clearly dominates, and X
says more about Y than Y's own most common value; pairs of columns are tried together where neither alone
determines Y. `iterate.detect.dependencies` then judges each dependency group by group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iterate.detect.context import ColumnFacts
from iterate.grouping import unique
from iterate.table import wide

MIN_GROUP = 3  # rows a group needs before its consensus judges anyone
# Rows in such groups a dependency is learned from: a rule read off a few dozen rows (47 cars) says more
# about those rows than about a wrong cell.
MIN_SUPPORT = 50
SAMPLE_ROWS = 50_000
MAX_COLUMNS = 80  # dependencies are searched among at most this many columns on each side
DENSE_LIMIT = 262_144
# Discovery: a share of the rows (in groups of MIN_GROUP or more) must sit in groups whose most common value
# is at least twice as common as the runner-up, and X must say more about Y than Y's own most common value.
MIN_DOMINATED_SHARE = 0.5
# Pairs of columns that determine Y together are tried among Y's best this many single determinants, and
# kept when their groups disagree on Y at most this share as often as either column's groups alone would.
MAX_PARTNERS = 3
PAIR_GAIN = 0.5


@dataclass
class GroupMajority:
    """Per X-code: group size, majority Y-code, its count, the runner-up count."""

    size: np.ndarray
    major: np.ndarray
    major_count: np.ndarray
    second_count: np.ndarray


def group_majority(
    x: np.ndarray, y: np.ndarray, n_x: int, n_y: int, weights: np.ndarray | None = None
) -> GroupMajority:
    """Majority of y within each x group (x, y: per-row dictionary codes; x may hold -1 for excluded rows).
    `weights`: how many rows each entry stands for (entries that are distinct row states); None: one each."""
    keep = x >= 0
    x, y = wide(x[keep]), y[keep]  # int64 before `x * n_y`: int32 codes of two big columns would wrap
    w = None if weights is None else weights[keep]
    counted = x.size if w is None else int(w.sum())  # rows: the same path for rows or their states
    if n_x * n_y <= max(DENSE_LIMIT, 2 * counted):
        table = np.bincount(x * n_y + y, weights=w, minlength=n_x * n_y).astype(np.int64, copy=False)
        table = table.reshape(n_x, n_y)
        major = table.argmax(axis=1)
        rows = np.arange(n_x)
        major_count = table[rows, major]
        size = table.sum(axis=1)
        table[rows, major] = 0  # the table is ours: the runner-up is the max of what is left
        second_count = table.max(axis=1) if n_y > 1 else np.zeros(n_x, dtype=np.int64)
        return GroupMajority(size, major, major_count, second_count)
    combined = x * n_y + y
    if w is None:
        pairs, counts = unique(combined, return_counts=True)
    else:
        pairs, inverse = unique(combined, return_inverse=True)
        counts = np.bincount(inverse.reshape(-1), weights=w, minlength=pairs.size).astype(np.int64)
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


@dataclass
class Dependency:
    lhs: int
    rhs: int
    confidence: float  # share of rows (in groups of 2+) agreeing with their group's majority
    support_rows: int
    # Further determining columns: X is (lhs, *more) read together (a team's city is its stadium's city:
    # neither alone determines it). Blame (wrong keys) and entity pairing stay with single columns.
    more: tuple[int, ...] = ()

    @property
    def determinants(self) -> tuple[int, ...]:
        return (self.lhs, *self.more)


@dataclass
class KeyCodes:
    codes: np.ndarray
    n_unique: int


@dataclass
class Composite:
    """Several columns read together as one determinant, shaped as consensus() reads a column's facts: each
    combination of present values is one code (a row missing any of them is in no group)."""

    name: str
    index: int
    column: KeyCodes
    is_missing: np.ndarray


def compact_codes(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes renumbered 0..k-1 (-1 kept), and k (at least 1)."""
    out = np.full(codes.size, -1, dtype=np.int64)
    valid = codes >= 0
    uniq, inverse = unique(codes[valid], return_inverse=True)
    out[valid] = inverse.reshape(-1)
    return out, max(int(uniq.size), 1)


def combine_codes(parts: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, int]:
    """One code per combination of the parts' codes (each -1 where missing), renumbered 0..k-1."""
    codes, n = parts[0]
    codes = codes.astype(np.int64)
    for other, n_other in parts[1:]:
        both = (codes >= 0) & (other >= 0)
        codes, n = compact_codes(np.where(both, codes * n_other + other, -1))
    return codes, n


def composite(facts: list[ColumnFacts], columns: tuple[int, ...]) -> Composite:
    codes, n = combine_codes([(present_codes(facts[c]), facts[c].column.n_unique) for c in columns])
    name = " + ".join(facts[c].name for c in columns)
    return Composite(name, -1, KeyCodes(codes, n), np.zeros(n, dtype=bool))


def determinant(facts: list[ColumnFacts], d: Dependency) -> ColumnFacts | Composite:
    """The dependency's X: its column's facts, or its columns read together."""
    return composite(facts, d.determinants) if d.more else facts[d.lhs]


def present_codes(f: ColumnFacts | Composite) -> np.ndarray:
    """Row codes with missing values excluded (-1): a blank neither forms a group nor votes."""
    missing = f.is_missing
    codes = f.column.codes
    return np.where(missing[codes], -1, codes) if missing.any() else codes


def discover(facts: list[ColumnFacts], n_rows: int, *, seed: int = 7) -> list[Dependency]:
    """Single-column dependencies X → Y, found on a sample of rows (all of them up to SAMPLE_ROWS).

    X → Y is kept when most rows of multi-row X groups sit in groups whose most common Y is at least twice as
    common as the runner-up (a consensus, however noisy), and knowing X leaves less to guess about Y than
    Y's own most common value does.
    """
    if n_rows < 2 * MIN_GROUP:
        return []
    rng = np.random.default_rng(seed)
    sample = None if n_rows <= SAMPLE_ROWS else np.sort(rng.choice(n_rows, SAMPLE_ROWS, replace=False))
    lhs_cols = [f for f in facts if 2 <= f.column.n_unique <= 0.8 * n_rows and f.n_present >= MIN_GROUP]
    rhs_cols = [f for f in facts if f.column.n_unique >= 2]
    lhs_cols, rhs_cols = lhs_cols[:MAX_COLUMNS], rhs_cols[:MAX_COLUMNS]

    def compact(codes: np.ndarray) -> tuple[np.ndarray, int]:
        """The sample's codes renumbered 0..k-1 (so tables scale with the sample, not the column)."""
        part = codes if sample is None else codes[sample]
        valid = part >= 0
        uniq, inverse = unique(part[valid], return_inverse=True)
        out = np.full(part.size, -1, dtype=np.int64)
        out[valid] = inverse.reshape(-1)
        return out, max(int(uniq.size), 1)

    # A dependent is compared by what its values say (7:10 a.m. and 7:10am agree), see ColumnFacts.meaning.
    rhs_sample = {fy.index: compact(fy.meaning.codes) for fy in rhs_cols}
    found: list[Dependency] = []
    for fx in lhs_cols:
        x_s, n_xs = compact(present_codes(fx))
        groups = np.bincount(x_s[x_s >= 0], minlength=n_xs)
        if groups[groups >= MIN_GROUP].sum() < max(2 * MIN_GROUP, 0.1 * x_s.size):
            continue  # nearly every value is unique in the sample: nothing to learn from it
        for fy in rhs_cols:
            if fy.index == fx.index:
                continue
            y_s, n_ys = rhs_sample[fy.index]
            both = (x_s >= 0) & (y_s >= 0)
            verdict = _judge_pair(np.where(both, x_s, -1), y_s, n_xs, n_ys)
            if verdict is None:
                continue
            # Found on the sample; every row is measured when the dependency judges them (consensus()).
            found.append(Dependency(fx.index, fy.index, *verdict))
    lhs_sample = {i: compact(present_codes(facts[i])) for i in sorted({d.lhs for d in found})}
    return found + _pair_dependencies(found, lhs_sample, rhs_sample)


def _pair_dependencies(
    found: list[Dependency],
    lhs_sample: dict[int, tuple[np.ndarray, int]],
    rhs_sample: dict[int, tuple[np.ndarray, int]],
) -> list[Dependency]:
    """Dependencies on two columns together (a team's city is its stadium's city), tried for each dependent
    among its best partial determinants only (MAX_PARTNERS), so the cost follows the dependencies found.

    A pair is kept when it passes the single columns' test (support, dominated groups, informative beyond
    chance), most of its rows sit in groups big enough to judge (a pair that is almost a row key proves
    nothing), and it determines Y far better than either column alone: its groups disagree on Y at most
    PAIR_GAIN as often as they would with Y shuffled within that column's groups (what they would show if
    the other column added nothing).
    """
    by_rhs: dict[int, list[Dependency]] = {}
    for d in found:
        by_rhs.setdefault(d.rhs, []).append(d)
    out: list[Dependency] = []
    for rhs, group in by_rhs.items():
        best = sorted(group, key=lambda d: (-d.confidence, d.lhs))[:MAX_PARTNERS]
        y, n_y = rhs_sample[rhs]
        for i, a in enumerate(best):
            for b in best[i + 1 :]:
                x, n_x = combine_codes([lhs_sample[a.lhs], lhs_sample[b.lhs]])
                x = np.where(y >= 0, x, -1)
                verdict = _judge_pair(x, y, n_x, n_y)
                if verdict is None:
                    continue
                parts = [lhs_sample[a.lhs][0], lhs_sample[b.lhs][0]]
                if not _refines(x, y, n_x, n_y, parts):
                    continue
                first, second = sorted((a.lhs, b.lhs))
                out.append(Dependency(first, rhs, *verdict, more=(second,)))
    return out


def _refines(x: np.ndarray, y: np.ndarray, n_x: int, n_y: int, parts: list[np.ndarray]) -> bool:
    """Whether the groups of x (a pair of columns) judge Y far better than each part's groups alone."""
    gm = group_majority(x, np.maximum(y, 0), n_x, n_y)
    judged = gm.size >= MIN_GROUP
    rows = int(gm.size[judged].sum())
    if rows < 0.5 * int((x >= 0).sum()):
        return False  # most rows in groups too small to judge: nearly a row key
    wrong = 1.0 - float(gm.major_count[judged].sum()) / max(rows, 1)
    rng = np.random.default_rng(17)
    held = np.flatnonzero(x >= 0)
    for part in parts:
        # Y shuffled among the rows of each of the part's groups: the other column's say is gone.
        in_order = held[np.argsort(part[held], kind="stable")]
        shuffled_order = held[np.lexsort((rng.random(held.size), part[held]))]
        shuffled = y.copy()
        shuffled[in_order] = y[shuffled_order]
        gs = group_majority(x, np.maximum(shuffled, 0), n_x, n_y)
        chance = 1.0 - float(gs.major_count[judged].sum()) / max(rows, 1)
        if wrong >= PAIR_GAIN * chance:
            return False  # (a part that determines Y alone leaves the pair nothing to add)
    return True


def _judge_pair(x: np.ndarray, y: np.ndarray, n_x: int, n_y: int) -> tuple[float, int] | None:
    """(confidence, rows in judged groups) when X → Y looks like a dependency, else None."""
    gm = group_majority(x, np.maximum(y, 0), n_x, n_y)
    judged = gm.size >= MIN_GROUP
    rows = int(gm.size[judged].sum())
    if rows < max(MIN_SUPPORT, 0.1 * int((x >= 0).sum())):
        return None
    dominated = judged & (gm.major_count >= 2) & (gm.major_count >= 2 * gm.second_count)
    if gm.size[dominated].sum() < MIN_DOMINATED_SHARE * rows:
        return None
    confidence = float(gm.major_count[judged].sum() / rows)
    # Informative: X's groups agree on Y more than the same groups would with Y shuffled among them (small
    # groups agree by chance, a binary Y most of all): the disagreement left must fall by a quarter at
    # least, judged on the dominated groups so that noise does not hide a real dependency.
    dom_conf = float(gm.major_count[dominated].sum() / max(gm.size[dominated].sum(), 1))
    both = (x >= 0) & (y >= 0)
    shuffled = y.copy()
    shuffled[both] = np.random.default_rng(17).permutation(y[both])
    gs = group_majority(x, np.maximum(shuffled, 0), n_x, n_y)
    dominated_s = (gs.size >= MIN_GROUP) & (gs.major_count >= 2) & (gs.major_count >= 2 * gs.second_count)
    chance = float(gs.major_count[dominated_s].sum() / max(gs.size[dominated_s].sum(), 1))
    if (1.0 - dom_conf) > 0.75 * (1.0 - chance):
        return None
    return confidence, rows


@dataclass
class Matching:
    """A one-to-one pairing of two columns that determine each other (player name ↔ surname).

    Pairs are taken greedily by how many rows hold them, each value at most once: a value pasted into
    another entity's rows never takes that entity's own value from it.
    """

    x_to_y: np.ndarray  # per X code: its matched Y code (-1: none)
    y_to_x: np.ndarray  # per Y code: its matched X code (-1: none)


def match_pairs(fx: ColumnFacts, fy: ColumnFacts) -> Matching:
    x, y = present_codes(fx), present_codes(fy)
    use = (x >= 0) & (y >= 0)
    n_y = fy.column.n_unique
    keys, counts = unique(x[use].astype(np.int64) * n_y + y[use], return_counts=True)
    order = np.argsort(-counts, kind="stable")
    x_to_y = np.full(fx.column.n_unique, -1, dtype=np.int64)
    y_to_x = np.full(n_y, -1, dtype=np.int64)
    for k in order[counts[order] >= 2].tolist():
        a, b = divmod(int(keys[k]), n_y)
        if x_to_y[a] < 0 and y_to_x[b] < 0:
            x_to_y[a], y_to_x[b] = b, a
    return Matching(x_to_y, y_to_x)
