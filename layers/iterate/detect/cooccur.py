"""Co-occurrence: a value unlikely beside the values its row holds in associated columns.

A value pasted in from another row (a swap), a category mistyped into another category, or a fresh typo is
drawn, as far as the rest of its row knows, from the column's values at large; a right value is drawn from
the values that go with its row (a city with its state, a relationship with a sex and a marital status).
For a column Y and a column X associated with it, the evidence that a cell is wrong is

    log p(y) - log p(y | x)

(how much likelier the value is as a draw from the whole column than as the value of its row's X group),
both estimated without the cell itself (its own row never vouches for it) and p(y | x) pulled toward p(y)
by a prior whose strength the column pair itself sets (empirical Bayes: the strength under which each row is
best predicted by the others). No threshold of its own: a value its group never otherwise holds scores above
zero, the group's usual value below, and a column X that says nothing about Y scores every cell near zero.
Associated columns are chosen by how much they tell about Y beyond chance (the uncertainty coefficient, less
what as many groups would tell by chance), a few per column; the decision (iterate.detect.model) weighs the
evidence with its strongest and weakest reading across them.

Functional dependencies (iterate.detect.dependencies) judge the groups that agree on one value; this signal
covers the looser associations and the columns whose groups are too small or too noisy for a consensus.
"""

from __future__ import annotations

import math

import numpy as np

from iterate.detect.context import ColumnFacts
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.discovery import present_codes
from iterate.detect.findings import Finding, cells
from iterate.detect.model import LLR_CAP
from iterate.grouping import unique
from iterate.wording import agree, plural

SAMPLE_ROWS = 2_000  # rows the association of two columns is measured on
MAX_TABLE = 50 * SAMPLE_ROWS  # (x, y) cells of one pair of columns beyond which the sample measures nothing
MAX_COLUMNS = 80  # as the dependencies: a wider table is judged on its first 80 such columns
MAX_CONTEXT = 3  # associated columns a column is judged against (the most telling ones)
MAX_VALUES = 5_000  # a column of more distinct values is a key or free text: it has no distribution to break
MIN_TYPICAL = 3  # the median row's value must be held by this many rows for the column to be judged
CANDIDATE_LLR = 1.0  # cells whose value is not e times likelier elsewhere than here are not listed (work)


def _context(facts: list[ColumnFacts], n_rows: int) -> dict[int, np.ndarray]:
    """Per column that can be judged or judge (the first MAX_COLUMNS): its present codes (-1: missing)."""
    out = {}
    for f in facts:
        if 2 <= f.column.n_unique <= min(MAX_VALUES, n_rows / 2) and f.n_present >= 20:
            out[f.index] = present_codes(f)
            if len(out) == MAX_COLUMNS:
                break
    return out


# Prior strengths tried for p(y | x): how many rows' worth of the column's own distribution a group's counts
# are pulled toward. The one that predicts each row best from the others (empirical Bayes) is kept.
ALPHAS = np.geomspace(0.1, 1000.0, 25)


def cooccurrence_llr(x: np.ndarray, y: np.ndarray, n_x: int, n_y: int) -> np.ndarray:
    """Per row: log p(y) - log p(y | x), each counted without the row itself (NaN where x or y is missing).

    p(y | x) is the group's share pulled toward p(y) by a prior of `alpha` rows, alpha chosen where the rows'
    leave-one-out likelihood peaks: X that says nothing about Y drives alpha up and the evidence to zero (a
    shuffled column proves nothing), X that determines Y keeps it small."""
    both = (x >= 0) & (y >= 0)
    out = np.full(y.size, np.nan)
    if not both.any():
        return out
    xs, ys = x[both].astype(np.int64), y[both].astype(np.int64)
    n = float(xs.size)
    y_counts = np.bincount(ys, minlength=n_y).astype(np.float64)
    x_counts = np.bincount(xs, minlength=n_x).astype(np.float64)
    keys, inverse, joint = unique(xs * n_y + ys, return_inverse=True, return_counts=True)
    # The rows of one (x, y) pair share every term: computed once per distinct pair, the likelihood summed
    # over them weighted by their rows.
    kx, ky = keys // n_y, keys % n_y
    k_pair = joint.astype(np.float64) - 1.0
    k_p_y = np.maximum(y_counts[ky] - 1.0, 0.5) / max(n - 1.0, 1.0)
    k_group = x_counts[kx] - 1.0
    weight = joint.astype(np.float64)
    fit = [float((weight * np.log((k_pair + a * k_p_y) / (k_group + a))).sum()) for a in ALPHAS]
    alpha = float(ALPHAS[int(np.argmax(fit))])
    k_p_y_x = (k_pair + alpha * k_p_y) / (k_group + alpha)
    out[both] = (np.log(k_p_y) - np.log(k_p_y_x))[inverse.reshape(-1)]
    return out


def _compact(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes renumbered 0..k-1 over the rows given (-1 kept for missing)."""
    valid = codes >= 0
    uniq, inverse = np.unique(codes[valid], return_inverse=True)
    out = np.full(codes.size, -1, dtype=np.int64)
    out[valid] = inverse.reshape(-1)
    return out, max(int(uniq.size), 1)


def _plogp(c: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, c * np.log(c), 0.0)


def _information(yc: np.ndarray, n_y: int, xs: np.ndarray, n_xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in mutual information of Y with each X (rows of `xs`), and H(Y) on the same rows, in nats."""
    k = xs.shape[0]
    sizes = n_xs * n_y
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    x_offsets = np.concatenate([[0], np.cumsum(n_xs)[:-1]])
    both = (xs >= 0) & (yc >= 0)[None, :]
    which = np.broadcast_to(np.arange(k)[:, None], xs.shape)[both]
    xb = xs[both]
    yb = np.broadcast_to(yc[None, :], xs.shape)[both]
    c_xy = np.bincount(offsets[which] + xb * n_y + yb, minlength=int(sizes.sum())).astype(np.float64)
    c_x = np.bincount(x_offsets[which] + xb, minlength=int(n_xs.sum())).astype(np.float64)
    c_y = np.bincount(which * n_y + yb, minlength=k * n_y).astype(np.float64)
    n = np.add.reduceat(c_xy, offsets)
    safe = np.maximum(n, 1.0)
    h_xy = np.log(safe) - np.add.reduceat(_plogp(c_xy), offsets) / safe
    h_x = np.log(safe) - np.add.reduceat(_plogp(c_x), x_offsets) / safe
    h_y = np.log(safe) - np.add.reduceat(_plogp(c_y), np.arange(k) * n_y) / safe
    return np.where(n >= 20, h_x + h_y - h_xy, 0.0), h_y


def associations(y: tuple[np.ndarray, int], xs: np.ndarray, n_xs: np.ndarray) -> np.ndarray:
    """How much each X (rows of `xs`, compacted sample codes, -1 missing) tells about Y beyond chance: (the
    mutual information, less what X shows with Y's values shuffled among the rows) / H(Y); 0 when it tells
    nothing more than chance. A table of far more (x, y) cells than sample rows is passed over."""
    yc, n_y = y
    out = np.zeros(xs.shape[0])
    fits = (n_xs * n_y <= MAX_TABLE) & (n_xs >= 2)
    if not fits.any() or n_y < 2:
        return out
    info, h_y = _information(yc, n_y, xs[fits], n_xs[fits])
    shuffled = np.random.default_rng(17).permutation(yc)
    chance, _ = _information(shuffled, n_y, xs[fits], n_xs[fits])
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(h_y > 0, (info - chance) / h_y, 0.0)
    out[fits] = np.maximum(u, 0.0)
    return out


def detect_cooccurrence(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    """Per judged column, the cells whose value its associated columns make unlikely (evidence, not a
    verdict: every candidate keeps its log-likelihood ratio and the decision weighs it)."""
    codes = _context(facts, n_rows)
    if len(codes) < 2 or n_rows < 20:
        return []
    rng = np.random.default_rng(11)
    sample = None if n_rows <= SAMPLE_ROWS else np.sort(rng.choice(n_rows, SAMPLE_ROWS, replace=False))
    order = list(codes)
    compact = [_compact(codes[i] if sample is None else codes[i][sample]) for i in order]
    stacked = np.stack([c for c, _ in compact]).astype(np.int32)
    sizes = np.array([n for _, n in compact], dtype=np.int64)
    n_unique = {i: facts[i].column.n_unique for i in codes}
    out: list[Finding] = []
    for pos, j in enumerate(order):
        fy = facts[j]
        y = codes[j]
        # A column of mostly unique values (names, ids, measures) has no distribution to break.
        if fy.free_text or fy.prose or fy.typical_count < MIN_TYPICAL:
            continue
        strength = associations(compact[pos], stacked, sizes)
        strength[pos] = 0.0  # a column tells everything about itself
        ranked = sorted(
            ((float(u), i) for u, i in zip(strength.tolist(), order, strict=True) if u > 0), reverse=True
        )
        chosen = ranked[:MAX_CONTEXT]
        if not chosen:
            continue
        llrs = np.stack([cooccurrence_llr(codes[i], y, n_unique[i], n_unique[j]) for _, i in chosen])
        judged = np.isfinite(llrs)
        if not judged.any():
            continue
        filled = np.where(judged, llrs, 0.0)
        count = judged.sum(axis=0)
        mean = np.where(count > 0, filled.sum(axis=0) / np.maximum(count, 1), np.nan)
        weakest = np.where(judged, llrs, np.inf).min(axis=0)
        strongest = np.where(judged, llrs, -np.inf).max(axis=0)
        hit = np.isfinite(mean) & (mean > CANDIDATE_LLR)
        if not hit.any():
            continue
        rows = np.flatnonzero(hit)
        names = [facts[i].name for _, i in chosen]
        out.append(_finding(fy, rows, mean[hit], weakest[hit], strongest[hit], chosen[0][0], names))
    return out


def _finding(
    fy: ColumnFacts,
    rows: np.ndarray,
    mean: np.ndarray,
    weakest: np.ndarray,
    strongest: np.ndarray,
    strength: float,
    context: list[str],
) -> Finding:
    name = fy.name
    shown = ", ".join(repr(c) for c in context)

    def describe(fd: Finding) -> str:
        first = int(fd.rows[0])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'is', 'are')} unlikely beside what "
            f"the same row holds in {shown}: rows that share those values hold other values of '{name}' "
            f"(e.g. row {first}: '{fy.column.value(first)}'). A value pasted from another row, or a category "
            "typed as another, reads like this."
        )

    r, c = cells(rows, fy.index)
    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Values of {name} unlike the rest of their row",
        description="",
        describe=describe,
        suggested_action=f"Check these values of '{name}' against the source record; the other values of "
        "the row say which one it should be.",
        category="smart_fixes",
        detector="cooccur",
        stats={"column": name, "context": context, "rows": rows[:MAX_ROWS_LISTED].tolist()},
        key=f"cooccur:{name}",
        llr=mean,
        stat=mean,
        stat_name="log-likelihood ratio of the value beside its row's context",
        value_level=False,
        vouchable=False,
        features={
            "weakest": np.clip(weakest, -LLR_CAP, LLR_CAP),
            "strongest": np.clip(strongest, -LLR_CAP, LLR_CAP),
            "strength": np.full(rows.size, math.log(max(strength, 1e-6))),
        },
    )
