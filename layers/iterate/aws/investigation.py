"""The investigation loop of the InvestigateEach Map: GenerateCode writes an attempt's code, RecordAttempt
keeps the sandbox's outcome."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from iterate.aws.deps import AwsDeps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import (
    MAX_SANDBOX_CODE_BYTES,
    GenerateCodeInput,
    GenerateCodeOutput,
    RecordAttemptInput,
    RecordAttemptOutput,
    RunState,
    SandboxDataset,
    SandboxFailure,
    SandboxRequest,
    SandboxResultRef,
)
from iterate.aws.steps import (
    _failure_text,
    _progress_callback,
    book_sandbox,
    repository,
    running_step,
)
from iterate.contracts import CodeInvestigation, ReusedScript
from iterate.investigate import GenerationFailed, code_source
from iterate.storage.s3 import S3ArtifactStore

# --- the investigation loop -----------------------------------------------------------------------


def _attempts_key(issue_id: str) -> str:
    return f"investigations/{issue_id}.attempts.json"


def result_key(issue_id: str, attempt: int) -> str:
    """Where the sandbox PUTs an attempt's result too large to return inline (relative to the run prefix).

    The sandbox's S3 endpoint lets a presigned PUT through for `artifacts/*/investigations/*.result.json` only.
    """
    return f"investigations/{issue_id}.attempt-{attempt}.result.json"


# An offloaded result is read back whole: anything past this is not a result the sandbox's caps allow.
MAX_OFFLOADED_RESULT_BYTES = 16 * 1024 * 1024


def _load_attempts(store: S3ArtifactStore, issue_id: str) -> dict[str, Any]:
    if not store.exists(_attempts_key(issue_id)):
        return {"attempts": [], "pending": None}
    data: dict[str, Any] = json.loads(store.get_bytes(_attempts_key(issue_id)))
    return data


def _save_attempts(store: S3ArtifactStore, issue_id: str, state: dict[str, Any]) -> None:
    store.put_bytes(_attempts_key(issue_id), json.dumps(state).encode(), content_type="application/json")


def _finish_investigation(
    deps: AwsDeps, run: RunState, ctx: Any, issue_id: str, final: CodeInvestigation
) -> None:
    from iterate import pipeline

    pipeline.record_investigation_step(ctx, issue_id, final)
    metrics.add_metric(
        name="InvestigationSucceeded" if final.success else "InvestigationFailed", unit="Count", value=1
    )
    repo = repository(deps, run.owner)
    done, total = repo.count_investigation(run.runId)
    _progress_callback(repo, run.runId, "investigate")(
        "investigate", done, max(total, done), f"{done}/{total} investigated"
    )


@tracer.capture_method(capture_response=False)
def generate_code(payload: GenerateCodeInput, deps: AwsDeps) -> GenerateCodeOutput:
    """The next attempt's code for one issue, with a presigned GET of this run's data for the sandbox."""
    from iterate import pipeline

    run = payload.run
    logger.append_keys(issue_id=payload.issueId)
    with running_step(deps, run, "investigate", llm=True, task="generate") as ctx:
        store: S3ArtifactStore = ctx.store
        state = _load_attempts(store, payload.issueId)
        attempts = [CodeInvestigation.model_validate(a) for a in state["attempts"]]
        code = None
        reused = None
        spent = sum(1 for a in attempts if a.reused is None)  # a stored script's rerun uses no attempt
        offered = (
            pipeline.stored_code_step(ctx, payload.issueId, attempts) if not state.get("finished") else None
        )
        if offered is not None:
            code, reused = offered
        elif spent < ctx.settings.investigation_max_attempts:
            try:
                code = pipeline.generate_code_step(ctx, payload.issueId, attempts)
                if code is not None and len(code.encode()) > MAX_SANDBOX_CODE_BYTES:
                    # The code travels in the state to the sandbox: it must leave room under 256 KiB.
                    raise GenerationFailed(
                        f"it wrote {len(code.encode())} bytes of code, over the {MAX_SANDBOX_CODE_BYTES}-byte limit"
                    )
            except GenerationFailed as exc:
                # The generator itself failed: the investigation fails with its reason, never the run.
                failed = CodeInvestigation(
                    code="",
                    success=False,
                    error=f"the code generator failed: {exc}",
                    stopped="error",
                    attempts=max(len(attempts), 1),
                )
                attempts.append(failed)
                state["attempts"] = [a.model_dump(mode="json") for a in attempts]
                code = None
        if code is None:
            if attempts and not state.get("finished"):
                # The generator gave up: the last failed attempt is what the report shows, with its reason.
                _finish_investigation(deps, run, ctx, payload.issueId, attempts[-1])
                state["finished"] = True
                _save_attempts(store, payload.issueId, state)
            elif not attempts:
                repo = repository(deps, run.owner)
                done, total = repo.count_investigation(run.runId)
                _progress_callback(repo, run.runId, "investigate")(
                    "investigate", done, max(total, done), "no code"
                )
            return GenerateCodeOutput(stop=True, attempt=0)
        attempt = len(attempts) + 1
        # Who wrote it (the engine's template, Claude, or Claude in an earlier run) decides how far its
        # numbers are trusted.
        source = "llm" if reused is not None else code_source(ctx.agents.investigation)
        state["pending"] = {"attempt": attempt, "code": code, "source": source}
        if reused is not None:
            state["pending"]["reused"] = reused.model_dump(mode="json")
        _save_attempts(store, payload.issueId, state)
        columns = pipeline.code_columns_step(ctx, payload.issueId, source, code)
        url = store.presigned_get("data.parquet", expires_s=deps.config.presign_expiry_s)
        out_key = store.prefix + result_key(payload.issueId, attempt)
        out_url = store.presigned_put(
            result_key(payload.issueId, attempt), expires_s=deps.config.presign_expiry_s
        )
    return GenerateCodeOutput(
        stop=False,
        attempt=attempt,
        sandboxRequest=SandboxRequest(
            code=code,
            dataset=SandboxDataset(presigned_url=url, columns=columns),
            timeout_s=deps.settings.sandbox_timeout_s,
            result_url=out_url,
            result_key=out_key,
        ),
    )


def _offloaded_result(
    deps: AwsDeps, run: RunState, issue_id: str, attempt: int, ref: SandboxResultRef
) -> CodeInvestigation:
    """The result the sandbox PUT to S3, read from the key this attempt was given (never one the ref names)."""
    expected = run.prefix + result_key(issue_id, attempt)

    def failed(reason: str) -> CodeInvestigation:
        return CodeInvestigation(code="", success=False, error=reason, stopped="crash", attempts=attempt)

    if ref.resultKey != expected:
        return failed(f"the sandbox stored its result under {ref.resultKey!r}, not this attempt's key")
    try:
        response = deps.s3_client().get_object(Bucket=run.bucket, Key=expected)
    except Exception as exc:  # missing or unreadable: the attempt failed, the run goes on
        return failed(f"the sandbox's stored result could not be read: {type(exc).__name__}")
    size = int(response.get("ContentLength") or 0)
    if size > MAX_OFFLOADED_RESULT_BYTES:
        response["Body"].close()
        return failed(f"the sandbox's stored result is {size} bytes, over {MAX_OFFLOADED_RESULT_BYTES}")
    try:
        return CodeInvestigation.model_validate_json(response["Body"].read())
    except ValidationError:
        return failed("the sandbox's stored result is not a CodeInvestigation")


@tracer.capture_method(capture_response=False)
def record_attempt(payload: RecordAttemptInput, deps: AwsDeps) -> RecordAttemptOutput:
    """Keep one sandbox outcome; finish the investigation on success or when the attempts are spent."""
    from iterate import pipeline

    run = payload.run
    logger.append_keys(issue_id=payload.issueId)
    with running_step(deps, run, "investigate", task="record") as ctx:
        store: S3ArtifactStore = ctx.store
        state = _load_attempts(store, payload.issueId)
        attempts = [CodeInvestigation.model_validate(a) for a in state["attempts"]]
        if len(attempts) >= payload.attempt:  # a retried RecordAttempt: already kept
            kept = attempts[payload.attempt - 1]
            finished = bool(state.get("finished"))
            return RecordAttemptOutput(finished=finished, success=kept.success, attempts=len(attempts))
        pending = state.get("pending") or {}
        code = str(pending.get("code", "")) if pending.get("attempt") == payload.attempt else ""
        result = payload.sandboxResult
        offloaded = isinstance(result, SandboxResultRef)
        if isinstance(result, SandboxResultRef):
            result = _offloaded_result(deps, run, payload.issueId, payload.attempt, result)
        if isinstance(result, CodeInvestigation):
            book_sandbox(deps, run, result, offloaded=offloaded)
        if isinstance(result, SandboxFailure):
            outcome = CodeInvestigation(
                code=code,
                success=False,
                error=_failure_text(result),
                stopped="crash",
                attempts=payload.attempt,
            )
        else:
            # The sandbox does not know who wrote the code; GenerateCode did (an old pending: untrusted).
            source = pending.get("source") if pending.get("attempt") == payload.attempt else None
            outcome = result.model_copy(
                update={
                    "attempts": payload.attempt,
                    "code": result.code or code,
                    "source": "template" if source == "template" else "llm",
                }
            )
        if pending.get("attempt") == payload.attempt and pending.get("reused"):
            # A stored script: judged as fresh LLM code is; if it no longer proves the issue, the agent
            # starts from it at the next GenerateCode.
            reused = ReusedScript.model_validate(pending["reused"])
            outcome = pipeline.judge_reused_step(
                ctx, payload.issueId, outcome, reused, attempt=payload.attempt
            )
        attempts.append(outcome)
        spent = sum(1 for a in attempts if a.reused is None)
        finished = outcome.success or spent >= ctx.settings.investigation_max_attempts
        state = {
            "attempts": [a.model_dump(mode="json") for a in attempts],
            "pending": None,
            "finished": finished,
        }
        _save_attempts(store, payload.issueId, state)
        if finished:
            _finish_investigation(deps, run, ctx, payload.issueId, outcome)
    return RecordAttemptOutput(finished=finished, success=outcome.success, attempts=len(attempts))
