"""The REST API: owner scoping (404 for others' ids), validation errors, runs, reports, schedules, follow-ups."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from awsenv import BUCKET, REGION, admit_queued

from iterate.api.models import ErrorBody
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

ISSUE = {
    "id": "I1",
    "type": "inconsistent_category",
    "severity": "medium",
    "description": "The state column spells the same state in several ways",
    "affectedColumns": ["state"],
    "suggestedAction": "Standardise the spellings",
    "category": "smart_fixes",
    "affectedRows": 3,
    "evidence": {
        "affectedCells": 3,
        "affectedRows": 3,
        "affectedShare": 0.3,
        "examples": [{"row": 1, "column": "state", "value": "calif.", "expected": "CA"}],
        "stats": {"groups": {"CA": ["CA", "calif.", "California"]}},
    },
}


def _uploaded_dataset(call: Any, world: dict[str, Any], owner: str = "alice") -> str:
    """Create a dataset through the API and record an upload for it, as the upload's run would."""
    status, body = call("POST", "/datasets", owner=owner, body={"name": "Orders", "fileName": "orders.csv"})
    assert status == 201, body
    dataset_id = body["dataset"]["datasetId"]
    key = body["upload"]["key"]
    version = world["s3"].put_object(Bucket=BUCKET, Key=key, Body=b"a,b\n1,2\n")["VersionId"]
    DynamoRunRepository(world["table"], owner).record_upload(
        dataset_id, {"bucket": BUCKET, "key": key, "versionId": version}
    )
    return str(dataset_id)


def test_create_dataset_returns_a_presigned_upload_under_the_callers_prefix(call: Any) -> None:
    # When alice creates a dataset
    status, body = call("POST", "/datasets", body={"name": "Orders", "fileName": "orders.csv"})
    # Then she gets a presigned POST for uploads/<her sub>/<dataset>/orders.csv, and the dataset is listed for
    # her only
    assert status == 201
    key = body["upload"]["key"]
    assert key == f"uploads/alice/{body['dataset']['datasetId']}/orders.csv"
    assert body["upload"]["method"] == "POST" and body["upload"]["fields"]["key"] == key
    # whose policy holds the key and a size range up to ITERATE_MAX_FILE_BYTES (S3 refuses a larger file)
    policy = json.loads(base64.b64decode(body["upload"]["fields"]["policy"]))
    assert {"key": key} in policy["conditions"]
    assert ["content-length-range", 1, 5_000_000_000] in policy["conditions"]
    assert body["upload"]["maxBytes"] == 5_000_000_000
    assert [d["datasetId"] for d in call("GET", "/datasets")[1]["datasets"]] == [body["dataset"]["datasetId"]]
    assert call("GET", "/datasets", owner="bob")[1]["datasets"] == []


def test_another_owners_ids_answer_404_on_every_route(call: Any, world: dict[str, Any]) -> None:
    # Given alice's dataset, a finished run with an issue, and a schedule
    dataset_id = _uploaded_dataset(call, world)
    repo = DynamoRunRepository(world["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": dataset_id, "status": "SUCCEEDED", "reportKey": "k"})
    repo.put_issues("r1", [ISSUE])
    assert call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": "rate(1 day)"})[0] == 200
    # When bob uses alice's ids on every route
    attempts = [
        ("GET", f"/datasets/{dataset_id}", None),
        ("GET", f"/datasets/{dataset_id}/runs", None),
        ("POST", f"/datasets/{dataset_id}/runs", {}),
        ("PUT", f"/datasets/{dataset_id}/schedule", {"expression": "rate(1 hour)"}),
        ("DELETE", f"/datasets/{dataset_id}/schedule", None),
        ("GET", "/runs/r1", None),
        ("DELETE", "/runs/r1", None),
        ("GET", "/runs/r1/issues", None),
        ("GET", "/runs/r1/report", None),
        ("POST", "/issues/r1.I1/followup", {}),
    ]
    # Then each one is 404 (not 403: the ids' existence is not revealed), and alice's data is unchanged
    for method, path, body in attempts:
        status, answer = call(method, path, owner="bob", body=body)
        assert status == 404, (method, path, status, answer)
        ErrorBody.model_validate(answer)  # the documented error shape
    assert call("GET", "/runs/r1")[1]["status"] == "SUCCEEDED"
    assert call("GET", f"/datasets/{dataset_id}")[1]["dataset"]["schedule"]["expression"] == "rate(1 day)"


def test_requests_without_an_authenticated_user_are_refused(call: Any) -> None:
    assert call("GET", "/datasets", owner=None)[0] == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x"}, "body.fileName"),
        ({"name": "x", "fileName": "../../etc/passwd"}, "body.fileName"),
        ({"name": "x", "fileName": "orders.exe"}, "body.fileName"),
        ({"name": "", "fileName": "orders.csv"}, "body.name"),
        ({"name": "x", "fileName": "orders.csv", "owner": "bob"}, "body.owner"),
    ],
)
def test_invalid_bodies_get_422_naming_the_field(call: Any, body: dict[str, Any], field: str) -> None:
    # When a body breaks the model, Then the answer is 422 and says which field and why
    status, answer = call("POST", "/datasets", body=body)
    assert status == 422
    ErrorBody.model_validate(answer)
    assert any(e["field"] == field and e["problem"] for e in answer["errors"]), answer


def test_malformed_json_gets_400(call: Any) -> None:
    status, answer = call("POST", "/datasets", raw_body="{not json")
    assert status == 400 and "not valid JSON" in answer["message"]


def test_start_run_queues_an_execution_for_the_latest_upload(call: Any, world: dict[str, Any]) -> None:
    # Given a dataset with an upload
    dataset_id = _uploaded_dataset(call, world)
    # When alice starts a run with instructions
    status, run = call(
        "POST", f"/datasets/{dataset_id}/runs", body={"instructions": "ignore the notes column"}
    )
    # Then a QUEUED run exists, first in alice's queue
    assert status == 202 and run["status"] == "QUEUED" and run["trigger"] == "api" and run["queuePlace"] == 1
    # And once admission takes it, an execution named after it got the StartRunRequest
    assert admit_queued() == [run["runId"]]
    execution = world["sfn"].describe_execution(
        executionArn=f"{world['machine'].replace(':stateMachine:', ':execution:')}:{run['runId']}"
    )
    sent = json.loads(execution["input"])
    assert sent["owner"] == "alice" and sent["datasetId"] == dataset_id and sent["runId"] == run["runId"]
    assert sent["instructions"] == "ignore the notes column" and sent["source"]["key"].endswith("orders.csv")
    assert call("GET", f"/runs/{run['runId']}")[1]["progress"]["percent"] == 0


def test_start_run_without_an_upload_is_a_conflict(call: Any) -> None:
    _, created = call("POST", "/datasets", body={"name": "Orders", "fileName": "orders.csv"})
    status, answer = call("POST", f"/datasets/{created['dataset']['datasetId']}/runs", body={})
    assert status == 409 and "no upload" in answer["message"]


def test_cancel_moves_a_running_run_to_cancelled_once(call: Any, world: dict[str, Any]) -> None:
    # Given a running run
    dataset_id = _uploaded_dataset(call, world)
    _, run = call("POST", f"/datasets/{dataset_id}/runs", body={})
    repo = DynamoRunRepository(world["table"], "alice")
    repo.transition(run["runId"], from_status="QUEUED", to_status="RUNNING")
    # When alice cancels it twice
    first = call("DELETE", f"/runs/{run['runId']}")
    second = call("DELETE", f"/runs/{run['runId']}")
    # Then the first cancels it and the second is a conflict
    assert first[0] == 200 and first[1]["status"] == "CANCELLED"
    assert second[0] == 409


def test_report_link_only_for_a_finished_run(call: Any, world: dict[str, Any]) -> None:
    repo = DynamoRunRepository(world["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "RUNNING"})
    assert call("GET", "/runs/r1/report")[0] == 409
    repo.transition(
        "r1", from_status="RUNNING", to_status="SUCCEEDED", reportKey="artifacts/alice/d1/r1/report.html"
    )
    status, link = call("GET", "/runs/r1/report")
    assert status == 200 and "artifacts/alice/d1/r1/report.html" in link["url"]


def test_schedule_targets_admission_with_the_dataset(call: Any, world: dict[str, Any]) -> None:
    import boto3

    from iterate.api.app import schedule_name

    # Given a dataset with an upload
    dataset_id = _uploaded_dataset(call, world)
    # When alice sets a daily schedule, changes it, then deletes it
    status, schedule = call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": "rate(1 day)"})
    assert status == 200
    assert call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": "cron(0 6 * * ? *)"})[0] == 200
    scheduler = boto3.client("scheduler", region_name=REGION)
    created = scheduler.get_schedule(Name=schedule_name("alice", dataset_id), GroupName="iterate-schedules")
    # Then EventBridge Scheduler hands admission a schedule-triggered run of that dataset
    assert created["ScheduleExpression"] == "cron(0 6 * * ? *)"
    assert created["Target"]["Arn"].endswith(":function:iterate-admission")  # queued like every run
    sent = json.loads(created["Target"]["Input"])
    assert sent == {"trigger": "schedule", "owner": "alice", "datasetId": dataset_id}
    assert call("DELETE", f"/datasets/{dataset_id}/schedule")[0] == 204
    assert call("DELETE", f"/datasets/{dataset_id}/schedule")[0] == 404
    assert schedule["scheduleName"] == schedule_name("alice", dataset_id)


def test_bad_schedule_expression_is_422(call: Any, world: dict[str, Any]) -> None:
    dataset_id = _uploaded_dataset(call, world)
    status, answer = call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": "every day"})
    assert status == 422 and answer["errors"][0]["field"] == "body.expression"


def test_followup_asks_one_question_at_a_time_and_maps_the_answer(call: Any, world: dict[str, Any]) -> None:
    # Given a run with a smart-fix issue
    repo = DynamoRunRepository(world["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "SUCCEEDED"})
    repo.put_issues("r1", [ISSUE])
    # When alice opens the conversation (twice: the same open question comes back)
    status, first = call("POST", "/issues/r1.I1/followup", body={})
    again = call("POST", "/issues/r1.I1/followup", body={})[1]
    assert status == 200 and first["turn"] == 0 and not first["done"]
    assert again == first
    options = [o["key"] for o in first["question"]["options"]]
    assert 2 <= len(options) <= 4
    # And answers with something that is not an option
    assert call("POST", "/issues/r1.I1/followup", body={"answer": "not-an-option"})[0] == 409
    # And then with a real option
    status, answered = call("POST", "/issues/r1.I1/followup", body={"answer": options[0]})
    # Then the answer is kept and either decides a fix action or opens the next question
    assert status == 200
    assert answered["action"] is not None or answered["turn"] == 1
    (turn0, *_) = repo.list_followups("r1.I1")
    assert turn0["answer"] == options[0]


def test_followup_of_an_unknown_issue_is_404(call: Any) -> None:
    assert call("POST", "/issues/r404.I1/followup", body={})[0] == 404
    assert call("POST", "/issues/no-dot/followup", body={})[0] == 404


def test_openapi_document_is_up_to_date(repo_root: Any) -> None:
    from iterate.api.openapi import render

    # Given the exported document in the repo, When the routes are rendered again, Then nothing changed
    exported = (repo_root / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert exported == render(), "run: python -m iterate.api.openapi docs/openapi.json"
    paths = json.loads(exported)["paths"]
    assert {
        "/datasets",
        "/runs/{run_id}",
        "/issues/{issue_ref}/followup",
        "/datasets/{dataset_id}/schedule",
    } <= set(paths)


def test_a_run_whose_execution_cannot_start_keeps_waiting_and_gives_its_slot_back(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import reset_caches

    from iterate.aws import admission
    from iterate.storage.admission import SlotLeases

    # Given a state machine ARN that does not exist (and waiting messages retried at once)
    monkeypatch.setattr(admission, "MAX_RETRY_S", 0)
    dataset_id = _uploaded_dataset(call, world)
    _status, run = call("POST", f"/datasets/{dataset_id}/runs", body={})
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", world["machine"] + "-gone")
    reset_caches()
    # When admission tries to start it, Then nothing starts, the run still waits and holds no slot
    assert admit_queued(rounds=3) == []
    assert call("GET", f"/runs/{run['runId']}")[1]["status"] == "QUEUED"
    assert SlotLeases(world["table"]).held() == 0 and SlotLeases(world["table"]).held("alice") == 0
    # And once the state machine is there again, it starts
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", world["machine"])
    reset_caches()
    assert admit_queued() == [run["runId"]]


# --- pagination, runs by dataset, idempotency, per-owner run limits --------------------------------------


def _pages(call: Any, path: str, field: str, owner: str = "alice", limit: int = 2) -> list[list[Any]]:
    """Every page of a list route, following nextToken."""
    pages: list[list[Any]] = []
    query: dict[str, str] = {"limit": str(limit)}
    while True:
        status, body = call("GET", path, owner=owner, query=query)
        assert status == 200, body
        pages.append(body[field])
        if not body.get("nextToken"):
            return pages
        query = {"limit": str(limit), "nextToken": body["nextToken"]}


def test_list_routes_page_with_limit_and_next_token(call: Any, world: dict[str, Any]) -> None:
    # Given five datasets, and a run with five issues
    for i in range(5):
        assert call("POST", "/datasets", body={"name": f"D{i}", "fileName": "a.csv"})[0] == 201
    repo = DynamoRunRepository(world["table"], "alice")
    repo.create_run({"runId": "r1", "datasetId": "d1", "status": "SUCCEEDED"})
    repo.put_issues("r1", [{**ISSUE, "id": f"I{i}"} for i in range(5)])
    # When each list is read two at a time
    datasets = _pages(call, "/datasets", "datasets")
    issues = _pages(call, "/runs/r1/issues", "issues")
    # Then every item comes exactly once, in pages of at most two
    assert sorted(d["name"] for page in datasets for d in page) == [f"D{i}" for i in range(5)]
    assert sorted(i["issue"]["id"] for page in issues for i in page) == [f"I{i}" for i in range(5)]
    assert all(len(page) <= 2 for page in datasets + issues) and len(datasets) >= 3
    # And a limit out of range, or a token that is not one, is refused
    assert call("GET", "/datasets", query={"limit": "0"})[0] == 422
    assert call("GET", "/datasets", query={"limit": "1000"})[0] == 422
    assert call("GET", "/datasets", query={"nextToken": "garbage"})[0] == 400


def test_a_datasets_runs_are_listed_newest_first_through_the_index(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from iterate.storage import dynamo

    # Given two datasets of alice's with runs a day apart, and every DynamoDB query recorded
    repo = DynamoRunRepository(world["table"], "alice")
    for i in range(5):
        repo.create_run({"runId": f"a{i}", "datasetId": "dA", "startedAt": f"2026-11-0{i + 1}T00:00:00Z"})
        repo.create_run({"runId": f"b{i}", "datasetId": "dB", "startedAt": f"2026-11-0{i + 1}T00:00:00Z"})
    repo.put_dataset({"datasetId": "dA", "name": "A"})
    queries: list[dict[str, Any]] = []
    real_page = dynamo.DynamoRunRepository._page

    def recording(self: Any, kwargs: dict[str, Any], *args: Any, **kw: Any) -> Any:
        queries.append(kwargs)
        return real_page(self, kwargs, *args, **kw)

    monkeypatch.setattr(dynamo.DynamoRunRepository, "_page", recording)
    # When alice lists dA's runs two at a time
    pages = _pages(call, "/datasets/dA/runs", "runs")
    # Then she gets dA's runs only, newest first
    assert [r["runId"] for page in pages for r in page] == ["a4", "a3", "a2", "a1", "a0"]
    # And each page was a query of GSI1 for (alice, dA): a key lookup, not a filter over all her runs
    assert queries and all(
        q["IndexName"] == "GSI1" and "FilterExpression" not in q and q["ScanIndexForward"] is False
        for q in queries
    )
    # And the dataset's detail shows the newest page of them
    detail = call("GET", "/datasets/dA")[1]
    assert [r["runId"] for r in detail["runs"]][:2] == ["a4", "a3"]
    # And bob neither sees alice's dataset's runs nor gets in with her page token
    assert call("GET", "/datasets/dA/runs", owner="bob")[0] == 404
    _, first = call("GET", "/datasets/dA/runs", query={"limit": "1"})
    bob_dataset = {"datasetId": "dA", "name": "bob's own dA"}
    DynamoRunRepository(world["table"], "bob").put_dataset(bob_dataset)
    status, _ = call("GET", "/datasets/dA/runs", owner="bob", query={"nextToken": first["nextToken"]})
    assert status == 400


def test_the_same_idempotency_key_answers_with_the_same_run(call: Any, world: dict[str, Any]) -> None:
    dataset_id = _uploaded_dataset(call, world)
    body = {"instructions": "amounts are in EUR"}
    # When alice's client sends the same start twice with one Idempotency-Key (a retry after a timeout)
    first = call("POST", f"/datasets/{dataset_id}/runs", body=body, headers={"Idempotency-Key": "k-1"})
    second = call("POST", f"/datasets/{dataset_id}/runs", body=body, headers={"idempotency-key": "k-1"})
    # Then both answers are the same run, and one execution started
    assert first[0] == second[0] == 202
    assert first[1]["runId"] == second[1]["runId"]
    assert len(DynamoRunRepository(world["table"], "alice").list_runs(dataset_id)) == 1
    assert admit_queued() == [first[1]["runId"]]
    assert len(world["sfn"].list_executions(stateMachineArn=world["machine"])["executions"]) == 1
    # And the key with another body is a conflict, another key starts another run, and bob's k-1 is his own
    other = call("POST", f"/datasets/{dataset_id}/runs", body={}, headers={"Idempotency-Key": "k-1"})
    assert other[0] == 409 and "Idempotency-Key" in other[1]["message"]
    assert (
        call("POST", f"/datasets/{dataset_id}/runs", body=body, headers={"Idempotency-Key": "k-2"})[0] == 202
    )
    bob_dataset = _uploaded_dataset(call, world, owner="bob")
    status, bobs = call(
        "POST", f"/datasets/{bob_dataset}/runs", owner="bob", body=body, headers={"Idempotency-Key": "k-1"}
    )
    assert status == 202 and bobs["runId"] != first[1]["runId"]


def test_runs_over_the_owner_limit_wait_in_the_queue_and_start_when_a_slot_frees(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import reset_caches

    from iterate.aws import admission

    # Given a limit of two runs in progress per owner (and waiting messages retried at once)
    monkeypatch.setenv("ITERATE_MAX_CONCURRENT_RUNS", "2")
    monkeypatch.setattr(admission, "MAX_RETRY_S", 0)
    reset_caches()
    dataset_id = _uploaded_dataset(call, world)
    # When alice starts three runs
    answers = [call("POST", f"/datasets/{dataset_id}/runs", body={}) for _ in range(3)]
    # Then none is refused: all three are queued, in order
    assert [status for status, _ in answers] == [202, 202, 202]
    assert [a["queuePlace"] for _, a in answers] == [1, 2, 3]
    first, second, third = (a["runId"] for _, a in answers)
    # And admission starts two; the third waits, first in her queue, and GET /quota says so
    assert admit_queued() == [first, second]
    assert len(world["sfn"].list_executions(stateMachineArn=world["machine"])["executions"]) == 2
    waiting = call("GET", f"/runs/{third}")[1]
    assert waiting["status"] == "QUEUED" and waiting["queuePlace"] == 1
    quota = call("GET", "/quota")[1]
    assert quota["runsInProgress"] == {"used": 2, "limit": 2} and quota["runsWaiting"] == 1
    assert quota["runs"]["used"] == 3
    # And bob is not held up by alice's runs
    bob_dataset = _uploaded_dataset(call, world, owner="bob")
    bobs = call("POST", f"/datasets/{bob_dataset}/runs", owner="bob", body={})[1]
    assert admit_queued() == [bobs["runId"]]
    # And once alice cancels one, her third run starts
    assert call("DELETE", f"/runs/{first}")[0] == 200
    assert admit_queued() == [third]
    assert call("GET", f"/runs/{third}")[1]["queuePlace"] is None


def test_a_run_over_a_daily_quota_is_a_429_saying_which_quota_and_when_it_resets(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import reset_caches

    # Given a quota of two runs a day
    monkeypatch.setenv("ITERATE_QUOTA_RUNS_PER_DAY", "2")
    reset_caches()
    dataset_id = _uploaded_dataset(call, world)
    assert [call("POST", f"/datasets/{dataset_id}/runs", body={})[0] for _ in range(2)] == [202, 202]
    # When alice starts a third
    status, answer = call("POST", f"/datasets/{dataset_id}/runs", body={})
    # Then it is refused with 429 naming the quota, its limit, her use and the reset; no run is left of it
    assert status == 429
    assert (answer["quota"], answer["limit"], answer["used"]) == ("runs", 2, 2)
    assert answer["resetsAt"].endswith("T00:00:00Z") and "daily quota of runs" in answer["message"]
    assert len(DynamoRunRepository(world["table"], "alice").list_runs(dataset_id)) == 2
    # And bob's quota is his own
    bob_dataset = _uploaded_dataset(call, world, owner="bob")
    assert call("POST", f"/datasets/{bob_dataset}/runs", owner="bob", body={})[0] == 202


def test_one_owner_flooding_the_api_is_throttled_and_the_others_are_not(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import reset_caches

    # Given a per-owner rate of 1 request a second with bursts of 3
    monkeypatch.setenv("ITERATE_API_OWNER_RPS", "1")
    monkeypatch.setenv("ITERATE_API_OWNER_BURST", "3")
    reset_caches()
    # When alice sends five requests at once
    statuses = [call("GET", "/datasets")[0] for _ in range(5)]
    # Then her burst passes and the rest are 429s with a Retry-After, while bob's request passes
    assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:]
    assert call("GET", "/datasets", owner="bob")[0] == 200


def test_schedules_have_a_dead_letter_queue_and_a_minimum_interval(
    call: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from awsenv import reset_caches

    from iterate.api.app import schedule_name

    # Given a deployment with a schedule DLQ and a minimum of 30 minutes between runs
    dlq = boto3.client("sqs", region_name=REGION).create_queue(QueueName="schedule-dlq")["QueueUrl"]
    dlq_arn = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=dlq, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    monkeypatch.setenv("ITERATE_SCHEDULE_DLQ_ARN", dlq_arn)
    monkeypatch.setenv("ITERATE_MIN_SCHEDULE_MINUTES", "30")
    reset_caches()
    dataset_id = _uploaded_dataset(call, world)
    # When a schedule fires more often than that (every minute, every 10 minutes, a cron twice an hour)
    for expression in ("rate(1 minute)", "rate(10 minutes)", "cron(0,15 * * * ? *)"):
        status, answer = call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": expression})
        # Then it is refused with 422 naming the field, the allowed minimum and what to use instead
        assert status == 422, expression
        assert answer["errors"][0]["field"] == "body.expression"
        assert (
            "at most one run every 30 minutes" in answer["message"]
            and "rate(30 minutes)" in answer["message"]
        )
    # And an allowed one is created with the dead-letter queue on its target
    assert call("PUT", f"/datasets/{dataset_id}/schedule", body={"expression": "rate(1 hour)"})[0] == 200
    created = boto3.client("scheduler", region_name=REGION).get_schedule(
        Name=schedule_name("alice", dataset_id), GroupName="iterate-schedules"
    )
    assert created["Target"]["DeadLetterConfig"] == {"Arn": dlq_arn}
