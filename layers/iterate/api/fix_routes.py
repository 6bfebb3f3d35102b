"""POST /runs/{id}/fixes and GET /runs/{id}/fixes/{fixId} (functions/fix): a fix is checked and recorded here,
applied by the fix worker (invoked asynchronously), and polled until it ends."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from iterate.api.common import ConflictError, DepsProvider, _run_view, _version_view, responses
from iterate.api.models import FixRequest, FixStatus
from iterate.storage.dynamo import DynamoRunRepository, RunTransitionError

# A job still PENDING or RUNNING past these is reported FAILED: the worker's event waited longer than Lambda
# keeps it (its async max event age, an hour), or the worker died mid-way (timeout, memory) without recording.
FIX_WORKER_TIMEOUT_S = 900  # the fix worker's timeout (infra reads it from here)
FIX_EVENT_MAX_AGE_S = 3600  # how long Lambda keeps the worker's event when it cannot run it yet (idem)
PENDING_STALE_S = FIX_EVENT_MAX_AGE_S + FIX_WORKER_TIMEOUT_S + 60
RUNNING_STALE_S = FIX_WORKER_TIMEOUT_S + 60


def fix_status(repo: DynamoRunRepository, record: dict[str, Any]) -> FixStatus:
    """The job as the API shows it, with its version and the run started on it as they are now."""
    run_id, fix_id = str(record["runId"]), str(record["fixId"])
    version = run = None
    if record.get("versionId") and record.get("status") == "SUCCEEDED":
        found = repo.get_version(str(record["datasetId"]), str(record["versionId"]))
        version = _version_view(found) if found else None
    if record.get("newRunId"):
        new_run = repo.get_run(str(record["newRunId"]))
        run = _run_view(new_run) if new_run else None
    return FixStatus(
        fixId=fix_id,
        runId=run_id,
        datasetId=str(record["datasetId"]),
        status=record["status"],
        createdAt=str(record["createdAt"]),
        updatedAt=record.get("updatedAt"),
        completedAt=record.get("completedAt"),
        request=FixRequest.model_validate(record["request"]),
        statusUrl=f"/runs/{run_id}/fixes/{fix_id}",
        error=record.get("error"),
        reason=record.get("reason"),
        version=version,
        run=run,
    )


def _age_s(record: dict[str, Any], field: str, now: float) -> float:
    at = record.get(field) or record.get("createdAt")
    return now - datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()


def settle_stale(repo: DynamoRunRepository, record: dict[str, Any], now: float) -> dict[str, Any]:
    """A job the worker can no longer end is recorded FAILED, saying why (conditional: a worker that does end
    it meanwhile wins)."""
    status = record.get("status")
    if status == "PENDING" and _age_s(record, "createdAt", now) > PENDING_STALE_S:
        reason = "the fix worker never started it (its event expired): send the request again"
    elif status == "RUNNING" and _age_s(record, "startedAt", now) > RUNNING_STALE_S:
        reason = (
            "the fix worker stopped without recording a result (timed out or ran out of memory): "
            "send the request again, with fewer fixes if it fails the same way"
        )
    else:
        return record
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    with contextlib.suppress(RunTransitionError):
        repo.transition_fix(
            str(record["runId"]), str(record["fixId"]), from_status=str(status), to_status="FAILED",
            error="FixWorkerLost", reason=reason, completedAt=at,
        )  # fmt: skip
    return repo.get_fix(str(record["runId"]), str(record["fixId"])) or record


def register_fixes(
    app: APIGatewayRestResolver,
    get_deps: DepsProvider,
    repo: Callable[[], DynamoRunRepository],
    require_run: Callable[[str], dict[str, Any]],
) -> None:
    @app.post(
        "/runs/<run_id>/fixes",
        summary="Apply fixes to a finished run's input as a new dataset version, and start a run on it: answers "
        "202 with the fix job; poll its statusUrl until it is SUCCEEDED (version, run) or FAILED (reason)",
        responses=responses(202, FixStatus, 400, 404, 409),
    )
    def apply_fixes(run_id: str, body: FixRequest) -> Response[Any]:
        from iterate.aws.fixes import FixJob, check_fix_request
        from iterate.aws.observability import logger
        from iterate.fix import FixError

        deps = get_deps()
        record = require_run(run_id)
        if record["status"] != "SUCCEEDED":
            raise ConflictError(
                f"run {run_id} has not succeeded ({record['status']}): only a finished run's issues can be fixed"
            )
        r = repo()
        try:
            check_fix_request(
                deps,
                r,
                record,
                issues=body.issues,
                answers=body.answers,
                quick=body.quick,
                confirm=set(body.confirm),
            )
        except FixError as exc:  # an unconfirmed destructive fix, an unanswered smart fix, an unknown issue
            raise ConflictError(str(exc)) from exc
        fix_id = f"f{uuid.uuid4().hex[:16]}"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))
        r.create_fix(
            run_id,
            {
                "fixId": fix_id,
                "datasetId": str(record["datasetId"]),
                "createdAt": now,
                "request": body.model_dump(mode="json"),
            },
        )
        job = FixJob(owner=r.owner, runId=run_id, fixId=fix_id)
        try:
            deps.lambda_client().invoke(
                FunctionName=deps.config.need("fix_worker_function"),
                InvocationType="Event",
                Payload=job.model_dump_json().encode(),
            )
        except Exception as exc:
            r.transition_fix(
                run_id, fix_id, from_status="PENDING", to_status="FAILED", error=type(exc).__name__,
                reason="the fix worker could not be started: send the request again", completedAt=now,
            )  # fmt: skip
            raise
        logger.info("fix queued", run_id=run_id, fix_id=fix_id)
        status = fix_status(r, r.get_fix(run_id, fix_id) or {})
        return Response(
            status_code=202,
            content_type=content_types.APPLICATION_JSON,
            body=json.dumps(status.model_dump(mode="json")),
            headers={"Location": status.statusUrl},
        )

    @app.get(
        "/runs/<run_id>/fixes/<fix_id>",
        summary="A fix job's status: PENDING, RUNNING, SUCCEEDED (its version and the run on it) or FAILED (why)",
        responses=responses(200, FixStatus, 404),
    )
    def get_fix(run_id: str, fix_id: str) -> FixStatus:
        deps = get_deps()
        r = repo()
        record = r.get_fix(run_id, fix_id)
        if record is None:
            raise NotFoundError(f"fix {fix_id} of run {run_id} not found")
        return fix_status(r, settle_stale(r, record, deps.clock()))
