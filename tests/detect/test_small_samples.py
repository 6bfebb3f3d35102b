"""A far-off number measured over few units (a rating over two minutes) is the swing of a small sample, not a
wrong value; the same number over many units, or a number its size column does not explain, stays evidence."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect.context import facts_for
from iterate.detect.explained import discount_small_samples, fit_funnel
from iterate.detect.numeric import detect_numeric_outliers
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def _evidence(cols: dict[str, list[str]], column: str) -> dict[int, float]:
    table = Table.from_arrow(pa.table(cols), name="t", source=SourceInfo(path="t.csv", format="csv"))
    facts = facts_for(table, "")
    f = next(g for g in facts if g.name == column)
    found = detect_numeric_outliers(f, f.numeric)
    assert found is not None
    found = discount_small_samples([found], facts)[0]
    assert found.llr is not None
    return dict(zip(found.rows.tolist(), found.llr.tolist(), strict=True))


def _players(rng: np.random.Generator, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    minutes = np.clip(np.round(np.exp(rng.normal(6.5, 1.4, n))), 1, 3500)
    rating = rng.normal(0.0, 2.0 * np.sqrt(800.0 / minutes))  # a mean over the minutes: sd falls with sqrt
    return minutes, rating


def test_ratings_over_a_handful_of_minutes_are_not_evidence_but_a_slip_over_many_is() -> None:
    rng = np.random.default_rng(3)
    minutes, rating = _players(rng)
    regular = int(np.flatnonzero(minutes > 1500)[0])
    rating[regular] = 45.0  # a slip: ten times the widest swing a regular's rating shows
    small = np.flatnonzero((minutes < 20) & (np.abs(rating) > 12))
    assert small.size >= 3  # the table has tiny-sample extremes to excuse
    llr = _evidence(
        {"minutes": [str(int(m)) for m in minutes], "rating": [f"{r:.3f}" for r in rating]}, "rating"
    )
    assert llr[regular] > 0
    assert all(llr.get(int(r), 0.0) <= 0 for r in small)


def test_without_a_size_column_the_same_extremes_stay_evidence() -> None:
    rng = np.random.default_rng(3)
    minutes, rating = _players(rng)
    small = np.flatnonzero((minutes < 20) & (np.abs(rating) > 12))
    shuffled = rng.permutation(minutes)  # minutes that belong to other players explain nothing
    llr = _evidence(
        {"minutes": [str(int(m)) for m in shuffled], "rating": [f"{r:.3f}" for r in rating]}, "rating"
    )
    assert sum(llr.get(int(r), 0.0) > 0 for r in small) >= small.size - 1


def test_a_sibling_measure_does_not_excuse_a_value_a_thousand_times_off() -> None:
    # Given town populations in two censuses, small towns changing more, and one count written a thousand times
    # too small in a small town
    rng = np.random.default_rng(5)
    before = np.round(np.exp(rng.normal(8.0, 1.5, 1500)))
    after = np.round(before * np.exp(rng.normal(0.02, 0.3 / np.sqrt(before / 500.0) + 0.02)))
    small = int(np.flatnonzero(before < 300)[0])
    after[small] = max(1.0, round(after[small] / 1000))
    llr = _evidence(
        {"pop2001": [str(int(v)) for v in before], "pop2011": [str(int(v)) for v in after]}, "pop2011"
    )
    assert llr[small] > 0


def test_a_funnel_is_kept_only_where_it_beats_one_spread() -> None:
    rng = np.random.default_rng(8)
    minutes, rating = _players(rng)
    fitted = fit_funnel(rating, minutes, None)  # type: ignore[arg-type]
    assert fitted is not None and 0.4 <= fitted.power <= 0.5
    flat = rng.normal(0.0, 2.0, minutes.size)
    assert fit_funnel(flat, minutes, None) is None  # type: ignore[arg-type]


def test_a_row_number_is_no_sample_size() -> None:
    # Given readings whose spread narrows down the file, and a column numbering the rows
    rng = np.random.default_rng(6)
    row = np.arange(1, 2001)
    reading = rng.normal(0.0, 2.0 * np.sqrt(800.0 / row))
    reading[3] = 100.0  # fifty spreads out, and within four of what a sample of 4 would swing
    llr = _evidence({"row": [str(r) for r in row], "reading": [f"{v:.3f}" for v in reading]}, "reading")
    # Then the numbering excuses nothing: each row number is written once, as no count is
    assert llr[3] > 0
