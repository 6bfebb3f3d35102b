"""The table beyond its columns, for the report: where values are missing, a few rows, strong associations.

Every part is bounded whatever the input: the missing-value patterns cost a few vector operations per column
that has missing values, the sample reads a handful of rows, and the associations compare a capped number of
columns on a capped sample of rows (`ASSOC_*`).
"""

from __future__ import annotations

import numpy as np

from iterate.contracts.profile import Association, MissingOverview, MissingPattern, SampleRows
from iterate.profile.sketch import disguised_sentinels
from iterate.profile.types import TypeInference
from iterate.table import Table
from iterate.wording import fmt_num

MISSING_PATTERNS = 8  # the most frequent sets of columns missing together
MISSING_BANDS = 40  # the table cut into this many bands of consecutive rows
BAND_COLUMNS = 40  # columns drawn band by band (those with most missing cells)
SAMPLE_ROWS = 5
SAMPLE_COLUMNS = 40
SAMPLE_VALUE_CHARS = 120
# Associations: shown from this strength on (|Spearman's rho| or Cramér's V), among at most this many
# columns of each kind, on at most ASSOC_ROWS rows (an even random sample beyond), with ASSOC_MIN_ROWS rows
# holding both values.
ASSOC_MIN = 0.5
ASSOC_NUMERIC_COLUMNS = 30
ASSOC_CATEGORY_COLUMNS = 20
ASSOC_MAX_CATEGORIES = 20
ASSOC_ROWS = 50_000
ASSOC_MIN_ROWS = 30
ASSOC_SHOWN = 20
NUMERIC_KINDS = frozenset({"integer", "decimal", "quantity", "currency", "percent"})


def gap_values(inference: TypeInference, counts: np.ndarray) -> np.ndarray:
    """Per distinct value: missing as the profile counts it (blank, marker, missing-like token or placeholder
    number or date), so that a column's rows here are its `missing + disguisedMissing`."""
    return np.asarray(inference.missing | disguised_sentinels(inference, counts), dtype=bool)


def _random_odd(n: int, seed: int) -> np.ndarray:
    draws = np.random.default_rng(seed).integers(1, 2**62, size=n, dtype=np.uint64)
    return draws * np.uint64(2) + np.uint64(1)


def missing_overview(table: Table, inferences: list[TypeInference]) -> MissingOverview:
    """Missing cells of the table: how many, in how many rows, which columns go missing together (exact sets,
    told apart by a 64-bit hash of the set), and per band of consecutive rows for the columns most affected."""
    n = table.n_rows
    per_column: list[tuple[int, np.ndarray]] = []  # (column index, per-distinct gap mask) with any gap
    for column, inference in zip(table.columns, inferences, strict=True):
        gaps = gap_values(inference, column.counts)
        if gaps.any():
            per_column.append((column.index, gaps))
    if n == 0 or not per_column:
        return MissingOverview(cells=0, rows=0)
    starts = np.linspace(0, n, min(MISSING_BANDS, n) + 1).astype(np.int64)
    band_rows = np.diff(starts)
    mult = _random_odd(len(per_column), seed=7)
    key = np.zeros(n, dtype=np.uint64)
    cells = 0
    band_counts: list[tuple[int, int, np.ndarray]] = []  # (cells, column index, per band)
    by_index = {c.index: c for c in table.columns}
    with np.errstate(over="ignore"):
        for m, (index, gaps) in zip(mult, per_column, strict=True):
            rows = gaps[by_index[index].codes]
            key += rows.astype(np.uint64) * m
            per_band = np.add.reduceat(rows.astype(np.int64), starts[:-1])
            total = int(per_band.sum())
            cells += total
            band_counts.append((total, index, per_band))
    holding = np.flatnonzero(key)
    if len(holding) == 0:  # (only when a hash sums to 0 mod 2^64: every row then has no gap)
        return MissingOverview(cells=cells, rows=0)
    keys, first, count = np.unique(key[holding], return_index=True, return_counts=True)
    order = np.lexsort((first, -count))[:MISSING_PATTERNS]  # most rows first, then first seen
    patterns = []
    for k in order.tolist():
        row = int(holding[first[k]])
        cols = [i for i, gaps in per_column if gaps[by_index[i].codes[row]]]
        patterns.append(MissingPattern(columns=cols, rows=int(count[k])))
    widest = sorted(band_counts, key=lambda t: (-t[0], t[1]))[:BAND_COLUMNS]
    widest.sort(key=lambda t: t[1])
    return MissingOverview(
        cells=cells,
        rows=len(holding),
        patterns=patterns,
        patternCount=len(keys),
        bandRows=[int(r) for r in band_rows],
        bandColumns=[i for _, i, _ in widest],
        bands=[[int(x) for x in b] for _, _, b in widest],
    )


def sample_rows(table: Table) -> SampleRows | None:
    """The first SAMPLE_ROWS rows in the first SAMPLE_COLUMNS columns, each value clipped."""
    n = min(table.n_rows, SAMPLE_ROWS)
    if n == 0 or not table.columns:
        return None
    rows = np.arange(n)
    shown = table.columns[:SAMPLE_COLUMNS]
    per_column = [c.values_at(rows).to_pylist() for c in shown]
    values = [[_clip(str(col[r])) for col in per_column] for r in range(n)]
    return SampleRows(rows=rows.tolist(), columns=[c.index for c in shown], values=values)


def _clip(text: str) -> str:
    return text if len(text) <= SAMPLE_VALUE_CHARS else text[: SAMPLE_VALUE_CHARS - 1] + "…"


def _sample(n: int) -> np.ndarray:
    if n <= ASSOC_ROWS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=ASSOC_ROWS, replace=False))


def _ranks(inference: TypeInference, counts: np.ndarray, gaps: np.ndarray) -> np.ndarray | None:
    """Per distinct value: its average rank among the column's numbers (ties share one), scaled to -0.5..0.5;
    NaN for a missing or non-number value. None when fewer than three distinct numbers."""
    numbers = inference.numbers
    if numbers is None:
        return None
    ok = ~gaps & inference.conforms & ~np.isnan(numbers)
    idx = np.flatnonzero(ok)
    if len(idx) < 3:
        return None
    order = idx[np.argsort(numbers[idx], kind="stable")]
    w = counts[order].astype(np.float64)
    cum = np.cumsum(w)
    out = np.full(len(numbers), np.nan)
    out[order] = (cum - (w - 1) / 2) / cum[-1] - 0.5
    return out


def _spearman(columns: list[tuple[str, np.ndarray]]) -> list[Association]:
    """Spearman's rho of every pair over the rows where both hold a number (ranks are each column's own)."""
    x = np.stack([r for _, r in columns], axis=1)
    present = (~np.isnan(x)).astype(np.float64)
    x0 = np.nan_to_num(x)
    n = present.T @ present
    sx = x0.T @ present  # sx[i, j]: the sum of column i over rows where both i and j hold a number
    sxx = (x0 * x0).T @ present
    sxy = x0.T @ x0
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = sxy - sx * sx.T / n
        var = sxx - sx * sx / n
        rho = cov / np.sqrt(var * var.T)
    out = []
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            r, rows = float(rho[i, j]), int(n[i, j])
            if rows >= ASSOC_MIN_ROWS and np.isfinite(r) and abs(r) >= ASSOC_MIN:
                value = round(max(-1.0, min(1.0, r)), 4)
                out.append(
                    Association(
                        columns=[columns[i][0], columns[j][0]], measure="spearman", value=value, rows=rows
                    )
                )
    return out


def cramers_v(a: np.ndarray, b: np.ndarray, ka: int, kb: int) -> tuple[float, int]:
    """Bias-corrected Cramér's V (Bergsma 2013) of two coded columns (-1: missing), and the rows compared."""
    both = (a >= 0) & (b >= 0)
    rows = int(both.sum())
    if rows < 2:
        return 0.0, rows
    table = np.bincount(a[both] * kb + b[both], minlength=ka * kb).reshape(ka, kb).astype(np.float64)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    r, k = table.shape
    if r < 2 or k < 2:
        return 0.0, rows
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / rows
    chi2 = float(((table - expected) ** 2 / expected).sum())
    phi2 = max(0.0, chi2 / rows - (k - 1) * (r - 1) / (rows - 1))
    r_corr = r - (r - 1) ** 2 / (rows - 1)
    k_corr = k - (k - 1) ** 2 / (rows - 1)
    denominator = min(k_corr - 1, r_corr - 1)
    if denominator <= 0:
        return 0.0, rows
    return float(np.sqrt(phi2 / denominator)), rows


def associations(table: Table, inferences: list[TypeInference]) -> tuple[list[Association], str]:
    """The strong associations (|rho| or V at least ASSOC_MIN), strongest first, and what was compared."""
    rows = _sample(table.n_rows)
    numeric: list[tuple[str, np.ndarray]] = []
    coded: list[tuple[str, np.ndarray, int]] = []
    for column, inference in zip(table.columns, inferences, strict=True):
        kind = inference.semantic_type
        if kind in NUMERIC_KINDS and len(numeric) < ASSOC_NUMERIC_COLUMNS:
            gaps = gap_values(inference, column.counts)
            ranks = _ranks(inference, column.counts, gaps)
            if ranks is not None:
                numeric.append((column.name, ranks[column.codes[rows]]))
        elif inference.data_type in {"categorical", "boolean"} and len(coded) < ASSOC_CATEGORY_COLUMNS:
            gaps = gap_values(inference, column.counts)
            present = np.flatnonzero(~gaps)
            if 2 <= len(present) <= ASSOC_MAX_CATEGORIES:
                remap = np.full(column.n_unique, -1, dtype=np.int64)
                remap[present] = np.arange(len(present))
                coded.append((column.name, remap[column.codes[rows]], len(present)))
    found = _spearman(numeric) if len(numeric) >= 2 else []
    for i, (name_a, a, ka) in enumerate(coded):
        for name_b, b, kb in coded[i + 1 :]:
            v, both = cramers_v(a, b, ka, kb)
            if both >= ASSOC_MIN_ROWS and v >= ASSOC_MIN:
                found.append(
                    Association(
                        columns=[name_a, name_b], measure="cramers_v", value=round(min(v, 1.0), 4), rows=both
                    )
                )
    found.sort(key=lambda a: (-abs(a.value), a.columns))
    sampled = ""
    if len(rows) < table.n_rows:
        sampled = f", on {fmt_num(len(rows))} rows drawn at random from {fmt_num(table.n_rows)}"
    note = (
        f"Compared: {len(numeric)} numeric columns by Spearman's rank correlation (up to "
        f"{ASSOC_NUMERIC_COLUMNS}, in file order), and {len(coded)} columns of 2 to {ASSOC_MAX_CATEGORIES} "
        f"categories by Cramér's V (up to {ASSOC_CATEGORY_COLUMNS}){sampled}; shown from "
        f"{fmt_num(ASSOC_MIN)} on, over at least {ASSOC_MIN_ROWS} rows holding both values."
    )
    return found[:ASSOC_SHOWN], note
