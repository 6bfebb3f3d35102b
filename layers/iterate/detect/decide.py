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

from iterate.detect.calibration import (
    DEFAULT,
    FAMILIES,
    FITTED_ONLY,
    NOT_RATED,
    SUPPORTING,
    Calibration,
    logit,
    sigmoid,
)
from iterate.detect.findings import MAX_LISTED, Finding
from iterate.detect.model import DETECTORS, LLR_CAP, Model, cell_features, extras_of
from iterate.detect.model import load as load_model
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
    model: Model | None = None
    evidence: CellEvidence | None = None  # kept only when asked (make calibrate reads its features)

    def summary(self) -> dict[str, Any]:
        """The decision's parameters and estimates, as run metadata."""
        return {
            "calibration": self.calibration.as_dict(),
            "decision": self.model.as_dict() if self.model is not None else None,
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


@dataclass
class CellEvidence:
    """Every evidence item of the flaggable findings, gathered per cell, and each cell's features.

    Items (one per cell of each finding): `where` (the cell's index in `ucid`), `owner` (the finding's index
    in `judged`), `fam`, `detector` (index in model.DETECTORS), `llr`, `value_level`. Cells: `ucid` (row *
    n_cols + col), `prior` (log-odds of the column's estimated error rate, leaving the cell's own value
    out), `total` (the families' strongest evidence added up), `features` (model.FEATURES).
    """

    judged: list[Finding]
    n_cols: int
    ucid: np.ndarray
    where: np.ndarray
    owner: np.ndarray
    fam: np.ndarray
    detector: np.ndarray
    llr: np.ndarray
    value_level: np.ndarray
    strongest: np.ndarray
    supporting: np.ndarray  # per family index
    prior: np.ndarray
    total: np.ndarray
    features: dict[str, np.ndarray]
    table_rate: float
    column_rates: np.ndarray
    column_share: np.ndarray  # per cell
    value_rows: np.ndarray  # per cell
    extras: dict[str, np.ndarray]  # per item: the statistics findings give beside their evidence
    eligible: np.ndarray  # per cell: a family that is not only supporting gives it evidence
    legacy: np.ndarray  # per item: part of the evidence's own reading (not a fitted-only detector)

    def features_of(self, items: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The cells' total and features from every item, or from the items in the mask `items` only."""
        if items is None:
            where, fam, llr, detector, extras = self.where, self.fam, self.llr, self.detector, self.extras
            total = self.total
        else:
            where, fam, llr, detector = (
                self.where[items],
                self.fam[items],
                self.llr[items],
                self.detector[items],
            )
            extras = {k: v[items] for k, v in self.extras.items()}
            own = self.legacy[items]
            total = _totals(where[own], fam[own], llr[own], self.ucid.size, self.supporting)[0]
        return total, cell_features(
            where,
            detector,
            llr,
            self.ucid.size,
            base=self.prior + total,
            families=_agreeing_families(where, fam, llr, self.ucid.size, self.supporting),
            column_share=self.column_share,
            value_rows=self.value_rows,
            extras=extras,
        )


def _agreeing_families(
    where: np.ndarray, fam: np.ndarray, llr: np.ndarray, n_cells: int, supporting: np.ndarray
) -> np.ndarray:
    """Per cell: how many families that are not supporting give it evidence pointing to a wrong value."""
    pos = (llr > 0) & ~supporting[fam]
    if not pos.any():
        return np.zeros(n_cells)
    n_fam = int(fam.max()) + 1
    pairs = np.unique(where[pos].astype(np.int64) * n_fam + fam[pos])
    return np.bincount(pairs // n_fam, minlength=n_cells).astype(np.float64)


def gather(
    findings: list[Finding],
    n_rows: int,
    column_names: list[str],
    cal: Calibration = DEFAULT,
    codes_of: Callable[[int], np.ndarray] | None = None,
    counts_of: Callable[[int], np.ndarray] | None = None,
) -> CellEvidence | None:
    """The evidence of the flaggable findings, per cell, with the features the decision reads (None: no
    finding has a cell to judge). `make calibrate` reads the same features to fit the decision."""
    n_cols = max(len(column_names), 1)
    judged = [f for f in findings if f.flag and f.n_cells and (f.cols >= 0).all()]
    if not judged:
        return None
    fam_of, fam_names = _family_index(judged)
    supporting = np.array([n in SUPPORTING for n in fam_names], dtype=bool)
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
    det_pos = {d: i for i, d in enumerate(DETECTORS)}
    detector = np.array([det_pos.get(f.detector, -1) for f in judged], dtype=np.int32)[owner]
    value_level = np.array([f.value_level for f in judged])[owner]

    ucid, where = unique(cid, return_inverse=True)
    del cid
    where = where.reshape(-1)
    # Each family's strongest item on each cell: the same entries for the totals and for who supports whom.
    strongest = _strongest_per_family(where, fam, llr)
    # The evidence's own reading leaves out the detectors that reach the decision only through the fit.
    legacy = np.array([f.detector not in FITTED_ONLY for f in judged])[owner]
    # What the error rates learn from: every family but the supporting ones and the gaps.
    unrated = supporting | np.array([n in NOT_RATED for n in fam_names], dtype=bool)
    if legacy.all():  # the strongest items found above serve both totals
        total = _totals(where, fam, llr, ucid.size, supporting, strongest)[0]
        own = _totals(where, fam, llr, ucid.size, unrated, strongest)[1]
    else:
        w, fm, lr = where[legacy], fam[legacy], llr[legacy]
        total = _totals(w, fm, lr, ucid.size, supporting)[0]
        own = _totals(w, fm, lr, ucid.size, unrated)[1]
        del w, fm, lr
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
    # The rates are the evidence's own reading: cells only fitted-only detectors point at are left out (they
    # count as cells without evidence) and take their column's rate.
    on_legacy = np.bincount(where[legacy], minlength=ucid.size) > 0
    if on_legacy.all():
        table_rate, rates, cell_prior = estimate_rates(own, cell_col, cell_group, sizes, n_rows, n_cols, cal)
    else:
        kept_groups, regroup = np.unique(cell_group[on_legacy], return_inverse=True)
        table_rate, rates, legacy_prior = estimate_rates(
            own[on_legacy],
            cell_col[on_legacy],
            regroup.reshape(-1),
            sizes[kept_groups],
            n_rows,
            n_cols,
            cal,
        )
        cell_prior = rates[cell_col]
        cell_prior[on_legacy] = legacy_prior
    # The share of each column's cells whose own evidence points to a wrong value, as log-odds.
    pointing = np.bincount(cell_col, weights=own > 0, minlength=n_cols) / max(n_rows, 1)
    pointing = np.clip(pointing, 1e-4, 1 - 1e-4)
    column_share = np.log(pointing / (1 - pointing))[cell_col]
    value_rows = np.log(np.maximum(group_size, 1).astype(np.float64))
    del own, cell_row, cell_code, group_size, cell_group, first_of_group, sizes
    prior = logit(cell_prior)
    del cell_prior
    extras = extras_of(judged, sizes_k)
    eligible = np.bincount(where, weights=~supporting[fam], minlength=ucid.size) > 0
    ev = CellEvidence(
        judged=judged,
        n_cols=n_cols,
        ucid=ucid,
        where=where,
        owner=owner,
        fam=fam,
        detector=detector,
        llr=llr,
        value_level=value_level,
        strongest=strongest,
        supporting=supporting,
        prior=prior,
        total=total,
        features={},
        table_rate=table_rate,
        column_rates=rates,
        column_share=column_share,
        value_rows=value_rows,
        extras=extras,
        eligible=eligible,
        legacy=legacy,
    )
    ev.features = ev.features_of()[1]
    return ev


def decide(
    findings: list[Finding],
    n_rows: int,
    column_names: list[str],
    cal: Calibration = DEFAULT,
    codes_of: Callable[[int], np.ndarray] | None = None,
    texts_of: Callable[[int, np.ndarray], list[str]] | None = None,
    counts_of: Callable[[int], np.ndarray] | None = None,
    model: Model | None = None,
    keep_evidence: bool = False,
) -> Decision:
    """Keep, in each finding, the cells the fitted decision says are wrong; drop findings left empty.

    `codes_of(col)` gives a column's per-row dictionary codes (to judge a value against its column's rate
    without its own cells; without it every cell counts as a value of its own) and `texts_of(col, codes)` the
    values they stand for: a finding lists the values it gave up (reported by another finding, or not
    wrong after all) as `excluded_values`, so that code recounting it leaves them out. `counts_of(col)`: the
    rows of each code, when the caller has them (else counted here, a pass over every row of the column).
    `model`: the fitted decision (default: fitted.json). `keep_evidence`: keep the gathered evidence and its
    features on the decision (for `make calibrate`; held past the decision otherwise for nothing).
    """
    model = model if model is not None else load_model()
    ev = gather(findings, n_rows, column_names, cal, codes_of, counts_of)
    if ev is None:
        return Decision(findings, cal.prior_floor, {}, cal, model=model)
    judged, where, owner = ev.judged, ev.where, ev.owner
    cut = model.logit_threshold()
    score = model.score(ev.features, ev.ucid.size)
    if not keep_evidence:
        ev.features = {}  # read no further: not held beside the value-level features below (the peak)
    posterior = sigmoid(score)
    # Flagged: a detector that can flag gave the cell evidence, and the fitted score carries it over the line.
    flagged = (score >= cut) & ev.eligible

    # Which finding reports each flagged cell: value-level evidence first when it flags the cell on its own
    # (so a value's cells are never split between issues); otherwise any finding that gave it evidence.
    # A cell whose evidence is all value-level scores the same on its value-level evidence alone: only cells
    # with both kinds are scored again (on a long table, few of its million cells).
    n_cells = ev.ucid.size
    has_value = np.bincount(where[ev.value_level], minlength=n_cells) > 0
    mixed = has_value & (np.bincount(where[~ev.value_level], minlength=n_cells) > 0)
    by_value = has_value & ~mixed & (score >= cut) & (ev.total > 0)
    if mixed.any():
        v_total, v_features = ev.features_of(ev.value_level & mixed[where])
        by_value |= mixed & (model.score(v_features, n_cells) >= cut) & (v_total > 0)
        del v_features
    by_value &= ev.eligible
    eligible = flagged[where] & (ev.value_level | ~by_value[where])
    # Where value-level evidence alone does not flag the cell, a row-level finding reports it if it has one.
    demoted = ev.value_level & ~by_value[where]
    rank = {t: i for i, t in enumerate(SPECIFICITY)}
    specificity = np.array([rank.get(f.type, len(rank)) for f in judged], dtype=np.int32)[owner]
    # The finding whose evidence weighs most in the fitted score reports the cell.
    weighs = _contribution(model, ev)
    order = np.lexsort((specificity, -weighs, demoted, ~eligible, where))
    first = np.ones(order.size, dtype=bool)
    first[1:] = where[order][1:] != where[order][:-1]
    chosen = order[first & eligible[order]]
    reporter = np.full(ev.ucid.size, -1, dtype=np.int64)
    reporter[where[chosen]] = owner[chosen]

    # Which other detectors saw each reported cell (the strongest item of their family): one grouping.
    support = ev.strongest & (reporter[where] >= 0) & (owner != reporter[where])
    pair_keys, pair_counts = unique(
        reporter[where][support] * len(judged) + owner[support], return_counts=True
    )
    seen: dict[int, dict[str, int]] = {}
    for key, count in zip(pair_keys.tolist(), pair_counts.tolist(), strict=True):
        rep, other = divmod(int(key), len(judged))
        name = judged[other].detector
        seen.setdefault(rep, {})[name] = seen.setdefault(rep, {}).get(name, 0) + int(count)

    kept: set[int] = set()
    offsets = np.concatenate([[0], np.cumsum([f.n_cells for f in judged])])
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
    cell_col = ev.ucid % ev.n_cols
    column_rates = {
        column_names[c]: float(ev.column_rates[c]) for c in np.unique(cell_col) if c < len(column_names)
    }
    return Decision(
        out,
        ev.table_rate,
        column_rates,
        cal,
        candidate_cells=int(ev.ucid.size),
        flagged_cells=int(flagged.sum()),
        model=model,
        evidence=ev if keep_evidence else None,
    )


def _contribution(model: Model, ev: CellEvidence) -> np.ndarray:
    """Per evidence item, what it adds to its cell's fitted score: its evidence through the evidence's own
    reading (`base`) and its detector's own weights (`llr:<detector>`, `has:<detector>`)."""
    llr = np.clip(np.nan_to_num(ev.llr, nan=0.0), -LLR_CAP, LLR_CAP)
    out = np.where(ev.legacy, model.weights.get("base", 0.0) * llr, 0.0)
    for k, name in enumerate(DETECTORS):
        w_llr, w_has = model.weights.get(f"llr:{name}", 0.0), model.weights.get(f"has:{name}", 0.0)
        if w_llr or w_has:
            on = ev.detector == k
            out[on] += w_llr * llr[on] + w_has
    return out


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
