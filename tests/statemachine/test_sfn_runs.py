"""The real ASL run end to end by moto: an upload becomes a run whose analysis equals the local command's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REPO,
    UPLOAD_KEY,
    history,
    load_handler,
    object_created_event,
    orders_csv,
    received_events,
    route_lambdas,
    run_execution,
)

from iterate.contracts import CodeInvestigation
from iterate.storage.dynamo import DynamoRunRepository

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from infra.runtime import TABLE_ACCESS

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]

RUN_ARTIFACTS = (
    "data.parquet",
    "profile.json",
    "candidates.json",
    "understanding.json",
    "issues.json",
    "analysis.json",
    "report.html",
    "flags.csv",
)


def _sandbox_handler() -> Any:
    """The sandbox function's own handler (functions/sandbox, the sandbox engineer's)."""
    if not (REPO / "functions" / "sandbox" / "handler.py").exists():
        pytest.fail("functions/sandbox/handler.py is missing: the Map's RunInSandbox state has no function")
    return load_handler("sandbox").lambda_handler


def assert_table_actions_granted(calls: Any) -> None:
    """Every DynamoDB call a function made is an action its role holds (a missing one is AccessDenied on AWS)."""
    used = calls.table_actions()
    assert used, "no DynamoDB call was recorded"
    for function, actions in used.items():
        assert actions <= TABLE_ACCESS[function], (function, sorted(actions - TABLE_ACCESS[function]))


def _upload(machine: dict[str, Any], body: bytes, key: str = UPLOAD_KEY) -> str:
    return str(machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=body)["VersionId"])


def _artifact(machine: dict[str, Any], prefix: str, name: str) -> bytes:
    return bytes(machine["s3"].get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read())


def _issue_facts(analysis: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a run found, without what differs between two runs of the same file (ids, clocks, paths)."""
    facts = []
    for issue in analysis["issues"]:
        evidence = issue.get("evidence") or {}
        investigation = issue.get("investigation") or {}
        facts.append(
            (
                issue["id"],
                issue["type"],
                issue["severity"],
                issue["category"],
                issue["status"],
                tuple(issue["affectedColumns"]),
                issue.get("affectedRows"),
                evidence.get("affectedCells"),
                evidence.get("affectedRows"),
                bool(investigation.get("success")),
            )
        )
    return sorted(facts)


def test_upload_runs_to_success_and_matches_the_local_command(
    machine: dict[str, Any], tmp_path: Path
) -> None:
    from iterate.pipeline import run_local

    # Given an orders file uploaded to the user's prefix
    body = orders_csv()
    version = _upload(machine, body)
    # When S3's "Object Created" event reaches the state machine and the execution runs to its end
    with route_lambdas({"sandbox": _sandbox_handler()}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    # Then it SUCCEEDED through every step, investigations included
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    output = json.loads(done["output"])
    run_id, prefix = output["run"]["runId"], output["run"]["prefix"]
    called = {name for name, _ in calls}
    assert {"profile", "understand", "analyze", "investigate", "sandbox", "report"} <= called
    assert "record_failure" not in called
    # And each function called only the DynamoDB actions its role is granted (infra/runtime.py)
    assert_table_actions_granted(calls)
    # And step payloads carried keys and counts, never the data (Step Functions caps state at 256 KB)
    assert max(len(json.dumps(event)) for _, event in calls) < 32_000
    assert len(done["output"]) < 8_000
    # And the run record is complete and owned by the uploader
    run = DynamoRunRepository(machine["table"], "alice").require_run(run_id)
    assert run["status"] == "SUCCEEDED" and run["trigger"] == "s3" and run["mode"] == "offline"
    assert run["progress"]["percent"] == 100 and run["issueCount"] >= 3
    assert set(run["timingsMs"]) >= {"profile", "understand", "analyze", "report"}
    assert run["investigationsDone"] == run["investigationsTotal"]
    items = json.loads(
        machine["s3"].get_object(Bucket=BUCKET, Key=output["analysis"]["itemsKey"])["Body"].read()
    )
    assert len(items) == output["analysis"]["count"] and output["analysis"]["itemsKey"].startswith(prefix)
    # And the template proofs went to the sandbox in batches: what InvestigateEach read is what they left,
    # and the run took fewer sandbox invocations than it made proofs
    sandbox_events = [event for name, event in calls if name == "sandbox"]
    proofs = sum(len(event.get("items") or [event]) for event in sandbox_events)
    assert output["proofs"]["batches"] >= 1 and output["analysis"]["count"] < run["investigationsTotal"]
    assert len(sandbox_events) < proofs, (len(sandbox_events), proofs)
    assert len(DynamoRunRepository(machine["table"], "alice").list_issues(run_id)) == run["issueCount"]
    # And every artifact is in S3 under artifacts/<owner>/<dataset>/<run>/
    assert prefix == f"artifacts/alice/orders/{run_id}/"
    for name in RUN_ARTIFACTS:
        assert _artifact(machine, prefix, name), name
    analysis = json.loads(_artifact(machine, prefix, "analysis.json"))
    assert any((i.get("investigation") or {}).get("success") for i in analysis["issues"]), (
        "nothing was proven"
    )
    # And the analysis is the local command's on the same file (same issues, counts, flags)
    source = tmp_path / "orders.csv"
    source.write_bytes(body)
    local = json.loads(run_local(source, tmp_path / "local").model_dump_json())
    assert _issue_facts(analysis) == _issue_facts(local)
    assert analysis["severityCounts"] == local["severityCounts"]
    assert _artifact(machine, prefix, "flags.csv") == (tmp_path / "local" / "flags.csv").read_bytes()
    # And the upload itself is untouched, and the completion event announced the run with its counts
    upload = machine["s3"].get_object(Bucket=BUCKET, Key=UPLOAD_KEY)
    assert upload["VersionId"] == version and upload["Body"].read() == body
    (event,) = received_events(machine["sqs"], machine["queue_url"])
    assert event["detail-type"] == "Iterate Run Completed" and event["source"] == "iterate"
    assert event["detail"]["status"] == "SUCCEEDED" and event["detail"]["runId"] == run_id
    assert event["detail"]["severityCounts"] == analysis["severityCounts"]


def test_duplicate_event_starts_no_second_run(machine: dict[str, Any]) -> None:
    # Given an upload whose event was delivered once and ran
    version = _upload(machine, orders_csv())
    event = object_created_event(BUCKET, UPLOAD_KEY, version)
    with route_lambdas({"sandbox": _sandbox_handler()}):
        first = run_execution(machine["sfn"], machine["arn"], event)
        # When EventBridge delivers the same event again (at-least-once delivery)
        with route_lambdas({"sandbox": _sandbox_handler()}) as second_calls:
            second = run_execution(machine["sfn"], machine["arn"], event)
    # Then the second execution ends at DuplicateUpload after the profile step alone, and there is one run
    assert first["status"] == second["status"] == "SUCCEEDED"
    assert json.loads(second["output"])["duplicate"] is True
    assert [name for name, _ in second_calls] == ["profile"]
    entered = [
        e["stateEnteredEventDetails"]["name"]
        for e in history(machine["sfn"], second["executionArn"])
        if "stateEnteredEventDetails" in e
    ]
    assert entered[-1] == "DuplicateUpload"
    assert len(DynamoRunRepository(machine["table"], "alice").list_runs()) == 1


def test_malformed_file_fails_with_its_reason_and_the_upload_intact(machine: dict[str, Any]) -> None:
    # Given a "CSV" that is binary garbage
    garbage = bytes(range(256)) * 64
    version = _upload(machine, garbage, key="uploads/alice/broken/broken.csv")
    # When its event runs
    with route_lambdas({"sandbox": _sandbox_handler()}) as calls:
        done = run_execution(
            machine["sfn"],
            machine["arn"],
            object_created_event(BUCKET, "uploads/alice/broken/broken.csv", version),
        )
    # Then the execution FAILED through RecordFailure, without retrying the bad input
    assert done["status"] == "FAILED"
    assert [name for name, _ in calls] == ["profile", "record_failure"]
    (run,) = DynamoRunRepository(machine["table"], "alice").list_runs()
    assert run["status"] == "FAILED" and run["error"] == "DatasetReadError"
    assert "broken.csv" in run["reason"] and len(run["reason"]) > len("DatasetReadError: broken.csv")
    # And the upload is exactly as it was, and the failure was announced
    upload = machine["s3"].get_object(Bucket=BUCKET, Key="uploads/alice/broken/broken.csv")
    assert upload["VersionId"] == version and upload["Body"].read() == garbage
    (event,) = received_events(machine["sqs"], machine["queue_url"])
    assert event["detail"]["status"] == "FAILED" and event["detail"]["error"] == "DatasetReadError"


def test_sandbox_crash_on_one_investigation_leaves_the_run_succeeded(machine: dict[str, Any]) -> None:
    real_sandbox = _sandbox_handler()
    doomed: list[str] = []

    def crashing_sandbox(event: dict[str, Any], context: Any) -> Any:
        # The first investigation's code (and any retry of the same code) kills the sandbox function, a
        # batch's invocation (every proof of it then runs alone) or its own.
        codes = [item["code"] for item in event.get("items") or [event]]
        if not doomed:
            doomed.append(codes[0])
        if doomed[0] in codes:
            raise MemoryError("Runtime exited with error: signal: killed")
        return real_sandbox(event, context)

    # Given an upload, and a sandbox function that dies on one investigation
    version = _upload(machine, orders_csv())
    # When the run executes
    with route_lambdas({"sandbox": crashing_sandbox}):
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    # Then the run still SUCCEEDED, that investigation is recorded as a crash, and the others were proven
    assert done["status"] == "SUCCEEDED", done
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(_artifact(machine, prefix, "analysis.json"))
    outcomes = [i["investigation"] for i in analysis["issues"] if i.get("investigation")]
    crashed = [o for o in outcomes if not o["success"] and "MemoryError" in (o.get("error") or "")]
    assert len(crashed) == 1 and crashed[0]["stopped"] == "crash"
    assert any(o["success"] for o in outcomes)
    run = DynamoRunRepository(machine["table"], "alice").list_runs()[0]
    assert run["status"] == "SUCCEEDED"


def test_cancelled_run_stops_at_the_next_step_and_stays_cancelled(machine: dict[str, Any]) -> None:
    real_understand = load_handler("understand").lambda_handler

    def understand_then_cancelled(event: dict[str, Any], context: Any) -> Any:
        # The owner's DELETE /runs/{id} lands while UnderstandDataset is running (before StopExecution does).
        result = real_understand(event, context)
        repo = DynamoRunRepository(machine["table"], event["run"]["owner"])
        repo.transition(event["run"]["runId"], from_status="RUNNING", to_status="CANCELLED")
        return result

    # Given an upload whose run gets cancelled during UnderstandDataset
    version = _upload(machine, orders_csv())
    with route_lambdas({"sandbox": _sandbox_handler(), "understand": understand_then_cancelled}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    # Then the next step refuses to work on it, nothing is investigated, and the run stays CANCELLED
    assert [name for name, _ in calls] == ["profile", "understand", "analyze", "record_failure"]
    assert done["status"] == "FAILED"
    (run,) = DynamoRunRepository(machine["table"], "alice").list_runs()
    assert run["status"] == "CANCELLED"
    (event,) = received_events(machine["sqs"], machine["queue_url"])
    assert event["detail"]["status"] == "CANCELLED" and event["detail"]["error"] == "RunCancelledError"


def test_a_failing_code_generator_fails_its_investigation_not_the_run(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from iterate import pipeline
    from iterate.investigate import GenerationFailed

    real = pipeline.generate_code_step
    doomed: list[str] = []

    def generate(ctx: Any, issue_id: str, attempts: Any) -> Any:
        # The generator itself breaks on the first issue it is asked about (as an agent with no template would).
        if not doomed:
            doomed.append(issue_id)
        if issue_id in doomed:
            raise GenerationFailed("no template and no LLM for this issue")
        return real(ctx, issue_id, attempts)

    # Given an upload and a code generator that fails on one issue
    monkeypatch.setattr(pipeline, "generate_code_step", generate)
    version = _upload(machine, orders_csv())
    # When the run executes
    with route_lambdas({"sandbox": _sandbox_handler()}):
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    # Then the run SUCCEEDED and that one issue says why its investigation failed
    assert done["status"] == "SUCCEEDED", DynamoRunRepository(machine["table"], "alice").list_runs()
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(_artifact(machine, prefix, "analysis.json"))
    failed = next(i for i in analysis["issues"] if i["id"] == doomed[0])["investigation"]
    assert failed["success"] is False and "code generator failed" in failed["error"]
    assert any(i["investigation"] and i["investigation"]["success"] for i in analysis["issues"])


def test_an_upload_over_the_size_limit_fails_naming_the_limit_before_it_is_downloaded(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from awsenv import reset_caches

    # Given a deployment that takes files up to 1,000 bytes, and a 4 KB upload
    monkeypatch.setenv("ITERATE_MAX_FILE_BYTES", "1000")
    reset_caches()
    body = b"id,name\n" + b"".join(b"%d,name %d\n" % (i, i) for i in range(400))
    version = _upload(machine, body, key="uploads/alice/big/big.csv")
    from boto3.s3.transfer import S3Transfer

    downloads: list[str] = []
    real = S3Transfer.download_file
    monkeypatch.setattr(
        S3Transfer, "download_file", lambda self, *a, **k: downloads.append("called") or real(self, *a, **k)
    )
    # When its event runs
    with route_lambdas({"sandbox": _sandbox_handler()}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, "uploads/alice/big/big.csv", version)
        )
    # Then the run FAILED through RecordFailure, with a reason naming the limit, its value and how to raise it
    assert done["status"] == "FAILED"
    assert [name for name, _ in calls] == ["profile", "record_failure"]
    (run,) = DynamoRunRepository(machine["table"], "alice").list_runs()
    assert run["status"] == "FAILED" and run["error"] == "DatasetReadError"
    assert "ITERATE_MAX_FILE_BYTES" in run["reason"] and "1000" in run["reason"]
    assert f"{len(body) / 1000:.1f} KB" in run["reason"]
    # And nothing was downloaded; the upload is untouched
    assert downloads == []
    upload = machine["s3"].get_object(Bucket=BUCKET, Key="uploads/alice/big/big.csv")
    assert upload["VersionId"] == version and upload["Body"].read() == body


def test_a_batch_keeps_each_proofs_own_verdict_and_leaves_what_it_did_not_settle_to_the_map(
    machine: dict[str, Any],
) -> None:
    real_sandbox = _sandbox_handler()
    batches: list[list[str]] = []
    alone: list[str] = []

    def sandbox(event: dict[str, Any], context: Any) -> Any:
        if "items" not in event:
            alone.append(event["code"])
            return real_sandbox(event, context)
        # A batch answer where the first proof succeeded in the shared process, the second was not settled
        # (no time left for it alone) and the third timed out in a run of its own
        answer = real_sandbox(event, context)
        codes = [item["code"] for item in event["items"]]
        batches.append(codes)
        if len(codes) >= 3:
            answer["items"][1] = None
            answer["items"][2] = CodeInvestigation(
                code=codes[2], success=False, error="timed out", stopped="timeout"
            ).model_dump(mode="json")
        return answer

    # Given an upload, and a sandbox function answering batches as above
    version = _upload(machine, orders_csv())
    # When the run executes
    with route_lambdas({"sandbox": sandbox}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    (first_batch,) = [b for b in batches if len(b) >= 3][:1]
    # Then the unsettled proof ran alone through InvestigateEach; the settled ones did not run again
    assert first_batch[1] in alone
    assert first_batch[0] not in alone
    # And each proof's verdict is its own in the report: the timeout recorded as its first attempt
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(_artifact(machine, prefix, "analysis.json"))
    by_code: dict[str, list[dict[str, Any]]] = {}
    for issue in analysis["issues"]:
        if issue.get("investigation"):
            kept = json.loads(_artifact(machine, prefix, f"investigations/{issue['id']}.attempts.json"))
            for attempt in kept["attempts"]:
                by_code.setdefault(attempt["code"], []).append(attempt)
    assert by_code[first_batch[0]][0]["success"] and by_code[first_batch[0]][0]["batch_size"] >= 3
    assert by_code[first_batch[2]][0]["stopped"] == "timeout" and by_code[first_batch[2]][0]["attempts"] == 1
    assert by_code[first_batch[1]][0]["success"] and by_code[first_batch[1]][0]["batch_size"] is None
