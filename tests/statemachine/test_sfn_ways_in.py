"""The other ways in, through the real ASL: a run started by the API, then one fired by the dataset's schedule."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REGION,
    FakeContext,
    admit_queued,
    as_function,
    load_handler,
    orders_csv,
    reset_caches,
    route_lambdas,
)
from test_sfn_runs import assert_table_actions_granted

from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def _api(method: str, path: str, body: Any = None, owner: str = "alice") -> tuple[int, Any]:
    name = "followup" if path.endswith("/followup") else "fix" if "/fixes" in path else "api"
    event = {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "queryStringParameters": None,
        "pathParameters": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
            "stage": "prod",
            "requestId": "r",
            "authorizer": {"claims": {"sub": owner}},
        },
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }
    with as_function(name):
        response = load_handler(name).lambda_handler(event, FakeContext(f"iterate-{name}"))
    return int(response["statusCode"]), json.loads(response["body"]) if response.get("body") else None


def _wait_for_end(sfn: Any, execution_arn: str, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return dict(described)
        time.sleep(0.05)
    raise TimeoutError(execution_arn)


def test_api_run_then_scheduled_run_of_the_same_dataset(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from iterate.api.app import schedule_name

    # Given the API pointed at the real state machine, and a scheduler role and group
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="scheduler-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="iterate")
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine["arn"])
    monkeypatch.setenv("ITERATE_SCHEDULER_ROLE_ARN", role)
    monkeypatch.setenv("ITERATE_SCHEDULE_GROUP", "iterate")
    with route_lambdas() as calls:
        # And a dataset created through the API whose file was uploaded with the presigned URL's key
        status, created = _api("POST", "/datasets", {"name": "Orders", "fileName": "orders.csv"})
        assert status == 201
        dataset_id, key = created["dataset"]["datasetId"], created["upload"]["key"]
        version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=orders_csv())["VersionId"]
        DynamoRunRepository(machine["table"], "alice").record_upload(
            dataset_id, {"bucket": BUCKET, "key": key, "versionId": version}
        )
        # When alice starts a run with instructions and it runs to its end
        status, queued = _api("POST", f"/datasets/{dataset_id}/runs", {"instructions": "amounts are in USD"})
        assert status == 202 and queued["status"] == "QUEUED"
        assert admit_queued() == [queued["runId"]]  # admission leases it a slot and starts it
        execution_arn = machine["arn"].replace(":stateMachine:", ":execution:") + ":" + queued["runId"]
        first = _wait_for_end(machine["sfn"], execution_arn)
        # Then the same run id went QUEUED → SUCCEEDED, with issues and a report link for her only
        assert first["status"] == "SUCCEEDED", first
        assert not calls.failures, calls.failures
        status, run = _api("GET", f"/runs/{queued['runId']}")
        assert (
            run["status"] == "SUCCEEDED"
            and run["trigger"] == "api"
            and run["instructions"] == "amounts are in USD"
        )
        status, issues = _api("GET", f"/runs/{queued['runId']}/issues")
        assert status == 200 and len(issues["issues"]) == run["issueCount"] > 0
        assert _api("GET", f"/runs/{queued['runId']}/report")[0] == 200
        assert _api("GET", f"/runs/{queued['runId']}/issues", owner="bob")[0] == 404
        # When she sets a schedule and EventBridge Scheduler fires it (its target input, as configured)
        assert _api("PUT", f"/datasets/{dataset_id}/schedule", {"expression": "rate(7 days)"})[0] == 200
        schedule = boto3.client("scheduler", region_name=REGION).get_schedule(
            Name=schedule_name("alice", dataset_id), GroupName="iterate"
        )
        assert schedule["Target"]["Arn"].endswith(":function:iterate-admission")
        # (Scheduler invokes the admission function with the target's input: it queues the run)
        with as_function("admission"):
            fired = load_handler("admission").lambda_handler(
                json.loads(schedule["Target"]["Input"]), FakeContext("iterate-admission")
            )
        assert fired["outcome"] == "queued" and admit_queued() == [fired["runId"]]
        second = _wait_for_end(
            machine["sfn"], machine["arn"].replace(":stateMachine:", ":execution:") + ":" + fired["runId"]
        )
        # And she reads the runs, the issues' follow-up, and stops the schedule
        status, listed = _api("GET", f"/datasets/{dataset_id}/runs")
        assert status == 200 and len(listed["runs"]) == 2
        first_issue = issues["issues"][0]["issueRef"]
        assert _api("POST", f"/issues/{first_issue}/followup", {})[0] in (200, 409)
        assert _api("DELETE", f"/datasets/{dataset_id}/schedule")[0] == 204
    # Then a second, schedule-triggered run of the latest upload succeeded and found the same issues
    assert second["status"] == "SUCCEEDED", second
    # And every function (the API's and the follow-up's included) made only the DynamoDB calls it is granted
    assert_table_actions_granted(calls)
    assert {"api", "followup", "profile", "analyze", "report"} <= calls.table_actions().keys()
    status, detail = _api("GET", f"/datasets/{dataset_id}")
    triggers = sorted(r["trigger"] for r in detail["runs"])
    assert triggers == ["api", "schedule"] and all(r["status"] == "SUCCEEDED" for r in detail["runs"])
    scheduled = next(r for r in detail["runs"] if r["trigger"] == "schedule")
    assert scheduled["issueCount"] == run["issueCount"]
    # And a re-analysis sees the previous run's issues (what new / persisting / resolved is computed from)
    from iterate.aws.deps import build_deps
    from iterate.aws.payloads import RunState
    from iterate.aws.steps import previous_issues

    later = RunState.model_validate(
        {
            "runId": "r-later",
            "owner": "alice",
            "datasetId": dataset_id,
            "trigger": "schedule",
            "bucket": BUCKET,
            "prefix": f"artifacts/alice/{dataset_id}/r-later/",
            "source": {"bucket": BUCKET, "key": key, "versionId": version},
            "startedAt": "2026-11-22T00:00:00Z",
        }
    )
    earlier = previous_issues(build_deps(), later)
    assert earlier is not None and len(earlier) == scheduled["issueCount"]


def test_a_scheduled_run_of_an_imported_dataset_reads_the_import_through_the_owners_role(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from iterate.api.app import schedule_name

    # Given a dataset whose only file sits in the owner's own (versioned) bucket, imported through their role
    iam = boto3.client("iam", region_name=REGION)
    scheduler_role = iam.create_role(RoleName="scheduler-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="iterate")
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine["arn"])
    monkeypatch.setenv("ITERATE_SCHEDULER_ROLE_ARN", scheduler_role)
    monkeypatch.setenv("ITERATE_SCHEDULE_GROUP", "iterate")
    s3 = machine["s3"]
    s3.create_bucket(Bucket="customer-data")
    s3.put_bucket_versioning(Bucket="customer-data", VersioningConfiguration={"Status": "Enabled"})
    first_body = orders_csv()
    first = s3.put_object(Bucket="customer-data", Key="exports/orders.csv", Body=first_body)["VersionId"]
    role = "arn:aws:iam::123456789012:role/iterate-reader"
    arn = machine["arn"].replace(":stateMachine:", ":execution:")
    with route_lambdas() as calls:
        _, created = _api("POST", "/datasets", {"name": "Theirs", "fileName": "orders.csv"})
        dataset_id = created["dataset"]["datasetId"]
        status, imported = _api(
            "POST",
            f"/datasets/{dataset_id}/imports",
            {"uri": "s3://customer-data/exports/orders.csv", "roleArn": role},
        )
        assert status == 202, imported
        assert admit_queued() == [imported["runId"]]
        assert _wait_for_end(machine["sfn"], f"{arn}:{imported['runId']}")["status"] == "SUCCEEDED"
        # And the owner's export is rewritten in place afterwards, with more rows
        lines = first_body.rstrip(b"\n").split(b"\n")
        second_body = first_body + b"\n".join(lines[1:21]) + b"\n"
        second = s3.put_object(Bucket="customer-data", Key="exports/orders.csv", Body=second_body)[
            "VersionId"
        ]
        # When the dataset's schedule fires (the scheduler invokes admission with the target's input)
        assert _api("PUT", f"/datasets/{dataset_id}/schedule", {"expression": "rate(7 days)"})[0] == 200
        schedule = boto3.client("scheduler", region_name=REGION).get_schedule(
            Name=schedule_name("alice", dataset_id), GroupName="iterate"
        )
        reset_caches()  # each function assumes the role afresh (a new container's credentials)
        calls.aws_calls.clear()
        with as_function("admission"):
            fired = load_handler("admission").lambda_handler(
                json.loads(schedule["Target"]["Input"]), FakeContext("iterate-admission")
            )
        assert fired["outcome"] == "queued", fired
        assert admit_queued() == [fired["runId"]]
        scheduled = _wait_for_end(machine["sfn"], f"{arn}:{fired['runId']}")
    # Then the scheduled run analysed the import's current version, read through the owner's role
    assert scheduled["status"] == "SUCCEEDED", calls.failures
    repo = DynamoRunRepository(machine["table"], "alice")
    record = repo.require_run(fired["runId"])
    assert record["trigger"] == "schedule"
    assert record["source"] == {
        "bucket": "customer-data",
        "key": "exports/orders.csv",
        "versionId": second,
        "roleArn": role,
    }
    assert repo.require_run(imported["runId"])["source"]["versionId"] == first != second
    assumed = {f for f, service, op, _ in calls.aws_calls if (service, op) == ("sts", "AssumeRole")}
    assert {"admission", "profile"} <= assumed
    status, run = _api("GET", f"/runs/{fired['runId']}")
    assert status == 200 and run["status"] == "SUCCEEDED" and run["trigger"] == "schedule"
    analysis_key = json.loads(scheduled["output"])["run"]["prefix"] + "analysis.json"
    analysis = json.loads(s3.get_object(Bucket=BUCKET, Key=analysis_key)["Body"].read())
    assert analysis["run"]["rowCount"] == len(lines) - 1 + 20
    # And the owner's bucket holds only their file; the dataset's source is still the import
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="customer-data")["Contents"]] == [
        "exports/orders.csv"
    ]
    dataset = repo.get_dataset(dataset_id)
    assert dataset is not None and dataset["latestUpload"]["roleArn"] == role
    assert "versionId" not in dataset["latestUpload"]
