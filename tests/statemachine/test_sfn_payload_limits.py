"""Step Functions' 256 KiB state limit, through the real ASL: large sandbox results travel as S3 keys, and the
harness fails any execution in which a state's output reached the limit (AWS would fail it, uncaught)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REPO,
    STATE_LIMIT_BYTES,
    UPLOAD_KEY,
    StateOverLimitError,
    load_handler,
    object_created_event,
    orders_csv,
    route_lambdas,
    run_execution,
)

from iterate.contracts import CodeInvestigation

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from infra.runtime import SANDBOX_INLINE_RESULT_BYTES, SANDBOX_MAX_OUTPUT_BYTES

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]

# Code whose result is ~150 KB (over the inline cap, under the output cap) and ~600 KB (over both).
LARGE = "result = {'affected_rows': 2, 'examples': ['x' * 1000] * 150}"
HUGE = "result = {'affected_rows': 3, 'examples': ['y' * 1000] * 600}"


def _upload(machine: dict[str, Any]) -> str:
    return str(machine["s3"].put_object(Bucket=BUCKET, Key=UPLOAD_KEY, Body=orders_csv())["VersionId"])


def _code_for_two_issues(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The first issue asked about gets LARGE, the second HUGE; the others their usual template."""
    from iterate import pipeline

    real = pipeline.generate_code_step
    chosen: dict[str, str] = {}

    def generate(ctx: Any, issue_id: str, attempts: Any) -> Any:
        if issue_id not in chosen and len(chosen) < 2:
            chosen[issue_id] = LARGE if not chosen else HUGE
        if issue_id in chosen:
            return None if attempts else chosen[issue_id]
        return real(ctx, issue_id, attempts)

    monkeypatch.setattr(pipeline, "generate_code_step", generate)
    return chosen


def test_a_large_sandbox_result_reaches_the_report_through_s3_and_every_state_stays_small(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the sandbox function's deployed caps, and two investigations whose code returns 150 KB and 600 KB
    monkeypatch.setenv("ITERATE_SANDBOX_MAX_OUTPUT_BYTES", str(SANDBOX_MAX_OUTPUT_BYTES))
    monkeypatch.setenv("ITERATE_SANDBOX_INLINE_RESULT_BYTES", str(SANDBOX_INLINE_RESULT_BYTES))
    monkeypatch.setenv("ITERATE_INVESTIGATION_BATCH", "0")  # each proof its own invocation (RunInSandbox)
    chosen = _code_for_two_issues(monkeypatch)
    version = _upload(machine)
    # When the upload runs through the real state machine with the real sandbox handler
    with route_lambdas({"sandbox": load_handler("sandbox").lambda_handler}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    # Then the run SUCCEEDED, and no state (Map children included) came near Step Functions' limit
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    sizes = dict(calls.state_sizes)
    assert {"RunInSandbox", "RecordAttempt", "GenerateCode", "InvestigateEach"} <= sizes.keys(), sorted(sizes)
    biggest = max(size for _, size in calls.state_sizes)
    assert biggest < SANDBOX_INLINE_RESULT_BYTES + 16 * 1024 < STATE_LIMIT_BYTES, biggest
    # And the 150 KB result came back as its key, the state passed the key, and the object holds the result
    large_issue, huge_issue = chosen
    refs = [
        e["sandboxResult"]
        for name, e in calls
        if name == "investigate" and e.get("action") == "record" and "resultKey" in e["sandboxResult"]
    ]
    assert len(refs) == 1 and f"investigations/{large_issue}.attempt-1.result.json" in refs[0]["resultKey"]
    stored = machine["s3"].get_object(Bucket=BUCKET, Key=refs[0]["resultKey"])["Body"].read()
    assert len(stored) == refs[0]["resultBytes"] > SANDBOX_INLINE_RESULT_BYTES
    # And the report holds that proof whole, while the 600 KB one was refused by the function's output cap
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(
        machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "analysis.json")["Body"].read()
    )
    by_id = {i["id"]: i for i in analysis["issues"]}
    large = CodeInvestigation.model_validate(by_id[large_issue]["investigation"])
    assert large.success and large.output["affected_rows"] == 2 and len(large.output["examples"]) == 150
    huge = CodeInvestigation.model_validate(by_id[huge_issue]["investigation"])
    assert huge.success is False and huge.stopped == "output_size"


def test_the_harness_fails_a_run_whose_state_passes_the_limit(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a sandbox that returns a 600 KB result inline (what the function did before results went to S3)
    monkeypatch.setenv("ITERATE_INVESTIGATION_BATCH", "0")

    def inline_600kb(event: dict[str, Any], context: Any) -> Any:
        output = {"affected_rows": 1, "examples": ["z" * 1000] * 600}
        return CodeInvestigation(code=event["code"], success=True, output=output).model_dump(mode="json")

    version = _upload(machine)
    # When a run executes (moto's interpreter lets States.ALL catch States.DataLimitExceeded; AWS does not)
    with pytest.raises(StateOverLimitError, match="RunInSandbox"), route_lambdas({"sandbox": inline_600kb}):
        run_execution(machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version))


def test_a_batch_result_over_the_inline_cap_travels_as_its_key_and_settles_its_proofs(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the smallest inline cap, so that a batch's verdicts together pass it
    monkeypatch.setenv("ITERATE_SANDBOX_INLINE_RESULT_BYTES", "1024")
    version = _upload(machine)
    # When the upload runs through the real state machine with the real sandbox handler
    with route_lambdas({"sandbox": load_handler("sandbox").lambda_handler}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
        )
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    # Then RecordBatch got the batch's key (under this run's prefix, the batch's own name), not the verdicts
    prefix = json.loads(done["output"])["run"]["prefix"]
    recorded = [e for name, e in calls if name == "investigate" and e.get("action") == "record-batch"]
    assert recorded and all("resultKey" in e["sandboxResult"] for e in recorded)
    assert recorded[0]["sandboxResult"]["resultKey"] == prefix + "investigations/batch-0.result.json"
    # And the proofs it held were settled from that object: none of them ran again alone
    batched = {item["code"] for name, e in calls if name == "sandbox" for item in e.get("items") or []}
    alone = {e["code"] for name, e in calls if name == "sandbox" and "items" not in e}
    assert len(batched) >= 3 and not batched & alone
    assert max(size for _, size in calls.state_sizes) < STATE_LIMIT_BYTES
