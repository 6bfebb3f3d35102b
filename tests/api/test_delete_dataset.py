"""DELETE /datasets/{id} over moto: every S3 object version and DynamoDB item of the dataset gone, its schedule
cancelled; the owner's other dataset and another owner's dataset byte-for-byte as they were; owner-scoped (another
owner's id is a 404), idempotent (a second DELETE is a 204), refused (409) while a run of it is in progress."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import BUCKET, REGION, admit_queued, route_lambdas

from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from infra.runtime import TABLE_ACCESS  # noqa: E402


def _dataset(call: Any, world: dict[str, Any], owner: str, name: str) -> dict[str, Any]:
    """Given a dataset with everything a dataset gathers: two uploads, a schedule, a finished run (its artifacts,
    issues, a follow-up, a fix job, an idempotency key, its upload claim), a version, an acceptance, a stored
    script (index and code)."""
    s3, table = world["s3"], world["table"]
    status, created = call("POST", "/datasets", owner=owner, body={"name": name, "fileName": "orders.csv"})
    assert status == 201, created
    dataset_id, key = created["dataset"]["datasetId"], created["upload"]["key"]
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"id,city\n1,Paris\n")
    version = s3.put_object(Bucket=BUCKET, Key=key, Body=b"id,city\n1,Pariss\n")["VersionId"]
    repo = DynamoRunRepository(table, owner)
    repo.record_upload(dataset_id, {"bucket": BUCKET, "key": key, "versionId": version})
    assert (
        call("PUT", f"/datasets/{dataset_id}/schedule", owner=owner, body={"expression": "rate(1 day)"})[0]
        == 200
    )
    status, run = call(
        "POST", f"/datasets/{dataset_id}/runs", owner=owner, body={}, headers={"Idempotency-Key": f"k-{name}"}
    )
    assert status == 202, run
    run_id = run["runId"]
    assert admit_queued() == [run_id]  # admission leases it a run slot and starts it
    repo.claim_object(BUCKET, key, version, run_id, execution_id=f"exec-{run_id}")
    repo.transition(run_id, from_status="QUEUED", to_status="RUNNING")
    prefix = f"artifacts/{owner}/{dataset_id}/{run_id}/"
    for artifact in ("analysis.json", "report.html", "flags.csv", "scripts/typos-city.py"):
        s3.put_object(Bucket=BUCKET, Key=prefix + artifact, Body=b"{}")
    repo.put_issues(run_id, [{"id": "typos-city", "severity": "low", "type": "typos"}])
    repo.put_followup(f"{run_id}.typos-city", 0, {"question": {"text": "which spelling?"}})
    repo.create_fix(run_id, {"fixId": "f1", "datasetId": dataset_id, "createdAt": "2026-12-01T00:00:00Z"})
    repo.transition_fix(run_id, "f1", from_status="PENDING", to_status="SUCCEEDED")
    repo.put_version(dataset_id, {"versionId": "v1", "datasetId": dataset_id, "key": "k"})
    s3.put_object(Bucket=BUCKET, Key=f"versions/{owner}/{dataset_id}/v1/orders.csv", Body=b"id\n1\n")
    repo.put_acceptance(dataset_id, {"id": "a1", "type": "typos", "columns": ["city"]})
    table.put_item(Item={"PK": f"OWNER#{owner}", "SK": f"SCRIPT#{dataset_id}#abcdef12", "entity": "script"})
    s3.put_object(Bucket=BUCKET, Key=f"library/{owner}/{dataset_id}/abcdef12.py", Body=b"print(1)")
    return {"id": dataset_id, "run": run_id, "owner": owner, "repo": repo}


def _finish(d: dict[str, Any]) -> None:
    """The dataset's run ends (the test's state machine does nothing: the run stays RUNNING until told)."""
    d["repo"].transition(d["run"], from_status="RUNNING", to_status="SUCCEEDED")


def _objects(world: dict[str, Any]) -> set[tuple[str, str]]:
    """Every object version and delete marker in the bucket."""
    found: set[tuple[str, str]] = set()
    for page in world["s3"].get_paginator("list_object_versions").paginate(Bucket=BUCKET):
        for v in (*page.get("Versions", []), *page.get("DeleteMarkers", [])):
            found.add((v["Key"], v["VersionId"]))
    return found


def _items(world: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Every item of the table, as its full JSON (a changed attribute shows), but the owners' API request
    buckets (every call takes from its caller's)."""
    found: dict[tuple[str, str], str] = {}
    kwargs: dict[str, Any] = {}
    while True:
        page = world["table"].scan(**kwargs)
        for item in page["Items"]:
            if item["SK"] == "BUCKET#api":
                continue
            found[(item["PK"], item["SK"])] = json.dumps(item, default=str, sort_keys=True)
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _schedules() -> set[str]:
    import boto3

    scheduler = boto3.client("scheduler", region_name=REGION)
    return {s["Name"] for s in scheduler.list_schedules()["Schedules"]}


def _mentions(text: str, d: dict[str, Any]) -> bool:
    return d["id"] in text or d["run"] in text


def test_deleting_a_dataset_leaves_nothing_of_it_and_touches_nothing_else(
    call: Any, world: dict[str, Any]
) -> None:
    # Given alice's two datasets and bob's one, each with runs, issues, versions, scripts and a schedule
    gone = _dataset(call, world, "alice", "orders")
    kept = _dataset(call, world, "alice", "customers")
    other = _dataset(call, world, "bob", "orders")
    objects, items, schedules = _objects(world), _items(world), _schedules()
    assert len(schedules) == 3 and any(_mentions(k, gone) for k, _ in objects)

    # When bob deletes alice's dataset, or alice deletes it while its run is in progress
    assert call("DELETE", f"/datasets/{gone['id']}", owner="bob")[0] == 404
    status, busy = call("DELETE", f"/datasets/{gone['id']}")
    # Then nothing at all changed, and alice is told what to do
    assert status == 409 and f"DELETE /runs/{gone['run']}" in busy["message"], busy
    assert (_objects(world), _items(world), _schedules()) == (objects, items, schedules)

    # When she cancels the run and deletes the dataset at once: refused again, its last step may still write
    for d in (kept, other):
        _finish(d)
    gone["repo"].transition(gone["run"], from_status="RUNNING", to_status="CANCELLED")
    status, busy = call("DELETE", f"/datasets/{gone['id']}")
    assert status == 409 and "cancelled less than 11 minutes ago" in busy["message"], busy
    # When the run ended long enough ago and alice deletes the dataset (with only the table actions her API
    # role holds)
    gone["repo"].set_run_fields(gone["run"], updatedAt="2026-01-01T00:00:00Z")
    items = _items(world)
    with route_lambdas(size_check=False) as calls:
        from awsenv import as_function

        with as_function("api"):
            status, _ = call("DELETE", f"/datasets/{gone['id']}")
    assert status == 204
    used = calls.table_actions()["api"]
    assert used <= TABLE_ACCESS["api"], sorted(used - TABLE_ACCESS["api"])
    s3_used = {op for fn, service, op, _ in calls.aws_calls if fn == "api" and service == "s3"}
    assert s3_used == {"ListObjectVersions", "DeleteObjects"}, s3_used  # what its role is granted

    # Then no object version, delete marker or item of it is left, and its schedule is gone
    after_objects, after_items = _objects(world), _items(world)
    assert not [k for k, _ in after_objects if _mentions(k, gone)]
    left = {key: item for key, item in after_items.items() if _mentions(item, gone)}
    # (but the tombstone that answers a repeated DELETE: the id, when, how much went; no data)
    assert list(left) == [("OWNER#alice", f"DELETED#{gone['id']}")], sorted(left)
    tombstone = json.loads(left[("OWNER#alice", f"DELETED#{gone['id']}")])
    assert set(tombstone) == {"PK", "SK", "entity", "datasetId", "deletedAt", "objects", "items", "expiresAt"}
    # two uploads, four artifacts, a version, a script
    assert int(tombstone["objects"]) == len([k for k, _ in objects if _mentions(k, gone)]) == 8
    # And everything else, alice's other dataset and bob's, is exactly as it was (but the slot counters, which
    # lost the deleted run's lease)
    assert after_objects == {o for o in objects if not _mentions(o[0], gone)}
    owner_slots, global_slots = ("OWNER#alice", "LIMIT#runs"), ("GLOBAL#admission", "SLOTS")
    changed = {owner_slots, global_slots}
    untouched = {k: v for k, v in items.items() if not _mentions(v, gone) and k not in changed}
    assert {k: v for k, v in after_items.items() if k in untouched} == untouched
    assert set(after_items) - changed - {("OWNER#alice", f"DELETED#{gone['id']}")} == set(untouched)
    assert ("GLOBAL#admission", f"LEASE#{gone['run']}") in items
    assert ("GLOBAL#admission", f"LEASE#{kept['run']}") in after_items
    for counter in (owner_slots, global_slots):
        assert int(json.loads(after_items[counter])["live"]) == int(json.loads(items[counter])["live"]) - 1
    assert len(_schedules()) == 2 and not any(gone["id"] in s for s in _schedules())

    # When she deletes it again: the same answer; an id she never had, and the deleted one's reads, are 404s
    assert call("DELETE", f"/datasets/{gone['id']}")[0] == 204
    assert call("DELETE", "/datasets/dnever")[0] == 404
    assert call("GET", f"/datasets/{gone['id']}")[0] == 404
    assert call("GET", f"/runs/{gone['run']}")[0] == 404
    assert call("GET", f"/datasets/{kept['id']}")[0] == 200
