"""How a run ends: ReportRun (analysis.json, report.html, the issues, SUCCEEDED, the events) and RecordFailure."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import ValidationError

from iterate.aws import cost as cost_model
from iterate.aws.admission import release_run
from iterate.aws.deps import AwsDeps
from iterate.aws.engine_tables import cleanup_run_tables
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import (
    COMPLETION_DETAIL_TYPE,
    EVENT_SOURCE,
    REGRESSION_DETAIL_TYPE,
    FailureInput,
    FailureOutput,
    ReportOutput,
    RunState,
    SandboxFailure,
    StateError,
    StepInput,
    failure_metric,
)
from iterate.aws.steps import (
    CompletionEventError,
    _failure_text,
    _now_iso,
    book_infra,
    repository,
    running_step,
)
from iterate.aws.triggers import DatasetNotFoundError, run_for_trigger
from iterate.contracts import Acceptance, AnalysisResult
from iterate.storage.dynamo import TERMINAL

# --- ReportRun / RecordFailure --------------------------------------------------------------------


def regression_detail(result: AnalysisResult, run: RunState) -> dict[str, Any] | None:
    """The IssueRegressed event of a re-analysis whose issues are new or affect more rows than in the previous
    run (None on a first run or when nothing got worse). Ids, types, severities and counts only: no data value.
    An accepted issue counts only when it grew since it was accepted."""
    if result.comparison is None:
        return None
    worse = [
        i
        for i in result.issues
        if i.change in ("new", "regressed") and (i.accepted is None or i.accepted.grown)
    ]
    if not worse:
        return None
    return {
        "runId": run.runId,
        "owner": run.owner,
        "datasetId": run.datasetId,
        "trigger": run.trigger,
        "new": sum(1 for i in worse if i.change == "new"),
        "regressed": sum(1 for i in worse if i.change == "regressed"),
        "issues": [
            {
                "issueId": i.id,
                "type": i.type,
                "change": i.change,
                "severity": i.severity,
                "affectedRows": i.evidence.affectedRows if i.evidence else i.affectedRows,
                "affectedCells": i.evidence.affectedCells if i.evidence else None,
            }
            for i in worse[:MAX_EVENT_ISSUES]
        ],
        "issuesOmitted": max(0, len(worse) - MAX_EVENT_ISSUES),
    }


# EventBridge takes 256 KB per entry: a run with more worsened issues lists the first ones and counts the rest.
MAX_EVENT_ISSUES = 100


def publish_completion(deps: AwsDeps, detail: dict[str, Any]) -> None:
    publish_event(deps, COMPLETION_DETAIL_TYPE, detail)


def publish_event(deps: AwsDeps, detail_type: str, detail: dict[str, Any]) -> None:
    response = deps.events_client().put_events(
        Entries=[
            {
                "Source": EVENT_SOURCE,
                "DetailType": detail_type,
                "Detail": json.dumps(detail, default=str),
                "EventBusName": deps.config.event_bus,
            }
        ]
    )
    if response.get("FailedEntryCount"):
        raise CompletionEventError(f"completion event refused: {response.get('Entries')}")


def _record_investigations(ctx: Any, record: dict[str, Any]) -> None:
    """steps/investigate.json from the Map's totals, so the report counts investigation tokens and fallbacks.

    Locally one investigate step writes it; on AWS each GenerateCode Lambda only added its usage to the run item.
    """
    from iterate.contracts import TokenUsage
    from iterate.pipeline import STEPS, StepRecord

    usage = (record.get("stepUsage") or {}).get("investigate") or {}
    degraded = list((record.get("stepDegraded") or {}).get("investigate") or [])
    if not usage and not degraded and not record.get("investigationsTotal"):
        return
    tokens = TokenUsage.model_validate({k: usage.get(k, 0) for k in TokenUsage.model_fields})
    step = StepRecord(
        step="investigate",
        durationMs=float((record.get("timingsMs") or {}).get("investigate", 0.0)),
        # The report Lambda has no LLM of its own: only the Map's own calls and fallbacks say how it went.
        mode="degraded" if degraded else ("llm" if tokens.calls else None),
        degradedReasons=degraded,
        usage={"investigation": tokens} if tokens.calls else {},
        detail={
            "investigated": record.get("investigationsTotal", 0),
            "finished": record.get("investigationsDone", 0),
        },
    )
    ctx.store.put_bytes(
        STEPS.format(step="investigate"),
        step.model_dump_json(indent=2).encode(),
        content_type="application/json",
    )


@tracer.capture_method(capture_response=False)
def report(payload: StepInput, deps: AwsDeps) -> ReportOutput:
    """Merge everything into analysis.json and report.html, store the issues, mark the run SUCCEEDED."""
    from iterate import pipeline

    run = payload.run
    repo = repository(deps, run.owner)
    with running_step(deps, run, "report") as ctx:
        _record_investigations(ctx, repo.require_run(run.runId))
        ctx.accepted = [Acceptance.model_validate(a) for a in repo.list_acceptances(run.datasetId)]
        result = pipeline.report_step(ctx, started_at=run.startedAt)
    # The rest of this invocation (issues, status, events) is booked too, without counting it twice.
    tail_started, tail = time.perf_counter(), cost_model.StepMeter.start(transitions=0)
    record = repo.require_run(run.runId)
    mode = result.mode
    counts = {k: int(v) for k, v in (result.severityCounts or {}).items()}
    issues = [issue.model_dump(mode="json") for issue in result.issues]
    repo.put_issues(run.runId, issues)
    if record["status"] == "SUCCEEDED":
        # A retry after the status was already written (e.g. EventBridge refused the event): do not redo it.
        logger.info("run already marked succeeded; re-announcing")
    else:
        repo.transition(
            run.runId,
            from_status="RUNNING",
            to_status="SUCCEEDED",
            mode=mode,
            severityCounts=counts,
            issueCount=len(issues),
            completedAt=result.completedAt,
            reportKey=f"{run.prefix}report.html",
            analysisKey=f"{run.prefix}analysis.json",
            progress={"step": "report", "percent": 100, "message": "done"},
            **({"comparison": result.comparison.model_dump(mode="json")} if result.comparison else {}),
        )
    release_run(deps, run.runId)  # the next waiting run may start
    regression = regression_detail(result, run)
    if regression is not None:
        publish_event(deps, REGRESSION_DETAIL_TYPE, regression)
    publish_completion(
        deps,
        {
            "runId": run.runId,
            "owner": run.owner,
            "datasetId": run.datasetId,
            "trigger": run.trigger,
            "status": "SUCCEEDED",
            "outcome": "degraded" if mode == "degraded" else "succeeded",
            "mode": mode,
            "issueCount": len(issues),
            "severityCounts": counts,
        },
    )
    metrics.add_metric(name="RunsSucceeded", unit="Count", value=1)
    tail_ms = (time.perf_counter() - tail_started) * 1000
    book_infra(repo, run.runId, "report", tail.finish(tail_ms, deps.config.function_memory_mb, invocations=0))
    return ReportOutput(
        runId=run.runId, status="SUCCEEDED", mode=mode, issueCount=len(issues), severityCounts=counts
    )


# A distributed Map fails with this error, whose cause names no item: which Map it was is read off the state.
MAP_FAILED = "States.ExceedToleratedFailureThreshold"


def _reason(error: StateError, state: dict[str, Any] | None = None) -> str:
    if error.Error == MAP_FAILED and state is not None:
        if state.get("analysis"):
            what = "more than half of the investigations failed (InvestigateEach)"
        elif state.get("chunked"):
            what = (
                "a chunk of the file could not be parsed: its chunk function failed after its retries"
                " (ProfileChunks; start the run again, or raise the chunk function's memory if it ran out)"
            )
        else:
            what = "more of a Map's items failed than it tolerates"
        return f"{MAP_FAILED}: {what}; the Map run in the Step Functions console lists the failed items"
    return _failure_text(SandboxFailure(Error=error.Error, Cause=error.Cause))


def _count_failure(error: str) -> None:
    """RunsFailed, and the user's or the system's share of it (only the system's alarms)."""
    metrics.add_metric(name="RunsFailed", unit="Count", value=1)
    metrics.add_metric(name=failure_metric(error), unit="Count", value=1)


@tracer.capture_method(capture_response=False)
def record_failure(payload: FailureInput, deps: AwsDeps, *, execution_id: str) -> FailureOutput:
    """Mark the run FAILED with the caught error's class and message, and announce it. Uploads are untouched."""
    started = time.perf_counter()
    meter = cost_model.StepMeter.start(cost_model.TRANSITIONS["failure"])
    state = dict(payload.state)
    error = StateError.model_validate(state.pop("error", None) or {"Error": "Unknown", "Cause": None})
    reason = _reason(error, state)
    try:
        run = RunState.model_validate(state["run"]) if state.get("run") else run_for_trigger(deps, state)[0]
    except (ValidationError, ValueError, DatasetNotFoundError) as exc:
        # The input itself could not be attributed to an owner: nothing to mark, but say why in the logs.
        logger.error("failure without an attributable run", error=error.Error, reason=reason, detail=str(exc))
        _count_failure(error.Error)
        return FailureOutput(runId=None, status="FAILED", error=error.Error, reason=reason)
    logger.append_keys(run_id=run.runId, dataset_id=run.datasetId, owner=run.owner)
    repo = repository(deps, run.owner)
    existing = repo.get_run(run.runId)
    fields = {"error": error.Error, "reason": reason, "completedAt": _now_iso(deps)}
    status: Literal["FAILED", "CANCELLED", "SUCCEEDED"] = "FAILED"
    if existing is None:
        repo.create_run(
            {
                "runId": run.runId,
                "datasetId": run.datasetId,
                "status": "FAILED",
                "trigger": run.trigger,
                "source": run.source.model_dump(mode="json"),
                "startedAt": run.startedAt,
                "executionId": execution_id,
                **fields,
            }
        )
    elif existing["status"] in TERMINAL:
        # Cancelled (or already ended): keep what the user or an earlier attempt decided.
        status = existing["status"]
    else:
        repo.transition(run.runId, from_status=existing["status"], to_status="FAILED", **fields)
    if state.get("engine") is not None:
        # The engine path ended before EngineStep's last round, which drops the run's Glue tables: drop them here.
        cleanup_run_tables(deps.glue_client(), deps.config.engine_database, owner=run.owner, run_id=run.runId)
    release_run(deps, run.runId)  # the next waiting run may start
    logger.error("run failed", error=error.Error, reason=reason)
    _count_failure(error.Error)
    publish_completion(
        deps,
        {
            "runId": run.runId,
            "owner": run.owner,
            "datasetId": run.datasetId,
            "trigger": run.trigger,
            "status": status,
            "outcome": "failed",
            "mode": (existing or {}).get("mode"),
            "error": error.Error,
            "reason": reason,
            "severityCounts": {},
        },
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    book_infra(repo, run.runId, "failure", meter.finish(elapsed_ms, deps.config.function_memory_mb))
    return FailureOutput(runId=run.runId, status=status, error=error.Error, reason=reason)
