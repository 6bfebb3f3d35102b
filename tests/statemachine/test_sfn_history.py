"""Change over time under moto's run of the real ASL: the run view's comparison, the history route, the
Iterate.IssueRegressed event, and accepted issues applied by the report step of a later run."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    UPLOAD_KEY,
    FakeContext,
    api_event,
    capture_events,
    load_handler,
    object_created_event,
    orders_csv,
    received_events,
    route_lambdas,
    run_execution,
)

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def _api(method: str, path: str, owner: str = "alice", body: Any = None, **kw: Any) -> tuple[int, Any]:
    response = load_handler("api").lambda_handler(
        api_event(method, path, owner=owner, body=body, **kw), FakeContext("iterate-api")
    )
    text = response.get("body") or ""
    return int(response["statusCode"]), (json.loads(text) if text else None)


def _worse(body: bytes) -> bytes:
    """The same orders with state misspellings, and more blank emails and customers."""
    rows = list(csv.reader(io.StringIO(body.decode())))
    for k in range(1, 9):
        rows[10 + k][3] = "calif." if k % 2 else "California"
        rows[30 + k][2] = ""
        rows[40 + k][1] = ""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def _run(machine: dict[str, Any], body: bytes) -> str:
    version = machine["s3"].put_object(Bucket=BUCKET, Key=UPLOAD_KEY, Body=body)["VersionId"]
    with route_lambdas() as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    return str(json.loads(done["output"])["run"]["runId"])


def test_a_worse_second_run_emits_one_regression_and_both_runs_are_in_the_history(
    machine: dict[str, Any],
) -> None:
    sqs, queue = capture_events("Iterate.IssueRegressed", "iterate-regressed")
    # Given a first run of the orders file: nothing to compare with, so no regression event
    first = _run(machine, orders_csv())
    assert received_events(sqs, queue) == []
    status, issues = _api("GET", f"/runs/{first}/issues")
    assert status == 200
    typos = next(i["issue"] for i in issues["issues"] if i["issue"]["id"] == "missing-email")
    # When alice accepts the blank emails through the API (bob cannot see the dataset)
    request = {"runId": first, "issueId": typos["id"], "reason": "legacy CRM spellings"}
    assert _api("POST", "/datasets/orders/accepted", owner="bob", body=request)[0] == 404
    status, acceptance = _api("POST", "/datasets/orders/accepted", body=request)
    assert status == 201 and acceptance["by"] == "alice" and acceptance["type"] == typos["type"]
    # And a worse file is uploaded and analysed
    second = _run(machine, _worse(orders_csv()))
    # Then exactly one Iterate.IssueRegressed event names the run and the issues that got worse
    (event,) = received_events(sqs, queue)
    assert event["source"] == "iterate" and event["detail-type"] == "Iterate.IssueRegressed"
    detail = event["detail"]
    assert detail["runId"] == second and detail["datasetId"] == "orders" and detail["owner"] == "alice"
    _, now = _api("GET", f"/runs/{second}/issues")
    found = {i["issue"]["id"]: i["issue"] for i in now["issues"]}
    worse = sorted(
        i
        for i, issue in found.items()
        if issue["change"] in ("new", "regressed")
        and (issue["accepted"] is None or issue["accepted"]["grown"])
    )
    assert worse and sorted(i["issueId"] for i in detail["issues"]) == worse
    assert detail["new"] + detail["regressed"] == len(worse)
    for item in detail["issues"]:
        assert item["affectedRows"] == found[item["issueId"]]["evidence"]["affectedRows"]
    # and it carries no data value (ids, types and counts only)
    text = json.dumps(event)
    assert "calif." not in text and "not-an-email" not in text and "@example.com" not in text
    # And the accepted issue is marked in the second run, grown (more rows with the same blank value)
    mark = found[typos["id"]]["accepted"]
    assert mark is not None and mark["reason"] == "legacy CRM spellings" and mark["grown"]
    # And the run view carries the comparison with the previous run
    status, run = _api("GET", f"/runs/{second}")
    assert status == 200 and run["comparison"]["regressed"] >= 1
    assert run["comparison"]["new"] == sum(1 for i in found.values() if i["change"] == "new")
    # And the history shows each issue over both runs, newest first, one page at a time
    status, history = _api("GET", "/datasets/orders/history", query={"limit": "1"})
    assert status == 200 and [r["runId"] for r in history["runs"]] == [second] and history["nextToken"]
    status, older = _api("GET", "/datasets/orders/history", query={"nextToken": history["nextToken"]})
    assert status == 200 and [r["runId"] for r in older["runs"]] == [first]
    status, both = _api("GET", "/datasets/orders/history")
    line = next(t for t in both["issues"] if t["issueId"] == typos["id"])
    assert [p["runId"] for p in line["points"]] == [second, first]
    assert [p["status"] for p in line["points"]] == ["regressed", "new"]
    assert line["points"][0]["accepted"] and not line["points"][1]["accepted"]
    assert line["points"][0]["affectedRows"] > line["points"][1]["affectedRows"]
    # And another owner gets 404 on the history; the acceptance can be listed and withdrawn by its owner only
    assert _api("GET", "/datasets/orders/history", owner="bob")[0] == 404
    status, listed = _api("GET", "/datasets/orders/accepted")
    assert status == 200 and [a["id"] for a in listed["accepted"]] == [acceptance["id"]]
    assert _api("DELETE", f"/datasets/orders/accepted/{acceptance['id']}", owner="bob")[0] == 404
    assert _api("DELETE", f"/datasets/orders/accepted/{acceptance['id']}")[0] == 204
    assert _api("DELETE", f"/datasets/orders/accepted/{acceptance['id']}")[0] == 404
    assert _api("GET", "/datasets/orders/accepted")[1]["accepted"] == []
