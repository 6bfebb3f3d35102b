"""The sandbox as a Lambda: the handler against moto S3 (presigned GET), and LambdaSandbox against a stub client."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pydantic import ValidationError

from iterate.contracts import CodeInvestigation
from iterate.ports import DatasetRef
from iterate.sandbox import (
    LambdaSandbox,
    LocalSandbox,
    ResultStoreError,
    SandboxEnvironmentDirty,
    SandboxEvent,
    SandboxLimits,
    SandboxUnavailable,
    clean_environment,
    deliver_result,
    oslayers,
    run_event,
    run_in_clean_environment,
)

REPO = Path(__file__).resolve().parents[2]
BUCKET = "iterate-sandbox-test"
KEY = "artifacts/owner/ds/run-1/data.parquet"


def load_sandbox_handler() -> ModuleType:
    name = "iterate_fn_sandbox_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "functions" / "sandbox" / "handler.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


class Context:
    function_name = "iterate-sandbox"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:iterate-sandbox"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@pytest.fixture
def s3_dataset(monkeypatch: pytest.MonkeyPatch, dataset: Path) -> Iterator[str]:
    """Given this run's dataset in (moto) S3, and a presigned GET for exactly that object."""
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "IterateTest",
        "ITERATE_SANDBOX_TIMEOUT_S": "10",
        "ITERATE_SANDBOX_MEMORY_MB": "1024",
    }.items():
        monkeypatch.setenv(name, value)
    from iterate.settings import get_settings

    get_settings.cache_clear()
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=dataset.read_bytes())
        yield s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": KEY}, ExpiresIn=300)
    get_settings.cache_clear()
    load_sandbox_handler()._limits.cache_clear()


@pytest.mark.handler
def test_handler_runs_the_code_on_the_presigned_dataset(s3_dataset: str) -> None:
    # Given the Map's RunInSandbox event
    event = {
        "code": "result = {'affected_rows': len(df), 'cols': list(df.columns)}",
        "dataset": {"presigned_url": s3_dataset},
        "timeout_s": 10,
    }
    # When the sandbox function handles it
    out = load_sandbox_handler().lambda_handler(event, Context())
    # Then it returns exactly a CodeInvestigation (what RecordAttempt parses) with the numbers from the data
    result = CodeInvestigation.model_validate(out)
    assert result.success, result.error
    assert result.output == {"affected_rows": 8, "cols": ["id", "city", "amount", "when", "note"]}


@pytest.mark.handler
def test_handler_fetches_and_loads_only_the_columns_the_event_names(s3_dataset: str) -> None:
    # Given a template's event: the code reads two columns, which the event names
    event = {
        "code": "result = {'affected_rows': int((df['city'] == 'Lyon').sum()), 'cols': list(df.columns)}",
        "dataset": {"presigned_url": s3_dataset, "columns": ["city", "amount"]},
        "timeout_s": 10,
    }
    # When the sandbox function handles it (ranged GETs of the presigned URL, served by moto)
    out = load_sandbox_handler().lambda_handler(event, Context())
    # Then the code saw those columns alone, with the data's numbers
    result = CodeInvestigation.model_validate(out)
    assert result.success, result.error
    assert result.output == {"affected_rows": 3, "cols": ["city", "amount"]}


@pytest.mark.handler
def test_handler_puts_a_result_over_the_inline_cap_to_s3_and_returns_its_key(
    s3_dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iterate.aws.payloads import SandboxResultRef
    from iterate.settings import get_settings

    # Given an inline cap of 4 KiB and the state machine's presigned PUT for this attempt's result
    monkeypatch.setenv("ITERATE_SANDBOX_INLINE_RESULT_BYTES", "4096")
    get_settings.cache_clear()
    result_key = "artifacts/owner/ds/run-1/investigations/i1.attempt-1.result.json"
    put = boto3.client("s3").generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": result_key}, ExpiresIn=300
    )
    event = {
        "code": "result = {'affected_rows': len(df), 'examples': ['x' * 100] * 200}",
        "dataset": {"presigned_url": s3_dataset},
        "timeout_s": 10,
        "result_url": put,
        "result_key": result_key,
    }
    # When the code's result (20 KB) is over the cap
    out = load_sandbox_handler().lambda_handler(event, Context())
    # Then the function returns only where it put the result, small enough for any state
    ref = SandboxResultRef.model_validate(out)
    assert ref.resultKey == result_key and ref.success and ref.resultBytes > 4096
    assert len(json.dumps(out)) < 512
    # And the object holds the whole CodeInvestigation, byte for byte what it reported
    stored = boto3.client("s3").get_object(Bucket=BUCKET, Key=result_key)["Body"].read()
    assert len(stored) == ref.resultBytes
    full = CodeInvestigation.model_validate_json(stored)
    assert full.success and full.output["affected_rows"] == 8 and len(full.output["examples"]) == 200


@pytest.mark.handler
def test_handler_returns_a_small_result_inline_even_with_a_result_url(s3_dataset: str) -> None:
    event = {
        "code": "result = {'affected_rows': len(df)}",
        "dataset": {"presigned_url": s3_dataset},
        "result_url": "https://never-used.example/put",
        "result_key": "artifacts/o/d/r/investigations/i.attempt-1.result.json",
    }
    out = load_sandbox_handler().lambda_handler(event, Context())
    assert CodeInvestigation.model_validate(out).output == {"affected_rows": 8}


@pytest.mark.unit
def test_a_large_result_that_cannot_be_stored_is_a_failed_output_size_attempt() -> None:
    # Given a large successful result and a result URL that refuses the PUT
    big = CodeInvestigation(code="c", success=True, output={"affected_rows": 1, "blob": "x" * 10_000})
    event = SandboxEvent.model_validate(
        {
            "code": "c",
            "dataset": {"presigned_url": "https://x/y"},
            "result_url": "https://x/put",
            "result_key": "artifacts/o/d/r/investigations/i.attempt-1.result.json",
        }
    )

    def refuse(url: str, body: bytes) -> None:
        raise ResultStoreError("result upload failed: HTTP 403")

    # When it is delivered / Then a small failed attempt says why, never the oversized result
    out = deliver_result(big, event, inline_limit=2048, put=refuse)
    failed = CodeInvestigation.model_validate(out)
    assert failed.success is False and failed.stopped == "output_size" and "HTTP 403" in (failed.error or "")
    assert len(json.dumps(out)) < 2048


@pytest.mark.unit
def test_result_url_and_key_come_together() -> None:
    with pytest.raises(ValidationError):
        SandboxEvent.model_validate(
            {"code": "c", "dataset": {"presigned_url": "https://x"}, "result_url": "u"}
        )


@pytest.mark.handler
def test_handler_refuses_hostile_code_again_inside_the_function(
    s3_dataset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iterate.settings import get_settings

    # The in-process policy is what this checks: on, even in a run of the suite with
    # ITERATE_SANDBOX_INPROCESS_CHECKS=0 (the OS layers alone are the red-team suites' business).
    handler = load_sandbox_handler()
    monkeypatch.setenv("ITERATE_SANDBOX_INPROCESS_CHECKS", "1")
    get_settings.cache_clear()
    handler._limits.cache_clear()
    event = {"code": "import os\nos.system('id')", "dataset": {"presigned_url": s3_dataset}}
    try:
        result = CodeInvestigation.model_validate(handler.lambda_handler(event, Context()))
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        handler._limits.cache_clear()
    assert result.success is False and result.stopped == "policy"
    assert "os" in (result.error or "")


@pytest.mark.handler
def test_handler_reports_a_dataset_it_cannot_fetch_as_a_failed_attempt(s3_dataset: str) -> None:
    # Given a presigned URL for an object that is not there
    s3 = boto3.client("s3")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "missing.parquet"}, ExpiresIn=60
    )
    event = {"code": "result = {'affected_rows': 1}", "dataset": {"presigned_url": url}}
    # When the function handles it / Then a failed investigation says why, rather than an exception
    result = CodeInvestigation.model_validate(load_sandbox_handler().lambda_handler(event, Context()))
    assert result.success is False and result.stopped == "crash"
    assert "download failed" in (result.error or "")


@pytest.mark.handler
def test_handler_rejects_a_malformed_event(s3_dataset: str) -> None:
    handler = load_sandbox_handler()
    with pytest.raises(ValidationError):
        handler.lambda_handler({"code": "x", "dataset": {"presigned_url": s3_dataset}, "extra": 1}, Context())
    with pytest.raises(ValidationError):
        handler.lambda_handler({"code": "x", "dataset": {}}, Context())


@pytest.mark.unit
def test_policy_refusal_costs_no_download(tmp_path: Path) -> None:
    # Given a fetcher that records its calls
    calls: list[str] = []

    def fetch(url: str, target: Path) -> int:
        calls.append(url)
        return 0

    event = SandboxEvent.model_validate({"code": "eval('1')", "dataset": {"presigned_url": "https://x/y"}})
    # When the event is run / Then the static policy answers first and nothing is fetched
    result = run_event(event, limits=SandboxLimits(timeout_s=5), fetch=fetch, scratch=str(tmp_path))
    assert result.stopped == "policy"
    assert calls == []


@pytest.mark.unit
def test_bucket_key_events_use_the_s3_client_for_exactly_that_object(tmp_path: Path, dataset: Path) -> None:
    # Given an event naming bucket/key/version and a stub S3 client
    seen: dict[str, Any] = {}

    class S3:
        def get_object(self, **kwargs: Any) -> dict[str, Any]:
            seen.update(kwargs)
            return {"Body": io.BytesIO(dataset.read_bytes())}

    event = SandboxEvent.model_validate(
        {
            "code": "result = {'affected_rows': len(df)}",
            "dataset": {"bucket": "b", "key": "k", "version_id": "v1"},
        }
    )
    # When it runs
    result = run_event(event, limits=SandboxLimits(timeout_s=10), s3_client=S3, scratch=str(tmp_path))
    # Then the object asked for is exactly that version, and the code ran on it
    assert seen == {"Bucket": "b", "Key": "k", "VersionId": "v1"}
    assert result.success and result.output == {"affected_rows": 8}


class StubLambda:
    """A Lambda client stand-in: records invocations and answers with a canned payload or error."""

    def __init__(
        self, payload: Any, *, function_error: str | None = None, raises: Exception | None = None
    ) -> None:
        self.payload = payload
        self.function_error = function_error
        self.raises = raises
        self.calls: list[dict[str, Any]] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.raises:
            raise self.raises
        response: dict[str, Any] = {
            "StatusCode": 200,
            "Payload": io.BytesIO(json.dumps(self.payload).encode()),
        }
        if self.function_error:
            response["FunctionError"] = self.function_error
        return response


@pytest.mark.unit
def test_lambda_sandbox_sends_a_presigned_event_and_returns_the_investigation() -> None:
    verdict = CodeInvestigation(code="c", success=True, output={"affected_rows": 3}, execution_time_ms=5.0)
    client = StubLambda(verdict.model_dump(mode="json"))
    sandbox = LambdaSandbox(client, "iterate-sandbox", presign=lambda ref: f"https://signed/{ref.key}")
    # When code is run against an S3 dataset
    result = sandbox.run("c", DatasetRef(bucket="b", key="k/data.parquet"), timeout_s=7)
    # Then one synchronous invoke carried the code, a presigned URL (no bucket/key) and the timeout
    assert result == verdict
    (call,) = client.calls
    assert call["FunctionName"] == "iterate-sandbox" and call["InvocationType"] == "RequestResponse"
    assert json.loads(call["Payload"]) == {
        "code": "c",
        "dataset": {"presigned_url": "https://signed/k/data.parquet"},
        "timeout_s": 7,
    }


@pytest.mark.unit
@pytest.mark.parametrize(
    ("message", "stopped"),
    [
        ("Task timed out after 30.00 seconds", "timeout"),
        ("Runtime exited with error: signal: killed", "crash"),
    ],
)
def test_lambda_sandbox_turns_a_dead_function_into_a_failed_attempt(message: str, stopped: str) -> None:
    client = StubLambda({"errorType": "Sandbox.Error", "errorMessage": message}, function_error="Unhandled")
    result = LambdaSandbox(client, "fn").run("c", DatasetRef(bucket="b", key="k"))
    assert result.success is False and result.stopped == stopped
    assert message in (result.error or "")


@pytest.mark.unit
def test_lambda_sandbox_raises_a_typed_error_when_unreachable() -> None:
    client = StubLambda(None, raises=ConnectionError("throttled"))
    with pytest.raises(SandboxUnavailable):
        LambdaSandbox(client, "fn").run("c", DatasetRef(bucket="b", key="k"))
    with pytest.raises(SandboxUnavailable):
        LambdaSandbox(StubLambda({"not": "an investigation"}), "fn").run("c", DatasetRef(bucket="b", key="k"))


class ThrottledLambda(StubLambda):
    """Answers the first `throttles` invokes as Lambda does at the function's reserved concurrency."""

    def __init__(self, payload: Any, *, throttles: int, code: str = "TooManyRequestsException") -> None:
        super().__init__(payload)
        self.throttles = throttles
        self.code = code

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        if len(self.calls) < self.throttles:
            self.calls.append(kwargs)
            error = {"Code": self.code, "Message": "Rate Exceeded."}
            raise ClientError(
                {"Error": error, "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded"}, "Invoke"
            )
        return super().invoke(**kwargs)


@pytest.mark.unit
def test_lambda_sandbox_retries_throttles_with_exponential_backoff_and_full_jitter() -> None:
    verdict = CodeInvestigation(code="c", success=True, output={"affected_rows": 1})
    # Given a sandbox function throttled three times before it takes the invoke
    client = ThrottledLambda(verdict.model_dump(mode="json"), throttles=3)
    waits: list[float] = []
    caps: list[float] = []

    def jitter(cap: float) -> float:
        caps.append(cap)
        return cap / 2

    sandbox = LambdaSandbox(
        client, "fn", throttle_retries=5, base_delay_s=0.5, max_delay_s=1.5, sleep=waits.append, jitter=jitter
    )
    # When code is run
    result = sandbox.run("c", DatasetRef(bucket="b", key="k"))
    # Then the proof is the function's verdict, not a failure: four invokes, three waits
    assert result == verdict and len(client.calls) == 4
    # And each wait was drawn from a cap that doubles from the base and stops at the maximum
    assert caps == [0.5, 1.0, 1.5]
    assert waits == [0.25, 0.5, 0.75]


@pytest.mark.unit
def test_lambda_sandbox_gives_up_after_its_throttle_retries_with_a_typed_error() -> None:
    client = ThrottledLambda(None, throttles=100, code="ThrottlingException")
    waits: list[float] = []
    sandbox = LambdaSandbox(client, "fn", throttle_retries=4, sleep=waits.append)
    with pytest.raises(SandboxUnavailable, match="after 5 tries"):
        sandbox.run("c", DatasetRef(bucket="b", key="k"))
    assert len(client.calls) == 5 and len(waits) == 4
    assert all(0 <= w <= 20.0 for w in waits)  # full jitter: each wait anywhere between 0 and its cap


@pytest.mark.unit
def test_lambda_sandbox_does_not_retry_what_is_not_a_throttle() -> None:
    client = ThrottledLambda(None, throttles=100, code="AccessDeniedException")
    waits: list[float] = []
    with pytest.raises(SandboxUnavailable):
        LambdaSandbox(client, "fn", sleep=waits.append).run("c", DatasetRef(bucket="b", key="k"))
    assert len(client.calls) == 1 and waits == []


@pytest.mark.unit
def test_lambda_sandbox_throttle_policy_and_function_come_from_the_settings() -> None:
    from iterate.settings import Settings

    settings = Settings.from_env(
        {
            "ITERATE_SANDBOX_FUNCTION": "iterate-sandbox",
            "ITERATE_SANDBOX_THROTTLE_RETRIES": "9",
            "ITERATE_SANDBOX_THROTTLE_BASE_S": "0.25",
            "ITERATE_SANDBOX_THROTTLE_MAX_S": "60",
        }
    )
    sandbox = LambdaSandbox.from_settings(StubLambda(None), settings)
    assert (sandbox.function_name, sandbox.throttle_retries) == ("iterate-sandbox", 9)
    assert (sandbox.base_delay_s, sandbox.max_delay_s) == (0.25, 60.0)


# --- the execution environment is left empty after every invocation, and checked empty before one


def _spawn_as(uid: int, script: str) -> None:
    """A process of `uid` that is not this process's child for long: a shell that daemonises a sleeper."""
    subprocess.run(["/bin/sh", "-c", script], user=uid, group=uid, check=True, timeout=10)


def _processes_of(uid: int) -> list[int]:
    """Live processes of `uid` (a killed one may stay a zombie until the machine's init reaps it)."""
    infos = [oslayers.proc_info(pid) for pid in oslayers.pids_of_uid(uid)]
    return [i.pid for i in infos if i is not None and i.state not in ("Z", "X")]


@pytest.fixture
def other_uid() -> Iterator[int]:
    """An unused uid standing for the Lambda's own (sbx_user): its processes are the leftovers."""
    if os.geteuid() != 0:
        pytest.skip("needs root to start processes as another uid")
    uid = 0x79000000 + random.randrange(1 << 20)
    yield uid
    for pid in _processes_of(uid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.unit
def test_cleaning_kills_every_process_of_the_uid_and_empties_the_scratch(
    tmp_path: Path, other_uid: int
) -> None:
    # Given leftovers of an invocation: a double-forked setsid sleeper, a plain one, files and folders
    _spawn_as(
        other_uid, "setsid /bin/sleep 120 >/dev/null 2>&1 < /dev/null & /bin/sleep 120 >/dev/null 2>&1 &"
    )
    deadline = time.monotonic() + 5
    while len(_processes_of(other_uid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_processes_of(other_uid)) == 2
    scratch = tmp_path / "scratch"
    (scratch / "run" / "deep").mkdir(parents=True)
    (scratch / "run" / "deep" / "data.parquet").write_bytes(b"tenant A's data")
    (scratch / "stray.txt").write_text("x")
    # When the environment is cleaned
    left = clean_environment(scratch, uid=other_uid)
    # Then nothing is left, and it says so
    assert left == []
    assert _processes_of(other_uid) == []
    assert list(scratch.iterdir()) == []


@pytest.mark.unit
def test_an_invocation_refuses_to_start_while_anything_is_left(
    tmp_path: Path, other_uid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a leftover process that (here, by a stubbed kill) cannot be removed
    _spawn_as(other_uid, "setsid /bin/sleep 120 >/dev/null 2>&1 < /dev/null &")
    monkeypatch.setattr(oslayers, "kill_checked", lambda info: None)
    calls: list[str] = []
    event = SandboxEvent.model_validate(
        {"code": "result = {'affected_rows': 1}", "dataset": {"presigned_url": "https://x/y"}}
    )
    # When an invocation starts / Then it refuses before fetching anything or running any code
    with pytest.raises(SandboxEnvironmentDirty):
        run_in_clean_environment(
            event,
            limits=SandboxLimits(timeout_s=5, namespaces=False, prefork=False),
            scratch=tmp_path / "scratch",
            uid=other_uid,
            fetch=lambda url, target: calls.append(url) or 0,
            deadline_s=0.2,
        )
    assert calls == []


@pytest.mark.unit
def test_an_invocation_leaves_nothing_behind(tmp_path: Path, dataset: Path, other_uid: int) -> None:
    # Given an invocation during which something of the environment's uid is started and a file is left
    # outside the run's own folder (what code on Lambda, sharing the function's uid, could do)
    scratch = tmp_path / "scratch"

    def fetch(url: str, target: Path) -> int:
        _spawn_as(other_uid, "setsid /bin/sleep 120 >/dev/null 2>&1 < /dev/null &")
        (scratch / "left-behind.txt").write_text("tenant A")
        target.write_bytes(dataset.read_bytes())
        return dataset.stat().st_size

    event = SandboxEvent.model_validate(
        {"code": "result = {'affected_rows': len(df)}", "dataset": {"presigned_url": "https://x/y"}}
    )
    # When it runs in the clean-environment wrapper
    result = run_in_clean_environment(
        event,
        limits=SandboxLimits(timeout_s=10, namespaces=False, prefork=False),
        scratch=scratch,
        uid=other_uid,
        fetch=fetch,
    )
    # Then it ran, and afterwards no process of the uid and nothing in the scratch remain
    assert result.success and result.output == {"affected_rows": 8}
    assert _processes_of(other_uid) == []
    assert list(scratch.iterdir()) == []


@pytest.mark.unit
def test_the_handler_runs_the_lambda_layer_set(s3_dataset: str) -> None:
    # The function's sandbox: no namespaces (Lambda grants none), a fresh process per invocation
    limits = load_sandbox_handler()._limits()
    assert limits.namespaces is False and limits.prefork is False


@pytest.mark.unit
def test_cleaning_one_uid_never_touches_another_sandboxs_runs(
    tmp_path: Path, other_uid: int, dataset: Path
) -> None:
    # Given another sandbox's run in progress (its own run uid), and this environment's uid with nothing
    sandbox = LocalSandbox(SandboxLimits(timeout_s=10, inprocess_checks=False, enforce_policy=False))
    import threading

    outcome: list[Any] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            sandbox.run_detailed(
                "import time\ntime.sleep(1.5)\nresult = {'n': 1}", DatasetRef(path=str(dataset))
            )
        )
    )
    thread.start()
    try:
        time.sleep(0.8)
        # When this environment is cleaned for its uid
        assert clean_environment(tmp_path / "scratch", uid=other_uid) == []
    finally:
        thread.join()
        sandbox.close()
    # Then the other run finished undisturbed
    assert outcome[0].investigation.success, outcome[0].investigation.error
