"""The step handlers one at a time over moto: triggers, status moves, failures, token usage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from awsenv import BUCKET, FakeContext, capture_events, load_handler, object_created_event, received_events
from pydantic import ValidationError

from iterate.aws.triggers import DatasetNotFoundError
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

CSV = b"id,state,amount\n1,CA,10\n2,calif.,12\n3,CA,11\n4,NY,\n5,NY,13\n5,NY,13\n"


def invoke(name: str, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = load_handler(name).lambda_handler(event, FakeContext(f"iterate-{name}"))
    return result


def _dataset_with_upload(aws: dict[str, Any], owner: str = "alice", dataset: str = "d1") -> dict[str, Any]:
    key = f"uploads/{owner}/{dataset}/orders.csv"
    version = aws["s3"].put_object(Bucket=BUCKET, Key=key, Body=CSV)["VersionId"]
    upload = {"bucket": BUCKET, "key": key, "versionId": version}
    DynamoRunRepository(aws["table"], owner).record_upload(dataset, upload)
    return upload


def test_api_run_moves_from_queued_to_running_and_is_profiled(aws: dict[str, Any]) -> None:
    # Given a dataset with an upload and the QUEUED run the API created
    upload = _dataset_with_upload(aws)
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.create_run({"runId": "r-api", "datasetId": "d1", "status": "QUEUED", "trigger": "api"})
    trigger = {"trigger": "api", "owner": "alice", "datasetId": "d1", "runId": "r-api", "source": upload}
    # When ProfileDataset runs for it
    out = invoke("profile", {"trigger": trigger, "executionId": "arn:exec:1"})
    # Then the run is RUNNING with its profile written under the run's prefix
    assert out["duplicate"] is False and out["run"]["runId"] == "r-api" and out["run"]["trigger"] == "api"
    run = repo.require_run("r-api")
    assert run["status"] == "RUNNING" and run["executionId"] == "arn:exec:1" and "profile" in run["timingsMs"]
    profile = json.loads(
        aws["s3"].get_object(Bucket=BUCKET, Key="artifacts/alice/d1/r-api/profile.json")["Body"].read()
    )
    assert profile["rowCount"] == 6 and profile["columnCount"] == 3
    assert out["summary"]["rowCount"] == 6


def test_scheduled_run_analyses_the_latest_upload(aws: dict[str, Any]) -> None:
    # Given two uploads of the dataset (the second is the latest)
    _dataset_with_upload(aws)
    latest = _dataset_with_upload(aws)
    # When the schedule's input (owner + dataset only) starts a run
    out = invoke(
        "profile",
        {"trigger": {"trigger": "schedule", "owner": "alice", "datasetId": "d1"}, "executionId": "x"},
    )
    # Then the run is a schedule run of the latest version
    assert out["run"]["trigger"] == "schedule" and out["run"]["source"] == latest
    assert DynamoRunRepository(aws["table"], "alice").require_run(out["run"]["runId"])["status"] == "RUNNING"


def test_scheduled_run_of_a_dataset_without_upload_is_refused(aws: dict[str, Any]) -> None:
    with pytest.raises(DatasetNotFoundError):
        invoke(
            "profile",
            {"trigger": {"trigger": "schedule", "owner": "alice", "datasetId": "nope"}, "executionId": "x"},
        )


def test_upload_outside_an_owner_prefix_is_refused_and_recorded_nowhere(aws: dict[str, Any]) -> None:
    # Given an object that is not under uploads/<owner>/<dataset>/
    event = object_created_event(BUCKET, "uploads/orphan.csv", "v1")
    # When profile sees it, Then it refuses; and RecordFailure has no owner to write to
    with pytest.raises(ValueError):
        invoke("profile", {"trigger": event, "executionId": "x"})
    failed = invoke(
        "record_failure",
        {"state": {**event, "error": {"Error": "InvalidUploadKeyError", "Cause": "{}"}}, "executionId": "x"},
    )
    assert failed["runId"] is None and failed["error"] == "InvalidUploadKeyError"
    assert aws["table"].scan()["Items"] == []


def test_record_failure_keeps_a_cancelled_run_cancelled(aws: dict[str, Any]) -> None:
    # Given a run the owner cancelled while a step was failing
    sqs, queue = capture_events()
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "RUNNING", "trigger": "api"})
    repo.transition("r1", from_status="RUNNING", to_status="CANCELLED")
    run_state = {
        "runId": "r1",
        "owner": "alice",
        "datasetId": "d1",
        "trigger": "api",
        "bucket": BUCKET,
        "prefix": "artifacts/alice/d1/r1/",
        "source": {"bucket": BUCKET, "key": "uploads/alice/d1/f.csv", "versionId": "v"},
        "startedAt": "2026-11-22T00:00:00Z",
    }
    cause = json.dumps({"errorType": "RunTransitionError", "errorMessage": "run r1 is not RUNNING"})
    # When RecordFailure runs
    out = invoke(
        "record_failure",
        {
            "state": {"run": run_state, "error": {"Error": "RunTransitionError", "Cause": cause}},
            "executionId": "x",
        },
    )
    # Then the run stays CANCELLED, and the event says so with the readable reason
    assert out["status"] == "CANCELLED" and out["reason"] == "RunTransitionError: run r1 is not RUNNING"
    assert repo.require_run("r1")["status"] == "CANCELLED"
    (event,) = received_events(sqs, queue)
    assert event["detail"]["status"] == "CANCELLED" and event["detail"]["outcome"] == "failed"


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("chunked", "a chunk of the file could not be parsed"),
        ("analysis", "more than half of the investigations"),
    ],
)
def test_a_failed_map_is_recorded_with_which_map_failed(aws: dict[str, Any], at: str, says: str) -> None:
    # Given a run whose distributed Map failed (AWS names no item in the error), with the chunked read or the
    # analysis in its state
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.create_run({"runId": "r2", "datasetId": "d1", "status": "RUNNING", "trigger": "api"})
    run_state = {
        "runId": "r2",
        "owner": "alice",
        "datasetId": "d1",
        "trigger": "api",
        "bucket": BUCKET,
        "prefix": "artifacts/alice/d1/r2/",
        "source": {"bucket": BUCKET, "key": "uploads/alice/d1/f.csv", "versionId": "v"},
        "startedAt": "2026-11-22T00:00:00Z",
    }
    error = {
        "Error": "States.ExceedToleratedFailureThreshold",
        "Cause": "The specified tolerated failure threshold was exceeded",
    }
    # When RecordFailure runs
    out = invoke(
        "record_failure",
        {"state": {"run": run_state, at: {"count": 3}, "error": error}, "executionId": "x"},
    )
    # Then the run is FAILED with a reason saying which Map failed and where to look
    assert out["status"] == "FAILED" and says in out["reason"], out["reason"]
    assert "lists the failed items" in out["reason"]
    assert repo.require_run("r2")["reason"] == out["reason"]


def test_step_inputs_refuse_unknown_fields(aws: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        invoke("understand", {"run": {"runId": "r1"}, "extra": 1})
    with pytest.raises(ValidationError):
        invoke("investigate", {"action": "explode", "run": {}, "issueId": "I1"})


def test_llm_steps_add_token_usage_and_fallbacks_to_the_run(aws: dict[str, Any]) -> None:
    from iterate.agents import build_agents
    from iterate.aws import steps
    from iterate.aws.deps import build_deps
    from iterate.aws.payloads import StepInput
    from iterate.contracts import TokenUsage

    # Given a profiled S3 run
    upload = _dataset_with_upload(aws)
    event = object_created_event(BUCKET, upload["key"], upload["versionId"])
    run = invoke("profile", {"trigger": event, "executionId": "x"})["run"]

    # And agents that report one LLM call and one fallback (as the Claude agents do when the API fails)
    def agents_factory(settings: Any) -> Any:
        agents = build_agents(settings)
        agents.usage_source = lambda: {
            "total": TokenUsage(inputTokens=1200, outputTokens=300, calls=1, costUsd=0.02)
        }
        agents.degraded_reasons.append("understanding: unavailable")
        return agents

    deps = build_deps()
    deps.agents_factory = agents_factory
    # When UnderstandDataset runs with them
    steps.understand(StepInput.model_validate({"run": run}), deps)
    # Then the run's totals and the step's own totals carry the tokens, cost and the fallback reason
    record = DynamoRunRepository(aws["table"], "alice").require_run(run["runId"])
    assert record["usage"]["inputTokens"] == 1200 and record["usage"]["calls"] == 1
    assert record["stepUsage"]["understand"]["outputTokens"] == 300
    assert record["costUsd"] == pytest.approx(0.02)
    assert record["degradedReasons"] == ["understanding: unavailable"]
    assert record["stepDegraded"] == {"understand": ["understanding: unavailable"]}


def test_url_encoded_key_in_the_event_still_finds_the_upload(aws: dict[str, Any]) -> None:
    # Given a file whose name has a space, announced with the key URL-encoded
    version = aws["s3"].put_object(Bucket=BUCKET, Key="uploads/alice/d1/my orders.csv", Body=CSV)["VersionId"]
    event = object_created_event(BUCKET, "uploads/alice/d1/my+orders.csv", version)
    # When ProfileDataset runs, Then it reads the real object and profiles it
    out = invoke("profile", {"trigger": event, "executionId": "x"})
    assert out["summary"]["rowCount"] == 6
