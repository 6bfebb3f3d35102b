"""ColumnSketch: a mergeable summary of one column (exact value counts) that finalizes into a ColumnProfile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.contracts.profile import (
    ColumnProfile,
    DateHistogram,
    DateStats,
    Histogram,
    LengthStats,
    NumericStats,
    ValueCount,
)
from iterate.profile._bytes import fast_shapes
from iterate.profile.missing import choose_null_marker, missing_like, null_marker_mask, token_counts
from iterate.profile.parse import TIME_ONLY_FORMATS
from iterate.profile.types import TypeInference, infer_semantic_type, kth_largest
from iterate.table import Column

TOP_VALUES = 10
TOP_PATTERNS = 10
HISTOGRAM_BINS = 20
# Above this many distinct values, patterns are counted on an even sample of them (and marked estimated).
PATTERN_SAMPLE = 20_000
# Numbers that often stand in for "unknown"; flagged only when they are also clearly out of place.
# Zero is left out: a spike of zeros (0 patients, 0 discount) is usually real.
SENTINEL_NUMBERS = (-1.0, -9.0, -99.0, -999.0, -9999.0, 99.0, 999.0, 9999.0, 99999.0, 999999.0)
SENTINEL_DATES = ("1900-01-01", "1899-12-31", "1970-01-01", "0001-01-01", "9999-12-31", "2099-12-31")


class SketchMergeError(ValueError):
    """Two sketches of different columns were asked to merge."""


@dataclass
class ColumnSketch:
    """Exact counts of each distinct value of one column over the rows seen so far.

    Every statistic of the profile is a function of these counts, so merging the sketches of consecutive
    chunks (in chunk order, which keeps first-seen order) gives the same profile as the whole column.
    """

    name: str
    index: int
    dictionary: pa.Array
    counts: np.ndarray

    @classmethod
    def from_column(cls, column: Column) -> ColumnSketch:
        """The sketch of a whole Table column (shares its dictionary and counts; no copy)."""
        return cls(column.name, column.index, column.dictionary, np.asarray(column.counts, dtype=np.int64))

    @classmethod
    def from_values(cls, name: str, index: int, values: pa.Array | list[str]) -> ColumnSketch:
        """The sketch of one chunk of a column's text values."""
        arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, pa.string())
        return cls.from_column(Column(name, index, arr))

    @property
    def n_rows(self) -> int:
        return int(self.counts.sum())

    def merge(self, other: ColumnSketch) -> ColumnSketch:
        """The sketch of this chunk followed by `other` (same column)."""
        if other.name != self.name or other.index != self.index:
            raise SketchMergeError(f"cannot merge column {other.name!r} into {self.name!r}")
        both = pa.concat_arrays([self.dictionary.cast(pa.string()), other.dictionary.cast(pa.string())])
        enc = pc.dictionary_encode(both)
        codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        counts = np.bincount(
            codes, weights=np.concatenate([self.counts, other.counts]), minlength=len(enc.dictionary)
        )
        return ColumnSketch(self.name, self.index, enc.dictionary, counts.astype(np.int64))

    @cached_property
    def missing(self) -> np.ndarray:
        """Per distinct value: blank or a missing-like token."""
        return missing_like(self.dictionary)

    def missing_tokens(self) -> dict[str, int]:
        """Rows per missing-like token (for choosing the dataset's null marker across columns)."""
        return token_counts(self.dictionary, self.counts, self.missing)

    def infer(self) -> TypeInference:
        """The semantic type of the values seen so far."""
        return infer_semantic_type(self, missing=self.missing)

    def finalize(self, null_marker: str = "", inference: TypeInference | None = None) -> ColumnProfile:
        """The column's profile; `null_marker` is the dataset's own missing token (see `choose_null_marker`)."""
        inference = inference or self.infer()
        return build_profile(self, inference, null_marker)


def build_profile(sketch: ColumnSketch, inf: TypeInference, null_marker: str) -> ColumnProfile:
    """The ColumnProfile of a sketch given its type inference and the dataset's null marker."""
    counts = sketch.counts
    n = int(counts.sum())
    missing_mask = inf.missing
    marker = null_marker_mask(sketch.dictionary, null_marker, missing_mask)
    sentinels = disguised_sentinels(inf, counts)
    disguised_mask = (missing_mask & ~marker) | sentinels
    present = ~missing_mask & ~sentinels
    missing = int(counts[marker].sum())
    disguised = int(counts[disguised_mask].sum())
    non_missing = n - missing
    pres_idx = np.flatnonzero(~missing_mask)
    pres_counts = counts[pres_idx]
    present_rows = int(pres_counts.sum())
    distinct = len(pres_idx)
    once = int((pres_counts == 1).sum())
    patterns, estimated = _patterns(sketch.dictionary, counts, pres_idx)
    return ColumnProfile(
        name=sketch.name,
        index=sketch.index,
        semanticType=inf.semantic_type,
        dataType=inf.data_type,
        format=inf.format,
        count=non_missing,
        missing=missing,
        disguisedMissing=disguised,
        distinct=distinct,
        distinctRatio=distinct / present_rows if present_rows else 0.0,
        uniqueRatio=once / present_rows if present_rows else 0.0,
        topValues=_top(sketch.dictionary, counts, pres_idx, TOP_VALUES),
        patterns=patterns,
        patternsEstimated=estimated,
        length=_lengths(sketch.dictionary, counts, pres_idx),
        numeric=_numeric(inf, counts, present),
        dates=_dates(inf, counts, present),
        conformity=round(inf.confidence, 6),
    )


def _top(dictionary: pa.Array, counts: np.ndarray, idx: np.ndarray, k: int) -> list[ValueCount]:
    """The k most frequent values; ties broken by value so chunking never changes the answer."""
    if len(idx) == 0:
        return []
    c = counts[idx]
    if len(idx) > 4 * k:
        # Keep every value tied with the k-th count, then sort that small set exactly.
        keep = c >= kth_largest(c, k)
        idx, c = idx[keep], c[keep]
        if len(idx) > 50 * k:  # thousands of ties (e.g. all-unique): the first-seen ones are as good as any
            idx, c = idx[: 50 * k], c[: 50 * k]
    values = pc.take(dictionary, pa.array(idx)).to_pylist()
    ranked = sorted(zip(values, c.tolist(), strict=True), key=lambda vc: (-vc[1], vc[0]))[:k]
    return [ValueCount(value=v, count=int(n)) for v, n in ranked]


def _patterns(dictionary: pa.Array, counts: np.ndarray, idx: np.ndarray) -> tuple[list[ValueCount], bool]:
    if len(idx) == 0:
        return [], False
    estimated = len(idx) > PATTERN_SAMPLE
    pick = idx[:: int(np.ceil(len(idx) / PATTERN_SAMPLE))] if estimated else idx
    shapes = fast_shapes(pc.take(dictionary, pa.array(pick)))
    enc = pc.dictionary_encode(shapes)
    codes = enc.indices.to_numpy(zero_copy_only=False)
    rows = np.bincount(codes, weights=counts[pick], minlength=len(enc.dictionary))
    if estimated:
        rows = rows * (counts[idx].sum() / max(1, counts[pick].sum()))
    order = np.argsort(-rows, kind="stable")[: TOP_PATTERNS * 3]
    names = enc.dictionary.to_pylist()
    ranked = sorted(((names[i], int(np.rint(rows[i]))) for i in order), key=lambda vc: (-vc[1], vc[0]))
    return [ValueCount(value=v, count=c) for v, c in ranked[:TOP_PATTERNS]], estimated


def _lengths(dictionary: pa.Array, counts: np.ndarray, idx: np.ndarray) -> LengthStats | None:
    if len(idx) == 0:
        return None
    lengths = np.asarray(pc.utf8_length(dictionary).to_numpy(zero_copy_only=False))
    if len(idx) < len(lengths):  # only gather when some values are missing
        lengths, counts = np.take(lengths, idx), np.take(counts, idx)
    return LengthStats(
        min=int(lengths.min()), max=int(lengths.max()), mean=float(np.dot(lengths, counts) / counts.sum())
    )


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, qs: list[float]) -> list[float]:
    """Quantiles of values repeated `weights` times (linear interpolation, as numpy/pandas do by default)."""
    w_int = np.asarray(weights).astype(np.int64)
    total_rows = int(w_int.sum())
    if len(values) > 50_000 and total_rows <= 3 * len(values):
        # Many distinct values with few repeats: selecting on the repeated values (linear time) beats
        # an indirect sort of the distinct ones.
        return [float(x) for x in np.quantile(np.repeat(values, w_int), qs)]
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order].astype(np.int64)
    cum = np.cumsum(w)
    total = int(cum[-1])
    out = []
    for q in qs:
        pos = q * (total - 1)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        a = v[np.searchsorted(cum, lo, side="right")]
        b = v[np.searchsorted(cum, hi, side="right")]
        out.append(float(a + (b - a) * (pos - lo)))
    return out


def _numeric(inf: TypeInference, counts: np.ndarray, present: np.ndarray) -> NumericStats | None:
    if inf.numbers is None:
        return None
    keep = present & inf.conforms & ~np.isnan(inf.numbers)
    if not keep.any():
        return None
    v, w = inf.numbers[keep], counts[keep].astype(np.float64)
    total = w.sum()
    # Moments on values scaled to at most 1, so 1e300-sized numbers neither overflow nor lose the mean.
    scale = float(np.abs(v).max()) or 1.0
    u = v / scale
    mean_u = float((u * w).sum() / total)
    var_u = float((w * (u - mean_u) ** 2).sum() / (total - 1)) if total > 1 else 0.0
    q1, median, q3, lo, hi = weighted_quantiles(v, w, [0.25, 0.5, 0.75, 0.005, 0.995])
    (mad,) = weighted_quantiles(np.abs(v - median), w, [0.5])
    return NumericStats(
        count=int(total),
        min=float(v.min()),
        max=float(v.max()),
        mean=mean_u * scale,
        std=float(np.sqrt(var_u)) * scale,
        median=median,
        mad=mad,
        q1=q1,
        q3=q3,
        histogram=_histogram(v, w, lo, hi),
    )


def _histogram(v: np.ndarray, w: np.ndarray, lo: float, hi: float) -> Histogram:
    if hi <= lo:
        return Histogram(edges=[lo, hi], counts=[int(w[(v >= lo) & (v <= hi)].sum())],
                         below=int(w[v < lo].sum()), above=int(w[v > hi].sum()))  # fmt: skip
    edges = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
    inside = (v >= lo) & (v <= hi)
    hist, _ = np.histogram(v[inside], bins=edges, weights=w[inside])
    return Histogram(
        edges=[float(e) for e in edges],
        counts=[int(c) for c in hist],
        below=int(w[v < lo].sum()),
        above=int(w[v > hi].sum()),
    )


def _dates(inf: TypeInference, counts: np.ndarray, present: np.ndarray) -> DateStats | None:
    if inf.dates is None:
        return None
    keep = present & ~np.isnat(inf.dates)
    if not keep.any():
        return None
    d = inf.dates[keep]
    with_time = inf.semantic_type == "datetime"
    fmt = (lambda x: str(x).replace("T", " ")) if with_time else (lambda x: str(x.astype("datetime64[D]")))
    if inf.format in TIME_ONLY_FORMATS:  # times of day alone: their 1900-01-01 is no date of the data
        fmt = lambda x: str(x)[11:]  # noqa: E731
    formats = sorted(inf.date_formats.items(), key=lambda kv: (-kv[1], kv[0]))
    secs = d.astype(np.int64).astype(np.float64)
    quantiles = weighted_quantiles(secs, counts[keep], [0.25, 0.5, 0.75, 0.005, 0.995])
    q1, median, q3 = (np.datetime64(int(np.floor(q)), "s") for q in quantiles[:3])
    lo, hi = quantiles[3:]
    return DateStats(
        count=int(counts[keep].sum()),
        min=fmt(d.min()),
        max=fmt(d.max()),
        formats=[ValueCount(value=f, count=c) for f, c in formats if c],
        median=fmt(median),
        q1=fmt(q1),
        q3=fmt(q3),
        histogram=_date_histogram(secs, counts[keep], lo, hi, whole_days=not with_time, fmt=fmt),
    )


DAY_S = 86_400


def _date_histogram(
    secs: np.ndarray, w: np.ndarray, lo: float, hi: float, *, whole_days: bool, fmt: Callable[[Any], str]
) -> DateHistogram:
    """Rows per span of time between the robust bounds: spans of whole days for dates (one day each when the
    range is short, so no two edges read alike), equal spans for date-times."""
    if whole_days:
        start = np.floor(lo / DAY_S) * DAY_S
        days = int(np.floor(hi / DAY_S) - start / DAY_S) + 1
        step = int(np.ceil(days / HISTOGRAM_BINS)) * DAY_S
        edges = start + step * np.arange(int(np.ceil(days * DAY_S / step)) + 1)
    elif hi > lo:
        edges = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
    else:
        edges = np.array([lo, lo + 1.0])
    inside = (
        (secs >= edges[0]) & (secs <= edges[-1])
        if not whole_days
        else (secs >= edges[0]) & (secs < edges[-1])
    )
    hist, _ = np.histogram(secs[inside], bins=edges, weights=w[inside])
    return DateHistogram(
        edges=[fmt(np.datetime64(int(np.floor(e)), "s")) for e in edges],
        counts=[int(c) for c in hist],
        below=int(w[secs < edges[0]].sum()),
        above=int(w[~inside & (secs >= edges[0])].sum()),
    )


def disguised_sentinels(inf: TypeInference, counts: np.ndarray) -> np.ndarray:
    """Distinct values that are placeholder numbers or dates standing in for missing (conservative).

    A sentinel must be one of the usual placeholders, hold a spike of rows (at least 0.05% of the column, or
    five times the average distinct value's rows), and sit well outside the range of every other value.
    """
    out = np.zeros(len(counts), dtype=bool)
    present = ~inf.missing
    n = int(counts[present].sum())
    if n == 0:
        return out
    if inf.numbers is not None and inf.data_type == "numeric":
        values = inf.numbers
        candidates = np.flatnonzero(present & np.isin(values, SENTINEL_NUMBERS))
    elif inf.dates is not None and inf.format not in TIME_ONLY_FORMATS:  # times alone all sit on 1900-01-01
        days = inf.dates.astype("datetime64[D]")
        candidates = np.flatnonzero(present & np.isin(days, np.array(SENTINEL_DATES, dtype="datetime64[D]")))
        if len(candidates) == 0:  # the usual case: skip the conversion below
            return out
        values = days.astype(np.float64)
        values[np.isnat(days)] = np.nan
    else:
        return out
    if len(candidates) == 0:
        return out
    finite = present & ~np.isnan(values)
    distinct = max(1, int(finite.sum()))
    mean_count = counts[finite].sum() / distinct
    others = finite.copy()
    others[candidates] = False
    # A placeholder stands apart from the range of the column's other values: with one other value (a
    # select-all answer written 1 / -1) there is no range, and the pair is a code.
    if int(others.sum()) < 2:
        return out
    rows_of_others = int(counts[others].sum())
    lo, hi = float(values[others].min()), float(values[others].max())
    span = max(hi - lo, 1.0)
    for i in candidates.tolist():
        c = int(counts[i])
        # A spike: a share of the column, or far above a typical value's count in a many-valued column.
        if c < 3 or (c < 0.0005 * n and c < 5 * mean_count):
            continue
        # ... but not the column's own majority: a value written in more rows than all the others together
        # is what the column writes (a survey's "not ticked"), whatever it looks like.
        if c > rows_of_others:
            continue
        v = float(values[i])
        if (v < lo and (v < 0 <= lo or lo - v > span)) or v > hi + span:
            out[i] = True
    return out


def finalize_all(
    sketches: list[ColumnSketch], null_marker: str | None = None
) -> tuple[str, list[ColumnProfile]]:
    """(null marker, column profiles) of a dataset from its (merged) column sketches.

    The null marker is chosen from the sketches' missing-token counts, which merge like everything else,
    so pieces of a huge file profiled apart and merged give the same columns as the whole file.
    """
    if null_marker is None:
        null_marker = choose_null_marker(s.missing_tokens() for s in sketches)
    return null_marker, [s.finalize(null_marker) for s in sketches]
