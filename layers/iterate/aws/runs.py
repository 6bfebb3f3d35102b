"""Starting a run outside the state machine's own triggers (the API, a fix's new version): record it QUEUED,
then start its execution. Light on purpose: the API function imports it without the data layer."""

from __future__ import annotations

import time
from typing import Any

from iterate.aws.deps import AwsDeps
from iterate.aws.payloads import S3ObjectRef, StartRunRequest
from iterate.storage.dynamo import DynamoRunRepository, RunLimitReachedError


def queue_run(
    deps: AwsDeps,
    r: DynamoRunRepository,
    dataset_id: str,
    run_id: str,
    source: S3ObjectRef,
    instructions: str | None,
    *,
    hold_slot: bool,
) -> dict[str, Any]:
    """Record run `run_id` of `source` QUEUED and start its execution; its record.

    `hold_slot`: take one of the owner's run slots first (RunLimitReachedError when none is free: the caller
    answers 429). Without it the run waits for a slot in ProfileDataset, as uploads and schedules do (what a
    background job wants: nobody is there to retry a 429)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))
    r.create_run(
        {
            "runId": run_id,
            "datasetId": dataset_id,
            "status": "QUEUED",
            "trigger": "api",
            "startedAt": now,
            "instructions": instructions,
            "source": source.model_dump(mode="json"),
            "progress": {"step": "queued", "percent": 0, "message": "waiting to start"},
        }
    )
    if hold_slot:
        try:
            r.acquire_run_slot(run_id, deps.config.max_concurrent_runs)
        except RunLimitReachedError:
            r.delete_run(run_id)  # refused before it started: it is no run of the caller's
            raise
    request = StartRunRequest(
        trigger="api",
        owner=r.owner,
        datasetId=dataset_id,
        runId=run_id,
        source=source,
        instructions=instructions,
    )
    try:
        execution = deps.sfn_client().start_execution(
            stateMachineArn=deps.config.need("state_machine_arn"),
            name=run_id,
            input=request.model_dump_json(),
        )
    except Exception as exc:
        # A run that never started must not sit QUEUED forever; the caller sees the error and can retry.
        r.transition(
            run_id,
            from_status="QUEUED",
            to_status="FAILED",
            error=type(exc).__name__,
            reason="not started",
        )
        r.release_run_slot(run_id)
        raise
    r.set_run_fields(run_id, executionArn=execution["executionArn"])
    return r.require_run(run_id)
