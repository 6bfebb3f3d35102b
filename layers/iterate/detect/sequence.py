"""Sequences: a column that advances by one step from row to row (a row counter, an hourly timestamp).

When most consecutive rows of a numeric column differ by the same non-zero step, the column is a sequence,
and a row it runs through (a row before and a row after keep the step with each other) whose value keeps
the step with none of the rows around it (value_j = value_i + step × (j − i) for no row j within REACH rows)
breaks it. A row beside a gap or a restart (a missing hour, a date that moves to the next month) keeps the
step with the rows on its own side, and the sequence does not run across it; a value pasted in from
elsewhere (`6598.57` where the counter reads 13) keeps it with none, however ordinary it is as a number of
the column.

The rule is checked in code the same way (the `sequence` rule of the rows template): the same parse, step,
reach and tolerance, so the recount is exact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.findings import Finding, cells
from iterate.detect.numeric import NUMBER, NumericModel
from iterate.wording import agree, plural

MIN_ROWS = 50  # a sequence is judged on at least this many rows
REACH = 3  # a value is checked against this many rows either side
# Relative to the step: consecutive rows that differ by the step within this share of it keep to it, and a
# value this far off its neighbours' prediction breaks the sequence (floating-point noise does neither).
STEP_TOLERANCE = 1e-3
# Most consecutive rows must keep to the step: a column sorted by chance (ages in order) rarely does.
MIN_STEP_SHARE = 0.5


def row_numbers(f: ColumnFacts, m: NumericModel) -> np.ndarray:
    """Each row's value as a number (NaN: missing or not a plain number), as the template reads it."""
    by_id = np.full(f.column.n_unique, np.nan)
    if m.convention == "point":
        text = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(m.ids, pa.int64())))
        plain = np.asarray(pc.fill_null(pc.match_substring_regex(text, NUMBER), False), dtype=bool)
        by_id[m.ids[plain]] = m.numbers[plain]
    return by_id[f.column.codes]


def sequence_breaks(values: np.ndarray, step: float) -> np.ndarray:
    """Rows the sequence runs through without them: a row before and a row after (within REACH) keep the
    step with each other, and the row's value keeps it with none of the rows within REACH (NaN rows never
    break).

    A row beside a gap or a restart (a missing hour, a date that moves to the next month) keeps the step
    with the rows on its own side, and the sequence does not run across it; a value pasted in from elsewhere
    keeps it with none, however many of its neighbours are wrong too, up to REACH in a row.
    """
    tolerance = STEP_TOLERANCE * abs(step)
    n = values.size
    anchored = np.zeros(n, dtype=bool)
    through = np.zeros(n, dtype=bool)
    with np.errstate(invalid="ignore"):
        for k in range(1, min(REACH, n - 1) + 1):
            keeps = np.abs(values[k:] - values[:-k] - k * step) <= tolerance
            anchored[k:] |= keeps
            anchored[:-k] |= keeps
        for before in range(1, REACH + 1):
            for after in range(1, REACH + 1):
                span = before + after
                if span >= n:
                    continue
                keeps = np.abs(values[span:] - values[:-span] - span * step) <= tolerance
                through[before : n - after] |= keeps
    return np.isfinite(values) & through & ~anchored


def regular_step(values: np.ndarray) -> tuple[float, float] | None:
    """(step, share of consecutive rows keeping to it) when most rows advance by one non-zero step in runs
    longer than the window a break is judged in.

    A column that restarts every few rows (seasons listed player by player: 2014, 2015, 2016, 2019, 2020)
    keeps the step in most of its rows, but within REACH rows of a restart its values meet the step by
    coincidence as often as not: a break is judged only where the typical row sits in a run of at least
    2 x REACH steps, so both sides of the window belong to one run."""
    diffs = np.diff(values)
    finite = np.isfinite(diffs)
    if int(finite.sum()) < MIN_ROWS:
        return None
    step = float(np.median(diffs[finite]))
    if step == 0.0:
        return None
    keeps = finite & (np.abs(np.where(finite, diffs, 0.0) - step) <= STEP_TOLERANCE * abs(step))
    share = float(keeps[finite].mean())
    if share < MIN_STEP_SHARE or typical_run(keeps) < 2 * REACH:
        return None
    return step, share


def typical_run(keeps: np.ndarray) -> float:
    """The length (in steps) of the run of kept steps the typical kept step belongs to (a step-weighted
    median)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], keeps.astype(np.int8), [0]])))
    lengths = (edges[1::2] - edges[0::2]).astype(np.float64)
    if not lengths.size:
        return 0.0
    order = np.sort(lengths)
    weight = np.cumsum(order)
    return float(order[np.searchsorted(weight, weight[-1] / 2)])


def detect_sequence_breaks(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    if not m.numeric or f.column.codes.size < MIN_ROWS or f.column.n_unique < 3:
        return None
    values = row_numbers(f, m)
    found = regular_step(values)
    if found is None:
        return None
    step, share = found
    broken = sequence_breaks(values, step)
    if not broken.any():
        return None
    rows = np.flatnonzero(broken)
    judged = int(np.isfinite(values).sum())
    # As telling as the sequence is regular: the share of rows that keep to it.
    llr = share_llr(1.0 - rows.size / max(judged, 1), cal.sequence_bonus)
    name = f.name
    step_text = f"{step:g}"

    def describe(fd: Finding) -> str:
        first = int(fd.rows[0])
        return (
            f"'{name}' advances by {step_text} from row to row in {share:.0%} of the table, but "
            f"{plural(fd.n_cells, 'value')} {agree(fd.n_cells, 'breaks', 'break')} that sequence, off what the rows "
            "around them predict "
            f"(e.g. row {first}: '{f.column.value(first)}'). A value pasted in from elsewhere breaks a "
            "counter or a timestamp like this."
        )

    r, c = cells(rows, f.index)
    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Values of {name} that break its sequence",
        description="",
        describe=describe,
        suggested_action=f"Restore these values of '{name}' from the source: the rows around each one say "
        "what it should be.",
        category="smart_fixes",
        detector="sequence",
        stats={
            "column": name,
            "rule": "sequence",
            "step": step,
            "reach": REACH,
            "tolerance": STEP_TOLERANCE,
            "number_regex": NUMBER,
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
        },
        key=f"sequence:{name}",
        llr=np.full(rows.size, llr),
        stat=np.full(rows.size, share),
        stat_name="share of consecutive rows that advance by the step",
        value_level=False,
        vouchable=False,
    )
