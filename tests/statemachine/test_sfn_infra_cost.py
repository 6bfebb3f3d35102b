"""Each run's infrastructure cost estimate, measured by its steps as the real ASL runs them under moto."""

from __future__ import annotations

import json
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    UPLOAD_KEY,
    history,
    load_handler,
    object_created_event,
    orders_csv,
    reset_caches,
    route_lambdas,
    run_execution,
)

from iterate.api.app import _run_view
from iterate.aws.cost import PRICES
from iterate.contracts import InfraCost
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]

FUNCTION_MB = 1024
SANDBOX_MB = 2048


def _repriced(cost: InfraCost) -> float:
    """The USD estimate recomputed from the counts the run recorded."""
    return (
        cost.lambdaGbSeconds * PRICES["lambda_gb_second"]
        + cost.lambdaInvocations * PRICES["lambda_request"]
        + cost.stateTransitions * PRICES["state_transition"]
        + cost.s3WriteRequests * PRICES["s3_write_request"]
        + cost.s3ReadRequests * PRICES["s3_read_request"]
        + cost.dynamoWriteRequests * PRICES["dynamo_write_request"]
        + cost.dynamoReadRequests * PRICES["dynamo_read_request"]
        + cost.events * PRICES["event"]
    )


def test_a_run_records_its_infrastructure_beside_its_tokens(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given functions that know their memory, as Lambda and the stack tell them
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", str(FUNCTION_MB))
    monkeypatch.setenv("ITERATE_SANDBOX_FUNCTION_MEMORY_MB", str(SANDBOX_MB))
    reset_caches()
    version = str(machine["s3"].put_object(Bucket=BUCKET, Key=UPLOAD_KEY, Body=orders_csv())["VersionId"])
    # When an upload runs through the whole state machine
    with route_lambdas({"sandbox": load_handler("sandbox").lambda_handler}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    assert done["status"] == "SUCCEEDED", done
    run_id = json.loads(done["output"])["run"]["runId"]
    record = DynamoRunRepository(machine["table"], "alice").require_run(run_id)
    infra = InfraCost.model_validate(record["infra"])
    steps = {step: InfraCost.model_validate(v) for step, v in record["stepInfra"].items() if v}
    # Then every Lambda invocation of the run is booked once, the sandbox's included
    invoked = [name for name, _ in calls]
    assert infra.lambdaInvocations == len(invoked), invoked
    assert steps["investigate"].lambdaInvocations == sum(
        1 for n in invoked if n in ("investigate", "sandbox")
    )
    # And each single-invocation step's GB-seconds are its recorded time at its memory (the report's also
    # holds the status and events written after the engine's part)
    for step in ("profile", "understand", "analyze"):
        expected = record["timingsMs"][step] / 1000 * FUNCTION_MB / 1024
        assert float(steps[step].lambdaGbSeconds) == pytest.approx(expected, abs=2e-3), step
    assert float(steps["report"].lambdaGbSeconds) >= record["timingsMs"]["report"] / 1000 - 2e-3
    # And each proof's sandbox time is booked at the sandbox's memory
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(
        machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "analysis.json")["Body"].read()
    )
    # (proofs that shared one batch process each report that process's time: it counts once)
    proofs = [i.get("investigation") or {} for i in analysis["issues"]]
    shared = {p.get("execution_time_ms") or 0.0 for p in proofs if (p.get("batch_size") or 1) > 1}
    proofs_ms = [p.get("execution_time_ms") or 0.0 for p in proofs if (p.get("batch_size") or 1) == 1]
    proofs_ms.append(max(shared, default=0.0))
    assert sum(proofs_ms) > 0
    assert float(steps["investigate"].lambdaGbSeconds) >= sum(proofs_ms) / 1000 * SANDBOX_MB / 1024 - 1e-3
    # And the transitions cover at least the states the parent execution entered (the Map's children add theirs)
    entered = [e for e in history(machine["sfn"], done["executionArn"]) if "stateEnteredEventDetails" in e]
    assert infra.stateTransitions >= len(entered) > 0
    # And the requests are the calls the steps made: the artifacts written, the upload read, the run updated
    assert infra.s3WriteRequests >= 8 and infra.s3ReadRequests >= 2
    assert infra.dynamoWriteRequests > infra.lambdaInvocations  # each booking is itself one write
    assert infra.dynamoReadRequests > 0 and infra.events == 1  # the completion event
    # And the estimate is the counts priced, the same figure the API shows beside the token cost
    assert infra.costUsd > 0
    assert infra.costUsd == pytest.approx(_repriced(infra), rel=1e-6, abs=1e-7)
    shown = _run_view(record)
    assert shown.infra == infra and shown.costUsd in (None, 0.0)


def test_record_failure_books_its_own_invocation(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a file that cannot be read
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", str(FUNCTION_MB))
    reset_caches()
    key = "uploads/alice/broken/broken.csv"
    version = str(machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=bytes(range(256)) * 64)["VersionId"])
    # When its run fails
    with route_lambdas() as calls:
        done = run_execution(machine["sfn"], machine["arn"], object_created_event(BUCKET, key, version))
    assert done["status"] == "FAILED" and [n for n, _ in calls] == ["profile", "record_failure"]
    # Then RecordFailure's invocation is on the run (the profile step failed before it could book)
    (run,) = DynamoRunRepository(machine["table"], "alice").list_runs()
    failure = InfraCost.model_validate(run["stepInfra"]["failure"])
    assert failure.lambdaInvocations == 1 and failure.stateTransitions == 2
    assert failure.events == 1 and failure.costUsd > 0
