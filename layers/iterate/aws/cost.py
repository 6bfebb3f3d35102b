"""Each run's own infrastructure cost estimate: Lambda GB-seconds, state transitions and requests, priced.

Measured where it happens: every step times its own work and knows its function's memory (Lambda sets
AWS_LAMBDA_FUNCTION_MEMORY_SIZE), and counts the S3, DynamoDB and EventBridge calls its clients make through
botocore's `before-call` event. The sandbox has no DynamoDB access, so RecordAttempt books the sandbox's time
from the attempt's own `execution_time_ms`. Step Functions transitions are counted per Task from the state
machine's shape (TRANSITIONS). It is an estimate: Lambda bills the whole invocation (cold start and payload
handling included) rounded up to the millisecond, DynamoDB bills capacity units (1 KB writes, 4 KB reads)
rather than requests, and storage, logs and data transfer are left out. docs/cost-model.md prices whole runs.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from iterate.contracts import InfraCost

# Public list prices in USD, us-east-1, 2026-11 (Lambda on arm64, which the stack deploys; Step Functions
# standard workflows; S3 Standard; DynamoDB on-demand; EventBridge custom events).
PRICES: dict[str, float] = {
    "lambda_gb_second": 0.0000133334,
    "lambda_request": 0.20 / 1_000_000,
    "state_transition": 0.025 / 1_000,
    "s3_write_request": 0.005 / 1_000,  # PUT, COPY, POST, LIST
    "s3_read_request": 0.0004 / 1_000,  # GET, HEAD and the rest
    "dynamo_write_request": 0.625 / 1_000_000,  # one write request unit (1 KB)
    "dynamo_read_request": 0.125 / 1_000_000,  # one read request unit (4 KB, strongly consistent)
    "event": 1.00 / 1_000_000,
}

# State transitions each Task's invocation accounts for: the Task and the Choice/Pass/Succeed/Fail it leads
# to (statemachine/analysis.asl.json). RecordAttempt also books RunInSandbox (one), which cannot write the run.
TRANSITIONS: dict[str, int] = {
    "profile": 3,  # ProfileDataset, IsDuplicateUpload, IsChunked (MergeChunks books its own Task the same way)
    "understand": 1,  # UnderstandDataset
    "analyze": 2,  # AnalyzeDataset, InvestigateEach
    "generate": 2,  # GenerateCode, HasCode
    "record": 2,  # RecordAttempt, TryAgain (RunInSandbox is booked with the sandbox's own time)
    "plan": 2,  # PlanProofs, HasBatches
    "batch": 2,  # PrepareBatch, HasBatch
    "record_batch": 2,  # RecordBatch, BatchDone (RunBatchInSandbox is booked with the sandbox's own time)
    "unsettled": 2,  # ListUnsettled, ProveTemplates
    "report": 2,  # ReportRun, RunSucceeded
    "failure": 2,  # RecordFailure, RunFailed
    "engine": 3,  # EngineStep's last round, EngineDone, MergeOrEngine
    "engine_round": 3,  # each earlier round: EngineStep, EngineDone, RunEngineQuery
}

_S3_WRITES = ("Put", "Copy", "Post", "List", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")
_DYNAMO_WRITES = ("Put", "Update", "Delete", "BatchWrite", "TransactWrite")


def _kind(service: str, operation: str) -> str | None:
    """The price class of one AWS call (None: a service this estimate does not price)."""
    if service == "s3":
        return "s3_write_request" if operation.startswith(_S3_WRITES) else "s3_read_request"
    if service == "dynamodb":
        return "dynamo_write_request" if operation.startswith(_DYNAMO_WRITES) else "dynamo_read_request"
    if service == "eventbridge" and operation == "PutEvents":
        return "event"
    return None


class _Calls:
    """Calls made by this process's clients, by price class (one Lambda invocation at a time per container)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, model: Any, **_: Any) -> None:
        kind = _kind(model.service_model.service_id.hyphenize(), model.name)
        if kind is not None:
            with self._lock:
                self._counts[kind] += 1

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


CALLS = _Calls()


def watch(client: Any) -> None:
    """Count `client`'s calls (a boto3 client, or a resource such as a DynamoDB Table); idempotent."""
    inner = getattr(getattr(client, "meta", None), "client", None) or client
    events = getattr(getattr(inner, "meta", None), "events", None)
    if events is not None:
        events.register("before-call", CALLS.count, unique_id="iterate-infra-cost")


def gb_seconds(ms: float, memory_mb: int | None) -> float:
    return (ms / 1000.0) * (memory_mb / 1024.0) if memory_mb else 0.0


@dataclass
class StepMeter:
    """One step's share of the run's infrastructure: started before the step, finished after it."""

    transitions: int
    before: Counter[str]

    @classmethod
    def start(cls, transitions: int) -> StepMeter:
        return cls(transitions=transitions, before=CALLS.snapshot())

    def finish(self, elapsed_ms: float, memory_mb: int | None, *, invocations: int = 1) -> InfraCost:
        """What the step used since start; `invocations` 0 for the rest of an invocation already booked."""
        calls = CALLS.snapshot()
        calls.subtract(self.before)
        return priced(
            lambda_gb_s=gb_seconds(elapsed_ms, memory_mb),
            lambda_invocations=invocations,
            transitions=self.transitions,
            calls={k: max(0, v) for k, v in calls.items()},
        )


def priced(
    *, lambda_gb_s: float, lambda_invocations: int, transitions: int, calls: dict[str, int]
) -> InfraCost:
    """An InfraCost with its USD estimate computed from PRICES."""
    cost = (
        lambda_gb_s * PRICES["lambda_gb_second"]
        + lambda_invocations * PRICES["lambda_request"]
        + transitions * PRICES["state_transition"]
        + sum(n * PRICES[kind] for kind, n in calls.items())
    )
    return InfraCost(
        lambdaGbSeconds=round(lambda_gb_s, 4),
        lambdaInvocations=lambda_invocations,
        stateTransitions=transitions,
        s3WriteRequests=calls.get("s3_write_request", 0),
        s3ReadRequests=calls.get("s3_read_request", 0),
        dynamoWriteRequests=calls.get("dynamo_write_request", 0),
        dynamoReadRequests=calls.get("dynamo_read_request", 0),
        events=calls.get("event", 0),
        costUsd=round(cost, 10),
    )
