"""Template proofs in batches on AWS: PlanProofs, the ProveTemplates Map (PrepareBatch, RecordBatch), ListUnsettled.

The local sandbox runs a batch of the engine's template proofs in one process (iterate.investigate.loop); here a
batch is one sandbox invocation. A proof the batch settles is recorded as its issue's first attempt, exactly as
RecordAttempt records one; every other issue (LLM-written code, proofs reading every column, a batch item that
did not succeed inside the shared process and could not be run alone in the same invocation, a batch that
failed whole) goes through InvestigateEach one invocation per attempt, as before.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from iterate.aws import cost as cost_model
from iterate.aws.deps import AwsDeps
from iterate.aws.investigation import (
    MAX_OFFLOADED_RESULT_BYTES,
    _finish_investigation,
    _load_attempts,
    _save_attempts,
)
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import (
    MAX_SANDBOX_CODE_BYTES,
    AnalyzeOutput,
    ListUnsettledInput,
    PlanProofsInput,
    PrepareBatchInput,
    PrepareBatchOutput,
    ProofsOutput,
    RecordBatchInput,
    RecordBatchOutput,
    RunState,
    SandboxBatchItem,
    SandboxBatchRequest,
    SandboxBatchVerdicts,
    SandboxDataset,
    SandboxFailure,
    SandboxResultRef,
)
from iterate.aws.steps import INVESTIGATION_ITEMS, book_infra, repository, running_step
from iterate.contracts import CodeInvestigation

# The ProveTemplates Map's items: a JSON array of issue-id arrays, one per batch.
BATCHES = "investigations/batches.json"
# What InvestigateEach reads after the batches: the issues they did not finish.
UNSETTLED = "investigations/unsettled.json"
# Proofs per sandbox invocation. Their code travels in the state (256 KiB with the presigned URLs and the run):
# a template is 1-3 KB, and BATCH_CODE_BYTES bounds a batch of unusual ones.
AWS_BATCH_PROOFS = 20
BATCH_CODE_BYTES = 120_000
assert BATCH_CODE_BYTES <= MAX_SANDBOX_CODE_BYTES + 20_000


def batch_result_key(batch: int) -> str:
    """Where the sandbox PUTs a batch's result too large to return inline (relative to the run prefix; the
    sandbox's S3 endpoint lets `artifacts/*/investigations/*.result.json` through)."""
    return f"investigations/batch-{batch}.result.json"


def settled_key(batch: int) -> str:
    """The issues a batch finished (a JSON array of ids), read by ListUnsettled."""
    return f"investigations/batch-{batch}.settled.json"


@tracer.capture_method(capture_response=False)
def plan_proofs(payload: PlanProofsInput, deps: AwsDeps) -> ProofsOutput:
    """Group the issues whose first attempt is one of the engine's templates into batches, as the local
    investigation loop groups them (`plan_batches`: same or nearby columns, bounded columns and cells; a
    proof reading every column is left out), at most AWS_BATCH_PROOFS each."""
    from iterate import pipeline
    from iterate.contracts import DatasetProfile
    from iterate.investigate.loop import batch_size, plan_batches, template_first
    from iterate.storage import get_model

    run, analysis = payload.run, payload.analysis
    with running_step(deps, run, "investigate", llm=True, task="plan") as ctx:
        size = min(batch_size(ctx.settings.investigation_batch), AWS_BATCH_PROOFS)
        batches: list[list[str]] = []
        if size > 1 and analysis.count > 1:
            wanted = set(json.loads(ctx.store.get_bytes(INVESTIGATION_ITEMS)))
            issues = [
                issue
                for issue in get_model(ctx.store, pipeline.ISSUES, pipeline.IssueDraft).issues
                if issue.id in wanted and template_first(ctx.agents.investigation, issue)
            ]
            profile = get_model(ctx.store, pipeline.PROFILE, DatasetProfile)
            batches = [[issues[i].id for i in b] for b in plan_batches(issues, profile, size)]
        ctx.store.put_bytes(BATCHES, json.dumps(batches).encode(), content_type="application/json")
    logger.info("template proofs planned", batches=len(batches), proofs=sum(len(b) for b in batches))
    return ProofsOutput(
        batches=len(batches),
        batchesKey=run.prefix + BATCHES,
        count=analysis.count,
        itemsKey=analysis.itemsKey,
    )


@tracer.capture_method(capture_response=False)
def prepare_batch(payload: PrepareBatchInput, deps: AwsDeps) -> PrepareBatchOutput:
    """The batch's template code, each issue's first attempt kept as pending (as GenerateCode keeps it), and
    the sandbox's batch event: one presigned GET of the run's data, one presigned PUT for a large result."""
    from iterate import pipeline
    from iterate.investigate import code_source

    run = payload.run
    logger.append_keys(batch=payload.batch)
    with running_step(deps, run, "investigate", llm=True, task="batch") as ctx:
        store = ctx.store
        items: list[SandboxBatchItem] = []
        ids: list[str] = []
        size = 0
        for issue_id in payload.issueIds:
            state = _load_attempts(store, issue_id)
            if state["attempts"] or state.get("finished"):
                continue  # a retried PrepareBatch, or already investigated: nothing to prove here
            try:
                code = pipeline.generate_code_step(ctx, issue_id, [])
            except Exception as exc:  # the issue alone (InvestigateEach) meets it and records it
                logger.info("no template for the batch", issue_id=issue_id, error=type(exc).__name__)
                continue
            if code is None or code_source(ctx.agents.investigation) != "template":
                continue
            if size + len(code.encode()) > BATCH_CODE_BYTES:
                break  # the rest of the batch is proved one by one
            size += len(code.encode())
            state["pending"] = {"attempt": 1, "code": code, "source": "template", "batch": payload.batch}
            _save_attempts(store, issue_id, state)
            columns = pipeline.code_columns_step(ctx, issue_id, "template", code)
            items.append(SandboxBatchItem(code=code, columns=columns))
            ids.append(issue_id)
        if not items:
            return PrepareBatchOutput(count=0, issueIds=[])
        union = None
        if all(item.columns for item in items):
            union = list(dict.fromkeys(c for item in items for c in item.columns or ()))
        url = store.presigned_get("data.parquet", expires_s=deps.config.presign_expiry_s)
        out_key = store.prefix + batch_result_key(payload.batch)
        out_url = store.presigned_put(batch_result_key(payload.batch), expires_s=deps.config.presign_expiry_s)
    return PrepareBatchOutput(
        count=len(items),
        issueIds=ids,
        sandboxRequest=SandboxBatchRequest(
            items=items,
            dataset=SandboxDataset(presigned_url=url, columns=union),
            timeout_s=deps.settings.sandbox_timeout_s,
            result_url=out_url,
            result_key=out_key,
        ),
    )


def _verdicts(deps: AwsDeps, run: RunState, payload: RecordBatchInput) -> list[CodeInvestigation | None]:
    """One verdict (or None) per issue of the batch, from the state or from the object the sandbox PUT under
    this batch's own key (never a key the reference names); nothing when the batch failed or its answer is
    unreadable."""
    result = payload.sandboxResult
    nothing: list[CodeInvestigation | None] = [None] * len(payload.issueIds)
    if isinstance(result, SandboxFailure):
        logger.warning("sandbox batch failed: each proof runs alone", error=result.Error)
        return nothing
    if isinstance(result, SandboxResultRef):
        expected = run.prefix + batch_result_key(payload.batch)
        if result.resultKey != expected:
            return nothing
        try:
            response = deps.s3_client().get_object(Bucket=run.bucket, Key=expected)
            if int(response.get("ContentLength") or 0) > MAX_OFFLOADED_RESULT_BYTES:
                response["Body"].close()
                return nothing
            result = SandboxBatchVerdicts.model_validate_json(response["Body"].read())
        except (ValidationError, Exception) as exc:  # missing or unreadable: each proof runs alone
            logger.warning("sandbox batch result unreadable", error=type(exc).__name__)
            return nothing
    if len(result.items) != len(payload.issueIds):
        return nothing
    return list(result.items)


def _book_batch(
    deps: AwsDeps, run: RunState, verdicts: list[CodeInvestigation | None], offloaded: bool
) -> None:
    """The batch invocation's share of the run's cost: the shared process once, each item run alone apart."""
    shared = [v.execution_time_ms or 0.0 for v in verdicts if v is not None and (v.batch_size or 1) > 1]
    alone = [v.execution_time_ms or 0.0 for v in verdicts if v is not None and (v.batch_size or 1) == 1]
    ms = max(shared, default=0.0) + sum(alone)
    cost = cost_model.priced(
        lambda_gb_s=cost_model.gb_seconds(ms, deps.config.sandbox_memory_mb),
        lambda_invocations=1,
        transitions=1,
        calls={"s3_read_request": 1, "s3_write_request": 1 if offloaded else 0},
    )
    book_infra(repository(deps, run.owner), run.runId, "investigate", cost)


@tracer.capture_method(capture_response=False)
def record_batch(payload: RecordBatchInput, deps: AwsDeps) -> RecordBatchOutput:
    """Keep each settled verdict as its issue's first attempt (as RecordAttempt keeps one) and list the issues
    the batch finished. A success inside the shared process is kept only when it validates, as the local loop
    keeps one; a verdict of the item's own run is kept whatever it says (it is what a single invocation gives)."""
    from iterate.investigate import validate

    run = payload.run
    logger.append_keys(batch=payload.batch)
    with running_step(deps, run, "investigate", task="record_batch") as ctx:
        store = ctx.store
        verdicts = _verdicts(deps, run, payload)
        if not isinstance(payload.sandboxResult, SandboxFailure):
            _book_batch(deps, run, verdicts, isinstance(payload.sandboxResult, SandboxResultRef))
        finished_ids: list[str] = []
        for issue_id, verdict in zip(payload.issueIds, verdicts, strict=True):
            state = _load_attempts(store, issue_id)
            pending: dict[str, Any] = state.get("pending") or {}
            if verdict is None or state["attempts"]:
                if state.get("finished"):
                    finished_ids.append(issue_id)  # a retried RecordBatch: already kept
                continue
            if pending.get("attempt") != 1 or pending.get("batch") != payload.batch:
                continue  # not this batch's pending attempt
            outcome = verdict.model_copy(
                update={"attempts": 1, "code": str(pending.get("code", "")), "source": "template"}
            )
            if (verdict.batch_size or 1) > 1 and not (outcome.success and validate(outcome).success):
                continue  # the single run decides (InvestigateEach)
            finished = outcome.success or ctx.settings.investigation_max_attempts <= 1
            state = {"attempts": [outcome.model_dump(mode="json")], "pending": None, "finished": finished}
            _save_attempts(store, issue_id, state)
            if finished:
                _finish_investigation(deps, run, ctx, issue_id, outcome)
                finished_ids.append(issue_id)
        store.put_bytes(
            settled_key(payload.batch), json.dumps(finished_ids).encode(), content_type="application/json"
        )
    metrics.add_metric(name="BatchedProofsSettled", unit="Count", value=len(finished_ids))
    return RecordBatchOutput(settled=len(finished_ids), unsettled=len(payload.issueIds) - len(finished_ids))


@tracer.capture_method(capture_response=False)
def list_unsettled(payload: ListUnsettledInput, deps: AwsDeps) -> AnalyzeOutput:
    """The issues InvestigateEach still investigates one by one: the analysis's, less those a batch finished."""
    run = payload.run
    with running_step(deps, run, "investigate", task="unsettled") as ctx:
        store = ctx.store
        settled: set[str] = set()
        for batch in range(payload.proofs.batches):
            if store.exists(settled_key(batch)):
                settled.update(json.loads(store.get_bytes(settled_key(batch))))
        ids = [i for i in json.loads(store.get_bytes(INVESTIGATION_ITEMS)) if i not in settled]
        store.put_bytes(UNSETTLED, json.dumps(ids).encode(), content_type="application/json")
    logger.info("template proofs settled in batches", settled=len(settled), left=len(ids))
    return AnalyzeOutput(count=len(ids), itemsKey=run.prefix + UNSETTLED)
