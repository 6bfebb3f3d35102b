"""What an execution input (an S3 upload event, or a run request from the API, a schedule or admission)
describes: the run, its owner and its source. Light: the API and the admission function import it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from iterate.aws.deps import AwsDeps
from iterate.aws.payloads import (
    ObjectCreatedEvent,
    RunState,
    S3ObjectRef,
    StartRunRequest,
    artifacts_prefix,
    parse_upload_key,
    run_id_for_object,
)
from iterate.storage.dynamo import DynamoRunRepository, RunTransitionError


class DatasetNotFoundError(LookupError):
    """A run was asked for a dataset this owner does not have, or one with no upload yet."""


def repository(deps: AwsDeps, owner: str) -> DynamoRunRepository:
    return DynamoRunRepository(deps.dynamo_table(), owner, clock=deps.clock)


def now_iso(deps: AwsDeps) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))


def is_s3_event(trigger: dict[str, Any]) -> bool:
    return trigger.get("source") == "aws.s3" or "detail-type" in trigger


def run_for_trigger(deps: AwsDeps, trigger: dict[str, Any]) -> tuple[RunState, str | None]:
    """The run an execution input describes, plus the upload's file name; no AWS writes."""
    bucket = deps.config.need("bucket")
    started = now_iso(deps)
    if is_s3_event(trigger):
        source = ObjectCreatedEvent.model_validate(trigger).upload()
        owner, dataset_id, file_name = parse_upload_key(source.key)
        run_id, kind, instructions = run_id_for_object(source), "s3", None
    else:
        request = StartRunRequest.model_validate(trigger)
        owner, dataset_id = request.owner, request.datasetId
        found = request.source
        if found is None:
            dataset = repository(deps, owner).get_dataset(dataset_id)
            if not dataset or not dataset.get("latestUpload"):
                raise DatasetNotFoundError(f"dataset {dataset_id} has no upload to analyse")
            found = S3ObjectRef.model_validate(dataset["latestUpload"])
        source = found
        file_name = source.key.rsplit("/", 1)[-1]
        run_id = request.runId or f"r{uuid.uuid4().hex[:24]}"
        kind, instructions = request.trigger, request.instructions
    run = RunState(
        runId=run_id,
        owner=owner,
        datasetId=dataset_id,
        trigger=kind,  # type: ignore[arg-type]
        bucket=bucket,
        prefix=artifacts_prefix(owner, dataset_id, run_id),
        source=source,
        startedAt=started,
        instructions=instructions,
    )
    return run, file_name


def start_run(repo: DynamoRunRepository, run: RunState, execution_id: str) -> None:
    """Create the run as RUNNING, or move the QUEUED record admission wrote to RUNNING; a retried step passes
    through; a run cancelled while it waited is refused (RunTransitionError)."""
    record = {
        "runId": run.runId,
        "datasetId": run.datasetId,
        "status": "RUNNING",
        "trigger": run.trigger,
        "source": run.source.model_dump(mode="json"),
        "startedAt": run.startedAt,
        "artifactsPrefix": run.prefix,
        "executionId": execution_id,
        "instructions": run.instructions,
        "progress": {"step": "profile", "percent": 0, "message": "started"},
    }
    try:
        repo.create_run(record)
        return
    except RunTransitionError:
        existing = repo.require_run(run.runId)
    if existing["status"] == "QUEUED":
        repo.transition(
            run.runId,
            from_status="QUEUED",
            to_status="RUNNING",
            executionId=execution_id,
            artifactsPrefix=run.prefix,
            progress={"step": "profile", "percent": 0, "message": "started"},
        )
    elif existing["status"] != "RUNNING":
        raise RunTransitionError(f"run {run.runId} is {existing['status']}; it cannot start")
