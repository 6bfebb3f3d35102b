"""Admission in front of the real state machine: uploads over the owner's limit wait in the queue, and the
end of a run (Report) frees the slot the next one starts in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    FakeContext,
    admit_queued,
    as_function,
    load_handler,
    object_created_event,
    orders_csv,
    reset_caches,
    route_lambdas,
)
from test_sfn_runs import _sandbox_handler, assert_table_actions_granted
from test_sfn_ways_in import _wait_for_end

from iterate.storage.admission import OwnerQueue, SlotLeases
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def test_uploads_over_the_owner_limit_wait_and_start_when_a_run_ends(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from iterate.aws import admission

    # Given a limit of one run at a time per owner (waiting messages retried at once) and two uploads of alice
    monkeypatch.setenv("ITERATE_MAX_CONCURRENT_RUNS", "1")
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine["arn"])
    monkeypatch.setattr(admission, "MAX_RETRY_S", 0)
    reset_caches()
    keys = ["uploads/alice/orders/jan.csv", "uploads/alice/orders/feb.csv"]
    runs = []
    with route_lambdas({"sandbox": _sandbox_handler()}) as calls:
        for n, key in enumerate(keys):
            version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=orders_csv())["VersionId"]
            event = object_created_event(BUCKET, key, version, event_id=f"e-{n}")
            with as_function("admission"):
                queued = load_handler("admission").lambda_handler(event, FakeContext("iterate-admission"))
            assert queued["outcome"] == "queued"
            runs.append(queued["runId"])
        # When admission works through the queue: only the first starts; the second waits, first in line
        assert admit_queued() == [runs[0]]
        repo = DynamoRunRepository(machine["table"], "alice")
        second = repo.require_run(runs[1])
        assert (
            second["status"] == "QUEUED"
            and OwnerQueue(machine["table"], "alice").place(second["queueKey"]) == 1
        )
        executions = machine["arn"].replace(":stateMachine:", ":execution:")
        first = _wait_for_end(machine["sfn"], f"{executions}:{runs[0]}")
        # Then the first run went through the real pipeline and its Report gave the slot back
        assert first["status"] == "SUCCEEDED", first
        assert SlotLeases(machine["table"]).held("alice") == 0
        # And the second starts in it and succeeds too
        assert admit_queued() == [runs[1]]
        assert _wait_for_end(machine["sfn"], f"{executions}:{runs[1]}")["status"] == "SUCCEEDED"
    assert not calls.failures, calls.failures
    assert [repo.require_run(r)["status"] for r in runs] == ["SUCCEEDED", "SUCCEEDED"]
    assert SlotLeases(machine["table"]).held() == 0 and not SlotLeases(machine["table"]).leases()
    assert json.loads(json.dumps(repo.require_run(runs[1])["waitedS"])) >= 0
    # And every function called only the DynamoDB actions its role holds (the slots' transactions included)
    assert_table_actions_granted(calls)
