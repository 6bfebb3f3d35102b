"""Numbers against their row's context: a value far from what its group, or a column it moves with, predicts.

Noise in a measure (a count off by a few hundred, a price with a digit doubled) is often ordinary for the
column as a whole and plain once the row is read: the population of a country far from its other years,
a total far from what its parts say, a charge far from what its payment predicts. Two readings, each on the
scale that suits the column (log for positive quantities spanning magnitudes):

- **group**: the value's distance from the median of its group in the label column that explains the most
  of the column's spread (countries, stations, products), in units of the typical spread within groups;
- **fit**: the value's distance from a robust line through the numeric column it ranks with most closely
  (a total and its parts, a charge and its payment), in units of the line's typical residual.

The evidence is a log-likelihood ratio: how much likelier the value is as a draw from the whole column than
from what its context predicts (`_context_llr`); a context that explains little gives none. Every candidate
also carries both distances and how much each context explains, and the decision (iterate.detect.model)
weighs them.
"""

from __future__ import annotations

import math

import numpy as np

from iterate.detect.context import ColumnFacts
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.explained import CONTEXT_MIN_ETA2, _rank_eta2_all, context_columns
from iterate.detect.findings import Finding, cells
from iterate.detect.model import LLR_CAP
from iterate.detect.numeric import robust_scale
from iterate.wording import agree, plural

MIN_GROUP_ROWS = 4  # a group judges its members from this many rows
CANDIDATE_LLR = (
    1.0  # cells whose value is not e times likelier from the column than from its context: not listed (work)
)
MIN_VALUES = 10  # a column of fewer distinct numbers is a code or a scale, judged elsewhere


def _rows_numbers(f: ColumnFacts) -> np.ndarray:
    m = f.numeric
    per_id = np.full(f.column.n_unique, np.nan)
    per_id[m.ids] = m.numbers
    return per_id[f.column.codes]


def _scaled(f: ColumnFacts) -> np.ndarray | None:
    """The column's numbers per row on the scale that suits it (NaN: missing, not a number, off the scale)."""
    m = f.numeric
    if not m.numeric or m.code_width is not None or int(m.is_number.sum()) < MIN_VALUES:
        return None
    ok = m.is_number
    scale = robust_scale(m.numbers[ok], m.weights[ok].astype(np.float64))
    if scale is None:
        return None
    kind = "log" if scale.log else "linear"
    x = _rows_numbers(f)
    if kind == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)
    return x


def _mad(t: np.ndarray) -> float:
    return float(np.median(np.abs(t - np.median(t)))) if t.size else 0.0


def _group_medians(g: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows sorted by (group, value): each group's start, size, and (lower) median."""
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, g.size])
    return starts, sizes, v[starts + (sizes - 1) // 2]


def _group_z(t: np.ndarray, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, float]:
    """Per row: |t - its group's median| / (1.4826 x the typical within-group MAD); and the share of the
    column's spread the groups leave (their pooled MAD over the column's). Groups of fewer than
    MIN_GROUP_ROWS rows judge nobody. Two sorts for every group at once."""
    ok = np.isfinite(t) & (groups >= 0)
    z = np.full(t.size, np.nan)
    if ok.sum() < 2 * MIN_GROUP_ROWS:
        return z, 1.0
    rows = np.flatnonzero(ok)
    g, v = groups[rows].astype(np.int64), t[rows]
    order = np.lexsort((v, g))
    g, v, rows = g[order], v[order], rows[order]
    starts, sizes, med = _group_medians(g, v)
    member = np.repeat(np.arange(starts.size), sizes)
    dev = np.abs(v - med[member])
    order2 = np.lexsort((dev, g))
    _, _, mads = _group_medians(g[order2], dev[order2])
    big = sizes >= MIN_GROUP_ROWS
    if not big.any():
        return z, 1.0
    by_mad = np.argsort(mads[big], kind="stable")
    cum = np.cumsum(sizes[big][by_mad].astype(np.float64))
    pooled = float(mads[big][by_mad][np.searchsorted(cum, cum[-1] / 2)])
    overall = _mad(t[ok])
    if pooled <= 0 or overall <= 0:
        return z, 1.0
    judged = big[member]
    z[rows[judged]] = dev[judged] / (1.4826 * pooled)
    return z, pooled / overall


def _fit_z(t: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, float]:
    """Per row: the distance of t from a robust line through (u, t) (median of pairwise slopes on a sample,
    median intercept), in units of 1.4826 x the residuals' MAD; and that spread as a share of the column's."""
    ok = np.isfinite(t) & np.isfinite(u)
    z = np.full(t.size, np.nan)
    if ok.sum() < 2 * MIN_VALUES:
        return z, 1.0
    rows = np.flatnonzero(ok)
    rng = np.random.default_rng(5)
    a = rng.choice(rows, min(rows.size, 4000))
    b = rng.choice(rows, a.size)
    du = u[a] - u[b]
    keep = du != 0
    if not keep.any():
        return z, 1.0
    slope = float(np.median((t[a] - t[b])[keep] / du[keep]))
    resid = t[rows] - slope * u[rows]
    resid -= np.median(resid)
    spread = 1.4826 * _mad(resid)
    overall = 1.4826 * _mad(t[rows])
    if spread <= 0 or overall <= 0:
        return z, 1.0
    z[rows] = np.abs(resid) / spread
    return z, spread / overall


def _marginal_z(t: np.ndarray) -> np.ndarray:
    ok = np.isfinite(t)
    z = np.full(t.size, np.nan)
    if ok.sum() < 2:
        return z
    centre = float(np.median(t[ok]))
    spread = 1.4826 * _mad(t[ok])
    if spread > 0:
        z[ok] = np.abs(t[ok] - centre) / spread
    return z


def _context_llr(z_context: np.ndarray, z_marginal: np.ndarray, left: float) -> np.ndarray:
    """log N(value; column) - log N(value; context), from the two robust z's and the share of the column's
    spread the context leaves: log(left) + (z_context^2 - z_marginal^2) / 2 (z's capped at 10: the tails of
    real measures are heavier than normal)."""
    zc, zm = np.minimum(z_context, 10.0), np.minimum(z_marginal, 10.0)
    with np.errstate(invalid="ignore"):
        return math.log(max(left, 1e-3)) + (zc**2 - np.nan_to_num(zm, nan=0.0) ** 2) / 2.0


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of the finite values (NaN elsewhere)."""
    out = np.full(x.size, np.nan)
    ok = np.flatnonzero(np.isfinite(x))
    out[ok[np.argsort(x[ok], kind="stable")]] = np.arange(ok.size)
    return out


def _closest_columns(ranks: dict[int, np.ndarray]) -> dict[int, tuple[float, int]]:
    """Per column, the other numeric column whose ranks correlate most with its own (absolute Pearson of the
    ranks, over the sampled rows both fill, at least 2 * MIN_VALUES of them), and that correlation; ties go to
    the first column. Every pair at once from a few matrix products over the rows each pair fills (a wide table
    has hundreds of numeric columns: a pair at a time was 25,000 calls of np.corrcoef)."""
    names = list(ranks)
    if len(names) < 2:
        return {}
    m = np.stack([ranks[i] for i in names], axis=1)
    filled = np.isfinite(m)
    # Centred on each column's own mean (the sums below then cancel little); the shift leaves r unchanged.
    with np.errstate(invalid="ignore"):
        x = np.where(filled, m - np.nanmean(np.where(filled, m, np.nan), axis=0), 0.0)
    f = filled.astype(np.float64)
    n = f.T @ f  # rows both fill
    s_a = x.T @ f  # [a, b]: the sum of a over the rows a and b fill
    s_aa = (x * x).T @ f
    s_ab = x.T @ x
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = s_ab - s_a * s_a.T / n
        var_a = s_aa - s_a * s_a / n
        r = np.clip(cov / np.sqrt(var_a * var_a.T), -1.0, 1.0)
    strength = np.round(np.abs(r), 12)  # one value for a tie, however the sums were ordered
    strength[~np.isfinite(strength) | (n < 2 * MIN_VALUES)] = -1.0
    np.fill_diagonal(strength, -1.0)
    out: dict[int, tuple[float, int]] = {}
    for k, j in enumerate(names):
        best = int(np.argmax(strength[k]))
        if strength[k, best] >= 0:
            out[j] = (float(strength[k, best]), names[best])
    return out


def detect_numeric_context(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    if n_rows < 4 * MIN_GROUP_ROWS:
        return []
    scaled = {f.index: t for f in facts if f.column.n_unique >= MIN_VALUES and (t := _scaled(f)) is not None}
    if not scaled:
        return []
    # Any label of five rows a value or more may group (countries, stations), not only a few categories.
    contexts = context_columns(facts, n_rows, max_groups=n_rows)
    sample = contexts.sample
    ranks = {i: _ranks(t[sample]) for i, t in scaled.items()}
    closest = _closest_columns(ranks)
    out: list[Finding] = []
    for j, t in scaled.items():
        fy = facts[j]
        ok = np.isfinite(t[sample])
        # The label column that separates the column's numbers most (rank eta squared, beyond chance).
        group_z, group_left, group_name = np.full(n_rows, np.nan), 1.0, None
        if ok.sum() >= 2 * MIN_VALUES and contexts.columns:
            order = np.argsort(t[sample][ok], kind="stable")
            judged = np.empty(order.size)
            judged[order] = np.arange(order.size)
            eta2 = _rank_eta2_all(contexts, ok, judged)
            best = int(np.argmax(eta2)) if eta2.size else -1
            if best >= 0 and eta2[best] >= CONTEXT_MIN_ETA2 and contexts.columns[best].index != j:
                g = contexts.columns[best]
                codes = np.where(g.is_missing[g.column.codes], -1, g.column.codes)
                group_z, group_left = _group_z(t, codes, g.column.n_unique)
                group_name = g.name
        # The numeric column that ranks the rows most like this one.
        best_fit = closest.get(j)
        fit_z, fit_corr, fit_left = np.full(n_rows, np.nan), 0.0, 1.0
        if best_fit is not None:
            fit_corr = best_fit[0]
            fit_z, fit_left = _fit_z(t, scaled[best_fit[1]])
        # Evidence: how much likelier the value is as a draw from the whole column than from what its context
        # predicts (normal readings of both, robust centres and spreads): a context that explains little (a
        # shuffled table) gives every value about as much under both, and no evidence.
        marginal = _marginal_z(t)
        llr = np.fmax(
            _context_llr(group_z, marginal, group_left),
            _context_llr(fit_z, marginal, fit_left),
        )
        far = np.fmax(group_z, fit_z)
        hit = np.isfinite(llr) & (llr > CANDIDATE_LLR)
        if not hit.any():
            continue
        rows = np.flatnonzero(hit)
        context = [x for x in (group_name, facts[best_fit[1]].name if best_fit else None) if x]
        out.append(
            _finding(
                fy,
                rows,
                llr[hit],
                far[hit],
                np.nan_to_num(group_z[hit], nan=0.0),
                np.nan_to_num(fit_z[hit], nan=0.0),
                group_left,
                fit_left,
                fit_corr,
                context,
            )
        )
    return out


def _finding(
    fy: ColumnFacts,
    rows: np.ndarray,
    llr: np.ndarray,
    far: np.ndarray,
    group_z: np.ndarray,
    fit_z: np.ndarray,
    group_left: float,
    fit_left: float,
    fit_corr: float,
    context: list[str],
) -> Finding:
    name = fy.name
    shown = " and ".join(repr(c) for c in context)

    def describe(fd: Finding) -> str:
        first = int(fd.rows[0])
        return (
            f"{plural(fd.n_cells, 'number')} in '{name}' {agree(fd.n_cells, 'lies', 'lie')} far from what "
            f"{shown} predict{'s' if len(context) == 1 else ''} for {agree(fd.n_cells, 'its', 'their')} row "
            f"(e.g. row {first}: '{fy.column.value(first)}'): a digit doubled or dropped, a value shifted, or "
            "noise pasted over the recorded one."
        )

    r, c = cells(rows, fy.index)
    return Finding(
        type="numeric_outlier",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Numbers of {name} off what their row predicts",
        description="",
        describe=describe,
        suggested_action=f"Check these values of '{name}' against the source; the row's other values say "
        "roughly what each should be.",
        category="smart_fixes",
        detector="numcontext",
        stats={"column": name, "context": context, "rows": rows[:MAX_ROWS_LISTED].tolist()},
        key=f"numcontext:{name}",
        llr=np.minimum(llr, LLR_CAP),
        stat=far,
        stat_name="distance from the row's prediction, in spreads",
        value_level=False,
        vouchable=False,
        features={
            "group": np.log1p(np.minimum(group_z, 1e6)),
            "fit": np.log1p(np.minimum(fit_z, 1e6)),
            "tight": np.full(rows.size, math.log(max(min(group_left, fit_left), 1e-3))),
            "corr": np.full(rows.size, fit_corr),
        },
    )
