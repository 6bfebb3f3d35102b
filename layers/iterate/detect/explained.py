"""Far-off numbers another column explains: the number of a group (a stock's prices, Guam's longitude), a zero
its sibling column shares (a township without residents), and the swing of a small sample (a player's rating
over a handful of minutes).

Each takes an outlier finding of numeric.py and lowers the evidence of the values the other column accounts
for; none flags anything of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import Finding
from iterate.detect.numeric import Scale, weighted_quantile

CONTEXT_SAMPLE = 50_000  # rows a grouping column's explanatory power is judged on
MAX_CONTEXT_GROUPS = 100  # a grouping column of categories (stocks, states)


@dataclass
class Contexts:
    """The label columns that may group a column's numbers, with their codes on one sample of rows, laid
    side by side so that how well each separates a column's numbers is measured for all of them at once."""

    columns: list[ColumnFacts]
    sample: np.ndarray  # the rows judged
    codes: np.ndarray  # (columns, sample): each column's group codes, offset so every group has its own id
    starts: np.ndarray  # per column: its first group id

    @cached_property
    def sizes(self) -> np.ndarray:
        """Rows of the sample in each group (over every column's groups)."""
        return np.bincount(self.codes.ravel(), minlength=int(self.codes.max()) + 1 if self.codes.size else 0)


def context_columns(
    facts: list[ColumnFacts], n_rows: int, max_groups: float = MAX_CONTEXT_GROUPS
) -> Contexts:
    """Label columns (not numbers) of 2..`max_groups` values, each holding five rows per value or more."""
    rng = np.random.default_rng(13)
    sample = (
        np.arange(n_rows) if n_rows <= CONTEXT_SAMPLE else rng.choice(n_rows, CONTEXT_SAMPLE, replace=False)
    )
    chosen = [
        g for g in facts if 2 <= g.column.n_unique <= min(max_groups, n_rows / 5) and not g.numeric.numeric
    ]
    sizes = np.array([g.column.n_unique for g in chosen], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    codes = np.empty((len(chosen), sample.size), dtype=np.int64)
    for k, g in enumerate(chosen):
        codes[k] = g.column.codes[sample] + starts[k]
    return Contexts(chosen, sample, codes, starts)


def _rank_eta2_all(contexts: Contexts, ok: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Per grouping column (rows of `contexts.codes`), on the sample's rows where `ok` (whose ranks `ranks`
    holds, in order): the share of the ranks' variance between its groups beyond what as many groups explain
    by chance ((k - 1) / (n - 1) for k groups of n rows), as a share of what chance leaves (0 for a random
    grouping, 1 for groups that sort the ranks)."""
    codes, starts = contexts.codes, contexts.starts
    if codes.shape[0] == 0:
        return np.zeros(0)
    total_groups = int(codes.max()) + 1
    # Every row is counted, the rows left out adding rank 0.0 (which leaves each group's float sum exactly
    # as without them) and then taken off the sizes: no copy of the column x row matrix per column judged.
    sizes = contexts.sizes
    if not ok.all():
        sizes = sizes - np.bincount(codes[:, ~ok].ravel(), minlength=total_groups)
    sizes = sizes.astype(np.float64)
    spread = np.zeros(codes.shape[1])
    spread[ok] = ranks
    sums = np.bincount(codes.ravel(), weights=np.tile(spread, codes.shape[0]), minlength=total_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = np.where(sizes > 0, sums**2 / np.maximum(sizes, 1), 0.0)
    between = np.add.reduceat(contrib, starts) - ranks.size * ranks.mean() ** 2
    total = float(((ranks - ranks.mean()) ** 2).sum())
    if total <= 0 or ranks.size < 2:
        return np.zeros(codes.shape[0])
    held = np.add.reduceat((sizes > 0).astype(np.float64), starts)
    chance = np.clip((held - 1) / (ranks.size - 1), 0.0, 1.0 - 1e-9)
    return (between / total - chance) / (1.0 - chance)


def discount_explained_outliers(
    f: Finding,
    facts: list[ColumnFacts],
    determines: set[tuple[int, int]],
    cal: Calibration = DEFAULT,
    contexts: Contexts | None = None,
) -> Finding:
    """A far-off number that is ordinary within its group of another column is that group's number: the
    prices of one stock among cheaper ones, the longitudes of Guam among the mainland's airports. A grouping
    column explains the numbers when their spread within its groups is well below their spread overall;
    then a value's evidence is also judged within its own group, and the smaller of the two stands.
    Columns that determine the numbers (`determines`: (lhs, rhs) pairs) are left to the dependencies,
    which judge a value against its entity's consensus. `contexts`: context_columns(facts), built once per
    table (else here)."""
    if f.type != "numeric_outlier" or not f.n_cells or f.llr is None:
        return f
    fy = facts[int(f.cols[0])]
    m = fy.numeric
    kind = str(f.stats.get("scale", "linear"))
    per_id = np.full(fy.column.n_unique, np.nan)
    per_id[m.ids] = m.numbers
    scale = Scale(kind, 0.0, 1.0, float(f.stats.get("top") or 0.0))
    values = scale.transform(per_id[fy.column.codes])
    if contexts is None:
        contexts = context_columns(facts, values.size)
    sample = contexts.sample
    ok = np.isfinite(values[sample])
    if ok.sum() < 20:
        return f
    overall = _mad(values[sample][ok])
    if overall <= 0:
        return f
    best: tuple[float, ColumnFacts] | None = None
    judged = values[sample][ok]
    ranks = np.empty(judged.size)
    ranks[np.argsort(judged, kind="stable")] = np.arange(judged.size)
    # Groups that barely separate the numbers' ranks cannot hold them much tighter: passed over unsorted.
    eta2 = _rank_eta2_all(contexts, ok, ranks)
    for k in np.flatnonzero(eta2 >= CONTEXT_MIN_ETA2).tolist():
        g = contexts.columns[k]
        if g.index == fy.index or (g.index, fy.index) in determines:
            continue  # labels (a stock, a state) define subpopulations; numbers relate through dependencies
        within = _pooled_mad(g.column.codes[sample][ok], judged)
        if (
            within is not None
            and within <= cal.context_spread_ratio * overall
            and (best is None or within < best[0])
        ):
            best = (within, g)
    if best is None:
        return f
    g = best[1]
    rows = f.rows
    groups = g.column.codes[rows]
    z_group = np.full(rows.size, np.inf)
    for code in np.unique(groups).tolist():
        members = np.flatnonzero(g.column.codes == code)
        t = values[members]
        t = t[np.isfinite(t)]
        if t.size < MIN_CONTEXT_ROWS:
            continue
        center = float(np.median(t))
        spread = max(1.4826 * _mad(t), best[0] * 1.4826)
        if spread <= 0:
            continue  # one value fills the group: nothing to measure a distance by
        on = groups == code
        z_group[on] = np.abs(values[rows[on]] - center) / spread
    llr_group = (np.minimum(z_group, 1e6) - cal.outlier_z) * cal.outlier_llr_per_z
    f.llr = np.minimum(f.llr, np.where(np.isfinite(z_group), llr_group, f.llr))
    if "far" in f.features:  # how far out: within its group, where the group holds it closer
        f.features["far"] = np.minimum(f.features["far"], np.log1p(np.minimum(z_group, 1e6)))
    f.stats["context"] = g.name
    return f


SIBLING_RANK_CORR = 0.9  # a column that ranks the rows (nearly) as this one does measures the same quantity
SIBLING_SAMPLE = 50_000  # rows the rank correlation of two columns is judged on


def _per_row_numbers(f: ColumnFacts) -> np.ndarray:
    """The number each row of a column reads as (NaN: not a number, or missing)."""
    m = f.numeric
    per_id = np.full(f.column.n_unique, np.nan)
    per_id[m.ids] = m.numbers
    return per_id[f.column.codes]


def _rank_corr(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two equally long arrays (no NaN)."""
    if a.size < 10:
        return 0.0
    ra = np.empty(a.size)
    rb = np.empty(b.size)
    ra[np.argsort(a, kind="stable")] = np.arange(a.size)
    rb[np.argsort(b, kind="stable")] = np.arange(b.size)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def excuse_shared_zeros(findings: list[Finding], facts: list[ColumnFacts]) -> list[Finding]:
    """A zero in a column of positive quantities is no evidence when its row is zero as well in a sibling
    column: one that ranks the rows as this one does (population in 2001 and in 2011, a count and its
    share). An entity that is empty (a township without residents, a county without Asian residents) is
    empty in every measurement of it; a slip or a failed report puts a zero in one cell, or in columns that
    measure different things (listings and months of inventory). The value's cells keep sharing one
    evidence: it is dropped only when every row holding the zero is vouched for so."""
    per_row: dict[int, np.ndarray] = {}

    def numbers_of(g: ColumnFacts) -> np.ndarray:
        if g.index not in per_row:
            per_row[g.index] = _per_row_numbers(g)
        return per_row[g.index]

    candidates = [g for g in facts if g.numeric.numeric and g.numeric.code_width is None]
    for f in findings:
        if f.type != "numeric_outlier" or not f.n_cells or f.llr is None or f.stats.get("scale") != "log":
            continue
        fy = facts[int(f.cols[0])]
        x = numbers_of(fy)
        zero_rows = np.flatnonzero(x == 0)
        if zero_rows.size == 0 or not np.isin(zero_rows, f.rows).any():
            continue
        vouched = np.zeros(zero_rows.size, dtype=bool)
        siblings: list[str] = []
        for g in candidates:
            if g.index == fy.index:
                continue
            y = numbers_of(g)
            shared = y[zero_rows] == 0
            if not shared.any():
                continue
            both = np.flatnonzero((x > 0) & (y > 0))
            if both.size > SIBLING_SAMPLE:
                both = np.random.default_rng(11).choice(both, SIBLING_SAMPLE, replace=False)
            if _rank_corr(x[both], y[both]) >= SIBLING_RANK_CORR:
                vouched |= shared
                siblings.append(g.name)
            if vouched.all():
                break
        if vouched.all():
            f.llr = np.where(x[f.rows] == 0, np.minimum(f.llr, 0.0), f.llr)
            f.stats["zero_siblings"] = siblings
    return findings


MIN_CONTEXT_ROWS = 5
# Groups whose spread is at most 0.6 of the overall one explain a good share of the ranks' variance beyond
# chance (every such grouping in 8,000 random mixtures, skewed and heavy-tailed, 30 to 2,000 rows, kept 0.1 or
# more); groups below 0.08 are passed over without sorting, and a random grouping of a small table with them.
CONTEXT_MIN_ETA2 = 0.08


def _mad(t: np.ndarray) -> float:
    return float(np.median(np.abs(t - np.median(t)))) if t.size else 0.0


def _pooled_mad(codes: np.ndarray, t: np.ndarray) -> float | None:
    """The row-weighted median, over groups of 5 rows or more, of each group's median absolute deviation
    (from the group's upper median). Two sorts for all groups at once: a table with a hundred label columns
    asks this of every far-off number's column."""
    order = np.lexsort((t, codes))
    codes, t = codes[order], t[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    sizes = np.diff(np.r_[starts, codes.size])
    big = sizes >= MIN_CONTEXT_ROWS
    if sizes[big].sum() < 0.5 * codes.size:
        return None  # the groups are too small to say anything
    group = np.repeat(np.arange(starts.size), sizes)
    dev = np.abs(t - t[starts + sizes // 2][group])
    dev = dev[np.lexsort((dev, group))]
    mads = (dev[starts + (sizes - 1) // 2] + dev[starts + sizes // 2]) / 2
    return weighted_quantile(mads[big], sizes[big].astype(np.float64), 0.5)


# ------------------------------------------------------------------------------------------ small samples

FUNNEL_SAMPLE = 50_000  # rows a funnel is fitted on
# How the spread falls with sample size: a mean's own law, its spread falls with the square root of the units it
# averages. Not fitted: a fall fitted freely reads any heteroscedasticity (wind speed is wider on days few
# riders ride) as small samples, and excused bike's planted noise (0.71 -> 0.37 left out of the fit).
FUNNEL_POWER = 0.5
FUNNEL_CANDIDATES = 3  # size columns fitted per outlier column: those whose growth most narrows its spread
FUNNEL_BINS = 10  # size bins of the location models
MAD_TO_SD = 1.4826  # a normal spread over its median absolute deviation: spreads on one footing with z


@dataclass
class Funnel:
    """The spread of a column's numbers falling with a size column: spread ∝ (size / median size) ** -power,
    around one centre or a centre per size bin (`edges`, `centres`)."""

    size: ColumnFacts
    power: float
    median_size: float
    mad: float  # the median absolute deviation at the median size (robust: the far-off values judged are in it)
    edges: np.ndarray
    centres: np.ndarray  # per size bin (all equal: one centre)
    gain: float  # BIC the funnel gains over the same centres with one spread

    def centre(self, size: np.ndarray) -> np.ndarray:
        return self.centres[np.searchsorted(self.edges, size, side="right")]


def _laplace_bic(dev: np.ndarray, params: int, logr: np.ndarray | None = None) -> float:
    """BIC of absolute deviations under a Laplace law of one scale, or of scales b / r (log r: `logr`)."""
    n = dev.size
    if logr is None:
        b = max(float(dev.mean()), 1e-300)
        ll = -n * math.log(2 * b) - n
    else:
        b = max(float((dev * np.exp(logr)).mean()), 1e-300)
        ll = -n * math.log(2 * b) + float(logr.sum()) - n
    return -2 * ll + params * math.log(n)


def fit_funnel(t: np.ndarray, size: np.ndarray, column: ColumnFacts) -> Funnel | None:
    """The funnel of numbers `t` over positive `size` (both finite), where a funnel model is the best by BIC
    of four: one centre or a centre per size bin (the numbers may move with the size: better players play
    more minutes), each with one spread or a spread falling with the size. None where a one-spread model wins."""
    n = t.size
    if n < 5 * FUNNEL_BINS:
        return None
    med = float(np.median(size))
    logs = np.log(size / med)
    edges = np.quantile(size, np.linspace(0, 1, FUNNEL_BINS + 1)[1:-1])
    bins = np.searchsorted(edges, size, side="right")
    one = np.full(FUNNEL_BINS, float(np.median(t)))
    per_bin = np.array([np.median(t[bins == k]) if (bins == k).any() else one[0] for k in range(FUNNEL_BINS)])
    # The law is not fitted: the funnel costs no parameter more than one spread around the same centres.
    flat, best, centres = math.inf, math.inf, one
    for candidate, params in ((one, 1), (per_bin, FUNNEL_BINS)):
        dev = np.abs(t - candidate[bins])
        flat = min(flat, _laplace_bic(dev, params + 1))
        bic = _laplace_bic(dev, params + 1, FUNNEL_POWER * logs)
        if bic < best:
            best, centres = bic, candidate
    gain = flat - best
    if gain <= 0:
        return None
    power = FUNNEL_POWER
    mad = float(np.median(np.abs(t - centres[bins]) * np.exp(power * logs)))
    return Funnel(column, power, med, mad, edges, centres, gain)


RANK_SAMPLE = 5_000  # rows the size columns are ranked on


def discount_small_samples(
    findings: list[Finding], facts: list[ColumnFacts], cal: Calibration = DEFAULT
) -> list[Finding]:
    """A far-off number measured over few units swings as far as its sample is small: a player's rating over
    two minutes, a county's rate over a handful of cases (the funnel of a funnel plot). Where a column of
    counts (the minutes, the cases) narrows the numbers' spread as it grows, by a law fitted here and kept
    only where it beats one spread for all by BIC (fit_funnel), a value's evidence is also judged against the
    spread its own sample size allows, and the smaller of the two stands. A value off the column's sign or
    scale (a negative or a zero where the column never has one) keeps its evidence."""
    outliers = [f for f in findings if f.type == "numeric_outlier" and f.n_cells and f.llr is not None]
    if not outliers:
        return findings
    sizes = [
        g
        for g in facts
        if g.numeric.numeric
        and g.numeric.code_width is None
        and g.numeric.ids.size >= 10
        and float(g.numeric.numbers.min(initial=0.0)) >= 0.0
        and bool(np.all(g.numeric.numbers == np.round(g.numeric.numbers)))  # counts: minutes, cases, games
        and g.n_present_unique < g.n_present  # a count repeats; a row number or an id does not
    ]
    if not sizes:
        return findings
    per_row: dict[int, np.ndarray] = {}

    def numbers_of(g: ColumnFacts) -> np.ndarray:
        if g.index not in per_row:
            per_row[g.index] = _per_row_numbers(g)
        return per_row[g.index]

    for f in outliers:
        _small_samples(
            f, facts[int(f.cols[0])], [g for g in sizes if g.index != int(f.cols[0])], numbers_of, cal
        )
    return findings


def _small_samples(
    f: Finding,
    fy: ColumnFacts,
    sizes: list[ColumnFacts],
    numbers_of: Callable[[ColumnFacts], np.ndarray],
    cal: Calibration,
) -> None:
    if f.stat is None or f.llr is None or not sizes:
        return
    kind = str(f.stats.get("scale", "linear"))
    scale = Scale(kind, 0.0, 1.0, float(f.stats.get("top") or 0.0))
    x = numbers_of(fy)
    values = scale.transform(x)
    rows = np.flatnonzero(np.isfinite(values))
    rng = np.random.default_rng(17)
    if rows.size > FUNNEL_SAMPLE:
        rows = rng.choice(rows, FUNNEL_SAMPLE, replace=False)
    if rows.size < 5 * FUNNEL_BINS:
        return
    center = float(np.median(values[rows]))
    # The size columns whose growth most narrows the spread (rank correlation of distance and size, on a
    # sample of rows) are fitted.
    few = rows if rows.size <= RANK_SAMPLE else rng.choice(rows, RANK_SAMPLE, replace=False)
    ranked: list[tuple[float, ColumnFacts]] = []
    judged_few = values[few]
    for g in sizes:
        s = numbers_of(g)[few]
        ok = np.isfinite(s) & (s > 0)
        if ok.sum() < 5 * FUNNEL_BINS or abs(_rank_corr(judged_few[ok], s[ok])) >= SIBLING_RANK_CORR:
            continue  # a sibling measure (one sector's employment beside another's) is no sample size
        ranked.append((_rank_corr(np.abs(judged_few[ok] - center), s[ok]), g))
    ranked.sort(key=lambda r: r[0])
    best: Funnel | None = None
    for corr, g in ranked[:FUNNEL_CANDIDATES]:
        if corr >= 0:
            break
        s = numbers_of(g)
        ok = rows[np.isfinite(s[rows]) & (s[rows] > 0)]
        fitted = fit_funnel(values[ok], s[ok], g)
        if fitted is not None and (best is None or fitted.gain > best.gain):
            best = fitted
    if best is None or best.mad <= 0:
        return
    s = numbers_of(best.size)[f.rows]
    t = values[f.rows]
    x_rows = x[f.rows]
    negatives_rare = float(np.mean(x[np.isfinite(x)] < 0)) < cal.offscale_share
    judged = np.isfinite(s) & (s > 0) & np.isfinite(t) & (f.stat > 0) & ~(negatives_rare & (x_rows <= 0))
    if not judged.any():
        return
    at = np.where(judged, s, best.median_size)
    spread = MAD_TO_SD * best.mad / np.power(at / best.median_size, best.power)
    z = np.abs(t - best.centre(at)) / spread
    llr = (np.minimum(z, 1e6) - cal.outlier_z) * cal.outlier_llr_per_z
    f.llr = np.where(judged, np.minimum(f.llr, llr), f.llr)
    if "far" in f.features:
        far = f.features["far"]
        f.features["far"] = np.where(judged, np.minimum(far, np.log1p(np.minimum(z, 1e6))), far)
    f.stats["sample_size"] = best.size.name
