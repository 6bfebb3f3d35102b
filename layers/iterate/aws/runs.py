"""Starting a run outside the upload and schedule triggers (the API, a fix's new version): it is queued for
admission like every run. Light on purpose: the API function imports it without the data layer."""

from __future__ import annotations

from typing import Any, Literal

from iterate.aws.admission import enqueue
from iterate.aws.deps import AwsDeps
from iterate.aws.payloads import S3ObjectRef, StartRunRequest
from iterate.storage.dynamo import DynamoRunRepository


def queue_run(
    deps: AwsDeps,
    r: DynamoRunRepository,
    dataset_id: str,
    run_id: str,
    source: S3ObjectRef,
    instructions: str | None,
    *,
    on_quota: Literal["record", "raise"],
) -> dict[str, Any]:
    """Record run `run_id` of `source` QUEUED and put it on the admission queue; its record.

    `on_quota`: over a daily quota, `raise` refuses it with nothing recorded (QuotaExceededError: the API
    answers 429), `record` records it FAILED saying which quota (a background job: nobody is there to retry)."""
    request = StartRunRequest(
        trigger="api",
        owner=r.owner,
        datasetId=dataset_id,
        runId=run_id,
        source=source,
        instructions=instructions,
    )
    enqueue(deps, request.model_dump(mode="json"), on_quota=on_quota)
    return r.require_run(run_id)
