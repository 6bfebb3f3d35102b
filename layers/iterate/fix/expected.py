"""Blanks a fix left on purpose: recorded in a version's version.json, read back when that version is analysed.

A fix that clears cells ("Clear those values", "Store them as proper empty values") makes blanks the user
asked for. Without a record, the next run of the fixed file reports them as a new missing-values issue and
the exported completeness check fails on the very file the user corrected: the loop never converges. So
`iterate fix` writes `expectedBlanks` (column -> 0-based rows of the new file) into version.json, carried
over from version to version; a run of a file whose bytes are that version's reads them back, does not report
those cells as missing, and says so in its metadata (`RunMetadata.expectedBlanks`), which the export reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from iterate.detect.findings import Finding
    from iterate.fix.engine import FixResult, FixStep

VERSION_FILE = "version.json"
# Findings about absent values: the only ones a deliberate blank can explain.
MISSING_TYPES = frozenset({"missing_values", "missing_together"})


def _new_rows(n_rows: int, dropped: np.ndarray) -> np.ndarray:
    """Parent row -> row in the new file (-1 for a dropped row)."""
    keep = np.ones(n_rows, dtype=bool)
    keep[dropped] = False
    out = np.full(n_rows, -1, dtype=np.int64)
    out[keep] = np.arange(int(keep.sum()))
    return out


def expected_blanks(
    result: FixResult, steps: Sequence[FixStep], parent_blanks: Mapping[str, Sequence[int]], n_rows: int
) -> dict[str, list[int]]:
    """The blanks of the new file that are the user's own: cells this fix cleared, the cells of a gap the user
    chose to store as proper empty values, and the parent version's own (rows renumbered past dropped rows);
    a cell a later step filled again is not blank and not listed."""
    parent: dict[str, set[int]] = {c: {int(r) for r in rows} for c, rows in parent_blanks.items()}
    for step in steps:
        if step.action.action != "set_null":
            continue
        col = str(step.action.parameters.get("column") or step.column or "")
        if col:
            parent.setdefault(col, set()).update(int(r) for r in step.rows.tolist())
    renumber = _new_rows(n_rows, result.dropped_rows)
    names = set(result.table.column_names)
    out: dict[str, list[int]] = {}
    for col, rows in parent.items():
        if col not in names:
            continue
        values = result.table.column(col)
        kept = []
        for r in sorted(rows):
            new = int(renumber[r]) if 0 <= r < n_rows else -1
            if new >= 0 and values[new].as_py() in (None, ""):
                kept.append(new)
        if kept:
            out[col] = kept
    return out


def version_record(data: Path) -> dict[str, Any] | None:
    """version.json beside `data` when `data` is the file it describes (same name; its sha256 is checked by
    the run against the bytes it read), else None."""
    path = data.parent / VERSION_FILE
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("file") != data.name or not isinstance(body.get("sha256"), str):
        return None
    return body


def blanks_of(record: Mapping[str, Any] | None, content_hash: str) -> dict[str, list[int]]:
    """The expected blanks a version record holds, when the data read is that version (same sha256)."""
    if not record or record.get("sha256") != content_hash:
        return {}
    raw = record.get("expectedBlanks")
    if not isinstance(raw, dict):
        return {}
    return {
        str(c): [int(r) for r in rows if isinstance(r, int)]
        for c, rows in raw.items()
        if isinstance(rows, list)
    }


def drop_expected(
    findings: list[Finding], blanks: Mapping[str, Sequence[int]], columns: Sequence[str]
) -> tuple[list[Finding], dict[str, int]]:
    """The findings without the deliberate blanks: a missing-values finding loses those cells (and is gone when
    none is left); returns the findings and, per column, how many blanks were the user's own."""
    if not blanks:
        return findings, {}
    index = {c: i for i, c in enumerate(columns)}
    wanted = {
        index[c]: np.asarray(sorted(set(rows)), dtype=np.int64) for c, rows in blanks.items() if c in index
    }
    out = []
    for f in findings:
        if f.type not in MISSING_TYPES or f.n_cells == 0:
            out.append(f)
            continue
        expected = np.zeros(f.n_cells, dtype=bool)
        for col, rows in wanted.items():
            expected |= (f.cols == col) & np.isin(f.rows, rows)
        if not expected.any():
            out.append(f)
            continue
        if expected.all():
            continue
        f.keep(~expected)
        if f.describe is not None:
            f.description = f.describe(f)
        out.append(f)
    return out, {columns[i]: int(rows.size) for i, rows in wanted.items() if rows.size}
