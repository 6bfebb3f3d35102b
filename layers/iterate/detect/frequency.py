"""Frequency: values far rarer than the column's values usually are, and values repeated far more.

In a column whose values each fill many rows (a license per business, a code per category), a value seen
once is unusual; alone it proves little (real rare values exist), so its evidence is capped low and it
counts when another signal agrees (a broken dependency, a far-off number). In a column where nearly every
value is unique, one value filling hundreds of rows is a placeholder or a bulk copy.
"""

from __future__ import annotations

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, cells


def _finding(
    f: ColumnFacts, ids: np.ndarray, llr_per_id: np.ndarray, stat_per_id: np.ndarray, **kw: object
) -> Finding:
    order = np.argsort(ids)
    ids, llr_per_id, stat_per_id = ids[order], llr_per_id[order], stat_per_id[order]
    rows = f.column.rows_of(ids)
    pos = np.searchsorted(ids, f.column.codes[rows])
    r, c = cells(rows, f.index)
    return Finding(rows=r, cols=c, llr=llr_per_id[pos], stat=stat_per_id[pos], **kw)  # type: ignore[arg-type]


def detect_rare_values(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """Values held by far fewer rows than the column's values typically are (weak evidence on its own)."""
    typical = f.typical_count
    if typical < cal.rare_min_typical or f.n_present < 20:
        return None
    present = f.present & (f.counts > 0)
    ratio = typical / np.maximum(f.counts, 1)
    rare = present & (ratio >= cal.rare_min_ratio)
    if not rare.any():
        return None
    ids = np.flatnonzero(rare)
    llr = np.minimum(np.log(ratio[ids] / cal.rare_min_ratio) + cal.rare_base_llr, cal.rare_max_llr)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{fd.n_cells:,} values in '{name}' are held by very few rows, while the column's values are "
            f"typically held by {typical:g}; other evidence agrees that they are wrong (e.g. {shown})."
        )

    return _finding(
        f,
        ids,
        llr,
        f.counts[ids].astype(np.float64),
        type="inconsistent_category",
        columns=[name],
        title=f"Rare values in {name}",
        description="",
        describe=describe,
        suggested_action="Check these values against the source; map them to the column's usual values or "
        "set them to missing when they cannot be recovered.",
        category="smart_fixes",
        detector="frequency",
        stat_name="rows holding the value",
        stats={
            "column": name,
            "rule": "rare",
            "typical_count": typical,
            "min_ratio": cal.rare_min_ratio,
            "bad_values": sorted({f.column.uniques[int(i)] for i in ids})[:MAX_LISTED],
        },
        key=f"rare:{name}",
    )


def detect_repeated_placeholder(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """One value filling far more rows than any other in a column of nearly unique values (bulk copy)."""
    present = f.present & (f.counts > 0)
    if f.n_present < 50 or f.typical_count > 1:
        return None
    counts = f.counts[present]
    ids = np.flatnonzero(present)
    # Among nearly unique values, how many rows would the most repeated one fill by chance? A handful.
    expected = max(2.0, float(np.quantile(counts, 0.99)))
    hit = counts >= cal.placeholder_repeat_ratio * expected
    if not hit.any():
        return None
    ids = ids[hit]
    llr = np.minimum(np.log(counts[hit] / expected) + 2.0, cal.placeholder_llr)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["markers"][:3])
        return (
            f"{fd.n_cells:,} rows of '{name}' hold {shown}, in a column where nearly every other value appears "
            "once: a placeholder or a value copied over many records."
        )

    return _finding(
        f,
        ids,
        llr,
        f.counts[ids].astype(np.float64),
        type="disguised_missing",
        columns=[name],
        title=f"One value repeated across many rows of {name}",
        description="",
        describe=describe,
        suggested_action="Check whether this value stands for 'unknown' or was copied in bulk; replace it with "
        "the real values or with a missing value.",
        category="smart_fixes",
        detector="placeholders",
        stat_name="rows holding the value",
        stats={
            "column": name,
            "markers": sorted({f.column.uniques[int(i)] for i in ids})[:MAX_LISTED],
            "rule": "repeated",
        },
        key=f"repeated:{name}",
    )
