"""The run, step by step: profile → understand → analyze → investigate → report, over an ArtifactStore.

The same functions run in-process for `iterate analyze` (a local directory store) and one per Lambda on AWS
(an S3 store), so a run's artifacts are the same wherever it ran. Steps exchange artifacts by key, never data.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from iterate import __version__
from iterate.contracts import (
    Acceptance,
    AnalysisResult,
    CodeInvestigation,
    Contract,
    DatasetProfile,
    DatasetUnderstanding,
    Issue,
    RunComparison,
    RunMetadata,
    TokenUsage,
)
from iterate.ports import Agents, ArtifactStore, DatasetRef, RunRepository, Sandbox, ScriptLibrary
from iterate.settings import Settings, library_enabled
from iterate.storage import get_model, get_models, put_model, put_models

if TYPE_CHECKING:
    from iterate.contracts import ReusedScript
    from iterate.library import Shelf
    from iterate.profile.background import BackgroundProfile
    from iterate.table import Table

Progress = Callable[[str, int, int, str], None]

# Artifact keys, relative to the run's prefix (a directory locally, artifacts/<owner>/<dataset>/<run>/ on S3).
DATA = "data.parquet"
PROFILE = "profile.json"
CANDIDATES = "candidates.json"
UNDERSTANDING = "understanding.json"
ISSUES = "issues.json"
ANALYSIS = "analysis.json"
REPORT = "report.html"
FLAGS = "flags.csv"
STEPS = "steps/{step}.json"
INVESTIGATION = "investigations/{issue_id}.json"


@dataclass
class RunContext:
    """What every step needs; built by the CLI locally, by each Lambda handler on AWS."""

    run_id: str
    store: ArtifactStore
    agents: Agents
    sandbox: Sandbox
    settings: Settings
    instructions: str | None = None
    repo: RunRepository | None = None
    progress: Progress | None = None
    previous_issues: list[Issue] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    # The script library and who the dataset is (AWS: owner and dataset id; locally "local" and the input's
    # resolved path): proofs are stored and offered per owner and dataset.
    library: ScriptLibrary | None = None
    owner: str = "local"
    dataset_id: str | None = None
    # Issues the user accepted (iterate accept / the API): marked in the report, never failing a gate.
    accepted: list[Acceptance] = field(default_factory=list)
    # version.json of the input when it is a version `iterate fix` wrote: the blanks the user asked for.
    version: dict[str, Any] | None = None

    def report(self, step: str, done: int, total: int, message: str = "") -> None:
        if self.progress is not None:
            self.progress(step, done, total, message)


class StepRecord(Contract):
    """What one step did, kept as steps/<step>.json so the report step can assemble the run's metadata."""

    step: str
    durationMs: float
    mode: str | None = None
    degradedReasons: list[str] = Field(default_factory=list)
    usage: dict[str, TokenUsage] = Field(default_factory=dict)
    model: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class ProfileSummary(Contract):
    rowCount: int
    columnCount: int
    contentHash: str
    nullMarker: str
    candidateIssues: int
    flaggedCells: int
    flaggedRows: int | None = None
    sourceFile: str
    datasetName: str


class IssueDraft(Contract):
    """issues.json: the analysis agent's issues before investigation."""

    issues: list[Issue]
    summary: str
    notes: list[str] = Field(default_factory=list)
    comparison: RunComparison | None = None


def _record(ctx: RunContext, step: str, started: float, *, agents: bool = False, **detail: Any) -> None:
    elapsed = (time.perf_counter() - started) * 1000
    ctx.timings_ms[step] = round(elapsed, 1)
    record = StepRecord(step=step, durationMs=round(elapsed, 1), detail=detail)
    if agents:
        a = ctx.agents
        usage_fn = getattr(a, "usage", None)
        record = record.model_copy(
            update={
                "mode": a.mode,
                "degradedReasons": list(a.degraded_reasons),
                "usage": usage_fn() if callable(usage_fn) else {},
                "model": getattr(a, "model", None),
            }
        )
    put_model(ctx.store, STEPS.format(step=step), record)


def _put_file(store: ArtifactStore, key: str, path: Path) -> None:
    put_file = getattr(store, "put_file", None)
    if callable(put_file):
        put_file(key, path)
    else:
        store.put_bytes(key, path.read_bytes())


def _prepare(sandbox: Sandbox | None, data: DatasetRef | None) -> None:
    """Let a sandbox that can (LocalSandbox.prepare) start its processes and load the data in the background."""
    prepare = getattr(sandbox, "prepare", None)
    if callable(prepare):
        prepare(data)


# Inputs from this size on are run for memory rather than speed (docs/large-files.md): the sandbox's
# interpreter starts once the detectors are done, not while the file is read (its 56-80 MB would add to the
# detection phase, a long file's peak; it starts while the profile's statistics are computed, seconds before
# the investigations need it), and the run's large blocks are mapped one by one (profile_step).
LARGE_INPUT_BYTES = 256 * 2**20


def _input_bytes(path: str | Path) -> int:
    """The input's size; 0 for standard input or a path that cannot be read (the read then says why)."""
    try:
        return 0 if str(path) == "-" else Path(path).stat().st_size
    except OSError:
        return 0


def _large_input(path: str | Path) -> bool:
    return _input_bytes(path) >= LARGE_INPUT_BYTES


def bound_memory(input_bytes: int) -> bool:
    """On an input of LARGE_INPUT_BYTES or more, from now on in this process (and the processes it forks):
    per-row arrays mapped one by one, so each one freed gives its pages back instead of leaving them in a heap,
    and pyarrow's buffers through the same malloc, not a pool that keeps what it frees (iterate.memory).
    Whether it was applied.

    On a large input only: the mappings cost page faults on every array (1M rows, 197 MB, alternated: 8.9-9.2 s
    without either against 11.8-14.6 s with both, the largest process 1.12-1.14 GB against 0.84-0.87 GB), a
    price worth paying where the memory would pass 2 GB (3M rows), not where the whole run holds a gigabyte.
    A warm Lambda keeps it for its later invocations: slower on a small file, never wrong."""
    from iterate.memory import map_large_blocks, use_system_pool

    if input_bytes < LARGE_INPUT_BYTES:
        return False
    map_large_blocks()
    use_system_pool()
    return True


def spill_table(table: Table, settings: Settings, timings_ms: dict[str, float] | None = None) -> int:
    """A table of `settings.spill_bytes` or more moved to files in the temporary directory and mapped back
    (Table.spill), so the detectors page it in rather than hold it; the bytes moved (0: left in memory).
    By default only where memory is short (`settings.spill`), and never where the temporary directory is itself
    memory (tmpfs): the files would cost what they save (iterate.memory.spill_directory)."""
    from iterate.memory import hand_back, spill_directory

    directory = spill_directory(table.nbytes, settings.spill_bytes, settings.spill)
    if directory is None:
        return 0
    t = time.perf_counter()
    moved = table.spill(directory)
    hand_back()  # the columns' arrays in memory are free now: give their pages back
    if timings_ms is not None:
        timings_ms["spill"] = round((time.perf_counter() - t) * 1000, 1)
    return moved


def profile_step(
    ctx: RunContext, source_path: str | Path, *, dataset_name: str | None = None, engine: bool = True
) -> ProfileSummary:
    """Read the file once, profile it, run the detectors; write data, profile, candidate issues and flags.
    `engine`: whether a large input may take the engine path (iterate.engine.route); the AWS steps pass False
    (no function ships DuckDB yet)."""
    from iterate.engine.route import routes_to_engine
    from iterate.io import ReadLimits, read_table
    from iterate.io.chunked import Chunking

    if engine and routes_to_engine(source_path, ctx.settings):
        from iterate.engine.pipeline import engine_profile_step

        return engine_profile_step(ctx, Path(source_path), dataset_name=dataset_name)
    started = time.perf_counter()
    bound_memory(_input_bytes(source_path))  # (the background profile, forked from here, inherits it)
    source_path = Path(source_path)
    ctx.report("read", 0, 1, source_path.name)
    table = read_table(
        source_path,
        name=dataset_name,
        limits=ReadLimits.from_settings(ctx.settings),
        chunking=Chunking.from_settings(ctx.settings),
    )
    return profile_read_step(
        ctx, table, source_name=source_path.name, started=started, overlap=_overlap(ctx, source_path)
    )


# What writing data.parquet and loading the sandbox's frame beside the detectors add to a run's memory, per
# byte of input: the frame is 1.6-1.7 times the CSV (3.2 GB for 10M rows x 20 columns, 1,972 MB of CSV), the
# text of the row group being written a tenth of it.
OVERLAP_BYTES_PER_INPUT_BYTE = 2


def _overlap(ctx: RunContext, source_path: Path) -> bool:
    """Whether the profile step writes data.parquet and has the sandbox load it beside the detectors
    (profile_read_step's `overlap`): with a sandbox that loads data ahead, for an input below LARGE_INPUT_BYTES
    (run for speed), or a larger one where memory is not short for what that adds (`memory_short`, the rule
    that also keeps a table in memory rather than in mapped files)."""
    from iterate.memory import memory_short

    if not callable(getattr(ctx.sandbox, "prepare", None)):
        return False
    size = _input_bytes(source_path)
    return size < LARGE_INPUT_BYTES or not memory_short(OVERLAP_BYTES_PER_INPUT_BYTE * size)


def _collect_profile(ctx: RunContext, pending: BackgroundProfile) -> DatasetProfile:
    """The column statistics, from the forked child or computed here, timed and reported."""
    ctx.report("profile", 0, 1, "column statistics")
    t = time.perf_counter()
    profile = pending.result()
    ctx.timings_ms["profile_table"] = round((time.perf_counter() - t) * 1000, 1)
    ctx.report("profile", 1, 1, "")
    return profile


def profile_read_step(
    ctx: RunContext, table: Table, *, source_name: str, started: float, overlap: bool = False
) -> ProfileSummary:
    """profile_step once the file is read (here, or in chunks by the AWS Map): data, profile, candidate
    issues and flags of `table`. `started`: when the read began (perf_counter), for the step's timings.

    `overlap`: write data.parquet in a thread beside the column statistics and the detectors, and ask the
    sandbox to load it (`_prepare`) once the detectors' per-column phase is over. Those phases keep every core
    busy, while writing the file (0.6 s on 1M rows x 20 columns), the detectors' last phases (0.45 s) and the
    sandbox's load (0.6 s) each ran on one core, one after the other (on 10M rows: 9, 6 and 6 s). Only where
    memory is plenty (`_overlap`): the file's text and the sandbox's frame are then held beside the detectors'
    arrays.
    """
    import numpy as np

    from iterate.detect import detect
    from iterate.detect.context import dataset_null_marker
    from iterate.fix.expected import blanks_of, drop_expected
    from iterate.io import write_parquet_text
    from iterate.issues import flags_of, issues_from_findings
    from iterate.memory import hand_back
    from iterate.profile.background import BackgroundProfile
    from iterate.report import write_flags_csv

    ctx.timings_ms["read"] = round((time.perf_counter() - started) * 1000, 1)
    ctx.report("read", 1, 1, f"{table.n_rows:,} rows × {len(table.columns)} columns")
    spill_table(table, ctx.settings, ctx.timings_ms)

    with tempfile.TemporaryDirectory(prefix="iterate-") as tmp, ThreadPoolExecutor(1) as background:
        data_path = Path(tmp) / DATA

        def write_data() -> None:
            write_parquet_text(table, data_path)
            _put_file(ctx.store, DATA, data_path)

        detected = threading.Event()  # the detectors' per-column phase is over, or the step failed
        failed: list[BaseException] = []

        def write_then_load() -> None:
            write_data()
            detected.wait()
            if not failed:
                _prepare(ctx.sandbox, DatasetRef(path=ctx.store.uri(DATA), format="parquet"))

        def phase_done(phase: str) -> None:
            if phase == "columns":
                detected.set()

        if not overlap:
            # A large input's sandbox loads the file once this step's memory is handed back (_run_steps), not
            # beside the detectors (docs/large-files.md).
            write_data()
        t = time.perf_counter()
        null_marker = dataset_null_marker(table)
        # The column statistics are computed in a forked process while the detectors run (see
        # iterate.profile.background for when, and why not in a thread). A long table's are computed here, and
        # before the detectors rather than after them: their working memory (1.2 GB at 10M rows) then does not
        # meet the detection's findings (0.6 GB), so the step's peak is the detection's (1.8 -> 1.7 GB anonymous
        # at 10M rows), in the same time.
        pending = BackgroundProfile(table, null_marker)
        # Started after the statistics' fork (if any), so the forked child never inherits a writer mid-write.
        written = background.submit(write_then_load) if overlap else None
        try:
            early = None
            if not pending.forked:
                spent = time.perf_counter() - t
                early = _collect_profile(ctx, pending)
                hand_back()
                t = time.perf_counter() - spent
            ctx.report("detect", 0, 1, "looking for problems")
            detection = detect(table, null_marker=null_marker, phase_done=phase_done)
        except BaseException as exc:
            failed.append(exc)  # the writer finishes (the executor waits for it) but nothing is loaded
            raise
        finally:
            detected.set()
        ctx.timings_ms["detect"] = round((time.perf_counter() - t) * 1000, 1)
        if written is not None:
            written.result()  # data.parquet is in the store (or its failure is raised here)
        _prepare(ctx.sandbox, None)  # started already unless the input is large (LARGE_INPUT_BYTES)
        findings, expected = detection.findings, dict[str, int]()
        blanks = blanks_of(ctx.version, table.source.content_hash)
        if blanks:  # cells the user cleared in the fix this file is a version of are not missing values
            findings, expected = drop_expected(findings, blanks, table.column_names)
            detection.findings = findings
        ctx.report("detect", 1, 1, f"{len(detection.findings)} findings")
        profile = early if early is not None else _collect_profile(ctx, pending)
        candidates = issues_from_findings(detection.findings, table, profile)
        flags = flags_of(detection.findings, table)
        flags_path = Path(tmp) / FLAGS
        n_flags = write_flags_csv(flags, flags_path, columns=table.column_names)
        flagged_rows = int(np.unique(np.asarray(flags.rows, dtype=np.int64)).size)
        _put_file(ctx.store, FLAGS, flags_path)
    put_model(ctx.store, PROFILE, profile)
    put_models(ctx.store, CANDIDATES, candidates, Issue)
    summary = ProfileSummary(
        rowCount=table.n_rows,
        columnCount=len(table.columns),
        contentHash=table.source.content_hash,
        nullMarker=detection.null_marker,
        candidateIssues=len(candidates),
        flaggedCells=n_flags,
        flaggedRows=flagged_rows,
        sourceFile=source_name,
        datasetName=table.name,
    )
    decision = detection.decision.summary() if detection.decision is not None else {}
    _record(
        ctx,
        "profile",
        started,
        summary=summary.model_dump(),
        detectTimingsMs=detection.timings_ms,
        detection=decision,
        expectedBlanks=expected,
    )
    return summary


def understand_step(ctx: RunContext) -> DatasetUnderstanding:
    """The profile (never the raw file) → a business description of the dataset and its columns."""
    started = time.perf_counter()
    ctx.report("understand", 0, 1, "describing the dataset")
    profile = get_model(ctx.store, PROFILE, DatasetProfile)
    understanding = ctx.agents.understanding.understand(profile, instructions=ctx.instructions)
    put_model(ctx.store, UNDERSTANDING, understanding)
    ctx.report("understand", 1, 1, "")
    _record(ctx, "understand", started, agents=True)
    return understanding


def analyze_step(ctx: RunContext) -> list[str]:
    """Detector candidates + understanding (+ instructions, previous issues) → the issues to investigate."""
    from iterate.investigate import supports

    started = time.perf_counter()
    ctx.report("analyze", 0, 1, "ranking and explaining issues")
    profile = get_model(ctx.store, PROFILE, DatasetProfile)
    understanding = get_model(ctx.store, UNDERSTANDING, DatasetUnderstanding)
    candidates = get_models(ctx.store, CANDIDATES, Issue)
    draft = ctx.agents.analysis.analyze(
        candidates,
        profile=profile,
        understanding=understanding,
        instructions=ctx.instructions,
        previous_issues=ctx.previous_issues,
    )
    issues, comparison = draft.issues, None
    if ctx.previous_issues is not None:  # a re-analysis: how did each issue change since the last run?
        from iterate.issues import compare_runs

        issues, comparison = compare_runs(issues, ctx.previous_issues)
    put_model(
        ctx.store,
        ISSUES,
        IssueDraft(issues=issues, summary=draft.summary, notes=draft.notes, comparison=comparison),
    )
    ctx.report("analyze", 1, 1, f"{len(draft.issues)} issues")
    _record(ctx, "analyze", started, agents=True)
    return [i.id for i in issues if supports(i, ctx.agents.investigation)]


def _issue(ctx: RunContext, issue_id: str) -> Issue:
    for issue in get_model(ctx.store, ISSUES, IssueDraft).issues:
        if issue.id == issue_id:
            return issue
    raise KeyError(f"issue {issue_id!r} is not in this run")


def generate_code_step(ctx: RunContext, issue_id: str, attempts: list[CodeInvestigation]) -> str | None:
    """The next attempt's code for one issue, or None when the loop should stop (AWS Map: GenerateCode)."""
    from iterate.investigate import next_code

    profile = get_model(ctx.store, PROFILE, DatasetProfile)
    return next_code(
        _issue(ctx, issue_id),
        attempts,
        agent=ctx.agents.investigation,
        profile=profile,
        max_attempts=ctx.settings.investigation_max_attempts,
    )


def code_columns_step(ctx: RunContext, issue_id: str, source: str, code: str) -> list[str] | None:
    """The only columns an attempt's `code` (written by `source`) reads, for the sandbox to fetch and load;
    None for every column (AWS Map: GenerateCode; iterate.investigate.loop.code_columns)."""
    from iterate.investigate.loop import code_columns

    columns = code_columns(_issue(ctx, issue_id), source, code)
    return list(columns) if columns else None


def shelf(ctx: RunContext, profile: DatasetProfile | None = None) -> Shelf | None:
    """The run's view of its dataset's stored scripts, or None without a library."""
    if ctx.library is None or not ctx.dataset_id:
        return None
    from iterate.library import Shelf

    return Shelf(
        ctx.library,
        owner=ctx.owner,
        dataset_id=ctx.dataset_id,
        profile=profile or get_model(ctx.store, PROFILE, DatasetProfile),
        check_policy=ctx.settings.sandbox_inprocess_checks,
    )


def stored_code_step(
    ctx: RunContext, issue_id: str, attempts: list[CodeInvestigation]
) -> tuple[str, ReusedScript] | None:
    """The stored script to run as this issue's next attempt instead of asking the agent (AWS Map:
    GenerateCode, before generate_code_step), or None."""
    from iterate.investigate.loop import template_first

    if ctx.library is None or any(a.reused is not None for a in attempts):
        return None
    issue = _issue(ctx, issue_id)
    if not attempts and template_first(ctx.agents.investigation, issue):
        return None  # the template goes first: no need to read the profile and the index for it
    found = shelf(ctx)
    return None if found is None else found.offer(issue, attempts, ctx.agents.investigation)


def judge_reused_step(
    ctx: RunContext, issue_id: str, run: CodeInvestigation, reused: ReusedScript, *, attempt: int
) -> CodeInvestigation:
    """A stored script's sandbox outcome, judged as fresh LLM code is (AWS Map: RecordAttempt)."""
    from iterate.library import reused_outcome

    return reused_outcome(_issue(ctx, issue_id), run, reused, attempt=attempt)


def record_investigation_step(ctx: RunContext, issue_id: str, investigation: CodeInvestigation) -> None:
    """Keep an investigation's outcome (validated) as investigations/<issue_id>.json."""
    from iterate.investigate import validate

    put_model(ctx.store, INVESTIGATION.format(issue_id=issue_id), validate(investigation))


def investigate_step(ctx: RunContext, data: DatasetRef | None = None) -> list[Issue]:
    """Investigate every supported issue in parallel (bounded) with the run's sandbox (local form of the Map)."""
    from iterate.investigate import investigate_all, supports

    started = time.perf_counter()
    profile = get_model(ctx.store, PROFILE, DatasetProfile)
    issues = get_model(ctx.store, ISSUES, IssueDraft).issues
    todo = [i for i in issues if supports(i, ctx.agents.investigation)]
    ctx.report("investigate", 0, max(len(todo), 1), f"{len(todo)} investigations")
    data = data or DatasetRef(path=ctx.store.uri(DATA), format="parquet")

    def on_done(done: int, total: int, issue: Issue) -> None:
        if done < total:  # the last one is reported below with the tally
            ctx.report("investigate", done, total, issue.id)

    done = investigate_all(
        todo,
        agent=ctx.agents.investigation,
        sandbox=ctx.sandbox,
        data=data,
        profile=profile,
        workers=ctx.settings.investigation_workers,
        max_attempts=ctx.settings.investigation_max_attempts,
        timeout_s=ctx.settings.sandbox_timeout_s,
        on_done=on_done,
        batch=ctx.settings.investigation_batch,
        reuse=shelf(ctx, profile),
    )
    for issue in done:
        if issue.investigation is not None:
            put_model(ctx.store, INVESTIGATION.format(issue_id=issue.id), issue.investigation)
    ok = sum(1 for i in done if i.investigation is not None and i.investigation.success)
    reused = sum(1 for i in done if i.investigation is not None and i.investigation.reused is not None)
    ctx.report("investigate", max(len(todo), 1), max(len(todo), 1), f"{ok} of {len(todo)} proven")
    # What the sandbox's own processes used (their CPU is not the caller's: a zygote reaps them).
    stats = getattr(ctx.sandbox, "stats", None)
    sandbox = stats() if callable(stats) else {}
    _record(
        ctx,
        "investigate",
        started,
        agents=True,
        investigated=len(todo),
        succeeded=ok,
        reused=reused,
        sandbox=sandbox,
    )
    return done


def _detection(records: list[StepRecord]) -> dict[str, Any]:
    """The detection decision's parameters and estimates, as the profile step recorded them."""
    for rec in records:
        if rec.step == "profile":
            found = rec.detail.get("detection")
            return dict(found) if isinstance(found, dict) else {}
    return {}


def _merge_usage(records: list[StepRecord]) -> dict[str, TokenUsage]:
    """Per agent, the largest cumulative figure any step saw (each step reports its session so far)."""
    merged: dict[str, TokenUsage] = {}
    for rec in records:
        for agent, usage in rec.usage.items():
            if agent == "total":
                continue
            have = merged.get(agent)
            if have is None or usage.calls >= have.calls:
                merged[agent] = usage
    if merged:
        total = TokenUsage(
            inputTokens=sum(u.inputTokens for u in merged.values()),
            outputTokens=sum(u.outputTokens for u in merged.values()),
            cacheReadTokens=sum(u.cacheReadTokens for u in merged.values()),
            cacheWriteTokens=sum(u.cacheWriteTokens for u in merged.values()),
            calls=sum(u.calls for u in merged.values()),
            costUsd=round(sum(u.costUsd for u in merged.values()), 6),
        )
        merged["total"] = total
    return merged


def _mode(records: list[StepRecord]) -> tuple[str, list[str]]:
    modes = [r.mode for r in records if r.mode]
    reasons = [reason for r in records for reason in r.degradedReasons]
    if "degraded" in modes or reasons:
        return "degraded", list(dict.fromkeys(reasons))
    if modes and all(m == "llm" for m in modes):
        return "llm", []
    return "offline", []


def report_step(ctx: RunContext, *, started_at: str, started_clock: float | None = None) -> AnalysisResult:
    """Assemble analysis.json (issues with their investigations), report.html and the scripts that worked."""
    from iterate.accepted import apply_accepted
    from iterate.investigate import confirm, save_scripts
    from iterate.issues import sort_issues
    from iterate.report import render_html

    started = time.perf_counter()
    ctx.report("report", 0, 1, "writing the report")
    profile = get_model(ctx.store, PROFILE, DatasetProfile)
    understanding = get_model(ctx.store, UNDERSTANDING, DatasetUnderstanding)
    draft = get_model(ctx.store, ISSUES, IssueDraft)
    profiled = get_model(ctx.store, STEPS.format(step="profile"), StepRecord).detail
    summary = ProfileSummary.model_validate(profiled["summary"])
    issues = []
    for issue in draft.issues:
        key = INVESTIGATION.format(issue_id=issue.id)
        investigation = get_model(ctx.store, key, CodeInvestigation) if ctx.store.exists(key) else None
        issues.append(confirm(issue, investigation) if investigation is not None else issue)
    if profiled.get("engine"):  # the engine path: proofs ran on its sample, population counts are its own
        from iterate.engine.proofs import apply_counts, read_sample_rows
        from iterate.engine.step import EngineCounts

        counts = EngineCounts.model_validate(profiled["engine"])
        issues = apply_counts(issues, counts, sample_rows=read_sample_rows(ctx.store))
    issues = apply_accepted(sort_issues(issues), ctx.accepted, ctx.store)
    save_scripts(issues, ctx.store)
    if ctx.library is not None and ctx.dataset_id:
        from iterate.library import store_proofs

        store_proofs(
            issues, ctx.library, profile, owner=ctx.owner, dataset_id=ctx.dataset_id, run_id=ctx.run_id
        )

    records = [
        get_model(ctx.store, STEPS.format(step=s), StepRecord)
        for s in ("profile", "understand", "analyze", "investigate")
        if ctx.store.exists(STEPS.format(step=s))
    ]
    mode, reasons = _mode(records)
    timings = {r.step: r.durationMs for r in records} | {
        k: v for k, v in ctx.timings_ms.items() if k not in {"report"}
    }
    model = next((r.model for r in records if r.model), None) if mode != "offline" else None
    now = datetime.now(UTC)
    duration = (
        (time.perf_counter() - started_clock) * 1000 if started_clock is not None else sum(timings.values())
    )
    result = AnalysisResult(
        mode=mode,  # type: ignore[arg-type]
        issues=issues,
        summary=draft.summary,
        completedAt=now.isoformat(timespec="seconds"),
        run=RunMetadata(
            runId=ctx.run_id,
            datasetName=summary.datasetName,
            sourceFile=summary.sourceFile,
            contentHash=summary.contentHash,
            rowCount=summary.rowCount,
            columnCount=summary.columnCount,
            startedAt=started_at,
            durationMs=round(duration, 1),
            engineVersion=__version__,
            instructions=ctx.instructions,
            degradedReasons=reasons,
            usage=_merge_usage(records),
            timingsMs=timings,
            model=model,
            detection=_detection(records),
            flaggedCells=summary.flaggedCells,
            flaggedRows=summary.flaggedRows,
            expectedBlanks=dict(profiled.get("expectedBlanks") or {}),
        ),
        severityCounts=dict(Counter(i.severity for i in issues)),
        comparison=draft.comparison,
    )
    result.run.timingsMs["report"] = round((time.perf_counter() - started) * 1000, 1)  # type: ignore[union-attr]
    put_model(ctx.store, ANALYSIS, result)
    ctx.store.put_bytes(
        REPORT, render_html(result, profile, understanding).encode("utf-8"), content_type="text/html"
    )
    ctx.report("report", 1, 1, "")
    return result


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


def run_local(
    path: str | Path,
    out_dir: str | Path,
    *,
    instructions: str | None = None,
    settings: Settings | None = None,
    agents: Agents | None = None,
    sandbox: Sandbox | None = None,
    progress: Progress | None = None,
    previous_issues: list[Issue] | None = None,
    library: ScriptLibrary | None = None,
    owner: str = "local",
    dataset_id: str | None = None,
    started_clock: float | None = None,
    accepted: list[Acceptance] | None = None,
) -> AnalysisResult:
    """The whole pipeline in-process: what `iterate analyze` runs, with the same steps as the state machine.

    library: where proofs are stored and found again (default: the directory settings.script_library names,
    none when it names none or "off"); owner and dataset_id say whose dataset this is (default: "local" and
    the input's resolved path, so the next run of the same file reuses this run's proofs).
    started_clock: a `time.perf_counter()` reading taken when the caller started (the command line's), so
    the run's `durationMs` counts from there; this call's own start when None.
    accepted: the user's accepted issues (see iterate.accepted), marked in the report.
    """
    settings = settings or Settings.from_env()
    if library is None and settings.script_library and library_enabled(settings):
        from iterate.library.local import LocalScriptLibrary

        library = LocalScriptLibrary(settings.script_library)
    if agents is None:
        from iterate.agents import build_agents

        cache_dir = (
            Path(settings.cache_dir) if settings.cache_dir else Path.home() / ".cache" / "iterate" / "llm"
        )
        agents = build_agents(settings, cache_dir=cache_dir if settings.anthropic_api_key else None)
    owned = None
    if sandbox is None:
        from iterate.sandbox import LocalSandbox, SandboxLimits

        sandbox = owned = LocalSandbox(SandboxLimits.from_settings(settings))
    if not _large_input(path) or settings.engine == "always":
        _prepare(sandbox, None)  # the sandbox's interpreter starts while the file is read
    scope = (library, owner, dataset_id or str(Path(path).resolve()))
    try:
        return _run_steps(
            sandbox,
            agents,
            settings,
            path,
            out_dir,
            instructions,
            progress,
            previous_issues,
            scope,
            started_clock,
            accepted or [],
        )
    finally:
        if owned is not None:  # its processes (and the dataset they hold) go with the run
            owned.close()


def _run_steps(
    sandbox: Sandbox,
    agents: Agents,
    settings: Settings,
    path: str | Path,
    out_dir: str | Path,
    instructions: str | None,
    progress: Progress | None,
    previous_issues: list[Issue] | None,
    scope: tuple[ScriptLibrary | None, str, str],
    started_clock: float | None = None,
    accepted: list[Acceptance] | None = None,
) -> AnalysisResult:
    from iterate.fix.expected import version_record
    from iterate.storage.local import LocalArtifactStore

    library, owner, dataset_id = scope
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(
        run_id=new_run_id(),
        store=LocalArtifactStore(out),
        agents=agents,
        sandbox=sandbox,
        settings=settings,
        instructions=instructions,
        progress=progress,
        previous_issues=previous_issues,
        library=library,
        owner=owner,
        dataset_id=dataset_id,
        accepted=accepted or [],
        version=version_record(Path(path)),
    )
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.perf_counter() if started_clock is None else started_clock
    previous = out / ANALYSIS
    if ctx.previous_issues is None and previous.exists():
        try:  # re-running into the same directory compares with the last run
            ctx.previous_issues = AnalysisResult.model_validate(
                json.loads(previous.read_text("utf-8"))
            ).issues
        except (ValueError, OSError):
            ctx.previous_issues = None
    profile_step(ctx, path)
    # The table and the detectors' arrays are gone now, but the allocators would keep their pages through the
    # investigations, whose sandbox processes hold the data too: hand them back (the main process held 1.8 GB
    # through a 3M-row run's investigations without this).
    from iterate.memory import hand_back

    hand_back()
    # Investigations run on data.parquet: a sandbox that can load it ahead of them starts now, while the
    # understanding and analysis steps run. Not earlier for a large input: its frame (about 1 GB on 3M rows x
    # 20 columns) and the detectors' arrays together were the run's peak. A smaller one's load was asked for
    # by the profile step already (profile_read_step's `overlap`): this finds it loaded or loading.
    _prepare(sandbox, DatasetRef(path=ctx.store.uri(DATA), format="parquet"))
    understand_step(ctx)
    analyze_step(ctx)
    investigate_step(ctx)
    return report_step(ctx, started_at=started_at, started_clock=clock)
