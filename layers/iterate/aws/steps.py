"""The state machine's steps as services: parse nothing, call the engine, keep DynamoDB and S3 in step.

What every step shares (running_step, the repository, progress, cost) and the steps up to AnalyzeDataset; the
investigation loop is iterate.aws.investigation, how a run ends iterate.aws.completion."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from pydantic import BaseModel

from iterate.aws import cost as cost_model
from iterate.aws.deps import AwsDeps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import (
    AnalyzeOutput,
    ChunkInput,
    ChunkOutput,
    EngineLoop,
    MergeChunksInput,
    ProfileInput,
    ProfileOutput,
    RunState,
    S3ObjectRef,
    SandboxFailure,
    StepInput,
    StepOutput,
)
from iterate.aws.secrets import settings_with_secret
from iterate.aws.sources import source_client
from iterate.aws.triggers import is_s3_event, run_for_trigger, start_run
from iterate.contracts import AnalysisResult, CodeInvestigation, InfraCost
from iterate.settings import Settings
from iterate.storage.dynamo import DynamoRunRepository, RunTransitionError
from iterate.storage.s3 import S3ArtifactStore

# Share of the progress bar each step owns (percent from, to).
STEP_SPANS: dict[str, tuple[int, int]] = {
    "profile": (0, 15),
    "understand": (15, 30),
    "analyze": (30, 45),
    "investigate": (45, 90),
    "report": (90, 100),
}


class RunCancelledError(RuntimeError):
    """The owner cancelled the run: later steps stop instead of spending work on it."""


class CompletionEventError(RuntimeError):
    """EventBridge refused the completion event (retried by the state machine)."""


class StateMachineSandbox:
    """On AWS the sandbox runs as the Map's RunInSandbox state; a step calling it directly is a wiring bug."""

    def run(self, code: str, data: Any, *, timeout_s: float | None = None) -> CodeInvestigation:
        raise RuntimeError("on AWS, investigation code runs in the state machine's RunInSandbox state")


def _now_iso(deps: AwsDeps) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))


def _jsonable(value: Any) -> Any:
    """A step summary of any shape (pydantic model, dataclass, dict) as plain JSON values."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))
    if value is None:
        return {}
    return json.loads(json.dumps(value, default=str))


def repository(deps: AwsDeps, owner: str) -> DynamoRunRepository:
    return DynamoRunRepository(deps.dynamo_table(), owner, clock=deps.clock)


def artifact_store(deps: AwsDeps, run: RunState) -> S3ArtifactStore:
    return S3ArtifactStore(deps.s3_client(), run.bucket, run.prefix)


LLM_CACHE_PREFIX = "artifacts/{owner}/_llm-cache/"
# The steps that read the script library (investigate: GenerateCode offers stored proofs) or write it
# (report: stores the run's proofs); the infra grants library/ to exactly these functions.
LIBRARY_STEPS = frozenset({"investigate", "report"})


def script_library(deps: AwsDeps, run: RunState) -> Any:
    """S3 (code under library/) + DynamoDB (index) for the owner's datasets; None when switched off."""
    from iterate.settings import library_enabled

    if not library_enabled(deps.settings):
        return None
    from iterate.library.aws import AwsScriptLibrary

    return AwsScriptLibrary(deps.s3_client(), run.bucket, deps.dynamo_table())


def _build_agents(deps: AwsDeps, settings: Settings, run: RunState) -> Any:
    if deps.agents_factory is not None:
        return deps.agents_factory(settings)
    from iterate.agents import build_agents  # lazily: the LLM stack is only paid for where it is used

    if not settings.anthropic_api_key:
        return build_agents(settings)
    from iterate.llm.cache import StoreCache
    from iterate.llm.observers import LoggingObserver
    from iterate.storage.admission import DailyUsage, DynamoTokenBucket

    # Answers cached in S3 per owner: a retried step or a re-analysis of unchanged data costs no tokens.
    store = S3ArtifactStore(deps.s3_client(), run.bucket, LLM_CACHE_PREFIX.format(owner=run.owner))
    per_minute = deps.config.llm_tokens_per_minute
    bucket = DynamoTokenBucket(
        deps.dynamo_table(), rate=per_minute / 60, capacity=per_minute, clock=deps.clock
    )
    usage = OwnerTokens(DailyUsage(deps.dynamo_table(), run.owner, clock=deps.clock))
    return build_agents(
        settings,
        cache=StoreCache(store, prefix="answers"),
        llm_gate=bucket.take,
        observers=[LoggingObserver(), usage],
    )


class OwnerTokens:
    """Counts every LLM call's tokens into its owner's daily usage (the tokens quota checked at admission)."""

    def __init__(self, usage: Any) -> None:
        self._usage = usage

    def on_llm_call(self, event: Any) -> None:
        if not event.cached:
            self._usage.add_tokens(event.input_tokens + event.output_tokens)

    def on_tool_call(self, event: Any) -> None:
        return None

    def on_error(self, event: Any) -> None:
        return None


def _progress_callback(
    repo: DynamoRunRepository, run_id: str, step: str
) -> Callable[[str, int, int, str], None]:
    low, high = STEP_SPANS[step]
    reached = [low]

    def report(sub_step: str, done: int, total: int, message: str) -> None:
        share = (done / total) if total else 0.0
        # Sub-steps (read, detect, profile...) each count 0→1: never let the bar move backwards.
        percent = max(reached[0], int(low + (high - low) * share))
        reached[0] = percent
        try:
            repo.update_progress(run_id, step=step, percent=percent, message=message or sub_step)
        except RunTransitionError:
            # A cancelled run stops taking progress; the step itself will be refused at its next transition.
            logger.info("progress not recorded: run no longer live", sub_step=sub_step)

    return report


def _usage_of(agents: Any) -> tuple[dict[str, Any], list[str]]:
    """The step's total token usage and degraded reasons, as the agents bundle reports them."""
    usage_fn = getattr(agents, "usage", None)
    total: dict[str, Any] = {}
    if callable(usage_fn):
        per_agent = usage_fn() or {}
        raw = per_agent.get("total")
        total = _jsonable(raw) if raw is not None else {}
    return total, list(getattr(agents, "degraded_reasons", []) or [])


def book_infra(repo: DynamoRunRepository, run_id: str, step: str, cost: InfraCost) -> None:
    """Add one invocation's infrastructure estimate to the run; an estimate never fails the step it measures."""
    try:
        repo.add_infra(run_id, step, cost)
    except Exception as exc:  # a run created before estimates existed has no maps to add to
        logger.warning("infrastructure estimate not recorded", step=step, error=type(exc).__name__)


def book_sandbox(deps: AwsDeps, run: RunState, result: CodeInvestigation, *, offloaded: bool) -> None:
    """RunInSandbox's share, booked by RecordAttempt: the sandbox has no DynamoDB right. Its time is the
    attempt's own execution_time_ms; it made one GET of data.parquet, and a PUT when its result was offloaded."""
    calls = {"s3_read_request": 1, "s3_write_request": 1 if offloaded else 0}
    ms = float(result.execution_time_ms or 0.0)
    cost = cost_model.priced(
        lambda_gb_s=cost_model.gb_seconds(ms, deps.config.sandbox_memory_mb),
        lambda_invocations=1,
        transitions=1,
        calls=calls,
    )
    book_infra(repository(deps, run.owner), run.runId, "investigate", cost)


@contextmanager
def running_step(
    deps: AwsDeps, run: RunState, step: str, *, llm: bool = False, task: str | None = None
) -> Iterator[Any]:
    """The engine's RunContext for one step; records progress, timing, token usage, the infrastructure
    estimate and log keys around it. `task`: the Task's key in cost.TRANSITIONS (default: the step)."""
    from iterate.pipeline import RunContext  # the engine; imported here so payload parsing stays light

    logger.append_keys(run_id=run.runId, dataset_id=run.datasetId, owner=run.owner, step=step)
    repo = repository(deps, run.owner)
    meter = cost_model.StepMeter.start(cost_model.TRANSITIONS[task or step])
    current = repo.get_run(run.runId)
    if current is not None and current.get("status") == "CANCELLED":
        # StopExecution may land after this step started; the record is what the owner decided.
        raise RunCancelledError(f"run {run.runId} was cancelled by its owner")
    settings = settings_with_secret(deps.settings, provider=deps.secret_provider) if llm else deps.settings
    agents = _build_agents(deps, settings, run)
    progress = _progress_callback(repo, run.runId, step)
    ctx = RunContext(
        run_id=run.runId,
        store=artifact_store(deps, run),
        agents=agents,
        sandbox=StateMachineSandbox(),
        settings=settings,
        instructions=run.instructions,
        repo=repo,
        progress=progress,
        library=script_library(deps, run) if step in LIBRARY_STEPS else None,
        owner=run.owner,
        dataset_id=run.datasetId,
    )
    if step != "investigate":  # investigations report by count as each one finishes (many Lambdas at once)
        progress(step, 0, 1, f"{step} started")
    started = time.perf_counter()
    yield ctx
    elapsed_ms = (time.perf_counter() - started) * 1000
    repo.record_timing(run.runId, step, elapsed_ms)
    metrics.add_metric(name=f"{step.title()}DurationMs", unit="Milliseconds", value=elapsed_ms)
    book_infra(repo, run.runId, step, meter.finish(elapsed_ms, deps.config.function_memory_mb))
    if llm:
        usage, degraded = _usage_of(agents)
        if usage.get("calls") or degraded:  # offline steps have nothing to add
            repo.add_usage(run.runId, step, usage, degraded)
        logger.info("step usage", tokens=usage, degraded=degraded, mode=getattr(agents, "mode", None))


# --- ProfileDataset --------------------------------------------------------------------------------


def _sized_upload(
    deps: AwsDeps, source: S3ObjectRef, name: str, *, allowed: int | None = None, s3: Any = None
) -> tuple[S3ObjectRef, int]:
    """The exact object version as stored (keys with spaces may arrive URL-encoded: tried decoded too) and
    its size, asked with HeadObject: an object over ITERATE_MAX_FILE_BYTES is refused (DatasetReadError
    naming the limit and how to raise it, which RecordFailure keeps as the run's reason) before a byte of it
    is read."""
    from botocore.exceptions import ClientError

    from iterate.io.limits import refuse, size_text

    extra = {"VersionId": source.versionId} if source.versionId else {}
    key = source.key
    try:
        head = (s3 or deps.s3_client()).head_object(Bucket=source.bucket, Key=key, **extra)
    except ClientError as exc:
        decoded = unquote_plus(source.key)
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey") or decoded == source.key:
            raise
        key = decoded
        head = (s3 or deps.s3_client()).head_object(Bucket=source.bucket, Key=key, **extra)
    from iterate.aws.large import allowed_bytes

    size = int(head["ContentLength"])
    allowed = allowed if allowed is not None else allowed_bytes(name, deps.settings)
    if size > allowed:
        raise refuse(
            name,
            "max_file_bytes",
            allowed,
            size,
            f"the uploaded file is {size_text(size)}, more than the {size_text(allowed)} allowed",
            advice="split it into smaller files",
        )
    return S3ObjectRef(
        bucket=source.bucket, key=key, versionId=source.versionId, roleArn=source.roleArn
    ), size


def _download(deps: AwsDeps, source: S3ObjectRef, local: Path, *, s3: Any = None) -> None:
    """The exact object version to local disk, once its size is allowed (`_sized_upload`)."""
    stored, _ = _sized_upload(deps, source, local.name, s3=s3)
    extra = {"VersionId": stored.versionId} if stored.versionId else None
    (s3 or deps.s3_client()).download_file(stored.bucket, stored.key, str(local), ExtraArgs=extra)


@tracer.capture_method(capture_response=False)
def profile(payload: ProfileInput, deps: AwsDeps, *, execution_id: str) -> ProfileOutput:
    """Claim the upload (one run per object version), create the run, and profile the file; a plain CSV/TSV
    over ITERATE_CHUNK_BYTES is cut into byte ranges instead (a manifest for the ProfileChunks Map)."""
    from iterate import pipeline
    from iterate.aws import large
    from iterate.aws.chunks import plan_upload

    run, file_name = run_for_trigger(deps, payload.trigger)
    repo = repository(deps, run.owner)
    logger.append_keys(run_id=run.runId, dataset_id=run.datasetId, owner=run.owner)
    if is_s3_event(payload.trigger):
        # The raw upload event (a replay by hand): claimed here. Admission claims the uploads it queues.
        earlier = repo.claim_object(
            run.source.bucket, run.source.key, run.source.versionId, run.runId, execution_id=execution_id
        )
        if earlier is not None:
            logger.info("duplicate upload event: run already started", duplicate_of=earlier)
            metrics.add_metric(name="DuplicateUploads", unit="Count", value=1)
            return ProfileOutput(duplicate=True, duplicateOf=earlier)
    if run.trigger == "s3":
        repo.record_upload(run.datasetId, run.source.model_dump(mode="json"))
    # Admission took the run's slots before starting this execution; none are taken here.
    start_run(repo, run, execution_id)
    name = file_name or "upload"
    source_s3 = source_client(deps, run.source, run.owner)  # the owner's role for an object in their bucket
    stored, size = _sized_upload(deps, run.source, name, s3=source_s3)
    engine = large.routes_to_engine(
        name, size, deps.settings
    )  # Athena over a Parquet copy (iterate.aws.large)
    chunked = plan_upload(
        source_s3, artifact_store(deps, run), run, stored, size, name, deps.settings,
        parts="parquet" if engine else "arrow",
    )  # fmt: skip
    if chunked is not None:
        logger.info("read in chunks", chunks=chunked.count, size=size, engine=engine)
        with contextlib.suppress(RunTransitionError):
            repo.update_progress(
                run.runId, step="profile", percent=1, message=f"reading in {chunked.count} chunks"
            )
        return ProfileOutput(run=run, chunked=chunked, engine=EngineLoop() if engine else None)
    if size > deps.settings.max_file_bytes:  # the engine path's limit let it in, but it is read in one pass
        _sized_upload(deps, run.source, name, allowed=deps.settings.max_file_bytes, s3=source_s3)
    work = Path(tempfile.mkdtemp(prefix="iterate-", dir=deps.work_dir))
    try:
        local = work / name
        _download(deps, stored, local, s3=source_s3)
        with running_step(deps, run, "profile") as ctx:
            # The file keeps its uploaded name, so the dataset is named exactly as `iterate analyze` names it.
            # The engine path is local only until a function ships DuckDB (docs/engine.md, "Left for later").
            summary = pipeline.profile_step(ctx, local, engine=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ProfileOutput(run=run, summary=_jsonable(summary))


@tracer.capture_method(capture_response=False)
def parse_chunk(payload: ChunkInput, deps: AwsDeps) -> ChunkOutput:
    """ParseChunk (one item of the ProfileChunks Map): one byte range of the upload into a partial in S3."""
    from iterate.aws.chunks import parse_chunk as parse

    logger.append_keys(run_id=payload.run.runId, chunk=payload.chunk.index)
    result = parse(
        payload, deps.s3_client(), source_s3=source_client(deps, payload.source, payload.run.owner)
    )
    if not result.trusted:
        logger.info("range not trusted: the merge reads the file in one pass", reason=result.reason)
    return result


@tracer.capture_method(capture_response=False)
def merge_chunks(payload: MergeChunksInput, deps: AwsDeps) -> ProfileOutput:
    """MergeChunks: the partials merged in file order into the single pass's Table, then profiled as
    ProfileDataset profiles a file; when a range was not trusted, the whole file is read in one pass."""
    from iterate import pipeline
    from iterate.aws.chunks import read_merged

    run, chunked = payload.run, payload.chunked
    name = chunked.fileName
    with running_step(deps, run, "profile") as ctx:
        started = time.perf_counter()
        # As a local run of a file this size: the merged table and the detectors' arrays bounded for memory.
        pipeline.bound_memory(chunked.size)
        ctx.report("read", 0, 1, f"merging {chunked.count} chunks")
        source_s3 = source_client(deps, chunked.source, run.owner)
        table, why = read_merged(source_s3, ctx.store, chunked, deps.settings)
        if table is not None:
            summary = pipeline.profile_read_step(ctx, table, source_name=name, started=started)
        else:
            logger.info("chunks not merged: reading the file in one pass", reason=why)
            metrics.add_metric(name="ChunkedReadFallbacks", unit="Count", value=1)
            work = Path(tempfile.mkdtemp(prefix="iterate-", dir=deps.work_dir))
            try:
                local = work / name
                _download(deps, chunked.source, local, s3=source_s3)
                summary = pipeline.profile_step(ctx, local, engine=False)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return ProfileOutput(run=run, summary=_jsonable(summary))


# --- UnderstandDataset / AnalyzeDataset -----------------------------------------------------------


@tracer.capture_method(capture_response=False)
def understand(payload: StepInput, deps: AwsDeps) -> StepOutput:
    from iterate import pipeline

    with running_step(deps, payload.run, "understand", llm=True) as ctx:
        understanding = pipeline.understand_step(ctx)
    # The understanding itself stays in S3: step payloads carry keys and counts, never data.
    summary = {"artifact": pipeline.UNDERSTANDING, "columns": len(understanding.columns)}
    return StepOutput(step="understand", summary=summary)


def previous_issues(deps: AwsDeps, run: RunState) -> list[Any] | None:
    """The issues of the dataset's last successful run, so a re-analysis can say new / persisting / resolved."""

    for earlier in repository(deps, run.owner).list_runs(run.datasetId):
        if (
            earlier["runId"] == run.runId
            or earlier.get("status") != "SUCCEEDED"
            or not earlier.get("analysisKey")
        ):
            continue
        try:
            body = deps.s3_client().get_object(Bucket=run.bucket, Key=earlier["analysisKey"])["Body"].read()
            return list(AnalysisResult.model_validate_json(body).issues)
        except Exception as exc:  # a missing or old-schema analysis only loses the comparison, not the run
            logger.warning(
                "previous analysis unreadable", previous_run=earlier["runId"], error=type(exc).__name__
            )
            return None
    return None


# The Map's items: a JSON array of issue ids, read by its ItemReader (never carried in the state).
INVESTIGATION_ITEMS = "investigations/items.json"


@tracer.capture_method(capture_response=False)
def analyze(payload: StepInput, deps: AwsDeps) -> AnalyzeOutput:
    from iterate import pipeline

    with running_step(deps, payload.run, "analyze", llm=True) as ctx:
        ctx.previous_issues = previous_issues(deps, payload.run)
        issue_ids = list(pipeline.analyze_step(ctx))
        ctx.store.put_bytes(
            INVESTIGATION_ITEMS, json.dumps(issue_ids).encode(), content_type="application/json"
        )
    repository(deps, payload.run.owner).set_run_fields(
        payload.run.runId, investigationsTotal=len(issue_ids), investigationsDone=0
    )
    return AnalyzeOutput(count=len(issue_ids), itemsKey=payload.run.prefix + INVESTIGATION_ITEMS)


def _failure_text(failure: SandboxFailure) -> str:
    """`Error: message` from a Catch's Cause (Lambda puts a JSON document with errorMessage there)."""
    message = failure.Cause or ""
    try:
        cause = json.loads(message)
        if isinstance(cause, dict):
            message = str(cause.get("errorMessage") or message)
    except (json.JSONDecodeError, TypeError):
        pass
    return f"{failure.Error}: {message}"[:2000] if message else failure.Error
