"""The S3 and DynamoDB adapters: keys stay under their prefix/owner, status changes are guarded."""

from __future__ import annotations

from typing import Any

import pytest
from awsenv import BUCKET, REGION

from iterate.storage import StatusConflictError
from iterate.storage.dynamo import (
    DynamoRunRepository,
    InvalidPageTokenError,
    RunTransitionError,
)
from iterate.storage.s3 import ArtifactNotFoundError, S3ArtifactStore

pytestmark = pytest.mark.handler


def test_s3_store_round_trips_under_its_prefix_only(aws: dict[str, Any]) -> None:
    # Given a store for one run's prefix
    store = S3ArtifactStore(aws["s3"], BUCKET, "artifacts/alice/d1/r1")
    # When an artifact is written
    uri = store.put_bytes("profile.json", b'{"a": 1}', content_type="application/json")
    # Then it lives under the prefix, encrypted, and reads back; missing keys and escapes are refused
    assert uri == f"s3://{BUCKET}/artifacts/alice/d1/r1/profile.json"
    head = aws["s3"].head_object(Bucket=BUCKET, Key="artifacts/alice/d1/r1/profile.json")
    assert head["ServerSideEncryption"] == "AES256"
    assert store.get_bytes("profile.json") == b'{"a": 1}'
    assert store.exists("profile.json") and not store.exists("nope.json")
    with pytest.raises(ArtifactNotFoundError):
        store.get_bytes("nope.json")
    with pytest.raises(ValueError):
        store.put_bytes("../r2/profile.json", b"x")
    assert store.list_keys() == ["profile.json"]


def test_presigned_get_reads_exactly_that_object(aws: dict[str, Any]) -> None:
    import requests

    from iterate.aws.clients import client

    # Given a run's data file, through the functions' own S3 client (SigV4)
    store = S3ArtifactStore(client("s3"), BUCKET, "artifacts/alice/d1/r1/")
    store.put_bytes("data.parquet", b"PAR1...")
    # When a presigned GET is made for it and fetched without credentials
    url = store.presigned_get("data.parquet", expires_s=60)
    response = requests.get(url, timeout=5)
    # Then it returns that object and names only that key
    assert response.status_code == 200 and response.content == b"PAR1..."
    assert "artifacts/alice/d1/r1/data.parquet" in url and "X-Amz-Expires=60" in url
    # And it names the regional endpoint, the one the sandbox's VPC gateway endpoint serves
    assert url.startswith(f"https://{BUCKET}.s3.{REGION}.amazonaws.com/")


def test_run_status_transitions_are_conditional(aws: dict[str, Any]) -> None:
    # Given a queued run
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "QUEUED", "trigger": "api"})
    # When it starts, makes progress and succeeds
    repo.transition("r1", from_status="QUEUED", to_status="RUNNING")
    repo.update_progress("r1", step="profile", percent=140, message="reading")
    repo.transition("r1", from_status="RUNNING", to_status="SUCCEEDED", issueCount=3, costUsd=0.25)
    # Then the record says so (percent clamped), and a stale or illegal transition is refused
    run = repo.get_run("r1")
    assert run is not None
    assert run["status"] == "SUCCEEDED" and run["issueCount"] == 3 and run["costUsd"] == 0.25
    assert run["progress"] == {"step": "profile", "percent": 100, "message": "reading"}
    with pytest.raises(StatusConflictError):
        repo.transition("r1", from_status="RUNNING", to_status="FAILED")
    with pytest.raises(RunTransitionError):
        repo.transition("r1", from_status="SUCCEEDED", to_status="RUNNING")
    with pytest.raises(RunTransitionError):  # a finished run takes no more progress
        repo.update_progress("r1", step="report", percent=50)
    with pytest.raises(RunTransitionError):  # the same run id cannot be created twice
        repo.create_run({"runId": "r1", "datasetId": "d1"})


def test_owners_never_see_each_others_items(aws: dict[str, Any]) -> None:
    # Given alice's run, dataset and issue
    alice = DynamoRunRepository(aws["table"], "alice")
    bob = DynamoRunRepository(aws["table"], "bob")
    alice.create_run({"runId": "r1", "datasetId": "d1", "status": "RUNNING"})
    alice.put_dataset({"datasetId": "d1", "name": "orders"})
    alice.put_issues("r1", [{"id": "I1", "type": "missing_values"}])
    # When bob looks them up by id
    # Then nothing is found, and bob cannot move alice's run
    assert bob.get_run("r1") is None and bob.get_dataset("d1") is None and bob.get_issue("r1", "I1") is None
    assert bob.list_runs() == [] and bob.list_datasets() == [] and bob.list_issues("r1") == []
    with pytest.raises(RunTransitionError):
        bob.transition("r1", from_status="RUNNING", to_status="CANCELLED")
    assert alice.require_run("r1")["status"] == "RUNNING"
    assert bob.list_runs("d1") == [] and bob.page_runs("d1", limit=10) == ([], None)


def test_object_claim_lets_one_execution_run_an_object_version(aws: dict[str, Any]) -> None:
    # Given an upload claimed by execution A
    repo = DynamoRunRepository(aws["table"], "alice", clock=lambda: 1_000.0)
    assert repo.claim_object("b", "uploads/alice/d1/f.csv", "v1", "r1", execution_id="A") is None
    # When execution A retries, execution B sees the same version, and a new version arrives
    retry = repo.claim_object("b", "uploads/alice/d1/f.csv", "v1", "r1", execution_id="A")
    duplicate = repo.claim_object("b", "uploads/alice/d1/f.csv", "v1", "r1", execution_id="B")
    new_version = repo.claim_object("b", "uploads/alice/d1/f.csv", "v2", "r2", execution_id="C")
    # Then only B is a duplicate (of r1), and the claim expires after the redelivery window
    assert (retry, duplicate, new_version) == (None, "r1", None)
    claim = aws["table"].get_item(Key={"PK": "OWNER#alice", "SK": "OBJ#b/uploads/alice/d1/f.csv#v1"})["Item"]
    assert int(claim["expiresAt"]) > 1_000
    assert "GSI1PK" not in claim  # only runs are in the index


def test_usage_adds_up_across_parallel_steps(aws: dict[str, Any]) -> None:
    # Given a running run
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "RUNNING"})
    # When two steps report token usage, one of them degraded
    repo.add_usage(
        "r1", "understand", {"inputTokens": 100, "outputTokens": 10, "calls": 1, "costUsd": 0.5}, []
    )
    repo.add_usage(
        "r1", "analyze", {"inputTokens": 50, "outputTokens": 5, "calls": 2, "costUsd": 0.25}, ["x"]
    )
    repo.record_timing("r1", "profile", 12.34)
    # Then the totals are the sums and the degraded reason is kept
    run = repo.require_run("r1")
    assert (
        run["usage"]["inputTokens"] == 150
        and run["usage"]["outputTokens"] == 15
        and run["usage"]["calls"] == 3
    )
    assert run["costUsd"] == pytest.approx(0.75)
    assert run["degradedReasons"] == ["x"] and run["timingsMs"] == {"profile": 12.3}


def test_followup_turns_are_written_once_and_answered_once(aws: dict[str, Any]) -> None:
    repo = DynamoRunRepository(aws["table"], "alice")
    # Given a first question
    repo.put_followup("r1.I1", 0, {"question": {"prompt": "p"}})
    # When it is written again, answered, then answered again
    with pytest.raises(RunTransitionError):
        repo.put_followup("r1.I1", 0, {"question": {"prompt": "other"}})
    repo.answer_followup("r1.I1", 0, "a")
    with pytest.raises(RunTransitionError):
        repo.answer_followup("r1.I1", 0, "b")
    # Then the first write and the first answer stand
    (turn,) = repo.list_followups("r1.I1")
    assert turn["question"] == {"prompt": "p"} and turn["answer"] == "a"


class CountingTable:
    """The boto3 Table, with every query's arguments kept (to see which key or index a listing used)."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self.queries: list[dict[str, Any]] = []

    def query(self, **kwargs: Any) -> Any:
        self.queries.append(kwargs)
        return self._table.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def test_a_datasets_runs_are_one_index_query_newest_first_a_page_at_a_time(aws: dict[str, Any]) -> None:
    # Given alice's five runs of d1 and three of d2, started a minute apart
    table = CountingTable(aws["table"])
    alice = DynamoRunRepository(table, "alice")
    for i in range(8):
        dataset = "d1" if i % 3 != 2 else "d2"
        alice.create_run({"runId": f"r{i}", "datasetId": dataset, "startedAt": f"2026-11-0{i + 1}T00:00:00Z"})
    # When d1's runs are read two at a time, following each page's token
    pages, token = [], None
    while True:
        runs, token = alice.page_runs("d1", limit=2, token=token)
        pages.append([r["runId"] for r in runs])
        if token is None:
            break
    # Then they come newest first, d1's only, two a page
    assert [run for page in pages for run in page] == ["r7", "r6", "r4", "r3", "r1", "r0"]
    assert all(len(page) <= 2 for page in pages) and len(pages) >= 3
    # And every page was a query of GSI1's partition for (alice, d1): no read of alice's other runs
    assert table.queries and all(q["IndexName"] == "GSI1" for q in table.queries)
    assert all(q["Limit"] == 2 and q["ScanIndexForward"] is False for q in table.queries)
    assert alice.list_runs("d2") == [alice.require_run(f"r{i}") for i in (5, 2)]


def test_a_page_token_only_opens_the_listing_and_owner_it_was_issued_for(aws: dict[str, Any]) -> None:
    alice = DynamoRunRepository(aws["table"], "alice")
    bob = DynamoRunRepository(aws["table"], "bob")
    for i in range(3):
        alice.create_run({"runId": f"r{i}", "datasetId": "d1", "startedAt": f"2026-11-0{i + 1}T00:00:00Z"})
        alice.put_dataset({"datasetId": f"d{i}", "name": "x"})
    _, runs_token = alice.page_runs("d1", limit=1)
    _, datasets_token = alice.page_datasets(limit=1)
    assert runs_token and datasets_token
    # When bob replays alice's tokens, or alice uses one listing's token in another, or a forged one
    for attempt in (
        lambda: bob.page_runs("d1", limit=1, token=runs_token),
        lambda: bob.page_datasets(limit=1, token=datasets_token),
        lambda: alice.page_runs("d2", limit=1, token=runs_token),
        lambda: alice.page_issues("r1", limit=1, token=datasets_token),
        lambda: alice.page_datasets(limit=1, token="not-a-token"),
    ):
        # Then each is refused: a token never reaches another owner's or another listing's items
        with pytest.raises(InvalidPageTokenError):
            attempt()


def test_an_idempotency_key_binds_one_run(aws: dict[str, Any]) -> None:
    alice = DynamoRunRepository(aws["table"], "alice", clock=lambda: 1_000.0)
    assert alice.claim_idempotency_key("k1", request_hash="h", run_id="r1") is None
    again = alice.claim_idempotency_key("k1", request_hash="h", run_id="r2")
    assert again is not None and again["runId"] == "r1" and again["requestHash"] == "h"
    # Another owner's same key is another key
    assert (
        DynamoRunRepository(aws["table"], "bob").claim_idempotency_key("k1", request_hash="h", run_id="b")
        is None
    )
    # A released key may be claimed again; an expired one too
    alice.release_idempotency_key("k1")
    assert alice.claim_idempotency_key("k1", request_hash="h2", run_id="r3") is None
    later = DynamoRunRepository(aws["table"], "alice", clock=lambda: 1_000.0 + 2 * 24 * 3600)
    assert later.claim_idempotency_key("k1", request_hash="h3", run_id="r4") is None
