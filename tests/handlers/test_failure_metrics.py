"""RecordFailure counts a run's failure as the user's (a bad file, a cancel) or the system's; only the system's
reach the run-failure alarm (tests/infra/test_operations.py checks the alarm's expression)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from awsenv import BUCKET, FakeContext, load_handler

from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler]


def _emitted(out: str) -> set[str]:
    """The metric names in the EMF lines Powertools printed."""
    names: set[str] = set()
    for line in out.splitlines():
        if '"_aws"' in line:
            record = json.loads(line)
            names |= {m["Name"] for d in record["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    return names


@pytest.mark.parametrize(
    ("error", "counted", "not_counted"),
    [
        ("DatasetReadError", "RunsFailedUser", "RunsFailedSystem"),
        ("RunCancelledError", "RunsFailedUser", "RunsFailedSystem"),
        ("States.TaskFailed", "RunsFailedSystem", "RunsFailedUser"),
        ("Lambda.Unknown", "RunsFailedSystem", "RunsFailedUser"),
    ],
)
def test_a_failed_run_is_counted_as_the_users_or_the_systems(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str], error: str, counted: str, not_counted: str
) -> None:
    # Given a running run that failed with `error`
    DynamoRunRepository(aws["table"], "alice").create_run(
        {"runId": "r1", "datasetId": "d1", "status": "RUNNING", "trigger": "api"}
    )
    run = {
        "runId": "r1", "owner": "alice", "datasetId": "d1", "trigger": "api", "bucket": BUCKET,
        "prefix": "artifacts/alice/d1/r1/", "startedAt": "2026-12-01T00:00:00Z",
        "source": {"bucket": BUCKET, "key": "uploads/alice/d1/f.csv", "versionId": "v"},
    }  # fmt: skip
    capsys.readouterr()
    # When RecordFailure records it
    load_handler("record_failure").lambda_handler(
        {"state": {"run": run, "error": {"Error": error, "Cause": "{}"}}, "executionId": "x"},
        FakeContext("iterate-record_failure"),
    )
    # Then it counts among all failures, and in exactly one of the user's or the system's
    emitted = _emitted(capsys.readouterr().out)
    assert {"RunsFailed", counted} <= emitted and not_counted not in emitted, emitted
