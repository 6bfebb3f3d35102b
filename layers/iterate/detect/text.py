"""Text hygiene: stray whitespace and encoding damage."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, cells
from iterate.wording import agree, plural

# Mojibake: UTF-8 bytes decoded as cp1252/latin-1 (Ã©, â€™, Â ), and the replacement character.
MOJIBAKE = (
    r"Ã[\x{80}-\x{BF}\x{A0}-\x{FF}]|Â[\x{A0}-\x{BF}]|â€[\x{80}-\x{BF}\x{98}-\x{9F}™œ\x{9D}]|â€|\x{FFFD}"
)
STRAY_SHARE = 0.2  # stray spaces are an issue when only a minority of values have them


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
    trimmed = {v: v.strip() for v in f.column.texts(ids)}
    return Finding(
        type="stray_whitespace",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Leading or trailing spaces in {f.name}",
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'starts or ends', 'start or end')} "
            "with spaces that the other values "
            "do not have; they will not match equal values in joins, filters and group-bys."
        ),
        suggested_action="Trim leading and trailing whitespace.",
        category="quick_fixes",
        detector="whitespace",
        damage="format",
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
    for v in f.column.texts(ids):
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
        description="",
        describe=lambda fd: (
            f"{plural(fd.n_cells, 'value')} in '{f.name}' {agree(fd.n_cells, 'contains', 'contain')} characters "
            "damaged by a wrong text "
            f"encoding (e.g. '{f.column.value(int(fd.rows[0]))}')."
        ),
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
