"""One calibrated decision over every detector's evidence: which cells are wrong, and how sure we are.

Per cell, the strongest evidence of each signal family is added to the prior log-odds of the cell's column;
the posterior is the cell's score. Each column's prior (its error rate) is estimated from the table itself by
expectation-maximisation: a column where many cells carry strong evidence is a dirty column, where weaker
evidence is enough; a column with little evidence stays near the floor, where only strong evidence flags. A
cell with no evidence counts as evidence of a right value (detectors see about half of the wrong cells).

Each flagged cell is reported by one finding: the value-level finding with the strongest evidence when the
value-level evidence alone flags it (so a value's cells are never split between issues), otherwise the
row-level finding (a broken dependency, a counter) whose evidence tipped it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iterate.detect.calibration import DEFAULT, FAMILIES, NOT_RATED, SUPPORTING, Calibration, logit, sigmoid
from iterate.detect.findings import MAX_LISTED, Finding
from iterate.grouping import unique

MAX_ROWS_LISTED = 50_000  # rows a finding lists for code to recount

# When two findings give a cell the same evidence, the most specific explanation reports it.
SPECIFICITY = [
    "encoding_damage", "disguised_missing", "missing_values", "stray_whitespace", "unit_in_number",
    "merged_columns", "format_violation", "mixed_types", "inconsistent_category", "dependency_violation",
    "numeric_outlier",
]  # fmt: skip


@dataclass
class Decision:
    """What the combiner decided: the findings as reported, and the table's estimated error rates."""

    findings: list[Finding]
    table_rate: float
    column_rates: dict[str, float]
    calibration: Calibration
    candidate_cells: int = 0
    flagged_cells: int = 0
    detail: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The decision's parameters and estimates, as run metadata."""
        return {
            "calibration": self.calibration.as_dict(),
            "estimatedErrorRate": round(self.table_rate, 6),
            "columnErrorRates": {k: round(v, 6) for k, v in self.column_rates.items()},
            "candidateCells": self.candidate_cells,
            "flaggedCells": self.flagged_cells,
        }


def _family_index(findings: list[Finding]) -> tuple[np.ndarray, list[str]]:
    """Each finding's signal family as an index into the sorted family names."""
    names = sorted({FAMILIES.get(f.detector, f.detector) for f in findings})
    pos = {n: i for i, n in enumerate(names)}
    return np.array([pos[FAMILIES.get(f.detector, f.detector)] for f in findings], dtype=np.int32), names


def _strongest_per_family(cell: np.ndarray, fam: np.ndarray, llr: np.ndarray) -> np.ndarray:
    """Mask of the entries that are the strongest evidence of their family on their cell (the first of them,
    in entry order, where several are as strong)."""
    keep = np.zeros(cell.size, dtype=bool)
    if cell.size == 0:
        return keep
    if np.isnan(llr).any():  # NaN has no maximum: the lexicographic sort places it
        return _strongest_by_lexsort(cell, fam, llr)
    # One stable sort on (cell, family), then each group's maximum: the entries of a group stay in entry order,
    # so the first one holding the maximum is the one a sort by (cell, family, -llr) puts first.
    key = cell.astype(np.int64) * (int(fam.max()) + 1) + fam
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.empty(key.size, dtype=bool)
    starts[0] = True
    np.not_equal(key[1:], key[:-1], out=starts[1:])
    del key
    group = np.cumsum(starts) - 1
    ranked = llr[order]
    best = np.maximum.reduceat(ranked, np.flatnonzero(starts))
    hit = np.flatnonzero(ranked == best[group])
    hit_group = group[hit]
    first_hit = hit[np.r_[True, hit_group[1:] != hit_group[:-1]]]
    keep[order[first_hit]] = True
    return keep


def _strongest_by_lexsort(cell: np.ndarray, fam: np.ndarray, llr: np.ndarray) -> np.ndarray:
    order = np.lexsort((-llr, fam, cell))
    first = np.ones(order.size, dtype=bool)
    first[1:] = (cell[order][1:] != cell[order][:-1]) | (fam[order][1:] != fam[order][:-1])
    keep = np.zeros(order.size, dtype=bool)
    keep[order[first]] = True
    return keep


def _totals(
    cell: np.ndarray,
    fam: np.ndarray,
    llr: np.ndarray,
    n_cells: int,
    supporting: np.ndarray,
    strongest: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct cell (`cell` indexes them): the sum over families of each family's strongest evidence,
    and the same without the supporting families (what the cell's own signals say; what the error rate
    learns from). A supporting family's evidence counts only on a cell where another family has positive
    evidence. `strongest`: `_strongest_per_family(cell, fam, llr)`, when the caller has it already."""
    keep = _strongest_per_family(cell, fam, llr) if strongest is None else strongest
    # Each selection made once (before: `llr[keep]` three times, `where[~sup]` twice, all alive at once at
    # the detection's peak on a long table).
    sup = supporting[fam[keep]]
    where, kept_llr = cell[keep], llr[keep]
    del keep
    own_cells, own_llr = where[~sup], kept_llr[~sup]
    own = np.bincount(own_cells, weights=own_llr, minlength=n_cells)
    agreed = np.bincount(own_cells, weights=own_llr > 0, minlength=n_cells) > 0
    del own_cells, own_llr
    extra = np.bincount(where[sup], weights=kept_llr[sup], minlength=n_cells)
    return own + np.where(agreed, extra, np.minimum(extra, 0.0)), own


def estimate_rates(
    total: np.ndarray,
    cell_col: np.ndarray,
    cell_group: np.ndarray,
    group_size: np.ndarray,
    n_rows: int,
    n_cols: int,
    cal: Calibration,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Error rates by EM: a column's rate is the mean posterior of its cells, shrunk toward the table's.

    A cell is judged against its column's rate *without its own value's cells* (`cell_group` numbers the
    (column, value) pairs of the cells with evidence, `group_size` their rows in the column): a value
    repeated a thousand times must not make its column look dirty enough to condemn itself.
    Returns the table's rate, each column's rate, and each evidence cell's prior rate.
    """
    evidence_cells = np.bincount(cell_col, minlength=n_cols)
    quiet = n_rows - evidence_cells  # cells without evidence
    absent = float(np.log(cal.miss_rate))
    rates = np.full(n_cols, cal.prior_start)
    prior = np.full(cell_col.size, cal.prior_start)
    table = cal.prior_start
    size = group_size[cell_group].astype(np.float64)
    for _ in range(cal.rounds):
        post = sigmoid(logit(prior) + total)
        mass = np.bincount(cell_col, weights=post, minlength=n_cols) + quiet * sigmoid(logit(rates) + absent)
        table = float(np.clip(mass.sum() / max(n_rows * n_cols, 1), cal.prior_floor, cal.prior_ceiling))
        rates = np.clip(
            (mass + cal.column_pseudo_cells * table) / (n_rows + cal.column_pseudo_cells),
            cal.prior_floor,
            cal.prior_ceiling,
        )
        # The value's cells all share one posterior when their evidence is by value; averaging over the
        # group keeps the leave-one-value-out mass right either way.
        own = np.bincount(cell_group, weights=post, minlength=group_size.size)[cell_group]
        col_mass = mass[cell_col]
        loo = (col_mass - own + cal.column_pseudo_cells * table) / (n_rows - size + cal.column_pseudo_cells)
        prior = np.clip(loo, cal.prior_floor, cal.prior_ceiling)
    return table, rates, prior


def decide(
    findings: list[Finding],
    n_rows: int,
    column_names: list[str],
    cal: Calibration = DEFAULT,
    codes_of: Callable[[int], np.ndarray] | None = None,
    texts_of: Callable[[int, np.ndarray], list[str]] | None = None,
    counts_of: Callable[[int], np.ndarray] | None = None,
) -> Decision:
    """Keep, in each finding, the cells the combined evidence says are wrong; drop findings left empty.

    `codes_of(col)` gives a column's per-row dictionary codes (to judge a value against its column's rate
    without its own cells; without it every cell counts as a value of its own) and `texts_of(col, codes)` the
    values they stand for: a finding lists the values it gave up (reported by another finding, or not
    wrong after all) as `excluded_values`, so that code recounting it leaves them out. `counts_of(col)`: the
    rows of each code, when the caller has them (else counted here, a pass over every row of the column).
    """
    n_cols = max(len(column_names), 1)
    judged = [f for f in findings if f.flag and f.n_cells and (f.cols >= 0).all()]
    if not judged:
        return Decision(findings, cal.prior_floor, {}, cal)
    fam_of, fam_names = _family_index(judged)
    supporting = np.array([n in SUPPORTING for n in fam_names], dtype=bool)
    rank = {t: i for i, t in enumerate(SPECIFICITY)}
    sizes_k = np.array([f.n_cells for f in judged])
    cid = np.concatenate([f.rows * n_cols + f.cols for f in judged])
    llr = np.minimum(
        np.concatenate([f.llr if f.llr is not None else np.full(f.n_cells, cal.certain_llr) for f in judged]),
        cal.max_llr,
    )
    # Per evidence item (every cell of every finding: millions on a long table), the finding it came from
    # and its family as int32, not int64: the decision's arrays are the detection's last peak.
    owner = np.repeat(np.arange(len(judged), dtype=np.int32), sizes_k)
    fam = fam_of[owner]
    value_level = np.array([f.value_level for f in judged])[owner]

    ucid, where = unique(cid, return_inverse=True)
    del cid
    where = where.reshape(-1)
    # Each family's strongest item on each cell: the same entries for the totals and for who supports whom.
    strongest = _strongest_per_family(where, fam, llr)
    # (Each call's other total is dropped at once: bound to `_`, it was held to the decision's peak.)
    total = _totals(where, fam, llr, ucid.size, supporting, strongest)[0]
    # What the error rates learn from: every family but the supporting ones and the gaps.
    unrated = supporting | np.array([n in NOT_RATED for n in fam_names], dtype=bool)
    own = _totals(where, fam, llr, ucid.size, unrated, strongest)[1]
    cell_col = (ucid % n_cols).astype(np.int64)
    cell_row = ucid // n_cols
    # Each evidence cell's (column, value) group, for judging it without its own value's cells.
    cell_code = np.arange(ucid.size, dtype=np.int64)
    group_size = np.ones(ucid.size, dtype=np.int64)
    if codes_of is not None:
        for c in np.unique(cell_col):
            on = cell_col == c
            codes = codes_of(int(c))
            cell_code[on] = codes[cell_row[on]]
            counts = counts_of(int(c)) if counts_of is not None else np.bincount(codes)
            group_size[on] = counts[cell_code[on]]
    span = int(cell_code.max()) + 1
    keys, first_of_group, cell_group = unique(
        cell_col * span + cell_code, return_index=True, return_inverse=True
    )
    del keys  # not read: bound to `_`, it was held to the decision's peak
    cell_group = cell_group.reshape(-1)
    sizes = group_size[first_of_group]
    table_rate, rates, cell_prior = estimate_rates(own, cell_col, cell_group, sizes, n_rows, n_cols, cal)
    # Per evidence cell arrays needed no further, let go before the reporting's (the decision's peak).
    del own, cell_row, cell_code, group_size, cell_group, first_of_group, sizes
    prior = logit(cell_prior)
    del cell_prior
    posterior = sigmoid(prior + total)
    # Flagged: the combined evidence points to a wrong value and carries the posterior over the line.
    flagged = (posterior >= cal.decide_at) & (total > 0)

    # Which finding reports each flagged cell: value-level evidence first when it flags the cell on its own.
    v_total = _totals(where[value_level], fam[value_level], llr[value_level], ucid.size, supporting)[0]
    by_value = (sigmoid(prior + v_total) >= cal.decide_at) & (v_total > 0)
    eligible = flagged[where] & np.where(value_level, by_value[where], ~by_value[where])
    specificity = np.array([rank.get(f.type, len(rank)) for f in judged], dtype=np.int32)[owner]
    order = np.lexsort((specificity, -llr, ~eligible, where))
    first = np.ones(order.size, dtype=bool)
    first[1:] = where[order][1:] != where[order][:-1]
    chosen = order[first & eligible[order]]
    reporter = np.full(ucid.size, -1, dtype=np.int64)
    reporter[where[chosen]] = owner[chosen]

    # Which other detectors saw each reported cell (the strongest item of their family): one grouping.
    support = strongest & (reporter[where] >= 0) & (owner != reporter[where])
    pair_keys, pair_counts = unique(
        reporter[where][support] * len(judged) + owner[support], return_counts=True
    )
    seen: dict[int, dict[str, int]] = {}
    for key, count in zip(pair_keys.tolist(), pair_counts.tolist(), strict=True):
        rep, other = divmod(int(key), len(judged))
        name = judged[other].detector
        seen.setdefault(rep, {})[name] = seen.setdefault(rep, {}).get(name, 0) + int(count)

    kept: set[int] = set()
    offsets = np.concatenate([[0], np.cumsum(sizes_k)])
    for k, f in enumerate(judged):
        pos = where[offsets[k] : offsets[k + 1]]
        mine = reporter[pos] == k
        if not mine.any():
            continue
        f.score = posterior[pos]
        if texts_of is not None and codes_of is not None and not mine.all():
            _exclude_lost_values(f, mine, codes_of, texts_of)
        f.keep(mine)
        if "rows" in f.stats:  # a finding that lists its rows lists those it reports
            f.stats["rows"] = f.unique_rows()[:MAX_ROWS_LISTED].tolist()
        f.stats["evidence"] = _evidence_record(f, seen.get(k, {}))
        kept.add(id(f))
    out = [f for f in findings if id(f) in kept or not (f.flag and f.n_cells and (f.cols >= 0).all())]
    for f in out:
        if f.describe is not None:
            f.description = f.describe(f)
    column_rates = {column_names[c]: float(rates[c]) for c in np.unique(cell_col) if c < len(column_names)}
    return Decision(
        out,
        table_rate,
        column_rates,
        cal,
        candidate_cells=int(ucid.size),
        flagged_cells=int(flagged.sum()),
    )


def _exclude_lost_values(
    f: Finding,
    mine: np.ndarray,
    codes_of: Callable[[int], np.ndarray],
    texts_of: Callable[[int, np.ndarray], list[str]],
) -> None:
    """List as `excluded_values` the values whose every cell the finding gave up (per column, by code)."""
    lost: set[str] = set()
    for c in np.unique(f.cols).tolist():
        on = f.cols == c
        codes = codes_of(int(c))
        gone = np.setdiff1d(codes[f.rows[on & ~mine]], codes[f.rows[on & mine]])
        if gone.size:
            lost |= set(texts_of(int(c), gone[:MAX_LISTED]))
    if not lost:
        return
    before = set(f.stats.get("excluded_values", []))
    f.stats["excluded_values"] = sorted(before | lost)[:MAX_LISTED]
    if "bad_values" in f.stats:
        f.stats["bad_values"] = [v for v in f.stats["bad_values"] if v not in lost]
    for key in ("canonical", "slips"):  # per-value claims: only those of the values still reported
        if key in f.stats:
            f.stats[key] = {k: v for k, v in f.stats[key].items() if k not in lost}


def _evidence_record(f: Finding, seen_with: dict[str, int]) -> dict[str, Any]:
    """What analysis.json keeps of a finding's evidence: the detector, its statistic, scores, agreement."""
    record: dict[str, Any] = {"detector": f.detector}
    if f.stat_name and f.stat is not None and f.stat.size:
        record["statistic"] = f.stat_name
        record["statisticRange"] = [round(float(np.nanmin(f.stat)), 4), round(float(np.nanmax(f.stat)), 4)]
    if f.score is not None and f.score.size:
        record["scoreRange"] = [round(float(f.score.min()), 4), round(float(f.score.max()), 4)]
    if seen_with:
        record["alsoSeenBy"] = dict(sorted(seen_with.items()))
    return record
