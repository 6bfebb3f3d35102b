"""Gaps that are right: a computed column left blank where its formula divides by zero (a population's change
from 0 residents). Such gaps are reported, not flagged."""

from __future__ import annotations

import numpy as np

from iterate.detect.context import ColumnFacts, as_written, to_float
from iterate.detect.findings import Finding

MAX_UNDEFINED_GAPS = 50  # lone gaps only: a formula is looked for where a few blanks meet a zero
FORMULA_HOLDS = 0.9  # the formula must give the column's value, as written, on this share of its rows
FORMULA_MIN_ROWS = 20
FORMULA_SAMPLE = 20_000  # rows a formula is checked on
# Ratios a computed column may hold: a share or a change (a / b, a / b - 1), as is or in percent.
RATIOS = (
    ("{a} / {b}", 0.0, 1.0),
    ("({a} - {b}) / {b}", 1.0, 1.0),
    ("{a} / {b} (%)", 0.0, 100.0),
    ("({a} - {b}) / {b} (%)", 1.0, 100.0),
)


def numbers_of(f: ColumnFacts, cache: dict[int, np.ndarray]) -> np.ndarray:
    """The column's distinct values as numbers (NaN where not a plain number), worked out once per column."""
    if f.index not in cache:
        cache[f.index] = to_float(f.column.dictionary)
    return cache[f.index]


def _resolution(f: ColumnFacts, rows: np.ndarray) -> np.ndarray:
    """Per row listed, half a unit of the last digit written (0.00005 for -0.0111 and for 3e-4)."""
    codes = f.column.codes[rows]
    ids = np.unique(codes)
    half = np.full(len(f.counts), np.nan)
    for i, t in zip(ids.tolist(), f.column.texts(ids), strict=True):
        mantissa, _, exponent = t.strip().lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        try:
            decimals -= int(exponent) if exponent else 0
        except ValueError:
            continue
        # A typo can turn an exponent absurd (1e9999): beyond float range the value has no resolution.
        if abs(decimals) <= 300:
            half[i] = 0.5 * 10.0 ** (-decimals)
    return half[codes]


def undefined_formula(
    f: ColumnFacts,
    gaps: np.ndarray,
    numeric: list[ColumnFacts],
    with_zero: list[ColumnFacts],
    n_rows: int,
    cache: dict[int, np.ndarray],
) -> tuple[np.ndarray, str, str] | None:
    """Gaps of a computed column where its formula divides by zero: the column is a ratio or a change of two
    others (a / b, (a - b) / b, in percent or not) on nearly every row, and at these gaps b is 0, so there
    is no value to give (a population's change from 0 residents). Returns the rows, the formula and b."""
    if gaps.size > MAX_UNDEFINED_GAPS:
        return None
    others = [g for g in numeric if g.index != f.index]
    # Cheap first: a column that is 0 on one of the gaps' rows (looked up by distinct value).
    divisors = [
        g for g in with_zero if g.index != f.index and (numbers_of(g, cache)[g.column.codes[gaps]] == 0).any()
    ]
    if not divisors:
        return None
    sample = np.arange(n_rows)
    if n_rows > FORMULA_SAMPLE:
        sample = np.sort(np.random.default_rng(7).choice(n_rows, FORMULA_SAMPLE, replace=False))
    ys = numbers_of(f, cache)[f.column.codes[sample]]
    if np.isfinite(ys).sum() < FORMULA_MIN_ROWS:
        return None
    tolerance = _resolution(f, sample)
    known = np.isfinite(ys) & np.isfinite(tolerance)
    for b in divisors:
        bs = numbers_of(b, cache)[b.column.codes[sample]]
        for a in others:
            if a.index == b.index:
                continue
            av = numbers_of(a, cache)[a.column.codes[sample]]
            usable = known & np.isfinite(av) & np.isfinite(bs) & (bs != 0)
            if usable.sum() < FORMULA_MIN_ROWS:
                continue
            ratio = av[usable] / bs[usable]
            for form, shift, scale in RATIOS:
                close = np.abs(ys[usable] - (ratio - shift) * scale) <= tolerance[usable] * 1.001
                if close.mean() >= FORMULA_HOLDS:
                    hit = gaps[numbers_of(b, cache)[b.column.codes[gaps]] == 0]
                    return hit, form.format(a=f"'{a.name}'", b=f"'{b.name}'"), b.name
    return None


def undefined_finding(f: ColumnFacts, rows: np.ndarray, formula: str, divisor: str) -> Finding:
    name = f.name
    return Finding(
        type="missing_values",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, f.index),
        title=f"{name} is blank where its formula divides by zero",
        description=(
            f"'{name}' is {formula} on nearly every row; {rows.size:,} "
            f"{'row lacks it where' if rows.size == 1 else 'rows lack it where'} '{divisor}' is 0, so there is "
            "nothing to compute: the blank is right. The cells are not flagged."
        ),
        suggested_action="Nothing to fix if a blank is how the table writes an undefined ratio; document it.",
        category="quick_fixes",
        detector="missing",
        stats={
            "column": name,
            "markers": as_written(f, f.is_missing),
            "formula": formula,
            "rule": "missing",
            "rows": rows.tolist(),
            "missing_markers": f.markers,
        },
        flag=False,
        key=f"missing-undefined:{name}",
    )
