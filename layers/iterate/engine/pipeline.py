"""The engine path's profile step in the run: the same artifacts as the single pass, from the engine."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iterate.contracts import Issue
from iterate.pipeline import (
    CANDIDATES,
    DATA,
    FLAGS,
    PROFILE,
    ProfileSummary,
    RunContext,
    _put_file,
    _record,
)
from iterate.storage import put_model, put_models

if TYPE_CHECKING:
    from iterate.engine.step import EngineResult

# Beside data.parquet (the sample the proofs read): each sample row's 0-based data row in the file.
SAMPLE_ROWS = "sample_rows.parquet"


def engine_profile_step(
    ctx: RunContext, source_path: Path, *, dataset_name: str | None = None
) -> ProfileSummary:
    """profile_step on the engine path: profile.json from the engine's statistics, candidates decided on its
    sample, flags.csv over every row from the decision's predicates, and data.parquet holding the sample (what
    the proofs run on; their population counts come from the engine, applied by the report step)."""
    from iterate.engine.step import run_engine

    started = time.perf_counter()
    ctx.report("read", 0, 1, source_path.name)
    name = dataset_name or source_path.stem
    result = run_engine(source_path, ctx.settings, name=name)
    return write_engine_result(ctx, result, started=started, name=name, source_file=source_path.name)


def write_engine_result(
    ctx: RunContext, result: EngineResult, *, started: float, name: str, source_file: str
) -> ProfileSummary:
    """The profile step's artifacts and record from the engine path's result (DuckDB's or Athena's)."""
    from iterate.report import write_flags_csv

    ctx.timings_ms.update(result.timings_ms)
    ctx.report(
        "read", 1, 1, f"{result.counts.rowCount:,} rows × {len(result.profile.columns)} columns (engine)"
    )
    with tempfile.TemporaryDirectory(prefix="iterate-") as tmp:
        data_path = Path(tmp) / DATA
        pq.write_table(result.sample, data_path)
        _put_file(ctx.store, DATA, data_path)
        rows_path = Path(tmp) / SAMPLE_ROWS
        pq.write_table(pa.table({"row": pa.array(result.sample_rows, pa.int64())}), rows_path)
        _put_file(ctx.store, SAMPLE_ROWS, rows_path)
        flags_path = Path(tmp) / FLAGS
        n_flags = write_flags_csv(result.flags, flags_path, columns=[c.name for c in result.profile.columns])
        _put_file(ctx.store, FLAGS, flags_path)
    rows = result.flags.column("row")
    flagged_rows = int(pc.count_distinct(rows).as_py()) if len(rows) else 0
    put_model(ctx.store, PROFILE, result.profile)
    put_models(ctx.store, CANDIDATES, result.candidates, Issue)
    summary = ProfileSummary(
        rowCount=result.counts.rowCount,
        columnCount=len(result.profile.columns),
        contentHash=result.profile.contentHash,
        nullMarker=result.detection.null_marker,
        candidateIssues=len(result.candidates),
        flaggedCells=n_flags,
        flaggedRows=flagged_rows,
        sourceFile=source_file,
        datasetName=name,
    )
    decision = result.detection.decision.summary() if result.detection.decision is not None else {}
    _record(
        ctx,
        "profile",
        started,
        summary=summary.model_dump(),
        detectTimingsMs=result.detection.timings_ms,
        detection=decision,
        expectedBlanks={},
        engine=result.counts.model_dump(),
        engineStatementsS=result.statements_s,
        engineStatementsCpuS=result.statements_cpu_s,
    )
    return summary
