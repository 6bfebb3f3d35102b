"""Missing values written the dataset's way, and disguised ones (placeholders that pose as values)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts
from iterate.detect.findings import Finding, cells


def _as_written(f: ColumnFacts, mask: np.ndarray) -> list[str]:
    return sorted({f.column.uniques[i].strip() for i in np.flatnonzero(mask & (f.counts > 0))})


def detect_missing(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    out: list[Finding] = []
    for f in facts:
        null = f.is_null_marker
        n_null = int(f.counts[null].sum())
        if 0 < n_null < n_rows:
            rows, cols = cells(f.column.rows_of(np.flatnonzero(null)), f.index)
            marker = repr(f.null_marker) if f.null_marker else "blank"
            out.append(
                Finding(
                    type="missing_values",
                    columns=[f.name],
                    rows=rows,
                    cols=cols,
                    title=f"Missing values in {f.name}",
                    description=(
                        f"{n_null:,} of {n_rows:,} rows ({n_null / n_rows:.1%}) have no value in "
                        f"'{f.name}' (written as {marker})."
                    ),
                    suggested_action="Decide whether these rows can be completed from the source, imputed, "
                    "or left empty on purpose; analyses that need this column should exclude them.",
                    category="quick_fixes",
                    detector="missing",
                    stats={"column": f.name, "markers": _as_written(f, null)},
                    flag=False,
                    key=f"missing:{f.name}",
                )
            )
        disguised = f.is_missing & ~null & (f.counts > 0)
        if disguised.any():
            ids = np.flatnonzero(disguised)
            rows, cols = cells(f.column.rows_of(ids), f.index)
            tokens = _as_written(f, disguised)
            shown = ", ".join(repr(t) for t in tokens[:5])
            out.append(
                Finding(
                    type="disguised_missing",
                    columns=[f.name],
                    rows=rows,
                    cols=cols,
                    title=f"Placeholders posing as values in {f.name}",
                    description=(
                        f"{rows.size:,} cells in '{f.name}' hold a placeholder ({shown}) instead of a value, "
                        f"while the rest of the dataset writes a missing value as "
                        f"{repr(f.null_marker) if f.null_marker else 'a blank'}. Tools will read these as text."
                    ),
                    suggested_action="Replace the placeholders with a real missing value (empty) so that "
                    "counts, averages and type detection treat them as missing.",
                    category="quick_fixes",
                    detector="missing",
                    stats={"column": f.name, "markers": tokens},
                    expected=[f.null_marker] * rows.size,
                    key=f"disguised:{f.name}",
                )
            )
    return out


def _sentinel_texts() -> pa.Array:
    from iterate.profile.sketch import SENTINEL_DATES, SENTINEL_NUMBERS

    texts = {d for d in SENTINEL_DATES}
    for v in SENTINEL_NUMBERS:
        texts |= {f"{v:g}", f"{v:.1f}", f"{v:.2f}"}
    return pa.array(sorted(texts), pa.string())


_SENTINEL_TEXTS = _sentinel_texts()  # no letters: compared with the lower-cased dictionary as they are


def detect_sentinels(f: ColumnFacts) -> Finding | None:
    """Placeholder numbers and dates (9999, -1, 1900-01-01) standing in for missing: a spike far outside the
    range of every other value. The profiler's rule decides; only columns holding such a value pay for it."""
    # The trimmed, lower-cased dictionary the other detectors share (the placeholders have no letters).
    hit = np.asarray(pc.is_in(f.folded, value_set=_SENTINEL_TEXTS).to_numpy(zero_copy_only=False), dtype=bool)
    if not (hit & f.present & (f.counts > 0)).any():
        return None
    from iterate.profile.sketch import disguised_sentinels
    from iterate.profile.types import infer_semantic_type

    inference = infer_semantic_type(f.column, missing=f.is_missing)
    sentinel = disguised_sentinels(inference, f.counts) & (f.counts > 0)
    if not sentinel.any():
        return None
    ids = np.flatnonzero(sentinel)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    markers = sorted({f.column.uniques[i].strip() for i in ids})
    shown = ", ".join(repr(m) for m in markers[:5])
    return Finding(
        type="disguised_missing",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Placeholder values standing in for missing in {f.name}",
        description=(
            f"{rows.size:,} cells in '{f.name}' hold {shown}, a value repeated far more often than others and far "
            "outside the range of the rest of the column: the usual sign of a placeholder for 'unknown'. "
            "Averages and ranges computed on this column are distorted by it."
        ),
        suggested_action="Replace the placeholder with a real missing value (empty), after checking with the "
        "source system that it means 'unknown'.",
        category="smart_fixes",
        detector="sentinels",
        stats={"column": f.name, "markers": markers},
        expected=[f.null_marker] * rows.size,
        key=f"sentinel:{f.name}",
    )
