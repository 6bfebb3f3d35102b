"""A load driver for admission under moto: uploads from many owners within a window, in real time.

What is real: the S3 "Object Created" events (the upload rule's input) handed to the admission function's
handler (claims, quotas, QUEUED runs, queue entries, SQS FIFO messages grouped by owner); moto's FIFO queue
(one in-flight batch per message group, visibility timeouts); the handler on each batch the driver receives,
as Lambda's event source mapping would hand it (it leases the slots in DynamoDB transactions and calls
StartExecution, recorded by moto); the run's start (`start_run`, QUEUED → RUNNING, as ProfileDataset does);
its end through the calls Report makes (RUNNING → SUCCEEDED, `release_run`) or through the real
RecordFailure step for an unreadable file (DatasetReadError, the user's); and the execution-status rule's
event (the release a no-op by then). What is not: the pipeline's steps between start and end: a run's body
is a wait of a few seconds (the whole pipeline per run under moto is seconds of CPU, 1,000 of them too slow
on 2 cores). moto's transactions restore only the items they name when cancelled, not a copy of the whole
table (`transactions_without_table_copies`), its Query reads the partition's items alone, not the whole
table sorted (`queries_by_partition`), and its SQS queue counts its messages only when a count is read, not
at every message sent or received (`sqs_without_queue_scans`).

Two Lambda instances at once: the uploads are handed over by a thread of their own, each at its planned
second, while the main thread works the queue (the batches, the runs' starts and ends), as the upload rule's
invocations and the event source mapping's run side by side on AWS. Their handler calls overlap; their AWS
calls take turns, each applied whole (moto applies a request in Python steps another thread could interleave,
where DynamoDB and SQS apply each atomically), an upload's first. So admission's writes race as they would on
AWS, request by request, and the checks below are of that. Invariants are checked as it goes: no owner ever
holds more slots than its limit, the deployment never more than the global one.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from awsenv import (
    ADMISSION_QUEUE_URL,
    BUCKET,
    REGION,
    FakeContext,
    admission_records,
    as_function,
    load_handler,
    object_created_event,
    queries_by_partition,
    sqs_without_queue_scans,
    transactions_without_table_copies,
)


@dataclass
class LoadResult:
    uploads: int
    owners: int
    duplicates_sent: int
    queued: int = 0  # runs that waited a second or more for a slot
    started: int = 0
    succeeded: int = 0
    user_errors: int = 0  # an unreadable file (RecordFailure) or a daily quota (refused before queueing)
    quota_rejected: int = 0
    other_failures: list[str] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    light_owner_waits: list[float] = field(default_factory=list)
    admission_invocations: int = 0  # handler calls on SQS batches
    intake_invocations: int = 0  # handler calls on upload events
    release_invocations: int = 0  # handler calls on execution-status events
    executions: int = 0  # StartExecution calls moto recorded
    peak_global: int = 0
    peak_owner: int = 0
    over_limit: list[str] = field(default_factory=list)
    left_in_queue: int = 0
    left_leases: int = 0
    left_queue_entries: int = 0
    left_slots_counted: int = 0  # the global counter: it must come back to 0 with the leases
    seconds: float = 0.0
    last_upload_s: float = 0.0  # when the last upload's event was handed to the admission function
    last_planned_s: float = 0.0  # when the plan had it (the window is the plan's)
    last_queued_s: float = 0.0  # when the function had queued it (its call returned)
    late: list[float] = field(default_factory=list)  # each upload: its handler call began this late, s
    intake_seconds: float = 0.0  # the admission handler's time on upload events, in all
    # AWS calls the admission function made ("dynamodb:PutItem", …; a transaction's items as
    # "dynamodb:TransactWriteItems/items"), for the cost of admission per run (docs/cost-model.md)
    admission_calls: dict[str, int] = field(default_factory=dict)

    @property
    def max_wait(self) -> float:
        return max(self.waits, default=0.0)

    def percentile(self, share: float) -> float:
        return _share(self.waits, share)

    def table(self) -> str:
        rows = [
            (
                "uploads (owners)",
                f"{self.uploads} ({self.owners}), {self.duplicates_sent} events delivered twice",
            ),
            (
                "last upload handed over at s (planned at; queued by)",
                f"{self.last_upload_s:.2f} ({self.last_planned_s:.2f}; {self.last_queued_s:.2f})",
            ),
            (
                "uploads handed over late by max / p95 s",
                f"{max(self.late, default=0.0):.2f} / {_share(self.late, 0.95):.2f}",
            ),
            (
                "intake handler s in all / per event",
                f"{self.intake_seconds:.1f} / {self.intake_seconds / max(1, self.intake_invocations):.3f}",
            ),
            ("runs started / succeeded", f"{self.started} / {self.succeeded}"),
            ("user errors", f"{self.user_errors} ({self.quota_rejected} over the daily runs quota)"),
            ("other failures", str(len(self.other_failures))),
            ("runs queued (waited 1 s or more for a slot)", str(self.queued)),
            (
                "wait max / p95 / p50 s",
                f"{self.max_wait:.1f} / {self.percentile(0.95):.1f} / {self.percentile(0.5):.1f}",
            ),
            ("light owner's wait max s", f"{max(self.light_owner_waits, default=0.0):.1f}"),
            ("peak slots global / one owner", f"{self.peak_global} / {self.peak_owner}"),
            (
                "invocations admit / intake / release",
                f"{self.admission_invocations} / {self.intake_invocations} / {self.release_invocations}",
            ),
            ("executions started", str(self.executions)),
            (
                "left: messages / leases / slots counted / queue entries",
                f"{self.left_in_queue} / {self.left_leases} / {self.left_slots_counted} / {self.left_queue_entries}",
            ),
            ("wall clock s", f"{self.seconds:.1f}"),
        ]
        runs = max(1, self.started)
        rows += [
            (f"admission {name} per run", f"{count / runs:.2f}")
            for name, count in self.admission_calls.items()
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _share(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def create_pass_machine() -> str:
    """A state machine whose runs do nothing (admission's StartExecution needs one; the driver plays the runs
    itself): its ARN."""
    import boto3

    role = boto3.client("iam", region_name=REGION).create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")[
        "Role"
    ]["Arn"]
    return boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name="iterate-analysis",
        definition=json.dumps({"StartAt": "Run", "States": {"Run": {"Type": "Pass", "End": True}}}),
        roleArn=role,
    )["stateMachineArn"]


class _Calls:
    """AWS calls one at a time, each whole (moto applies a request in Python that another thread could
    interleave; DynamoDB and SQS apply each request atomically), the uploads' calls first: while one waits,
    no other call begins."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.upload_waiting = threading.Event()

    @contextlib.contextmanager
    def upload(self) -> Any:
        """The uploads' thread hands an upload over: its calls go before the queue's."""
        _THREAD.upload = True
        self.upload_waiting.set()
        try:
            yield
        finally:
            self.upload_waiting.clear()
            _THREAD.upload = False

    @contextlib.contextmanager
    def turn(self) -> Any:
        if not getattr(_THREAD, "upload", False):
            while self.upload_waiting.is_set():
                time.sleep(0.0005)
        with self.lock:
            yield


_THREAD = threading.local()  # which thread runs the admission handler (its calls are counted), the uploads'


def run_load(**kwargs: Any) -> LoadResult:
    """`_run_load` with moto's transactions copying only the items they name (`transactions_without_table_copies`),
    its Query reading one partition, its queue not scanned at each message, one AWS call at a time (`_Calls`),
    counting the AWS calls the admission function makes. Powertools' EMF lines (printed to stdout by every
    handler call) are swallowed, and its one metric set per process is added to and flushed by one thread at
    a time (a Lambda instance runs one invocation at a time; here two threads share the process)."""
    from botocore.client import BaseClient

    from iterate.aws.observability import metrics

    counted: dict[str, int] = {}
    real = BaseClient._make_api_call
    calls = _Calls()

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        with calls.turn():
            if getattr(_THREAD, "admission", False):
                name = f"{self.meta.service_model.service_name}:{operation}"
                counted[name] = counted.get(name, 0) + 1
                if operation == "TransactWriteItems":
                    items = f"{name}/items"
                    counted[items] = counted.get(items, 0) + len(params.get("TransactItems", []))
            return real(self, operation, params)

    provider = metrics.provider
    metrics_lock = threading.RLock()

    def one_at_a_time(method: Any) -> Any:
        def locked(*args: Any, **kwargs: Any) -> Any:
            with metrics_lock:
                return method(*args, **kwargs)

        return locked

    with (
        transactions_without_table_copies(),
        queries_by_partition(),
        sqs_without_queue_scans(),
        mock.patch.object(BaseClient, "_make_api_call", counting),
        mock.patch.object(provider, "add_metric", one_at_a_time(provider.add_metric)),
        mock.patch.object(provider, "flush_metrics", one_at_a_time(provider.flush_metrics)),
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
    ):
        # The GIL passes between the two threads every 0.5 ms instead of 5 ms: an upload due while the queue's
        # thread computes gets its turn about as soon as a Lambda instance of its own would.
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        try:
            result = _run_load(calls=calls, **kwargs)
        finally:
            sys.setswitchinterval(switch)
    result.admission_calls = dict(sorted(counted.items()))
    return result


@contextlib.contextmanager
def _admission() -> Any:
    """This thread is running the admission function's handler (its AWS calls are counted)."""
    _THREAD.admission = True
    try:
        with as_function("admission"):
            yield
    finally:
        _THREAD.admission = False


def _run_load(
    *,
    calls: _Calls,
    owners: int,
    uploads: int,
    window_s: float,
    owner_limit: int,
    global_limit: int,
    run_s: tuple[float, float],
    light_owner_uploads: int = 5,
    runs_quota: int | None = None,
    broken_share: float = 0.02,
    duplicate_share: float = 0.02,
    seed: int = 7,
    timeout_s: float = 900.0,
) -> LoadResult:
    """Inside a moto world (bucket, table, admission queue, a state machine at ITERATE_STATE_MACHINE_ARN,
    environment with the limits set): `uploads` uploads within `window_s` seconds, `light_owner_uploads` of
    them from one owner (o00) and the rest spread over the other owners, then until every run has ended."""
    import boto3

    from iterate.aws.admission import release_run
    from iterate.aws.deps import build_deps
    from iterate.aws.payloads import RunState, StartRunRequest, artifacts_prefix
    from iterate.aws.triggers import repository, start_run
    from iterate.storage.admission import OwnerQueue, SlotLeases

    rng = random.Random(seed)
    sqs = boto3.client("sqs", region_name=REGION)
    table = boto3.resource("dynamodb", region_name=REGION).Table(__import__("os").environ["ITERATE_TABLE"])
    handler = load_handler("admission").lambda_handler
    record_failure = load_handler("record_failure").lambda_handler
    slots = SlotLeases(table)
    deps = build_deps()

    names = [f"o{i:02d}" for i in range(owners)]
    heavy = names[1:]
    plan: list[tuple[float, str, int]] = []
    for k in range(light_owner_uploads):
        plan.append((rng.uniform(0, window_s), names[0], k))
    for k in range(uploads - light_owner_uploads):
        plan.append((rng.uniform(0, window_s), heavy[k % len(heavy)], k))
    plan.sort()
    result = LoadResult(uploads=uploads, owners=owners, duplicates_sent=0)
    ends: list[tuple[float, str, str, bool]] = []  # (end at, owner, run id, broken)
    broken: set[str] = set()  # the uploads' keys whose files are unreadable
    running: dict[str, set[str]] = {}
    started_at = time.monotonic()
    nxt = 0
    outstanding = 0  # queued runs not yet ended

    # The uploads' thread and the main thread run their handler calls at once, as separate Lambda instances
    # would; their AWS calls take turns (`calls`), an upload's first. The counters below change under this.
    counters = threading.Lock()
    upload_rng = random.Random(seed + 1)  # the uploads' own draws (duplicates, unreadable files)
    intake_errors: list[BaseException] = []

    def intake(event: dict[str, Any]) -> dict[str, Any]:
        result.intake_invocations += 1
        began = time.monotonic()
        try:
            with calls.upload(), _admission():
                return dict(handler(event, FakeContext("iterate-admission")))
        finally:
            result.intake_seconds += time.monotonic() - began

    def emit_all() -> None:
        """Each upload at its planned second: its event (sometimes twice, as EventBridge may deliver it) to
        the admission function."""
        nonlocal nxt, outstanding
        try:
            while nxt < len(plan):
                due, owner, k = plan[nxt]
                time.sleep(max(0.0, due - (time.monotonic() - started_at)))
                key = f"uploads/{owner}/d{k % 3}/file{k}.csv"
                event = object_created_event(BUCKET, key, f"v{k}", event_id=f"e-{owner}-{k}")
                event["detail"]["object"]["size"] = 1000 + k
                if upload_rng.random() < broken_share:
                    broken.add(key)  # before its run can start
                twice = upload_rng.random() < duplicate_share
                handed = time.monotonic() - started_at
                result.late.append(handed - due)
                outcome = intake(event)
                if twice:
                    result.duplicates_sent += 1
                    again = dict(event, id=f"e-{owner}-{k}-again")
                    assert intake(again)["outcome"] == "duplicate", "a duplicate event queued a second run"
                with counters:
                    if outcome["outcome"] == "queued":
                        outstanding += 1
                    elif outcome["outcome"] == "rejected":
                        result.quota_rejected += 1
                        result.user_errors += 1
                    result.last_upload_s, result.last_planned_s = handed, due
                    result.last_queued_s = time.monotonic() - started_at
                    nxt += 1
        except BaseException as exc:  # the main thread raises it
            intake_errors.append(exc)
            with counters:
                nxt = len(plan)

    # Every execution admission starts, by a message of its own or by fair share when a slot frees: the run
    # begins then, as its execution would.
    starts: list[tuple[str, str]] = []
    sfn_client = load_handler("admission")._deps().sfn_client()
    real_start = sfn_client.start_execution

    def recording_start(**kwargs: Any) -> Any:
        answer = real_start(**kwargs)
        starts.append((kwargs["name"], kwargs["input"]))
        return answer

    sfn_client.start_execution = recording_start

    def began(now: float) -> None:
        """The runs admission started in the handler call just made: each becomes RUNNING (ProfileDataset's
        start_run) and ends a few seconds later."""
        while starts:
            run_id, raw = starts.pop(0)
            request = StartRunRequest.model_validate_json(raw)
            owner = request.owner
            record = repository(deps, owner).require_run(run_id)
            waited = float(record.get("waitedS") or 0.0)
            if waited >= 1.0:
                result.queued += 1
            result.waits.append(waited)
            if owner == names[0]:
                result.light_owner_waits.append(waited)
            result.started += 1
            run = RunState(
                runId=run_id,
                owner=owner,
                datasetId=request.datasetId,
                trigger="s3",
                bucket=BUCKET,
                prefix=artifacts_prefix(owner, request.datasetId, run_id),
                source=request.source,  # type: ignore[arg-type]
                startedAt=str(record["startedAt"]),
            )
            repo = repository(deps, owner)
            start_run(repo, run, f"exec-{run_id}")
            repo.set_run_fields(run_id, stateJson=json.dumps({"run": run.model_dump(mode="json")}))
            running.setdefault(owner, set()).add(run_id)
            heapq.heappush(ends, (now + rng.uniform(*run_s), owner, run_id, request.source.key in broken))

    emitter = threading.Thread(target=emit_all, name="uploads", daemon=True)
    emitter.start()
    while True:
        if intake_errors:
            raise intake_errors[0]
        now = time.monotonic() - started_at
        # Runs due to end: the end Report (or RecordFailure) makes, then the execution-status event.
        while ends and ends[0][0] <= now:
            _, owner, run_id, is_broken = heapq.heappop(ends)
            repo = repository(deps, owner)
            if is_broken:
                state = json.loads(repo.require_run(run_id)["stateJson"])
                out = record_failure(
                    {
                        "state": {**state, "error": {"Error": "DatasetReadError", "Cause": "not a table"}},
                        "executionId": f"exec-{run_id}",
                    },
                    FakeContext("iterate-record_failure"),
                )
                assert out["status"] == "FAILED", out
            else:
                repo.transition(run_id, from_status="RUNNING", to_status="SUCCEEDED")
                release_run(deps, run_id)
            running[owner].discard(run_id)
            result.release_invocations += 1
            with _admission():
                handler(
                    {
                        "source": "aws.states",
                        "detail-type": "Step Functions Execution Status Change",
                        "detail": {"name": run_id, "status": "FAILED" if is_broken else "SUCCEEDED"},
                    },
                    FakeContext("iterate-admission"),
                )
            with counters:
                outstanding -= 1
            began(now)  # the slot it freed may have gone to a waiting run (fair share)
        # What the event source mapping does: receive a batch, hand it over, delete what was not reported.
        for _ in range(20):
            messages = sqs.receive_message(
                QueueUrl=ADMISSION_QUEUE_URL, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                break
            result.admission_invocations += 1
            with _admission():
                answer = handler({"Records": admission_records(messages)}, FakeContext("iterate-admission"))
            failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
            for m in messages:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=ADMISSION_QUEUE_URL, ReceiptHandle=m["ReceiptHandle"])
            began(now)
            if len(failed) == len(messages):
                break
        # Limits, as the counters and the runs in flight say.
        held_global = slots.held()
        result.peak_global = max(result.peak_global, held_global)
        in_flight = max((len(r) for r in running.values()), default=0)
        result.peak_owner = max(result.peak_owner, in_flight)
        if held_global > global_limit or in_flight > owner_limit:
            result.over_limit.append(f"at {now:.1f}s: {held_global} global, {in_flight} one owner")
        with counters:
            drained = nxt == len(plan) and outstanding == 0
        if drained:
            # Messages of runs fair share started before their message came are dropped when they come back.
            counts = sqs.get_queue_attributes(QueueUrl=ADMISSION_QUEUE_URL, AttributeNames=["All"])[
                "Attributes"
            ]
            drained = (
                int(counts["ApproximateNumberOfMessages"])
                + int(counts["ApproximateNumberOfMessagesNotVisible"])
                == 0
            )
        if drained:
            break
        if now > timeout_s:
            raise TimeoutError(f"{outstanding} runs still outstanding after {timeout_s} s")
        time.sleep(0.1)
    result.seconds = time.monotonic() - started_at
    emitter.join()
    # Every run ended SUCCEEDED or with a user error; the queue, the leases and the owners' queues are empty.
    for owner in names:
        for run in repository(deps, owner).list_runs():
            if run["status"] == "SUCCEEDED":
                result.succeeded += 1
            elif run.get("error") == "DatasetReadError":
                result.user_errors += 1
            elif run.get("error") != "QuotaExceededError":
                result.other_failures.append(f"{run['runId']}: {run['status']} {run.get('error')}")
        result.left_queue_entries += OwnerQueue(table, owner).waiting()
    attributes = sqs.get_queue_attributes(QueueUrl=ADMISSION_QUEUE_URL, AttributeNames=["All"])["Attributes"]
    result.left_in_queue = int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )
    result.left_leases = len(slots.leases())
    result.left_slots_counted = slots.held() + sum(slots.held(owner) for owner in names)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = __import__("os").environ["ITERATE_STATE_MACHINE_ARN"]
    paginator = sfn.get_paginator("list_executions")
    result.executions = sum(len(p["executions"]) for p in paginator.paginate(stateMachineArn=arn))
    return result
