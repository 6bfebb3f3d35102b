"""Conflicting sources: several sources report the same entities, and the reliable ones tell the truth.

A table that merges reports from several sources (a flight's departure time from twenty websites, a
product's price from several feeds) holds one row per source and entity, and the sources disagree. The
entity's consensus is the truth, but a plain majority is not enough when a third of the claims are wrong:
sources differ in how often they are right, and wrong claims repeat (one source copies another). So the
truth is found as truth-discovery methods find it (TruthFinder, ACCU): each entity's value is the one with
the most weight of sources behind it, each source's weight is how often it agrees with the truth, and the
two are estimated together. A claim off its entity's truth is evidence in proportion to how sure the
weighted vote is.

The mode needs the table to say it is of this kind: a column named as a source (src, source, feed,
website, publisher), with each entity reported by several sources and by each at most once. Panels of
the same people over years are not sources: their values change legitimately, and nothing calls the year a
source. The claim is recounted in code with the `consensus` rule (a listed row's entity holds another
value as well), as a broken dependency is.
"""

from __future__ import annotations

import re

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration, logit, share_llr
from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.discovery import Dependency, present_codes
from iterate.detect.findings import MAX_LISTED, Finding, value_finding
from iterate.table import wide

# A column named as where each report came from. Not 'origin' (a flight's origin airport, a product's
# country), 'provider' (a hospital is an entity) or 'vendor' (vendors price alike goods differently).
SOURCE_NAME = re.compile(
    r"(?:^|[_\s.-])(?:src|source|sources|feed|website|publisher)(?:$|[_\s.-]|id\b|_?name\b)",
    re.IGNORECASE,
)
MIN_SOURCES_PER_ENTITY = 3.0  # sources reporting an entity, on average
ONCE_SHARE = 0.9  # rows whose (entity, source) pair is theirs alone: each source reports an entity once
MIN_CLAIMS = 3  # claims an entity needs before its truth judges any of them
ROUNDS = 10
PRIOR_ACCURACY = 0.8


def source_column(facts: list[ColumnFacts], n_rows: int) -> ColumnFacts | None:
    """The column the table names as its source, when it has one with a few to a few hundred values."""
    for f in facts:
        if SOURCE_NAME.search(f.name) and 2 <= f.column.n_unique <= min(1000, max(n_rows // 3, 2)):
            return f
    return None


def _reported_once(x: np.ndarray, s: np.ndarray, n_s: int) -> float:
    """Share of (entity, source) pairs reported once, where each entity has several sources (else 0)."""
    use = (x >= 0) & (s >= 0)
    if use.sum() < 30:
        return 0.0
    pair = wide(x[use]) * n_s + s[use]
    _, counts = np.unique(pair, return_counts=True)
    once = float((counts == 1).sum() / counts.size)
    entities = np.unique(x[use]).size
    return once if counts.size / max(entities, 1) >= MIN_SOURCES_PER_ENTITY else 0.0


def discover_truth(
    x: np.ndarray, y: np.ndarray, s: np.ndarray, n_x: int, n_y: int, n_s: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the entity's truth (-1: not judged) and the probability that the row's claim is wrong; per
    source: its estimated accuracy. x, y, s: per-row codes (-1: missing)."""
    use = (x >= 0) & (y >= 0) & (s >= 0)
    rows = np.flatnonzero(use)
    xr, yr, sr = wide(x[rows]), wide(y[rows]), wide(s[rows])
    claims = np.bincount(xr, minlength=n_x)
    judged_entity = claims >= MIN_CLAIMS
    pair, inverse = np.unique(xr * n_y + yr, return_inverse=True)
    inverse = inverse.reshape(-1)
    px, py = pair // n_y, pair % n_y
    accuracy = np.full(n_s, PRIOR_ACCURACY)
    truth = np.full(n_x, -1, dtype=np.int64)
    for _ in range(ROUNDS):
        weight = np.log(np.clip(accuracy, 0.05, 0.99) / np.clip(1 - accuracy, 0.01, 0.95))
        score = np.bincount(inverse, weights=weight[sr], minlength=pair.size)
        order = np.lexsort((-score, px))
        first = np.r_[True, px[order][1:] != px[order][:-1]]
        truth[:] = -1
        truth[px[order][first]] = py[order][first]
        agree = truth[xr] == yr
        judged = judged_entity[xr]
        hits = np.bincount(sr[judged], weights=agree[judged], minlength=n_s)
        total = np.bincount(sr[judged], minlength=n_s)
        accuracy = (hits + 1.0) / (total + 2.0)
    # How sure the vote is of the truth against the row's own claim: a softmax of the candidates' scores
    # within the entity.
    weight = np.log(np.clip(accuracy, 0.05, 0.99) / np.clip(1 - accuracy, 0.01, 0.95))
    score = np.bincount(inverse, weights=weight[sr], minlength=pair.size)
    top = np.full(n_x, -np.inf)
    np.maximum.at(top, px, score)
    mass = np.bincount(px, weights=np.exp(score - top[px]), minlength=n_x)
    p_claim = np.exp(score[inverse] - top[xr]) / mass[xr]
    wrong = np.zeros(x.size)
    judged_row = np.zeros(x.size, dtype=bool)
    judged_row[rows] = judged_entity[xr]
    wrong[rows] = np.where(judged_entity[xr], 1.0 - p_claim, 0.0)
    truth_row = np.full(x.size, -1, dtype=np.int64)
    truth_row[rows] = np.where(judged_entity[xr], truth[xr], -1)
    return truth_row, wrong, accuracy


def detect_source_conflicts(
    facts: list[ColumnFacts], n_rows: int, deps: list[Dependency], cal: Calibration = DEFAULT
) -> list[Finding]:
    """Claims off their entity's truth, in a table that merges several sources' reports."""
    fs = source_column(facts, n_rows)
    if fs is None:
        return []
    s = present_codes(fs)
    out: list[Finding] = []
    # The entity is the determinant that the sources report once each, best: the other columns it
    # determines are its attributes (a time that happens to be unique per flight is not the flight).
    keys = sorted({d.lhs for d in deps if d.lhs != fs.index})
    once = {k: _reported_once(present_codes(facts[k]), s, fs.column.n_unique) for k in keys}
    entity = max(keys, key=lambda k: (once[k], -facts[k].column.n_unique), default=None)
    if entity is None or once[entity] < ONCE_SHARE:
        return []
    for lhs in [entity]:
        fx = facts[lhs]
        x = present_codes(fx)
        for d in deps:
            if d.lhs != lhs or d.rhs == fs.index:
                continue
            fy = facts[d.rhs]
            y = fy.meaning.codes
            truth, wrong, _ = discover_truth(
                x, y, s, fx.column.n_unique, fy.meaning.n_keys, fs.column.n_unique
            )
            variants = _spelling_variants(fy, truth >= 0, cal)
            if variants is not None:
                out.append(variants)
            off = (truth >= 0) & (y != truth) & (wrong > 0.5)
            if not off.any():
                continue
            rows = np.flatnonzero(off)
            p = np.clip(wrong[rows], 0.5, 1 - 1e-4)
            # The vote's certainty is a probability that already holds the base rate of wrong reports; as
            # evidence beside the column's own rate, it is taken relative to that base rate.
            base = float(np.clip(off.sum() / max(int((truth >= 0).sum()), 1), cal.prior_floor, 0.5))
            llr = np.clip(logit(p) - logit(base), 0.0, cal.dependency_llr_cap)
            expected = fy.column.texts(fy.meaning.spelling[truth[rows]])
            out.append(_finding(fx, fy, fs, rows, llr, p, expected))
    return out


def _spelling_variants(fy: ColumnFacts, judged: np.ndarray, cal: Calibration) -> Finding | None:
    """Reports that give the entity's value in another spelling than the sources' usual one (7:59am where
    most write 7:59 a.m.): the same value, written so that the merged column holds several formats."""
    meaning = fy.meaning
    codes = fy.column.codes[judged]
    keys = meaning.key_of[codes]
    present = keys >= 0
    codes, keys = codes[present], keys[present]
    if codes.size == 0:
        return None
    usual = meaning.spelling[keys] == codes
    share = float(usual.mean())
    if share >= 1.0 or share < 0.5:
        return None  # one way of writing throughout, or no way most sources keep to
    ids = np.unique(codes[~usual])
    llr = share_llr(share, cal.shape_bonus)
    name = fy.name
    usual_of = {
        int(i): fy.column.texts([int(meaning.spelling[meaning.key_of[i]])])[0] for i in ids[:MAX_LISTED]
    }
    texts = fy.column.texts(ids[:MAX_LISTED])
    return value_finding(
        fy,
        ids,
        np.full(ids.size, llr),
        np.full(ids.size, share),
        type="format_violation",
        columns=[name],
        title=f"Sources that write {name} in other formats",
        description="",
        describe=lambda f: (
            f"The sources write most values of '{name}' one way ({share:.0%} of their reports), but "
            f"{f.n_cells:,} reports give the same value written another way (e.g. "
            f"'{texts[0]}' for '{usual_of[int(ids[0])]}')."
        ),
        suggested_action=f"Rewrite these values of '{name}' the way most sources write them.",
        category="quick_fixes",
        detector="sources-format",
        stats={
            "column": name,
            "rule": "listed",
            "bad_values": texts,
            "canonical": {t: usual_of[int(i)] for t, i in zip(texts, ids[:MAX_LISTED].tolist(), strict=True)},
        },
        key=f"sources-format:{name}",
        stat_name="share of the reports written the usual way",
    )


def _finding(
    fx: ColumnFacts,
    fy: ColumnFacts,
    fs: ColumnFacts,
    rows: np.ndarray,
    llr: np.ndarray,
    p: np.ndarray,
    expected: list[str],
) -> Finding:
    name, key, source = fy.name, fx.name, fs.name

    def describe(f: Finding) -> str:
        first = int(f.rows[0])
        return (
            f"Several sources ('{source}') report each '{key}', and they disagree on '{name}'. Weighing each "
            f"source by how often it agrees with the others, {f.n_rows:,} reports differ from their "
            f"{key}'s most supported value (e.g. row {first}: '{fy.column.value(first)}' where the reliable "
            f"sources say '{(f.expected or [''])[0]}')."
        )

    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, fy.index, dtype=np.int64),
        title=f"Sources that disagree on {name}",
        description="",
        describe=describe,
        suggested_action=f"Take the value the reliable sources agree on for each '{key}', or check the "
        "odd reports against the original source.",
        category="smart_fixes",
        detector="sources",
        stats={
            "rhs": name,
            "determinants": [key],
            "source": source,
            "rule": "consensus",
            "min_group": MIN_CLAIMS,
            "missing_markers": missing_markers(fy.null_marker),
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
        },
        expected=expected,
        key=f"sources:{name}",
        llr=llr,
        stat=p,
        stat_name="probability that the report is wrong, from the sources' weighted vote",
        value_level=False,
    )
