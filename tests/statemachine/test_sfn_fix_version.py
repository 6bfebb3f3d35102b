"""A fix through the real ASL: an upload runs to SUCCEEDED, POST /runs/{id}/fixes queues a job whose worker writes a
version and starts a run on it, and that run (profile reading versions/) succeeds and sees the fixed issues resolved."""

from __future__ import annotations

from typing import Any

import pytest
from awsenv import BUCKET, admit_queued, route_lambdas
from test_sfn_runs import assert_table_actions_granted
from test_sfn_ways_in import _api, _wait_for_end

from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def test_a_fixed_version_runs_through_the_state_machine_and_resolves_its_issues(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine["arn"])
    with route_lambdas() as calls:
        # Given alice's dataset, its upload analysed by a run the API started
        status, created = _api("POST", "/datasets", {"name": "Orders", "fileName": "orders.csv"})
        dataset_id, key = created["dataset"]["datasetId"], created["upload"]["key"]
        version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=sample.read_bytes())["VersionId"]
        DynamoRunRepository(machine["table"], "alice").record_upload(
            dataset_id, {"bucket": BUCKET, "key": key, "versionId": version}
        )
        status, queued = _api("POST", f"/datasets/{dataset_id}/runs", {})
        assert admit_queued() == [queued["runId"]]
        arn = machine["arn"].replace(":stateMachine:", ":execution:")
        assert _wait_for_end(machine["sfn"], f"{arn}:{queued['runId']}")["status"] == "SUCCEEDED"
        # When she applies the quick fixes, confirmed
        status, job = _api(
            "POST", f"/runs/{queued['runId']}/fixes", {"quick": True, "confirm": ["drop", "clear"]}
        )
        assert status == 202, job
        # (the fix worker, invoked asynchronously, has written the version and started a run on it)
        status, fixed = _api("GET", job["statusUrl"])
        assert status == 200 and fixed["status"] == "SUCCEEDED", fixed
        assert admit_queued() == [fixed["run"]["runId"]]  # the run on the version was queued like any
        second = _wait_for_end(machine["sfn"], f"{arn}:{fixed['run']['runId']}")
        # Then the run on the version succeeded, and the fixed issues are gone from it
        assert second["status"] == "SUCCEEDED", second
        assert not calls.failures, calls.failures
        _, first_issues = _api("GET", f"/runs/{queued['runId']}/issues", None)
        _, new_issues = _api("GET", f"/runs/{fixed['run']['runId']}/issues", None)
    before = {i["issue"]["id"] for i in first_issues["issues"]}
    after = {i["issue"]["id"] for i in new_issues["issues"]}
    fixed_ids = {"dates-order_date", "units-unit_price", "whitespace-customer_name", "duplicates-exact"}
    assert fixed_ids <= before and not fixed_ids & after
    assert set(fixed["version"]["issuesApplied"]) >= fixed_ids
    # And every function, the fix route and its worker included, made only the DynamoDB calls it is granted
    assert_table_actions_granted(calls)
    assert {"fix", "fix_worker"} <= calls.table_actions().keys()
