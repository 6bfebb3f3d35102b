"""Moto world for the runtime tests: bucket, table, bus, state machine, and Lambda invokes routed in-process."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "iterate-test-artifacts"
TABLE = "iterate-test"
# The admission queue (FIFO, one message group per owner), as the stack creates it; moto's URL is fixed.
ADMISSION_QUEUE = "iterate-admission.fifo"
ADMISSION_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{ADMISSION_QUEUE}"
FUNCTIONS = (
    "profile",
    "chunk",
    "understand",
    "analyze",
    "investigate",
    "sandbox",
    "report",
    "record_failure",
)
PLACEHOLDER = {
    "profile": "ProfileFunctionArn",
    "chunk": "ChunkFunctionArn",
    "understand": "UnderstandFunctionArn",
    "analyze": "AnalyzeFunctionArn",
    "investigate": "InvestigateFunctionArn",
    "sandbox": "SandboxFunctionArn",
    "report": "ReportFunctionArn",
    "record_failure": "RecordFailureFunctionArn",
}
ENGINE_DATABASE, ENGINE_WORKGROUP = "iterate_engine", "iterate-engine"
_LOAD_LOCK = threading.Lock()
_RUNNING = threading.local()  # which function's handler this thread is running (for the AWS call record)
UPLOAD_KEY = "uploads/alice/orders/orders.csv"
# Step Functions' cap on any state's input or output (UTF-8 JSON). Over it, AWS fails the execution with
# States.DataLimitExceeded, which no Catch (not even States.ALL) handles; moto's interpreter lets States.ALL
# catch it, so the harness checks every state itself.
STATE_LIMIT_BYTES = 256 * 1024
MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


def load_handler(name: str) -> ModuleType:
    """functions/<name>/handler.py as a module of its own (every handler file has the same name)."""
    module_name = f"iterate_fn_{name}"
    with _LOAD_LOCK:  # Map iterations invoke concurrently: never hand out a half-imported module
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, REPO / "functions" / name / "handler.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[module_name] = module
        return module


def base_env(monkeypatch: Any, **extra: str) -> None:
    """Environment of a deployed function, pointing at the moto resources; no LLM key (offline agents)."""
    env = {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "ITERATE_BUCKET": BUCKET,
        "ITERATE_TABLE": TABLE,
        "ITERATE_EVENT_BUS": "default",
        "ITERATE_ADMISSION_QUEUE_URL": ADMISSION_QUEUE_URL,
        "ITERATE_ADMISSION_FUNCTION_ARN": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:iterate-admission",
        "ITERATE_FIX_WORKER_FUNCTION": "iterate-fix_worker",  # the fix route invokes it (route_lambdas runs it)
        "POWERTOOLS_SERVICE_NAME": "iterate",
        "POWERTOOLS_METRICS_NAMESPACE": "Iterate",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_DEV": "false",
        **extra,
    }
    for key in ("ANTHROPIC_API_KEY", "ITERATE_ANTHROPIC_SECRET_ARN", "ANTHROPIC_BASE_URL", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def reset_caches() -> None:
    """Every per-container cache, so each test's functions start cold against its own moto world."""
    from iterate.aws import clients
    from iterate.aws.config import get_aws_config
    from iterate.settings import get_settings

    clients.reset()
    get_aws_config.cache_clear()
    get_settings.cache_clear()
    for name in (*FUNCTIONS, "api", "followup", "fix", "fix_worker", "admission"):
        module = sys.modules.get(f"iterate_fn_{name}")
        for cached in ("_deps", "_limits"):  # the sandbox's limits come from the settings too
            factory = getattr(module, cached, None)
            if factory is not None:
                factory.cache_clear()


def create_resources(*, versioned: bool = True) -> dict[str, Any]:
    """The bucket (versioned), the single table (GSI1, TTL) and the clients tests use to look at them."""
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    if versioned:
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    ddb = boto3.client("dynamodb", region_name=REGION)
    ddb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "GSI1PK", "GSI1SK")
        ],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "GSI1",
                "KeySchema": [
                    {"AttributeName": "GSI1PK", "KeyType": "HASH"},
                    {"AttributeName": "GSI1SK", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    ddb.update_time_to_live(
        TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
    )
    table = boto3.resource("dynamodb", region_name=REGION).Table(TABLE)
    create_admission_queue()
    return {"s3": s3, "ddb": ddb, "table": table}


def create_admission_queue() -> str:
    """The FIFO admission queue as the stack configures it (no content-based deduplication: the run id is)."""
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    return str(
        sqs.create_queue(
            QueueName=ADMISSION_QUEUE,
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "360"},
        )["QueueUrl"]
    )


def admission_records(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Received SQS messages as the records Lambda's event source mapping hands the admission function."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{ADMISSION_QUEUE}",
        }
        for m in messages
    ]


def admit_queued(rounds: int = 100) -> list[str]:
    """Do what the event source mapping does with the admission queue until it has nothing visible: hand each
    batch to the real admission handler, delete what it admitted (or dropped), leave what it reported failed
    (it set their visibility itself). Returns the run ids whose execution it started."""
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    handler = load_handler("admission").lambda_handler
    started: list[str] = []
    for _ in range(rounds):
        messages = sqs.receive_message(
            QueueUrl=ADMISSION_QUEUE_URL, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            break
        with as_function("admission"):
            result = handler({"Records": admission_records(messages)}, FakeContext("iterate-admission"))
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=ADMISSION_QUEUE_URL, ReceiptHandle=m["ReceiptHandle"])
                started.append(json.loads(m["Body"])["request"]["runId"])
        if len(failed) == len(messages):
            break  # nothing could start: the rest waits for a slot
    return started


def capture_events(
    detail_type: str = "Iterate Run Completed", name: str = "iterate-completed"
) -> tuple[Any, str]:
    """A rule on the default bus sending Iterate's events of one detail-type (default: run completions) to an
    SQS queue tests can read, as a user would route them."""
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = boto3.client("events", region_name=REGION)
    events.put_rule(Name=name, EventPattern=json.dumps({"source": ["iterate"], "detail-type": [detail_type]}))
    events.put_targets(Rule=name, Targets=[{"Id": "q", "Arn": queue_arn}])
    return sqs, queue_url


def received_events(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
        "Messages", []
    )
    return [json.loads(m["Body"]) for m in messages]


def object_created_event(
    bucket: str, key: str, version_id: str | None, *, event_id: str = "e-1"
) -> dict[str, Any]:
    """The EventBridge event S3 emits for an upload (the shape AWS documents for "Object Created")."""
    detail_object: dict[str, Any] = {"key": key, "size": 1, "etag": "x", "sequencer": "0"}
    if version_id:
        detail_object["version-id"] = version_id
    return {
        "version": "0",
        "id": event_id,
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": ACCOUNT,
        "time": "2026-11-22T00:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": detail_object,
            "request-id": "r",
            "requester": ACCOUNT,
            "source-ip-address": "10.0.0.1",
            "reason": "PutObject",
        },
    }


# --- Lambda invokes → the real handlers, in-process -----------------------------------------------


class FakeContext:
    """The parts of the Lambda context Powertools reads."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = "req-1"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


Handler = Callable[[dict[str, Any], Any], Any]


class Calls(list[tuple[str, dict[str, Any]]]):
    """(function, event) per invoke, in order; `failures` keeps (function, traceback) of those that raised;
    `state_sizes` the UTF-8 size of every state's output and every Lambda result, Map children included;
    `spans` (function, requested, started, ended) per invoke, monotonic seconds: from the request (waiting for the
    function's one environment included: on AWS each request in flight is one concurrent execution) and from the
    handler's own start."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[tuple[str, str]] = []
        self.spans: list[tuple[str, float, float, float]] = []
        self.state_sizes: list[tuple[str, int]] = []
        self.aws_calls: set[tuple[str, str, str, str | None]] = set()
        self._lock = threading.Lock()

    def record_size(self, state: str, value: Any) -> None:
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        with self._lock:
            self.state_sizes.append((state, len(text.encode("utf-8"))))

    def oversized(self, limit: int = STATE_LIMIT_BYTES) -> list[tuple[str, int]]:
        """States whose output (or a Lambda result) reached the limit: each would fail the run on AWS."""
        return [(name, size) for name, size in self.state_sizes if size >= limit]

    def table_actions(self) -> dict[str, set[str]]:
        """The DynamoDB actions each function made ("Query:GSI1" for a query of the index), as IAM names them."""
        used: dict[str, set[str]] = {}
        for function, service, operation, index in self.aws_calls:
            if service == "dynamodb":
                used.setdefault(function, set()).add(operation + (f":{index}" if index else ""))
        return used


@contextmanager
def as_function(name: str) -> Iterator[None]:
    """Mark this thread as running functions/<name>'s handler (the AWS calls it makes are its own)."""
    previous = getattr(_RUNNING, "name", None)
    _RUNNING.name = name
    try:
        yield
    finally:
        _RUNNING.name = previous


@contextmanager
def record_aws_calls(calls: Calls) -> Iterator[None]:
    """Record (function, service, operation, index) of every botocore call a handler makes."""
    from botocore.client import BaseClient

    real = BaseClient._make_api_call

    def recording(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        function = getattr(_RUNNING, "name", None)
        if function is not None:
            entry = (
                function,
                self.meta.service_model.service_name,
                operation_name,
                api_params.get("IndexName"),
            )
            with calls._lock:
                calls.aws_calls.add(entry)
        return real(self, operation_name, api_params)

    with mock.patch.object(BaseClient, "_make_api_call", recording):
        yield


class StateOverLimitError(AssertionError):
    """A state's output reached Step Functions' 256 KiB: on AWS the execution fails and no Catch runs."""


@contextmanager
def check_state_sizes(calls: Calls) -> Iterator[None]:
    """Record the size of every state output moto's interpreter produces (its own quota check is the hook:
    it sees each state's output and each Lambda task's result, inside Map iterations too)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import (
        StateTaskLambda,
    )
    from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

    state_check = CommonStateField._verify_size_quota
    lambda_check = StateTaskLambda._verify_size_quota

    def state_output(self: Any, env: Any, value: Any) -> None:
        calls.record_size(self.name, value)
        state_check(self, env, value)

    def lambda_result(self: Any, env: Any, value: Any) -> None:
        # The Lambda task's override sees both its invoke response ({"Payload": …}) and its state's output.
        if isinstance(value, dict) and "Payload" in value:
            calls.record_size(f"{self.name} (Lambda result)", value["Payload"])
        else:
            calls.record_size(self.name, value)
        lambda_check(self, env, value)

    with (
        mock.patch.object(CommonStateField, "_verify_size_quota", state_output),
        mock.patch.object(StateTaskLambda, "_verify_size_quota", lambda_result),
    ):
        yield


@contextmanager
def route_lambdas(overrides: dict[str, Handler] | None = None, *, size_check: bool = True) -> Iterator[Calls]:
    """Patch moto's docker-less Lambda backend so invoking `iterate-<name>` runs functions/<name>/handler.py.

    An exception becomes Lambda's unhandled-error payload (errorType = class name), which is exactly what the
    state machine's Retry/Catch route on. Yields the list of (function, event) calls for assertions.
    On leaving, raises StateOverLimitError if any state's output reached 256 KiB (`size_check`). GetObject is
    served without moto's whole-object copies meanwhile (`s3_reads_by_seek`), and PutObject bodies decoded in
    linear time (`s3_uploads_decoded_linearly`).
    """
    from moto.awslambda_simple.models import LambdaSimpleBackend

    calls = Calls()
    handlers: dict[str, Handler] = dict(overrides or {})
    # One invocation of a function at a time, as in one Lambda execution environment: the handler modules'
    # globals (Powertools' Metrics singleton among them) are shared by every thread here, and two investigations
    # flushing one metric set at once raised "Must contain at least one metric". Different functions still run
    # side by side (a Map's investigations call the sandbox while they run).
    environments: dict[str, threading.RLock] = {}
    environments_lock = threading.Lock()

    def environment(name: str) -> threading.RLock:
        with environments_lock:
            return environments.setdefault(name, threading.RLock())

    def invoke(
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1].removeprefix("iterate-")
        event = json.loads(body) if body else {}
        calls.append((name, event))
        requested = started = time.monotonic()
        try:
            handler = handlers.get(name) or load_handler(name).lambda_handler
            with environment(name), as_function(name):
                started = time.monotonic()
                result = handler(event, FakeContext(f"iterate-{name}"))
        except Exception as exc:
            calls.failures.append((name, "".join(traceback.format_exception(exc))))
            calls.spans.append((name, requested, started, time.monotonic()))
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": type(exc).__name__,
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_exception(exc)[-3:],
                }
            ).encode()
        calls.spans.append((name, requested, started, time.monotonic()))
        return json.dumps(result).encode()

    # Map iterations run their Lambdas in threads, and moto's DynamoDB backend is not thread-safe: a get_item
    # serialising a run record while another thread updates it raised "dictionary changed size during
    # iteration" (seen once in a full parallel run). DynamoDB requests are served one at a time, as the real
    # service would answer them; the handlers themselves still run side by side.
    from moto.dynamodb.responses import DynamoHandler

    served = DynamoHandler.call_action
    dynamo_lock = threading.RLock()

    def call_action(self: Any) -> Any:
        with dynamo_lock:
            return served(self)

    with (
        mock.patch.object(LambdaSimpleBackend, "invoke", invoke),
        mock.patch.object(DynamoHandler, "call_action", call_action),
        check_state_sizes(calls),
        record_aws_calls(calls),
        s3_reads_by_seek(),
        s3_uploads_decoded_linearly(),
    ):
        yield calls
    if size_check and calls.oversized():
        raise StateOverLimitError(
            f"states over Step Functions' {STATE_LIMIT_BYTES}-byte limit (the execution would fail on AWS, "
            f"uncaught): {calls.oversized()}"
        )


class KeyBytes:
    """Bytes [start, end) of a moto S3 object (FakeKey), read by seek from its buffer when asked for.

    moto answers GetObject with `FakeKey.value`: the whole object read out of its buffer (a spooled temp file)
    into one bytes object, and, for a Range header, slices that (`_handle_range_header`): two copies of the
    whole object per ranged GET, so a 2 GB upload read by 2 chunk functions at once held ~8 GB. This stands in
    for `value` in GetObject only (`s3_reads_by_seek`): a range reads its own bytes, a whole GET streams.
    """

    def __init__(self, key: Any, start: int = 0, end: int | None = None) -> None:
        self.key = key
        self.start = start
        self.end = key.size if end is None else end

    def __len__(self) -> int:
        return self.end - self.start

    def __bool__(self) -> bool:
        return len(self) > 0

    def read_at(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, len(self) - offset))
        with self.key.lock:  # the buffer is one file shared by every reader: seek and read together
            self.key._value_buffer.seek(self.start + offset)
            return bytes(self.key._value_buffer.read(length))

    def __getitem__(self, index: slice) -> bytes:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("KeyBytes takes a contiguous slice")
        begin, end, _ = index.indices(len(self))
        return self.read_at(begin, end - begin)

    def __bytes__(self) -> bytes:
        return self.read_at(0, len(self))


class KeyStream(io.RawIOBase):
    """The raw response botocore reads a `KeyBytes` body from (moto's own wraps a bytes object in a BytesIO)."""

    piece = 8 * 1024 * 1024

    def __init__(self, body: KeyBytes) -> None:
        super().__init__()
        self.body = body
        self.position = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = len(self.body) - self.position if size is None or size < 0 else size
        data = self.body.read_at(self.position, wanted)
        self.position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        while data := self.read(self.piece):
            yield data


@contextmanager
def s3_reads_by_seek() -> Iterator[None]:
    """moto's GetObject without its whole-object copies: a ranged GET reads only its range from the object's
    buffer, a whole GET is streamed from it. Test harness only (the product calls S3 as it is).

    `S3Response.get_object` ends with `key.value`; here `_get_key` hands it a view of the key whose `value` is
    a `KeyBytes`, which `_handle_range_header` slices (len + one slice) and botocore's response reads through
    `KeyStream`; a request through `responses` (plain HTTP to a presigned URL: the sandbox's dataset download)
    streams it too.
    """
    import responses
    from moto.core import botocore_stubber
    from moto.s3.responses import S3Response

    class LazyValue:
        def __init__(self, key: Any) -> None:
            self._key = key

        def __getattr__(self, name: str) -> Any:
            return getattr(self._key, name)

        @property
        def value(self) -> KeyBytes:
            return KeyBytes(self._key)

    real_get_object = S3Response.get_object
    real_raw = botocore_stubber.MockRawResponse
    real_body = responses._handle_body

    def get_object(self: Any) -> Any:
        if "partNumber" in self.querystring:  # a part's answer is 206 already, never sliced: moto's own path
            return real_get_object(self)
        real_get_key = self._get_key

        def get_key(*args: Any, **kwargs: Any) -> Any:
            key, not_modified = real_get_key(*args, **kwargs)
            return LazyValue(key), not_modified

        self._get_key = get_key  # this request's handler instance only
        try:
            return real_get_object(self)
        finally:
            del self._get_key

    def raw_response(body: Any) -> Any:
        return KeyStream(body) if isinstance(body, KeyBytes) else real_raw(body)

    def handle_body(body: Any) -> Any:  # `responses` answers a BufferedReader as it is, streamed
        if isinstance(body, KeyBytes):
            return io.BufferedReader(KeyStream(body), KeyStream.piece)
        return real_body(body)

    with (
        mock.patch.object(S3Response, "get_object", get_object),
        mock.patch.object(botocore_stubber, "MockRawResponse", raw_response),
        mock.patch.object(responses, "_handle_body", handle_body),
    ):
        yield


def decode_aws_chunked(body: Any) -> bytes:
    """moto's `S3Response._handle_encoded_body` in linear time: the same parse (hex size line, data, CRLF, ...,
    size 0) over one view of the request body, joined once. moto's own appends each 64 KiB-1 MiB chunk to a
    growing bytes object: quadratic, a 2 GB PutObject (botocore sends aws-chunked with a trailing checksum)
    was still being decoded after 17 minutes."""
    if not body:
        return b""
    data = body if isinstance(body, bytes) else body.read()
    view = memoryview(data)
    parts = []
    at = 0

    def line() -> bytes:
        nonlocal at
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end + 1
        text, at = data[at:end], end
        return text

    size = int(line().strip(), 16)
    while size > 0:
        parts.append(view[at : at + size])
        at += size
        line()  # the CRLF after the chunk's data
        size = int(line().strip(), 16)
    return b"".join(parts)


@contextmanager
def s3_uploads_decoded_linearly() -> Iterator[None]:
    """Uploads in aws-chunked encoding (what botocore sends with a checksum) in linear time, test harness only:
    moto reads the whole request body with one `read()`, which botocore's `AwsChunkedWrapper` answers by
    appending chunk after chunk to one bytes object (quadratic; over a network it is read in fixed pieces), and
    decodes it with `decode_aws_chunked` instead of its own `_handle_encoded_body`."""
    from botocore.httpchecksum import AwsChunkedWrapper
    from moto.s3.responses import S3Response

    real_read = AwsChunkedWrapper.read

    def read(self: Any, size: int | None = None) -> bytes:
        if size is not None and size > 0:
            return bytes(real_read(self, size))
        parts = []
        while piece := real_read(self, 8 * 1024 * 1024):
            parts.append(piece)
        return b"".join(parts)

    with (
        mock.patch.object(AwsChunkedWrapper, "read", read),
        mock.patch.object(S3Response, "_handle_encoded_body", lambda self, body: decode_aws_chunked(body)),
    ):
        yield


def create_state_machine(asl_path: Path | None = None) -> str:
    """The real ASL with CDK's placeholders substituted by moto function ARNs; returns the machine's ARN."""
    import io
    import zipfile

    import boto3

    iam = boto3.client("iam", region_name=REGION)
    role_arn = iam.create_role(
        RoleName="iterate-test-role",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("handler.py", "def lambda_handler(event, context):\n    return event\n")
    lam = boto3.client("lambda", region_name=REGION)
    text = (asl_path or REPO / "statemachine" / "analysis.asl.json").read_text()
    for name in FUNCTIONS:
        arn = lam.create_function(
            FunctionName=f"iterate-{name}",
            Runtime="python3.12",
            Role=role_arn,
            Handler="handler.lambda_handler",
            Code={"ZipFile": zipped.getvalue()},
        )["FunctionArn"]
        text = text.replace("${" + PLACEHOLDER[name] + "}", arn)
    # The engine path's Glue database (the stack's EngineConstruct); moto's Athena takes any workgroup name.
    boto3.client("glue", region_name=REGION).create_database(DatabaseInput={"Name": ENGINE_DATABASE})
    text = text.replace("${EngineDatabase}", ENGINE_DATABASE).replace("${EngineWorkGroup}", ENGINE_WORKGROUP)
    assert "${" not in text, "every placeholder in the ASL must be substituted"
    sfn = boto3.client("stepfunctions", region_name=REGION)
    return str(
        sfn.create_state_machine(name="iterate-analysis", definition=text, roleArn=role_arn)[
            "stateMachineArn"
        ]
    )


def run_execution(
    sfn: Any, machine_arn: str, payload: dict[str, Any], *, timeout_s: float = 120
) -> dict[str, Any]:
    """Start an execution and wait for it to end; returns describe_execution."""
    # EventBridge and the API name executions uniquely; moto would otherwise name every one "None".
    name = f"exec-{uuid.uuid4().hex[:12]}"
    arn = sfn.start_execution(stateMachineArn=machine_arn, name=name, input=json.dumps(payload))[
        "executionArn"
    ]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return dict(described)
        time.sleep(0.05)
    raise TimeoutError(f"execution {arn} still running after {timeout_s} s")


def history(sfn: Any, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def orders_csv() -> bytes:
    """A small orders file with problems a data engineer would expect found: blanks, a duplicate row,
    one state spelled three ways, an outlier, a bad email."""
    rows = [["order_id", "customer", "email", "state", "amount", "order_date"]]
    states = ["CA", "NY", "TX", "WA"]
    for i in range(1, 61):
        state = states[i % 4]
        email = f"user{i}@example.com"
        amount = f"{20 + (i * 7) % 90}.{i % 10}0"
        rows.append([str(1000 + i), f"Customer {i}", email, state, amount, f"2026-0{1 + i % 9}-1{i % 10}"])
    rows[5][3] = "calif."
    rows[9][3] = "California"
    rows[12][2] = ""
    rows[13][2] = "not-an-email"
    rows[20][4] = "99999.00"
    rows[30][1] = ""
    rows.append(list(rows[7]))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def api_event(
    method: str,
    path: str,
    *,
    owner: str | None,
    body: Any = None,
    raw_body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A REST API proxy event as API Gateway sends it after the Cognito user pool authorizer."""
    claims = {"sub": owner, "email": f"{owner}@example.com"} if owner else {}
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": "req",
            "accountId": "123456789012",
            "authorizer": {"claims": claims},
        },
        "body": raw_body if raw_body is not None else (json.dumps(body) if body is not None else None),
        "isBase64Encoded": False,
    }


@contextmanager
def transactions_without_table_copies() -> Iterator[None]:
    """moto's TransactWriteItems deep-copies every table it touches, whole, before each transaction (its
    rollback), so a transaction costs time and memory in the table's size: a load test's thousands of slot
    transactions over a table of thousands of items took minutes and gigabytes. This keeps the semantics
    (all or nothing) by restoring just the items the transaction names when it is cancelled."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    real = DynamoDBBackend.transact_write_items

    def transact(self: Any, transact_items: list[dict[str, Any]]) -> None:
        before: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = self.get_table(op["TableName"])
            if op_type == "Put":
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            current = self.get_item(op["TableName"], key)
            before.append(
                (op["TableName"], key, None if current is None else current.to_json()["Attributes"])
            )
        with mock.patch.object(Table, "__deepcopy__", lambda table, memo: table, create=True):
            try:
                real(self, transact_items)
            except Exception:
                for name, key, attrs in before:
                    if attrs is None:
                        if self.get_item(name, key) is not None:
                            self.delete_item(name, key)
                    else:
                        self.put_item(name, attrs)
                raise

    with mock.patch.object(DynamoDBBackend, "transact_write_items", transact):
        yield


@contextmanager
def queries_by_partition() -> Iterator[None]:
    """moto answers a Query of the base table by sorting every item of the table and keeping the partition's: a
    Query costs time in the table's size (0.03-0.05 s each over a load test's few thousand items, where DynamoDB
    reads the partition alone). This hands moto's Query the partition's items alone, sorted as moto sorts them;
    index queries are moto's own."""
    from moto.dynamodb.models.table import Table

    real_query, real_all = Table.query, Table.all_items
    local = threading.local()

    def all_items(self: Any) -> Any:
        items = getattr(local, "partition", None)
        return items if items is not None else real_all(self)

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name or hash_key is None or not self.range_key_attr:
            return real_query(self, hash_key, *args, **kwargs)
        partition = self.items.get(hash_key) or {}
        local.partition = sorted(partition.values(), key=lambda x: (x.hash_key, x.range_key))
        try:
            return real_query(self, hash_key, *args, **kwargs)
        finally:
            local.partition = None

    with mock.patch.object(Table, "query", query), mock.patch.object(Table, "all_items", all_items):
        yield


@contextmanager
def sqs_without_queue_scans() -> Iterator[None]:
    """moto works out every attribute of a queue whenever it reads one, its three message counts among them
    (each a scan of every message in the queue, two clock reads a message): a SendMessage reads the queue's
    attributes four times, and a ReceiveMessage three times per message it hands over, so each costs time in
    the queue's depth (0.02-0.04 s with the load test's several hundred waiting messages), where SQS does not.
    This keeps moto's attributes, keys and values alike, and counts the messages only when a count is read."""
    from collections.abc import Mapping

    from moto.sqs.models import Queue, SQSBackend

    real_attributes = Queue.attributes.fget  # type: ignore[attr-defined]
    real_get = SQSBackend.get_queue_attributes
    counts = {
        "ApproximateNumberOfMessages": "approximate_number_of_messages",
        "ApproximateNumberOfMessagesDelayed": "approximate_number_of_messages_delayed",
        "ApproximateNumberOfMessagesNotVisible": "approximate_number_of_messages_not_visible",
    }

    class Uncounted:
        """The queue, its message counts left out."""

        def __init__(self, queue: Any) -> None:
            self._queue = queue

        def __getattr__(self, name: str) -> Any:
            return None if name in counts.values() else getattr(self._queue, name)

    class Attributes(Mapping[str, Any]):
        def __init__(self, queue: Any) -> None:
            self._queue = queue
            self._values = real_attributes(Uncounted(queue))

        def __getitem__(self, name: str) -> Any:
            if name in counts and name in self._values:
                return getattr(self._queue, counts[name])
            return self._values[name]

        def __iter__(self) -> Iterator[str]:
            return iter(self._values)

        def __len__(self) -> int:
            return len(self._values)

    def get_queue_attributes(self: Any, queue_name: str, attribute_names: list[str]) -> dict[str, Any]:
        return dict(real_get(self, queue_name, attribute_names))

    with (
        mock.patch.object(Queue, "attributes", property(Attributes)),
        mock.patch.object(SQSBackend, "get_queue_attributes", get_queue_attributes),
    ):
        yield
