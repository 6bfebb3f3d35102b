"""Text hygiene and numeric range: stray whitespace, encoding damage, robust numeric outliers."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts, to_float
from iterate.detect.findings import MAX_LISTED, Finding, cells

# Mojibake: UTF-8 bytes decoded as cp1252/latin-1 (Ã©, â€™, Â ), and the replacement character.
MOJIBAKE = (
    r"Ã[\x{80}-\x{BF}\x{A0}-\x{FF}]|Â[\x{A0}-\x{BF}]|â€[\x{80}-\x{BF}\x{98}-\x{9F}™œ\x{9D}]|â€|\x{FFFD}"
)
STRAY_SHARE = 0.2  # stray spaces are an issue when only a minority of values have them
OUTLIER_Z = 6.0  # robust z-score (median / MAD) beyond which a number is an outlier


def detect_whitespace(f: ColumnFacts) -> Finding | None:
    present = f.present & (f.counts > 0)
    if f.n_present < 5:
        return None
    d = f.column.dictionary
    stray = np.asarray(pc.not_equal(pc.utf8_trim_whitespace(d), d).to_numpy(zero_copy_only=False), dtype=bool)
    stray &= present
    n = int(f.counts[stray].sum())
    if n == 0 or n > STRAY_SHARE * f.n_present:
        return None  # a column that pads every value does so by convention
    ids = np.flatnonzero(stray)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    trimmed = {f.column.uniques[i]: f.column.uniques[i].strip() for i in ids}
    return Finding(
        type="stray_whitespace",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Leading or trailing spaces in {f.name}",
        description=f"{n:,} values in '{f.name}' start or end with spaces that the other values do not have; "
        "they will not match equal values in joins, filters and group-bys.",
        suggested_action="Trim leading and trailing whitespace.",
        category="quick_fixes",
        detector="whitespace",
        stats={
            "column": f.name,
            "bad_values": sorted(trimmed)[:MAX_LISTED],
            "canonical": dict(list(trimmed.items())[:MAX_LISTED]),
        },
        expected=[trimmed[f.column.value(int(r))] for r in rows],
        key=f"whitespace:{f.name}",
    )


def detect_encoding(f: ColumnFacts) -> Finding | None:
    d = f.column.dictionary
    bad = np.asarray(pc.match_substring_regex(d, pattern=MOJIBAKE).to_numpy(zero_copy_only=False), dtype=bool)
    bad &= f.counts > 0
    if not bad.any():
        return None
    ids = np.flatnonzero(bad)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    repaired = {}
    for i in ids:
        v = f.column.uniques[i]
        try:
            repaired[v] = v.encode("cp1252").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            repaired[v] = v
    return Finding(
        type="encoding_damage",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Garbled characters in {f.name}",
        description=f"{rows.size:,} values in '{f.name}' contain characters damaged by a wrong text encoding "
        f"(e.g. '{f.column.uniques[ids[0]]}').",
        suggested_action="Re-export the source as UTF-8, or repair the values (the report shows the likely originals).",
        category="quick_fixes",
        detector="encoding",
        stats={
            "column": f.name,
            "bad_values": sorted(repaired)[:MAX_LISTED],
            "canonical": dict(list(repaired.items())[:MAX_LISTED]),
        },
        expected=[repaired[f.column.value(int(r))] for r in rows],
        key=f"encoding:{f.name}",
    )


def detect_outliers(f: ColumnFacts, *, is_measure: bool) -> Finding | None:
    """Numbers far outside the column's bulk (robust z-score), for measures only (not codes or identifiers)."""
    if not is_measure or f.n_present < 30:
        return None
    present = np.flatnonzero(f.present & (f.counts > 0))
    if present.size < 3:
        return None
    d = f.column.dictionary.take(present)
    cleaned = pc.replace_substring_regex(pc.utf8_trim_whitespace(d), pattern=r"[,$€£%\s]", replacement="")
    nums = to_float(cleaned)
    ok = ~np.isnan(nums)
    if f.counts[present][ok].sum() < 0.9 * f.n_present:
        return None
    vals, weights = nums[ok], f.counts[present][ok]
    order = np.argsort(vals)
    vals, weights = vals[order], weights[order]
    cum = np.cumsum(weights)
    total = cum[-1]
    median = vals[np.searchsorted(cum, total / 2)]
    dev = np.abs(vals - median)
    dorder = np.argsort(dev)
    dcum = np.cumsum(weights[dorder])
    mad = dev[dorder][np.searchsorted(dcum, total / 2)]
    if mad == 0:
        return None
    z = np.abs(nums - median) / (1.4826 * mad)
    bad_local = ok & (z > OUTLIER_Z)
    if not bad_local.any():
        return None
    ids = present[bad_local]
    rows, cols = cells(f.column.rows_of(ids), f.index)
    if rows.size > 0.05 * f.n_present:
        return None  # a heavy tail, not a few wild values
    spread = 1.4826 * mad * OUTLIER_Z
    low, high = float(median - spread), float(median + spread)
    return Finding(
        type="numeric_outlier",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Extreme values in {f.name}",
        description=(
            f"{rows.size:,} values in '{f.name}' lie far outside the range of the rest (median {median:g}; "
            f"expected within {low:g} … {high:g}), e.g. {f.column.uniques[ids[0]]}."
        ),
        suggested_action="Check these values against the source: unit mix-ups, extra digits and test records "
        "are common causes. Correct or exclude them before computing averages.",
        category="smart_fixes",
        detector="outliers",
        stats={"column": f.name, "low": low, "high": high, "median": float(median), "mad": float(mad)},
        key=f"outliers:{f.name}",
    )
