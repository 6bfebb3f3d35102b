"""The profile step on the engine path: statistics, duplicates and flags over every row in SQL, detection on
the engine's bounded sample, the decision turned into predicates (docs/engine.md)."""

from __future__ import annotations

import hashlib
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pydantic import Field

from iterate.contracts import Contract, DatasetProfile, Issue
from iterate.contracts.profile import ColumnProfile, DuplicateStats, LengthStats, MissingPattern, NumericStats
from iterate.engine.summaries import Summaries

if TYPE_CHECKING:
    from iterate.detect import Detection
    from iterate.engine.project import Counted, Projection
    from iterate.settings import Settings
    from iterate.table import SourceInfo


class EngineCounts(Contract):
    """What the engine counted over every row for each issue, applied to the issues once their
    proofs (run on the sample) are judged: the population counts of the report."""

    rowCount: int
    sampleRows: int
    randomRows: int
    rows: dict[str, int]
    cells: dict[str, int]
    sampleCounted: list[str]
    # What each issue's predicate counts on the sample (the rows the proofs ran on): a proof whose claim there is
    # the predicate's has the engine's count over every row as its own.
    predicateSampleRows: dict[str, int] = Field(default_factory=dict)
    predicateSampleCells: dict[str, int] = Field(default_factory=dict)


@dataclass
class _Hash:
    value: str = ""


def _hash_in_background(path: Path) -> tuple[threading.Thread, _Hash]:
    """sha256 of the file's bytes in a thread (hashlib releases the GIL while DuckDB scans)."""
    out = _Hash()

    def run() -> None:
        sha = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(8 * 2**20), b""):
                sha.update(chunk)
        out.value = sha.hexdigest()

    thread = threading.Thread(target=run, name="iterate-engine-hash", daemon=True)
    thread.start()
    return thread, out


def _column_profile(base: ColumnProfile, s: Summaries, i: int, null_marker: str) -> ColumnProfile:
    """A column's profile with the engine's numbers: exact from its value counts when it has them (the same
    sketch the single pass profiles), else the sample's profile with the engine's counts, distinct estimate,
    lengths and numbers."""
    from iterate.profile import ColumnSketch

    counted = s.value_counts.get(i)
    if counted is not None:
        values, counts = counted
        sketch = ColumnSketch(base.name, i, pa.array(values, pa.string()), counts)
        return sketch.finalize(null_marker)
    missing = int(s.column_stat(i, "missing") or 0)
    present = max(s.n_rows - missing, 0)
    distinct = int(s.column_stat(i, "distinct") or 0)
    update: dict[str, Any] = {
        "count": present,
        "missing": missing,
        "distinct": distinct,
        "distinctRatio": distinct / present if present else 0.0,
    }
    if s.column_stat(i, "min_length") is not None:
        update["length"] = LengthStats(
            min=int(s.column_stat(i, "min_length")),
            max=int(s.column_stat(i, "max_length")),
            mean=round(float(s.column_stat(i, "mean_length")), 4),
        )
    quartiles = s.column_stat(i, "quartiles")
    if base.numeric is not None and s.column_stat(i, "numbers") and quartiles:
        update["numeric"] = NumericStats(
            count=int(s.column_stat(i, "numbers")),
            min=float(s.column_stat(i, "min")),
            max=float(s.column_stat(i, "max")),
            mean=float(s.column_stat(i, "mean")),
            std=float(s.column_stat(i, "std") or 0.0),
            median=float(quartiles[1]),
            mad=base.numeric.mad,
            q1=float(quartiles[0]),
            q3=float(quartiles[2]),
            histogram=None,
        )
    return base.model_copy(update=update)


def engine_profile(
    sampled: DatasetProfile, s: Summaries, null_marker: str, content_hash: str
) -> DatasetProfile:
    """The profile of the whole input: the engine's numbers over every row where it has them."""
    columns = [_column_profile(c, s, i, null_marker) for i, c in enumerate(sampled.columns)]
    dup = s.duplicates
    patterns = [
        MissingPattern(columns=[i for i in range(len(s.columns)) if p >> i & 1], rows=n)
        for p, n in s.missing_patterns
        if p
    ]
    complete = next((n for p, n in s.missing_patterns if p == 0), 0)
    overview = sampled.missingOverview
    if overview is not None:
        overview = overview.model_copy(
            update={
                "cells": sum(c.missing + c.disguisedMissing for c in columns),
                "rows": s.n_rows - complete if s.missing_patterns else overview.rows,
                "patterns": patterns,
                "patternCount": len(patterns),
                "bandRows": [],
                "bandColumns": [],
                "bands": [],
            }
        )
    note = (
        f"engine path: statistics, value counts, duplicates and flags over all {s.n_rows:,} rows; detection on a "
        f"sample of {len(s.sample_rows):,} rows ({s.random_rows:,} drawn at random, the others holding values of "
        "low-cardinality columns the draw missed); near-duplicate rows, dependencies and associations are the "
        "sample's"
    )
    return sampled.model_copy(
        update={
            "rowCount": s.n_rows,
            "contentHash": content_hash,
            "columns": columns,
            "duplicates": DuplicateStats(
                exactRows=dup.get("repeats", 0),
                exactGroups=dup.get("groups", 0),
                nearRows=sampled.duplicates.nearRows,
                largestGroup=dup.get("largest", 0),
            ),
            "missingOverview": overview,
            "readNotes": [*sampled.readNotes, note],
            "sample": None,
        }
    )


def _file_rows(issues: list[Issue], rows: np.ndarray) -> list[Issue]:
    """Examples named by their sample position, renamed to the file's data row."""
    out = []
    for issue in issues:
        if issue.evidence is None or not issue.evidence.examples:
            out.append(issue)
            continue
        examples = [e.model_copy(update={"row": int(rows[e.row])}) for e in issue.evidence.examples]
        out.append(
            issue.model_copy(update={"evidence": issue.evidence.model_copy(update={"examples": examples})})
        )
    return out


@dataclass
class EngineResult:
    """What the engine path's profile step made: the candidates, the profile, the counts and the flags."""

    profile: DatasetProfile
    candidates: list[Issue]
    detection: Detection
    counts: EngineCounts
    flags: pa.Table
    sample: pa.Table
    timings_ms: dict[str, float]
    statements_s: dict[str, float] = field(default_factory=dict)
    statements_cpu_s: dict[str, float] = field(default_factory=dict)
    # The file's 0-based data row of each sample row: what a proof's row (a place in the sample) names.
    sample_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def run_engine(path: Path, settings: Settings, *, name: str) -> EngineResult:
    """Every pass of the engine path over `path` (DuckDB, in place), detection on its sample, the decision's
    predicates counted and flagged over every row. A file DuckDB cannot read raises DatasetReadError."""
    import duckdb

    from iterate.io import ReadLimits
    from iterate.io.errors import DatasetReadError
    from iterate.io.reader import check_source

    check_source(path, ReadLimits.from_settings(settings))  # missing, not a regular file, over the size limit
    timings: dict[str, float] = {}
    t = time.perf_counter()
    hashing, digest = _hash_in_background(path)
    try:
        return _run(path, settings, name, hashing, digest, timings, t)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetReadError(
            path,
            f"could not be read by the engine path (DuckDB: {first})",
            "check that it is a delimited text file with a header row, or run it with ITERATE_ENGINE=never "
            "to read it in one pass",
        ) from exc
    finally:
        hashing.join()


def _run(
    path: Path,
    settings: Settings,
    name: str,
    hashing: threading.Thread,
    digest: _Hash,
    timings: dict[str, float],
    t: float,
) -> EngineResult:
    from iterate.engine.duck import DuckSource
    from iterate.engine.project import count_and_flag
    from iterate.engine.summaries import source_info, summarize

    with (
        tempfile.TemporaryDirectory(prefix="iterate-engine-") as spill,
        DuckSource(
            path, memory_mb=max(settings.engine_scan_memory_mb, settings.engine_memory_mb), directory=spill
        ) as source,
    ):
        summaries = summarize(source, sample_rows=settings.engine_sample_rows)
        # Detection's memory comes next to DuckDB's: DuckDB's cap comes down to make room (1.2 s on 10M rows,
        # 0.8 GB of the table written to its spill files).
        source.limit_memory(settings.engine_memory_mb)
        if summaries.n_rows == 0:
            from iterate.io.errors import DatasetReadError

            raise DatasetReadError(
                path, "has no data rows", "check that the file holds a header and its rows"
            )
        timings["engine_summaries"] = _ms(t)
        hashing.join()
        result = decide_and_count(
            summaries,
            source_info(path, digest.value),
            lambda projected: count_and_flag(source, projected, summaries.counts_by_value()),
            name=name,
            timings=timings,
        )
        result.statements_s = dict(source.timings)
        result.statements_cpu_s = dict(source.cpu)
    return result


def decide_and_count(
    summaries: Summaries,
    info: SourceInfo,
    count: Callable[[list[Projection]], Counted],
    *,
    name: str,
    timings: dict[str, float],
) -> EngineResult:
    """What follows the engine's summaries, whatever engine computed them (DuckDB here, Athena on AWS):
    detection on the sample, the profile, the decision's predicates counted and flagged over every row by
    `count`."""
    from iterate.detect import detect
    from iterate.detect.context import dataset_null_marker
    from iterate.engine.project import projections, sample_counts
    from iterate.issues import issues_from_findings
    from iterate.profile import profile_table

    t = time.perf_counter()
    table = summaries.table(name, info)
    null_marker = dataset_null_marker(table)
    detection = detect(table, null_marker=null_marker)
    timings["engine_detect"] = _ms(t)
    t = time.perf_counter()
    sampled = profile_table(table, null_marker=null_marker)
    profile = engine_profile(sampled, summaries, null_marker, info.content_hash)
    candidates = issues_from_findings(detection.findings, table, sampled)
    projected = projections(detection.findings, table)
    counted = count(projected)
    timings["engine_flags"] = _ms(t)
    with_cells = {p.issue_id for p in projected}
    sample_counted = []
    rows, cells = dict(counted.rows), dict(counted.cells)
    for issue in candidates:
        if issue.type == "duplicate_rows":
            rows[issue.id] = summaries.duplicates.get("repeats", 0)
            cells[issue.id] = rows[issue.id] * len(summaries.columns)
        elif issue.id not in with_cells:
            sample_counted.append(issue.id)  # whole-row facts other than exact duplicates: the sample's count
        else:
            rows.setdefault(issue.id, 0)
            cells.setdefault(issue.id, 0)
    predicate_rows, predicate_cells = sample_counts(projected)
    counts = EngineCounts(
        rowCount=summaries.n_rows,
        sampleRows=len(summaries.sample_rows),
        randomRows=summaries.random_rows,
        rows=rows,
        cells=cells,
        sampleCounted=sample_counted,
        predicateSampleRows=predicate_rows,
        predicateSampleCells=predicate_cells,
    )
    empty = pa.table({"row": pa.array([], pa.int64()), "column": pa.array([], pa.string()),
                      "issue_id": pa.array([], pa.string()), "score": pa.array([], pa.float64())})  # fmt: skip
    return EngineResult(
        profile=profile,
        candidates=_file_rows(candidates, summaries.sample_rows),
        detection=detection,
        counts=counts,
        flags=counted.flags if counted.flags is not None else empty,
        sample=summaries.sample,
        timings_ms=timings,
        sample_rows=summaries.sample_rows,
    )


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)
