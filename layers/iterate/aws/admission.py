"""Admission: every run (upload, schedule, API, fix) is recorded QUEUED and put on one SQS FIFO queue whose
message group is its owner; the admitter starts its execution only once a global and an owner slot are
leased to it, and a run's end gives them back. Nothing fails for being busy: a run waits, its place in its
owner's queue visible. Quotas are checked before a run is queued."""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from iterate.aws.deps import AwsDeps
from iterate.aws.engine_tables import cleanup_run_tables
from iterate.aws.observability import logger, metrics
from iterate.aws.payloads import ObjectCreatedEvent, S3ObjectRef, StartRunRequest
from iterate.aws.triggers import is_s3_event, now_iso, repository, run_for_trigger
from iterate.contracts.base import Contract
from iterate.storage.admission import (
    DailyUsage,
    OwnerQueue,
    QuotaExceededError,
    QuotaLimits,
    SlotLeases,
    admission_state,
    transact,
)
from iterate.storage.dynamo import RunTransitionError

QUEUED_MESSAGE = "waiting for a run slot"
# A message of a run that could not start yet comes back after admission_retry_s, later the longer it has
# waited (every 20 receives one more step, at most 5 minutes): SQS's 1,000-receive ceiling before the
# dead-letter queue is then days of waiting, never minutes.
MAX_RETRY_S = 300
_GROUP_ID = re.compile(r"^[!-~]{1,128}$")


class AdmissionMessage(Contract):
    """One run waiting on the admission queue: the execution input it will start with, and its queue entry."""

    request: StartRunRequest
    queueKey: str = Field(description="its item in the owner's queue (OwnerQueue)")
    queuedAt: float = Field(description="epoch seconds it was queued (its wait is measured from here)")


class Enqueued(Contract):
    outcome: Literal["queued", "duplicate", "rejected"]
    runId: str | None = None
    owner: str | None = None
    reason: str | None = None


def quota_limits(deps: AwsDeps) -> QuotaLimits:
    c = deps.config
    return QuotaLimits(runs=c.quota_runs_per_day, bytes=c.quota_bytes_per_day, tokens=c.quota_tokens_per_day)


def leases(deps: AwsDeps) -> SlotLeases:
    return SlotLeases(deps.dynamo_table(), clock=deps.clock)


def message_group(owner: str) -> str:
    """The owner as an SQS message group id (hashed when it holds characters a group id may not)."""
    return owner if _GROUP_ID.match(owner) else hashlib.sha256(owner.encode()).hexdigest()


def _object_head(deps: AwsDeps, source: S3ObjectRef, owner: str) -> tuple[int, str | None]:
    """The source's size for the bytes quota and its version, read as every step reads it (through the owner's
    role for a file in their bucket); (0, None) when it cannot be read: ProfileDataset then says why."""
    from botocore.exceptions import ClientError

    from iterate.aws.sources import SourceAccessError, source_client

    extra = {"VersionId": source.versionId} if source.versionId else {}
    try:
        s3 = source_client(deps, source, owner)
        head = s3.head_object(Bucket=source.bucket, Key=source.key, **extra)
    except (ClientError, SourceAccessError):
        return 0, None
    version = head.get("VersionId")
    return int(head["ContentLength"]), version if version and version != "null" else None


def enqueue(
    deps: AwsDeps,
    trigger: dict[str, Any],
    *,
    on_quota: Literal["record", "raise"] = "record",
    event_id: str | None = None,
) -> Enqueued:
    """Record the run `trigger` asks for as QUEUED, charge it to the owner's daily quotas and put it on the
    admission queue. The upload's claim, the run, the charge, its entry in the owner's queue and the owner's
    waiting counter are one transaction: all are written or none (a retried delivery never finds half of them).
    An upload event already seen is a duplicate (nothing queued). Over a quota, the run is recorded FAILED with
    QuotaExceededError as its error (`record`: uploads, schedules, fixes; the user's, counted as RunsRejected: no
    execution failed, so RunsFailed's arithmetic is untouched), or refused with nothing recorded (`raise`: the
    API answers 429)."""
    run, _ = run_for_trigger(deps, trigger)
    repo = repository(deps, run.owner)
    logger.append_keys(run_id=run.runId, dataset_id=run.datasetId, owner=run.owner)
    claim: list[dict[str, Any]] = []
    if is_s3_event(trigger):
        event = ObjectCreatedEvent.model_validate(trigger)
        claim.append(
            repo.claim_object_write(
                run.source.bucket,
                run.source.key,
                run.source.versionId,
                run.runId,
                execution_id=f"event:{event_id or event.id}",
            )
        )
        size = event.detail.object.size
        if size is None:
            size, _ = _object_head(deps, run.source, run.owner)
    else:
        size, version = _object_head(deps, run.source, run.owner)
        if version and run.source.versionId is None:
            # A dataset imported from the owner's bucket names the object, not a version (a schedule re-reads
            # what is there now): the run reads the version there when it was queued, in every step.
            run = run.model_copy(update={"source": run.source.model_copy(update={"versionId": version})})
    table = deps.dynamo_table()
    queued_at = deps.clock()
    queue = OwnerQueue(table, run.owner)
    queue_key = queue.sort_key(int(queued_at * 1000), run.runId)
    record = {
        "runId": run.runId,
        "datasetId": run.datasetId,
        "status": "QUEUED",
        "trigger": run.trigger,
        "startedAt": run.startedAt,
        "queuedAt": run.startedAt,
        "queueKey": queue_key,
        "sizeBytes": size,
        "instructions": run.instructions,
        "source": run.source.model_dump(mode="json"),
        "artifactsPrefix": run.prefix,
        "progress": {"step": "queued", "percent": 0, "message": QUEUED_MESSAGE},
    }
    message = AdmissionMessage(
        request=StartRunRequest(
            trigger=run.trigger,
            owner=run.owner,
            datasetId=run.datasetId,
            runId=run.runId,
            source=run.source,
            instructions=run.instructions,
        ),
        queueKey=queue_key,
        queuedAt=queued_at,
    )
    usage, limits = DailyUsage(table, run.owner, clock=deps.clock), quota_limits(deps)
    if size > limits.bytes:
        return _refuse(deps, usage.refusal(size, limits), record, claim, owner=run.owner, on_quota=on_quota)
    writes = [
        *claim,
        repo.create_run_write(record),
        usage.charge_run_write(size, limits),
        *queue.add_writes(run.runId, int(queued_at * 1000), request=message.model_dump_json()),
    ]
    failed = transact(table, writes)
    claimed_by_another, run_exists, over_quota = (
        bool(claim) and 0 in failed,
        len(claim) in failed,
        len(claim) + 1 in failed,
    )
    if claimed_by_another:
        earlier = repo.object_claimant(run.source.bucket, run.source.key, run.source.versionId) or run.runId
        logger.info("duplicate upload event: run already queued", duplicate_of=earlier)
        metrics.add_metric(name="DuplicateUploads", unit="Count", value=1)
        return Enqueued(outcome="duplicate", runId=earlier, owner=run.owner)
    if run_exists:
        # A retried delivery of this request: recorded already, with its charge and queue entry (the FIFO
        # queue drops the repeated message).
        existing = repo.require_run(run.runId)
        if existing["status"] != "QUEUED":
            return Enqueued(outcome="duplicate", runId=run.runId, owner=run.owner)
        message = message.model_copy(update={"queueKey": str(existing.get("queueKey") or queue_key)})
    elif over_quota:
        return _refuse(deps, usage.refusal(size, limits), record, claim, owner=run.owner, on_quota=on_quota)
    elif failed:
        raise RunTransitionError(f"run {run.runId} not queued: writes {sorted(failed)} refused")
    deps.sqs_client().send_message(
        QueueUrl=deps.config.need("admission_queue_url"),
        MessageBody=message.model_dump_json(),
        MessageGroupId=message_group(run.owner),
        MessageDeduplicationId=run.runId,
    )
    metrics.add_metric(name="RunsQueued", unit="Count", value=1)
    return Enqueued(outcome="queued", runId=run.runId, owner=run.owner)


def _refuse(
    deps: AwsDeps,
    exc: QuotaExceededError,
    record: dict[str, Any],
    claim: list[dict[str, Any]],
    *,
    owner: str,
    on_quota: Literal["record", "raise"],
) -> Enqueued:
    """A run over a daily quota: recorded FAILED (with the upload's claim, so that another delivery of the
    event is a duplicate), or refused with nothing recorded."""
    metrics.add_metric(name="RunsRejected", unit="Count", value=1)
    logger.info("run refused: daily quota", quota=exc.quota, limit=exc.limit, used=exc.used)
    if on_quota == "raise":
        raise exc
    run_id = str(record["runId"])
    refused = {
        **{k: v for k, v in record.items() if k != "queueKey"},
        "status": "FAILED",
        "error": type(exc).__name__,
        "reason": str(exc),
        "completedAt": now_iso(deps),
        "progress": {"step": "queued", "percent": 0, "message": "refused: daily quota reached"},
    }
    if transact(deps.dynamo_table(), [*claim, repository(deps, owner).create_run_write(refused)]):
        return Enqueued(
            outcome="duplicate", runId=run_id, owner=owner
        )  # another delivery recorded it meanwhile
    return Enqueued(outcome="rejected", runId=run_id, owner=owner, reason=str(exc))


def _retry_after(record: dict[str, Any], base_s: int) -> int:
    receives = int((record.get("attributes") or {}).get("ApproximateReceiveCount") or 1)
    return min(MAX_RETRY_S, base_s * (1 + receives // 20))


@dataclass
class FairShare:
    """Who runs and who waits, read once per SQS batch: a freed slot goes to the waiting owner with the fewest
    runs in progress, not to whichever message SQS hands over first. `free`: global slots not held."""

    free: int
    running: Counter[str] = field(default_factory=Counter)
    waiting: dict[str, int] = field(default_factory=dict)
    owner_limit: int = 1
    since: dict[str, int] = field(default_factory=dict)  # epoch ms each owner's waiting began

    @classmethod
    def read(cls, deps: AwsDeps) -> FairShare:
        state = admission_state(deps.dynamo_table())
        return cls(
            free=deps.config.global_concurrent_runs - len(state.holders),
            running=Counter(state.holders),
            waiting={owner: count for owner, (count, _) in state.waiting.items()},
            owner_limit=deps.config.max_concurrent_runs,
            since={owner: began for owner, (_, began) in state.waiting.items()},
        )

    def ahead_of(self, owner: str) -> int:
        """Waiting owners that deserve a free slot before `owner`: fewer runs in progress, and room for one."""
        mine = self.running[owner]
        return sum(
            1
            for other in self.waiting
            if other != owner and self.running[other] < min(mine, self.owner_limit)
        )

    def turn(self, owner: str) -> bool:
        """Whether `owner` may take a free slot now: more slots are free than owners ahead of it (those are
        kept for them: their messages come back within the retry delay). With none free, the lease decides."""
        return self.free <= 0 or self.free > self.ahead_of(owner)

    def started(self, owner: str) -> None:
        self.free -= 1
        self.running[owner] += 1
        if owner in self.waiting:
            self.waiting[owner] -= 1
            if self.waiting[owner] <= 0:
                del self.waiting[owner]

    def order(self, owner: str) -> int:
        return self.running[owner]


def _no_longer_waiting(deps: AwsDeps, message: AdmissionMessage, record: dict[str, Any] | None) -> bool:
    """Cancelled (or its dataset deleted) while it waited, or started already (by fair share, before its
    message came): nothing to start, and out of its owner's queue."""
    if record is not None and record["status"] == "QUEUED" and not record.get("admittedAt"):
        return False
    OwnerQueue(deps.dynamo_table(), message.request.owner).remove(message.queueKey)
    status = (record or {}).get("status")
    logger.info("queued run no longer waiting", run_id=message.request.runId, status=status)
    return True


def _waiting_record(deps: AwsDeps, request: StartRunRequest) -> dict[str, Any] | None:
    """What `_no_longer_waiting` reads of a run: its status and whether it was admitted."""
    return repository(deps, request.owner).run_fields(str(request.runId), "status", "admittedAt")


def admit_one(
    deps: AwsDeps, message: AdmissionMessage, share: FairShare | None = None
) -> Literal["started", "dropped", "wait", "full"]:
    """Start the run's execution if a global and an owner slot can be leased to it and it is its owner's turn
    (`share`: fair share across owners); `wait` if not, `full` when the deployment's limit refused it."""
    request = message.request
    run_id = str(request.runId)
    repo = repository(deps, request.owner)
    queue = OwnerQueue(deps.dynamo_table(), request.owner)
    if _no_longer_waiting(deps, message, _waiting_record(deps, request)):
        return "dropped"
    c = deps.config
    if share is not None and not share.turn(request.owner):
        metrics.add_metric(name="AdmissionFairShareWaits", unit="Count", value=1)
        return "wait"
    slots = leases(deps)
    taken = slots.take(
        request.owner,
        run_id,
        owner_limit=c.max_concurrent_runs,
        global_limit=c.global_concurrent_runs,
        ttl_s=c.run_lease_s,
    )
    if taken != "held":
        return "wait" if taken == "owner_full" else "full"
    try:
        execution = deps.sfn_client().start_execution(
            stateMachineArn=c.need("state_machine_arn"), name=run_id, input=request.model_dump_json()
        )
        arn = execution["executionArn"]
    except Exception as exc:
        if type(exc).__name__ != "ExecutionAlreadyExists" and "ExecutionAlreadyExists" not in str(
            getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        ):
            slots.release(run_id)  # not started: the slot goes to the next run; this one is retried
            raise
        arn = f"{c.need('state_machine_arn').replace(':stateMachine:', ':execution:')}:{run_id}"
    queue.remove(message.queueKey)
    if share is not None:
        share.started(request.owner)
    waited = max(0.0, deps.clock() - message.queuedAt)
    repo.set_run_fields(run_id, executionArn=arn, admittedAt=now_iso(deps), waitedS=round(waited, 3))
    metrics.add_metric(name="RunsAdmitted", unit="Count", value=1)
    metrics.add_metric(name="AdmissionWaitSeconds", unit="Seconds", value=waited)
    return "started"


# Runs one call of fill_free_slots starts at most (the rest: the next batch or release).
MAX_FILLED = 10


def fill_free_slots(deps: AwsDeps, share: FairShare) -> list[str]:
    """While slots are free, start the longest-waiting run of the waiting owner with the fewest runs in
    progress (among owners tied at that count, the one waiting longest): a freed slot goes to the owner with the
    least, not to whichever message SQS delivers next. The run's message, when it comes, finds it started and is
    dropped. Returns the runs started."""
    started: list[str] = []
    while share.free > 0 and len(started) < MAX_FILLED:
        room = [o for o in share.waiting if share.running[o] < share.owner_limit]
        if not room:
            break
        # The fewest runs in progress first; among owners tied there, the one waiting longest.
        owner = min(room, key=lambda o: (share.running[o], share.since.get(o, 0), o))
        head = OwnerQueue(deps.dynamo_table(), owner).head()
        if head is None or not head.get("request"):
            share.waiting.pop(owner, None)  # nothing it can start here: its messages will
            continue
        message = AdmissionMessage.model_validate_json(str(head["request"]))
        try:
            outcome = admit_one(deps, message)
        except Exception:
            logger.exception("fair-share start failed; its message retries it", run_id=message.request.runId)
            break
        if outcome == "started":
            share.started(owner)
            started.append(str(message.request.runId))
            metrics.add_metric(name="RunsAdmittedByFairShare", unit="Count", value=1)
        elif outcome == "dropped":
            share.waiting[owner] = share.waiting.get(owner, 1) - 1
            if share.waiting[owner] <= 0:
                share.waiting.pop(owner, None)
        else:
            break  # no slot after all (another admitter took it)
    return started


def admit_batch(deps: AwsDeps, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The admitter on one SQS batch: the messages it could not start yet are reported failed (SQS gives them
    back later) and so is every later message of the same owner (FIFO order); a run that cannot start
    because the deployment is full stops the batch there. Owners with fewer runs in progress go first, and a
    freed slot is kept for a waiting owner with fewer runs than the message's (FairShare)."""
    failed: list[str] = []
    blocked: set[str] = set()
    full = False
    share = FairShare.read(deps)
    fill_free_slots(deps, share)
    messages = [AdmissionMessage.model_validate_json(record["body"]) for record in records]
    # Stable: one owner's messages keep their FIFO order.
    turns = sorted(range(len(records)), key=lambda k: share.order(messages[k].request.owner))
    for k in turns:
        record, message = records[k], messages[k]
        owner = message.request.owner
        outcome = "wait"
        if full or owner in blocked:
            # Its run may have been started by fair share already: then its message goes.
            if _no_longer_waiting(deps, message, _waiting_record(deps, message.request)):
                outcome = "dropped"
        else:
            try:
                outcome = admit_one(deps, message, share)
            except Exception:
                logger.exception("admission failed; the message is retried", run_id=message.request.runId)
                outcome = "wait"
            if outcome == "full":
                full, outcome = True, "wait"
        if outcome == "wait":
            blocked.add(owner)
            failed.append(record["messageId"])
            _delay(deps, record)
    if failed:
        metrics.add_metric(name="AdmissionWaits", unit="Count", value=len(failed))
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def _delay(deps: AwsDeps, record: dict[str, Any]) -> None:
    """The waiting message comes back after `_retry_after` instead of the queue's whole visibility timeout."""
    handle = record.get("receiptHandle")
    if not handle:
        return
    try:
        deps.sqs_client().change_message_visibility(
            QueueUrl=deps.config.need("admission_queue_url"),
            ReceiptHandle=handle,
            VisibilityTimeout=_retry_after(record, deps.config.admission_retry_s),
        )
    except Exception:  # the queue's own visibility timeout brings it back then
        logger.warning("could not shorten a waiting message's visibility", message_id=record.get("messageId"))


def release_run(deps: AwsDeps, run_id: str, lease: dict[str, Any] | None = None) -> bool:
    """The run ended (or was cancelled): its slots go to the next waiting run (`lease`: its lease, just read)."""
    released = leases(deps).release(run_id, lease)
    if released:
        metrics.add_metric(name="RunSlotsReleased", unit="Count", value=1)
    return released


def leave_queue(deps: AwsDeps, owner: str, record: dict[str, Any]) -> None:
    """A queued run cancelled or deleted: out of its owner's queue (its message is dropped when it comes)."""
    if record.get("queueKey"):
        OwnerQueue(deps.dynamo_table(), owner).remove(str(record["queueKey"]))


ENDED_ERRORS = {"TIMED_OUT": "States.Timeout", "ABORTED": "ExecutionAborted", "FAILED": "ExecutionFailed"}


def execution_ended(deps: AwsDeps, detail: dict[str, Any]) -> bool:
    """The execution-status rule: an execution ended. Its slots are released (a no-op when Report or
    RecordFailure already did), and a run the execution left RUNNING (timed out, aborted by hand) is marked
    FAILED so that it never looks alive."""
    run_id = str(detail.get("name") or "")
    lease = leases(deps).lease(run_id)
    released = release_run(deps, run_id, lease) if lease else False
    status = str(detail.get("status") or "")
    owner = str(lease["owner"]) if lease else _owner_of_input(detail.get("input"))
    if owner and status in ENDED_ERRORS:
        repo = repository(deps, owner)
        record = repo.get_run(run_id)
        if record is not None and record["status"] in ("QUEUED", "RUNNING"):
            with contextlib.suppress(RunTransitionError):
                repo.transition(
                    run_id,
                    from_status=record["status"],
                    to_status="FAILED",
                    error=ENDED_ERRORS[status],
                    reason=f"the execution ended {status} before the run recorded its end",
                    completedAt=now_iso(deps),
                )
    if owner and status in ("TIMED_OUT", "ABORTED"):
        # RecordFailure never ran: a run on the engine path may have left Glue tables (a no-op for any other).
        cleanup_run_tables(deps.glue_client(), deps.config.engine_database, owner=owner, run_id=run_id)
    # A slot was freed (here, or by Report or RecordFailure before this event): the fairest waiting run takes it.
    filled = fill_free_slots(deps, FairShare.read(deps))
    logger.info("execution ended", run_id=run_id, status=status, released=released, started=len(filled))
    return released


def _owner_of_input(raw: Any) -> str | None:
    """The owner named by an execution's input (a run request), when the event carries it."""
    import json

    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    owner = value.get("owner") if isinstance(value, dict) else None
    return owner if isinstance(owner, str) and owner else None


def queue_place(deps: AwsDeps, owner: str, record: dict[str, Any]) -> int | None:
    """A QUEUED run's place in its owner's queue (1: next to start), None for any other run."""
    if record.get("status") != "QUEUED" or not record.get("queueKey") or record.get("admittedAt"):
        return None
    return OwnerQueue(deps.dynamo_table(), owner).place(str(record["queueKey"])) or None


def quota_view(deps: AwsDeps, owner: str) -> dict[str, Any]:
    """Today's use of each daily quota, its limit and when it resets; runs in progress and waiting."""
    usage = DailyUsage(deps.dynamo_table(), owner, clock=deps.clock)
    used, limits = usage.today(), quota_limits(deps)
    return {
        "day": time.strftime("%Y-%m-%d", time.gmtime(deps.clock())),
        "resetsAt": usage.resets_at(),
        "runs": {"used": used["runs"], "limit": limits.runs},
        "bytes": {"used": used["bytes"], "limit": limits.bytes},
        "tokens": {"used": used["tokens"], "limit": limits.tokens},
        "runsInProgress": {"used": leases(deps).held(owner), "limit": deps.config.max_concurrent_runs},
        "runsWaiting": OwnerQueue(deps.dynamo_table(), owner).waiting(),
    }


EXECUTION_STATUS_CHANGE = "Step Functions Execution Status Change"


def handle(event: dict[str, Any], deps: AwsDeps) -> dict[str, Any]:
    """The admission function's one entry: an SQS batch (admit), an execution-status event (release), or a
    run to queue (an S3 upload event from the upload rule, a StartRunRequest from a schedule)."""
    from pydantic import ValidationError

    from iterate.aws.payloads import InvalidUploadKeyError
    from iterate.aws.triggers import DatasetNotFoundError

    if isinstance(event.get("Records"), list):
        return admit_batch(deps, event["Records"])
    if event.get("detail-type") == EXECUTION_STATUS_CHANGE:
        return {"released": execution_ended(deps, event.get("detail") or {})}
    try:
        return enqueue(deps, event).model_dump(mode="json")
    except (InvalidUploadKeyError, DatasetNotFoundError, ValidationError) as exc:
        # Nothing to attribute or to analyse: retrying the event cannot help. The user's, never an alarm.
        logger.warning("run not queued", error=type(exc).__name__, reason=str(exc))
        metrics.add_metric(name="RunsRejected", unit="Count", value=1)
        return Enqueued(outcome="rejected", reason=f"{type(exc).__name__}: {exc}").model_dump(mode="json")
