"""The ASL file itself: valid JSON, the contracted placeholders, Retry/Catch on every Task, everything reachable."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.statemachine

ASL = Path(__file__).resolve().parents[2] / "statemachine" / "analysis.asl.json"
CONTRACT_PLACEHOLDERS = {
    "ProfileFunctionArn",
    "ChunkFunctionArn",
    "UnderstandFunctionArn",
    "AnalyzeFunctionArn",
    "InvestigateFunctionArn",
    "SandboxFunctionArn",
    "ReportFunctionArn",
    "RecordFailureFunctionArn",
    # The engine path's Athena workgroup and Glue database (RunEngineQuery)
    "EngineWorkGroup",
    "EngineDatabase",
}


@pytest.fixture(scope="module")
def asl() -> dict[str, Any]:
    return dict(json.loads(ASL.read_text(encoding="utf-8")))


def _all_states(machine: dict[str, Any]) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = {}
    for name, state in machine["States"].items():
        states[name] = state
        inner = state.get("ItemProcessor") or state.get("Iterator")
        if inner:
            states.update(_all_states(inner))
    return states


def _reachable(machine: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = [machine["StartAt"]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        state = machine["States"][name]
        targets = [state.get("Next"), state.get("Default")]
        targets += [c["Next"] for c in state.get("Choices", [])] + [c["Next"] for c in state.get("Catch", [])]
        todo.extend(t for t in targets if t)
        inner = state.get("ItemProcessor")
        if inner:
            seen |= _reachable(inner)
    return seen


def test_placeholders_are_exactly_the_contracted_function_arns(asl: dict[str, Any]) -> None:
    # Given the raw text, When its ${…} placeholders are collected, Then they are the ones infra substitutes
    found = set(re.findall(r"\$\{([A-Za-z]+)\}", ASL.read_text(encoding="utf-8")))
    assert found == CONTRACT_PLACEHOLDERS


def test_every_task_retries_with_full_jitter_and_is_caught(asl: dict[str, Any]) -> None:
    tasks = {n: s for n, s in _all_states(asl).items() if s["Type"] == "Task"}
    assert len(tasks) >= 8
    for name, task in tasks.items():
        retries = task.get("Retry", [])
        assert retries, f"{name} has no Retry"
        for rule in retries:
            assert (
                rule["JitterStrategy"] == "FULL" and rule["BackoffRate"] >= 1 and rule["MaxDelaySeconds"] > 0
            )
            assert "States.ALL" not in rule["ErrorEquals"], f"{name} retries every error blindly"
            assert "DatasetReadError" not in rule["ErrorEquals"], "bad input must not be retried"
        transient = {e for rule in retries for e in rule["ErrorEquals"]}
        if task["Resource"].startswith("arn:aws:states:::athena:"):  # Athena's throttling, not Lambda's
            assert "Athena.TooManyRequestsException" in transient, name
        else:
            assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= transient, name
        if name != "RecordFailure":
            assert task.get("Catch"), f"{name} has no Catch"


# Batches of template proofs only save sandbox invocations: when they fail, every issue is investigated one by one.
BATCH_STATES = {"PlanProofs", "ProveTemplates", "ListUnsettled"}


def test_top_level_failures_go_through_record_failure_to_fail(asl: dict[str, Any]) -> None:
    for name, state in asl["States"].items():
        for catch in state.get("Catch", []):
            assert catch["Next"] == ("InvestigateEach" if name in BATCH_STATES else "RecordFailure"), name
    assert asl["States"]["RecordFailure"]["Next"] == "RunFailed"
    assert asl["States"]["RunFailed"]["Type"] == "Fail"


def test_llm_steps_retry_retryable_llm_errors(asl: dict[str, Any]) -> None:
    states = _all_states(asl)
    for name in ("UnderstandDataset", "AnalyzeDataset", "GenerateCode"):
        errors = {e for rule in states[name]["Retry"] for e in rule["ErrorEquals"]}
        assert "RetryableLLMError" in errors, name


def test_map_fans_out_with_bounds_and_passes_run_and_issue(asl: dict[str, Any]) -> None:
    fan_out = asl["States"]["InvestigateEach"]
    # The items come from the S3 object AnalyzeDataset wrote, never from the state (256 KiB cap)
    assert fan_out["Type"] == "Map" and "ItemsPath" not in fan_out
    assert fan_out["ItemReader"] == {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSON"},
        "Parameters": {"Bucket.$": "$.run.bucket", "Key.$": "$.analysis.itemsKey"},
    }
    assert 1 <= fan_out["MaxConcurrency"] <= 40 and 0 < fan_out["ToleratedFailurePercentage"] < 100
    assert fan_out["ItemSelector"] == {"run.$": "$.run", "issueId.$": "$$.Map.Item.Value"}
    loop = fan_out["ItemProcessor"]["States"]
    # The ReAct loop goes back to GenerateCode only through the RecordAttempt decision (bounded there)
    assert loop["TryAgain"]["Choices"][0]["Next"] == "GenerateCode"
    assert loop["RunInSandbox"]["Resource"] == "${SandboxFunctionArn}"
    assert loop["RunInSandbox"]["Catch"][0]["Next"] == "RecordAttempt", "a sandbox crash is a failed attempt"
    # Every child's result is gathered into the Map's output: each one is an empty object
    assert loop["InvestigationDone"]["Result"] == {} and loop["InvestigationDone"]["End"]
    assert fan_out["ResultPath"] is None


def test_template_proofs_go_in_batches_before_the_map_and_never_fail_the_run(asl: dict[str, Any]) -> None:
    states = asl["States"]
    # Given the analysis, the batches are planned, and proved only when there are any
    assert states["AnalyzeDataset"]["Next"] == "PlanProofs" and states["PlanProofs"]["Next"] == "HasBatches"
    assert states["HasBatches"]["Choices"][0]["Next"] == "ProveTemplates"
    assert states["HasBatches"]["Default"] == "InvestigateEach"
    fan_out = states["ProveTemplates"]
    # The batches come from S3, one child per batch, one sandbox invocation per child
    assert fan_out["ItemReader"]["Parameters"] == {"Bucket.$": "$.run.bucket", "Key.$": "$.proofs.batchesKey"}
    assert fan_out["ItemSelector"] == {
        "run.$": "$.run",
        "batch.$": "$$.Map.Item.Index",
        "issueIds.$": "$$.Map.Item.Value",
    }
    inner = fan_out["ItemProcessor"]["States"]
    assert inner["RunBatchInSandbox"]["Resource"] == "${SandboxFunctionArn}"
    # A sandbox failure is recorded (nothing settled), any other failure only ends the batch
    assert inner["RunBatchInSandbox"]["Catch"][0]["Next"] == "RecordBatch"
    assert (
        inner["PrepareBatch"]["Catch"][0]["Next"] == inner["RecordBatch"]["Catch"][0]["Next"] == "BatchDone"
    )
    assert inner["BatchDone"]["Result"] == {} and fan_out["ResultPath"] is None
    # And what no batch finished is what InvestigateEach reads: ListUnsettled replaces the analysis's items
    assert fan_out["Next"] == "ListUnsettled" and states["ListUnsettled"]["ResultPath"] == "$.analysis"
    assert states["ListUnsettled"]["Next"] == "InvestigateEach"


def test_a_large_upload_fans_out_over_its_chunk_manifest_and_merges(asl: dict[str, Any]) -> None:
    states = asl["States"]
    # Given a ProfileDataset that cut the file (`chunked` set), the Map runs; otherwise the run goes on as before
    assert states["IsDuplicateUpload"]["Default"] == "IsChunked"
    assert states["IsChunked"]["Choices"] == [
        {"Variable": "$.chunked", "IsNull": False, "Next": "ProfileChunks"}
    ]
    assert states["IsChunked"]["Default"] == "UnderstandDataset"
    fan_out = states["ProfileChunks"]
    # The ranges come from the manifest in S3, never from the state; one failed range fails the Map
    assert fan_out["ItemReader"]["Parameters"] == {
        "Bucket.$": "$.run.bucket",
        "Key.$": "$.chunked.manifestKey",
    }
    assert fan_out["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert fan_out["ToleratedFailurePercentage"] == 0 and fan_out["ResultPath"] is None
    assert fan_out["ItemSelector"]["chunk.$"] == "$$.Map.Item.Value"
    parse = fan_out["ItemProcessor"]["States"]["ParseChunk"]
    # Each child's output is empty ({}): the Map gathers them all, and state is capped at 256 KiB
    assert parse["Resource"] == "${ChunkFunctionArn}" and parse["OutputPath"] is None and parse["End"]
    assert fan_out["Catch"][0]["Next"] == "RecordFailure" and fan_out["Next"] == "MergeOrEngine"
    assert states["MergeOrEngine"]["Choices"] == [
        {"Variable": "$.engine", "IsNull": False, "Next": "EngineStep"}
    ]
    assert states["MergeOrEngine"]["Default"] == "MergeChunks"
    # And the merge is the profile function's, with the run and the chunked read; it ends where profiling ends
    merge = states["MergeChunks"]
    assert merge["Resource"] == "${ProfileFunctionArn}" and merge["Parameters"]["action"] == "merge"
    assert merge["ResultPath"] == "$" and merge["Next"] == "UnderstandDataset"


def test_sandbox_throttles_wait_with_long_backoff_before_counting_as_a_failed_attempt(
    asl: dict[str, Any],
) -> None:
    # Given the sandbox state (its reserved concurrency is shared by every run of the account)
    run_in_sandbox = _all_states(asl)["RunInSandbox"]
    (throttle,) = [
        r for r in run_in_sandbox["Retry"] if "Lambda.TooManyRequestsException" in r["ErrorEquals"]
    ]
    # Then a throttle is retried alone, long enough to outlast a busy minute of other runs
    assert throttle["ErrorEquals"] == ["Lambda.TooManyRequestsException"]
    assert throttle["MaxAttempts"] >= 6 and throttle["BackoffRate"] >= 2 and throttle["MaxDelaySeconds"] >= 60
    waits = [
        min(throttle["IntervalSeconds"] * throttle["BackoffRate"] ** n, throttle["MaxDelaySeconds"])
        for n in range(throttle["MaxAttempts"])
    ]
    assert sum(waits) >= 300, waits  # the longest total wait, before full jitter spreads the retries


def test_every_state_is_reachable_and_paths_are_simple(asl: dict[str, Any]) -> None:
    assert _reachable(asl) == set(_all_states(asl))
    text = ASL.read_text(encoding="utf-8")
    assert "JSONata" not in text and "QueryLanguage" not in text
    assert not re.search(r"\[\d+\]\.", text), "index-then-field paths misbehave in moto"


def test_no_run_waits_or_fails_in_profile_dataset_for_being_busy() -> None:
    # Given the definition: admission starts an execution only with its run slots held, so ProfileDataset
    # retries only Lambda's own transient errors (a busy owner is no error of any step)
    asl = json.loads(ASL.read_text())
    retried = {e for r in asl["States"]["ProfileDataset"]["Retry"] for e in r["ErrorEquals"]}
    assert retried == {
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
    }


def test_the_engine_path_loops_between_its_step_and_athena_until_done(asl: dict[str, Any]) -> None:
    states = asl["States"]
    # Given EngineStep: the profile function, with the run, the chunked read and the loop's state
    step = states["EngineStep"]
    assert step["Resource"] == "${ProfileFunctionArn}" and step["Parameters"]["action"] == "engine"
    assert step["ResultPath"] == "$.engine" and step["Next"] == "EngineDone"
    # When it is done the run goes on as after profiling; otherwise its statement runs on Athena, waited for
    assert states["EngineDone"]["Choices"] == [
        {"Variable": "$.engine.done", "BooleanEquals": True, "Next": "UnderstandDataset"}
    ]
    query = states[states["EngineDone"]["Default"]]
    assert query["Resource"] == "arn:aws:states:::athena:startQueryExecution.sync"
    assert query["Parameters"] == {
        "QueryString.$": "$.engine.query",
        "WorkGroup": "${EngineWorkGroup}",
        "QueryExecutionContext": {"Database": "${EngineDatabase}"},
    }
    # Then what it scanned comes back to EngineStep (the run's cost), and a failed query is recorded
    assert query["ResultSelector"]["bytes.$"] == "$.QueryExecution.Statistics.DataScannedInBytes"
    assert query["ResultPath"] == "$.engine.ran" and query["Next"] == "EngineStep"
    assert query["Catch"][0]["Next"] == "RecordFailure" and step["Catch"][0]["Next"] == "RecordFailure"
