"""DELETE /datasets/{id}: everything of one owner's dataset out of S3, DynamoDB and EventBridge Scheduler.

What a dataset leaves behind, and where (the owner is in every key, so nothing here can reach another owner's):
- S3, every version and delete marker (the bucket is versioned): `uploads/<o>/<d>/`, `artifacts/<o>/<d>/`
  (every run's artifacts), `versions/<o>/<d>/` (fixed versions), `library/<o>/<d>/` (stored proofs).
- DynamoDB, partition `OWNER#<o>`: `DATASET#<d>`, `SCHEDULE#<d>`, `VERSION#<d>#…`, `ACCEPTED#<d>#…`,
  `SCRIPT#<d>#…`, per run `RUN#<r>`, `ISSUE#<r>#…`, `FOLLOWUP#<r>.…`, `FIX#<r>#…`, the upload claims
  `OBJ#<bucket>/uploads/<o>/<d>/…`, the API idempotency keys that name one of its runs, and any run slot one of
  its runs still holds (`GLOBAL#admission` `LEASE#<r>`, released with the counters).
- The dataset's EventBridge Scheduler schedule (first, so no run starts while the rest goes).

The sweep is idempotent: a second call (or one after a failure half-way) finds what is left and removes it. A
tombstone (`DELETED#<d>`: when, and how much was removed; no data) answers a repeated DELETE with the same 204
for a week, then expires.

Not the dataset's alone, so kept: the owner's LLM answer cache (`artifacts/<o>/_llm-cache/`, keyed by prompt
hash and shared by the owner's datasets), the owner's run-slot counter and daily usage.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Key

from iterate.aws.deps import AwsDeps
from iterate.aws.schedules import schedule_name
from iterate.storage.admission import SlotLeases
from iterate.storage.dynamo import GSI1, DynamoRunRepository, dataset_runs_pk

# A cancelled run's execution is stopped, but a step already running finishes (profile and report may take
# up to their 600 s timeout) and may still write its artifacts: wait that long after a cancel.
STEP_DRAIN_S = 660
TOMBSTONE_TTL_S = 7 * 24 * 3600
IN_PROGRESS = frozenset({"QUEUED", "RUNNING", "PENDING"})
S3_BATCH = 1000  # DeleteObjects takes at most 1,000 keys


class DatasetBusyError(Exception):
    """Something of the dataset is still running (a run, a fix): deleting now would leave what it writes next."""

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeletionError(RuntimeError):
    """S3 refused to delete some objects: the dataset is partly deleted; DELETE again to finish."""


@dataclass(frozen=True)
class DeletionReport:
    datasetId: str
    objects: int  # S3 object versions and delete markers removed
    items: int  # DynamoDB items removed
    schedule: bool  # an EventBridge Scheduler schedule was deleted


def dataset_prefixes(owner: str, dataset_id: str) -> tuple[str, ...]:
    """The S3 prefixes only this dataset writes under (the trailing slash: `d1` never matches `d10`)."""
    return tuple(f"{top}/{owner}/{dataset_id}/" for top in ("uploads", "artifacts", "versions", "library"))


def tombstone_key(owner_pk: str, dataset_id: str) -> dict[str, str]:
    return {"PK": owner_pk, "SK": f"DELETED#{dataset_id}"}


def was_deleted(table: Any, owner_pk: str, dataset_id: str) -> bool:
    """Whether this owner deleted the dataset within the tombstone's week (a repeated DELETE answers 204)."""
    return "Item" in table.get_item(Key=tombstone_key(owner_pk, dataset_id), ConsistentRead=True)


def delete_dataset(deps: AwsDeps, repo: DynamoRunRepository, dataset_id: str) -> DeletionReport:
    """Remove everything of `repo.owner`'s dataset; DatasetBusyError (nothing touched) while a run or a fix of
    it is in progress or a cancelled run's last step may still be writing."""
    table = deps.dynamo_table()
    pk = f"OWNER#{repo.owner}"
    by_dataset = Key("GSI1PK").eq(dataset_runs_pk(repo.owner, dataset_id))
    runs = list(_query(table, IndexName=GSI1, KeyConditionExpression=by_dataset))
    run_ids = {str(r["runId"]) for r in runs}
    fixes = [f for run_id in sorted(run_ids) for f in _prefix(table, pk, f"FIX#{run_id}#")]
    _refuse_when_busy(runs, fixes, deps.clock())

    schedule = _delete_schedule(deps, repo.owner, dataset_id)
    bucket = deps.config.need("bucket")
    objects = sum(
        _delete_versions(deps.s3_client(), bucket, p) for p in dataset_prefixes(repo.owner, dataset_id)
    )

    keys: list[dict[str, str]] = [{"PK": pk, "SK": str(r["SK"])} for r in runs]
    keys += [_key(f) for f in fixes]
    for run_id in sorted(run_ids):
        keys += [_key(i) for i in _prefix(table, pk, f"ISSUE#{run_id}#")]
        keys += [_key(i) for i in _prefix(table, pk, f"FOLLOWUP#{run_id}.")]
    for prefix in (f"VERSION#{dataset_id}#", f"ACCEPTED#{dataset_id}#", f"SCRIPT#{dataset_id}#"):
        # "#" may be in a dataset id (an upload key's segment): only an item of exactly this dataset goes.
        keys += [_key(i) for i in _prefix(table, pk, prefix) if "#" not in str(i["SK"])[len(prefix) :]]
    keys += [_key(i) for i in _prefix(table, pk, f"OBJ#{bucket}/uploads/{repo.owner}/{dataset_id}/")]
    keys += [_key(i) for i in _prefix(table, pk, "IDEMPOTENCY#") if str(i.get("runId")) in run_ids]
    keys += [{"PK": pk, "SK": f"SCHEDULE#{dataset_id}"}]
    slots = SlotLeases(table, clock=deps.clock)
    for lease in slots.leases():  # ended runs whose slots were never given back (every release lost)
        if str(lease["runId"]) in run_ids:
            slots.release(str(lease["runId"]))
    now = int(deps.clock())
    # The tombstone before the dataset item: a failure in between leaves the dataset item, so DELETE sweeps again.
    table.put_item(
        Item={
            **tombstone_key(pk, dataset_id),
            "entity": "deleted",
            "datasetId": dataset_id,
            "deletedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "objects": objects,
            "items": len(keys) + 1,
            "expiresAt": now + TOMBSTONE_TTL_S,
        }
    )
    with table.batch_writer(overwrite_by_pkeys=["PK", "SK"]) as batch:
        for key in keys:
            batch.delete_item(Key=key)
    table.delete_item(Key={"PK": pk, "SK": f"DATASET#{dataset_id}"})
    return DeletionReport(datasetId=dataset_id, objects=objects, items=len(keys) + 1, schedule=schedule)


def _refuse_when_busy(runs: list[dict[str, Any]], fixes: list[dict[str, Any]], now: float) -> None:
    running = sorted(str(r["runId"]) for r in runs if r.get("status") in IN_PROGRESS)
    if running:
        raise DatasetBusyError(
            f"run {', '.join(running[:5])} of this dataset is in progress: cancel it (DELETE /runs/{running[0]}) "
            f"or wait for it to end, then delete the dataset"
        )
    fixing = sorted(str(f["fixId"]) for f in fixes if f.get("status") in IN_PROGRESS)
    if fixing:
        raise DatasetBusyError(
            f"fix {fixing[0]} of this dataset is being applied: wait for it to end (GET its status), "
            "then delete the dataset",
            retry_after_s=60,
        )
    wait = 0.0
    for run in runs:
        if run.get("status") == "CANCELLED" and run.get("updatedAt"):
            cancelled = datetime.fromisoformat(str(run["updatedAt"]).replace("Z", "+00:00")).timestamp()
            wait = max(wait, cancelled + STEP_DRAIN_S - now)
    if wait > 0:
        raise DatasetBusyError(
            f"a run of this dataset was cancelled less than {STEP_DRAIN_S // 60} minutes ago and its last step may "
            f"still be writing: delete the dataset in {int(wait) + 1} s",
            retry_after_s=int(wait) + 1,
        )


def _delete_schedule(deps: AwsDeps, owner: str, dataset_id: str) -> bool:
    """Delete the dataset's schedule by its name (also one whose table item was never written)."""
    scheduler = deps.scheduler_client()
    try:
        scheduler.delete_schedule(Name=schedule_name(owner, dataset_id), GroupName=deps.config.schedule_group)
    except scheduler.exceptions.ResourceNotFoundException:
        return False
    return True


def _delete_versions(s3: Any, bucket: str, prefix: str) -> int:
    """Every version and delete marker under `prefix`: with versioning on, deleting a key only hides it."""
    removed = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        found = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in (*page.get("Versions", []), *page.get("DeleteMarkers", []))
        ]
        for start in range(0, len(found), S3_BATCH):
            answer = s3.delete_objects(
                Bucket=bucket, Delete={"Objects": found[start : start + S3_BATCH], "Quiet": True}
            )
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise DeletionError(
                    f"S3 did not delete {len(answer['Errors'])} objects under {prefix} "
                    f"({first.get('Code')}): DELETE the dataset again to finish"
                )
        removed += len(found)
    return removed


def _key(item: dict[str, Any]) -> dict[str, str]:
    return {"PK": str(item["PK"]), "SK": str(item["SK"])}


def _prefix(table: Any, pk: str, prefix: str) -> Iterator[dict[str, Any]]:
    return _query(table, KeyConditionExpression=Key("PK").eq(pk) & Key("SK").begins_with(prefix))


def _query(table: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    while True:
        page = table.query(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
