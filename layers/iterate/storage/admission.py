"""DynamoDB records of admission: run slots held as leases, each owner's queue of waiting runs, daily quotas
and the global LLM token bucket. Every write that counts is conditional, so two functions racing for the last
slot or the last of a quota cannot both win."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from iterate.storage.dynamo import owner_pk

# Items shared by every owner (the global slot counter, the leases, the LLM bucket) live in one partition of
# their own: at most `global limit` leases and two counters, far below a partition's write capacity.
GLOBAL_PK = "GLOBAL#admission"
GLOBAL_SLOTS_SK = "SLOTS"
OWNER_SLOTS_SK = "LIMIT#runs"
LEASE_PREFIX = "LEASE#"
QUEUE_PREFIX = "QUEUE#"
# One counter per owner with runs waiting (in the global partition): who is waiting, for fair share.
WAITING_PREFIX = "WAITING#"
USAGE_PREFIX = "USAGE#"
TOKEN_BUCKET_SK = "BUCKET#llm-tokens"
# Daily usage items outlive their day by a week (a support question about yesterday can still read them).
USAGE_TTL_S = 8 * 24 * 3600


def _failed(exc: Exception, *codes: str) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
    return code in codes


def _cancelled(exc: Exception) -> bool:
    return _failed(exc, "TransactionCanceledException", "ConditionalCheckFailedException")


def transact(table: Any, writes: list[dict[str, Any]], *, attempts: int = 4) -> set[int]:
    """Write `writes` in one TransactWriteItems, all or nothing: the positions of those whose condition failed
    (empty: all written). A transaction cancelled by a conflict with another one on the same item (a busy
    owner's waiting counter) is tried again, after a short jittered pause."""
    for attempt in range(attempts):
        try:
            table.meta.client.transact_write_items(TransactItems=writes)
            return set()
        except Exception as exc:
            reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
            codes = [str(reason.get("Code") or "None") for reason in reasons]
            failed = {k for k, code in enumerate(codes) if code == "ConditionalCheckFailed"}
            if failed:
                return failed
            if "TransactionConflict" not in codes or attempt == attempts - 1:
                raise
        time.sleep(random.uniform(0, 0.05 * 2**attempt))
    raise AssertionError("unreachable")


class SlotLeases:
    """A run slot is a lease item plus one on each counter (global, the owner's), taken and given back in
    one transaction: the counters always equal the leases held. A lease ends when its run ends (Report,
    RecordFailure, a cancel, the execution-status rule) or, if every release was lost, at `leaseUntil`."""

    def __init__(self, table: Any, *, clock: Callable[[], float] = time.time) -> None:
        self._table = table
        self._client = table.meta.client
        self._name = table.name
        self._clock = clock

    def _counter(self, pk: str, sk: str, limit: int) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self._name,
                "Key": {"PK": pk, "SK": sk},
                "UpdateExpression": "ADD live :one SET entity = :e",
                "ConditionExpression": "attribute_not_exists(live) OR live < :max",
                "ExpressionAttributeValues": {":one": 1, ":max": limit, ":e": "limits"},
            }
        }

    def acquire(self, owner: str, run_id: str, *, owner_limit: int, global_limit: int, ttl_s: int) -> bool:
        """Take a global and an owner slot for `run_id`: True when held (also when it already was), False when
        either limit is reached even after expired leases were swept."""
        return (
            self.take(owner, run_id, owner_limit=owner_limit, global_limit=global_limit, ttl_s=ttl_s)
            == "held"
        )

    def take(
        self, owner: str, run_id: str, *, owner_limit: int, global_limit: int, ttl_s: int
    ) -> Literal["held", "owner_full", "full"]:
        """`acquire`, saying which limit refused: `full` when the deployment's (every later run waits too),
        `owner_full` when only the owner's."""
        refused: Literal["owner_full", "full"] = "owner_full"
        for attempt in range(2):
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        self._counter(GLOBAL_PK, GLOBAL_SLOTS_SK, global_limit),
                        self._counter(owner_pk(owner), OWNER_SLOTS_SK, owner_limit),
                        {
                            "Put": {
                                "TableName": self._name,
                                "Item": {
                                    "PK": GLOBAL_PK,
                                    "SK": f"{LEASE_PREFIX}{run_id}",
                                    "entity": "lease",
                                    "owner": owner,
                                    "runId": run_id,
                                    "leaseUntil": int(self._clock()) + ttl_s,
                                },
                                "ConditionExpression": "attribute_not_exists(PK)",
                            }
                        },
                    ]
                )
                return "held"
            except Exception as exc:
                if not _cancelled(exc):
                    raise
                reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
                global_refused = bool(reasons) and str(reasons[0].get("Code")) == "ConditionalCheckFailed"
                refused = "full" if global_refused else "owner_full"
            if self.lease(run_id) is not None:
                return "held"  # a retried admission: the slot is already this run's
            if attempt == 0 and self.sweep():
                continue
        return refused

    def lease(self, run_id: str) -> dict[str, Any] | None:
        return self._table.get_item(
            Key={"PK": GLOBAL_PK, "SK": f"{LEASE_PREFIX}{run_id}"}, ConsistentRead=True
        ).get("Item")

    def release(self, run_id: str, lease: dict[str, Any] | None = None) -> bool:
        """Give `run_id`'s slots back; False when it held none (never admitted, or released already).
        `lease`: its lease item, when the caller has just read it."""
        lease = lease or self.lease(run_id)
        if lease is None:
            return False
        minus = {":m": -1}
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self._name,
                            "Key": {"PK": GLOBAL_PK, "SK": f"{LEASE_PREFIX}{run_id}"},
                            "ConditionExpression": "attribute_exists(PK)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._name,
                            "Key": {"PK": GLOBAL_PK, "SK": GLOBAL_SLOTS_SK},
                            "UpdateExpression": "ADD live :m",
                            "ExpressionAttributeValues": minus,
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._name,
                            "Key": {"PK": owner_pk(str(lease["owner"])), "SK": OWNER_SLOTS_SK},
                            "UpdateExpression": "ADD live :m",
                            "ExpressionAttributeValues": minus,
                        }
                    },
                ]
            )
        except Exception as exc:
            if not _cancelled(exc):
                raise
            return False  # a concurrent release won
        return True

    def leases(self) -> list[dict[str, Any]]:
        """Every slot held now (at most the global limit of them)."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
            "ExpressionAttributeValues": {":pk": GLOBAL_PK, ":p": LEASE_PREFIX},
            "ConsistentRead": True,
        }
        while True:
            page = self._table.query(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def sweep(self) -> int:
        """Release every lease past its `leaseUntil` (its run ended and every release of it was lost)."""
        now = int(self._clock())
        return sum(
            1 for lease in self.leases() if int(lease["leaseUntil"]) < now and self.release(lease["runId"])
        )

    def held(self, owner: str | None = None) -> int:
        """Slots held now, globally or by one owner (the counters)."""
        key = (
            {"PK": GLOBAL_PK, "SK": GLOBAL_SLOTS_SK}
            if owner is None
            else {"PK": owner_pk(owner), "SK": OWNER_SLOTS_SK}
        )
        item = self._table.get_item(Key=key, ConsistentRead=True).get("Item") or {}
        return int(item.get("live") or 0)


class OwnerQueue:
    """The runs of one owner waiting for a slot, in arrival order (one small item each): a run's place is
    how many wait before it, plus one."""

    def __init__(self, table: Any, owner: str) -> None:
        self._table = table
        self._owner = owner
        self._pk = owner_pk(owner)

    @staticmethod
    def sort_key(queued_ms: int, run_id: str) -> str:
        return f"{QUEUE_PREFIX}{queued_ms:015d}#{run_id}"

    def add_writes(self, run_id: str, queued_ms: int, request: str | None = None) -> list[dict[str, Any]]:
        """`add` as two writes of a TransactWriteItems: the entry (it fails its condition when queued already)
        and the owner's waiting counter."""
        item = {"PK": self._pk, "SK": self.sort_key(queued_ms, run_id), "entity": "queued", "runId": run_id}
        if request is not None:
            item["request"] = request
        name = self._table.name
        return [
            {"Put": {"TableName": name, "Item": item, "ConditionExpression": "attribute_not_exists(PK)"}},
            {
                "Update": {
                    "TableName": name,
                    "Key": self._waiting_key(),
                    **self._count_expression(1, queued_ms),
                }
            },
        ]

    def add(self, run_id: str, queued_ms: int, request: str | None = None) -> str:
        """Queue the run, and count it in the owner's waiting counter (once, even when added again).
        `request`: the admission message's body, so that admission can start the run without its message."""
        sk = self.sort_key(queued_ms, run_id)
        item = {"PK": self._pk, "SK": sk, "entity": "queued", "runId": run_id}
        if request is not None:
            item["request"] = request
        try:
            self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(PK)")
        except Exception as exc:
            if not _failed(exc, "ConditionalCheckFailedException"):
                raise
            return sk
        self._count(1, since_ms=queued_ms)
        return sk

    def remove(self, sk: str) -> None:
        """Out of the queue; the waiting counter goes down only when the entry was there (a repeated remove
        counts once), and goes when it reaches 0."""
        old = self._table.delete_item(Key={"PK": self._pk, "SK": sk}, ReturnValues="ALL_OLD").get(
            "Attributes"
        )
        if old and self._count(-1) <= 0:
            try:
                self._table.delete_item(
                    Key=self._waiting_key(),
                    ConditionExpression="waiting <= :zero",
                    ExpressionAttributeValues={":zero": 0},
                )
            except Exception as exc:  # a run queued meanwhile: the counter stays
                if not _failed(exc, "ConditionalCheckFailedException"):
                    raise

    def _waiting_key(self) -> dict[str, str]:
        return {"PK": GLOBAL_PK, "SK": f"{WAITING_PREFIX}{self._owner}"}

    def _count(self, step: int, since_ms: int | None = None) -> int:
        """Add `step` to the owner's waiting counter; `since`: when its waiting began (the first run queued
        while none was waiting), which orders owners tied for a freed slot."""
        answer = self._table.update_item(
            Key=self._waiting_key(), **self._count_expression(step, since_ms), ReturnValues="UPDATED_NEW"
        )
        return int(answer["Attributes"]["waiting"])

    def _count_expression(self, step: int, since_ms: int | None) -> dict[str, Any]:
        expression = "ADD waiting :n SET #o = :o, entity = :e"
        values: dict[str, Any] = {":n": step, ":o": self._owner, ":e": "waiting"}
        if since_ms is not None:
            expression += ", since = if_not_exists(since, :s)"
            values[":s"] = since_ms
        return {
            "UpdateExpression": expression,
            "ExpressionAttributeNames": {"#o": "owner"},
            "ExpressionAttributeValues": values,
        }

    def head(self) -> dict[str, Any] | None:
        """The run waiting longest (its entry), or None."""
        page = self._table.query(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :p)",
            ExpressionAttributeValues={":pk": self._pk, ":p": QUEUE_PREFIX},
            Limit=1,
            ConsistentRead=True,
        )
        items = page.get("Items") or []
        return dict(items[0]) if items else None

    def place(self, sk: str) -> int:
        """1 for the next run to start; counts only runs still waiting."""
        page = self._table.query(
            KeyConditionExpression="PK = :pk AND SK BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":pk": self._pk, ":lo": QUEUE_PREFIX, ":hi": sk},
            Select="COUNT",
            ConsistentRead=True,
        )
        return int(page.get("Count", 0))

    def waiting(self) -> int:
        page = self._table.query(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :p)",
            ExpressionAttributeValues={":pk": self._pk, ":p": QUEUE_PREFIX},
            Select="COUNT",
            ConsistentRead=True,
        )
        return int(page.get("Count", 0))


@dataclass(frozen=True)
class AdmissionState:
    """Who holds the run slots and who waits for one, from one read of the admission partition."""

    holders: list[str]  # the owner of each slot held (a lease each)
    waiting: dict[str, tuple[int, int]]  # as `waiting_owners`


def admission_state(table: Any) -> AdmissionState:
    """The leases' owners and the waiting owners in one Query of the admission partition (its other items, the
    counters and the LLM token bucket, are a few more), each item's owner and counts alone."""
    holders: list[str] = []
    waiting: dict[str, tuple[int, int]] = {}
    kwargs: dict[str, Any] = {
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": GLOBAL_PK},
        "ProjectionExpression": "SK, #o, waiting, since",
        "ExpressionAttributeNames": {"#o": "owner"},
        "ConsistentRead": True,
    }
    while True:
        page = table.query(**kwargs)
        for item in page.get("Items", []):
            sk = str(item["SK"])
            if sk.startswith(LEASE_PREFIX):
                holders.append(str(item["owner"]))
            elif sk.startswith(WAITING_PREFIX) and int(item.get("waiting") or 0) > 0:
                waiting[str(item["owner"])] = (int(item["waiting"]), int(item.get("since") or 0))
        if "LastEvaluatedKey" not in page:
            return AdmissionState(holders=holders, waiting=waiting)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def waiting_owners(table: Any) -> dict[str, tuple[int, int]]:
    """Every owner with runs waiting for a slot: (how many, epoch ms its waiting began); one item per owner."""
    found: dict[str, tuple[int, int]] = {}
    kwargs: dict[str, Any] = {
        "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
        "ExpressionAttributeValues": {":pk": GLOBAL_PK, ":p": WAITING_PREFIX},
        "ConsistentRead": True,
    }
    while True:
        page = table.query(**kwargs)
        for item in page.get("Items", []):
            if int(item.get("waiting") or 0) > 0:
                found[str(item["owner"])] = (int(item["waiting"]), int(item.get("since") or 0))
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass(frozen=True)
class QuotaLimits:
    """An owner's allowance per UTC day."""

    runs: int
    bytes: int
    tokens: int


class QuotaExceededError(RuntimeError):
    """An owner used up a daily quota: the run is refused before it starts (the user's, never a system fault)."""

    def __init__(self, quota: str, limit: int, used: int, resets_at: str, asked: int = 0) -> None:
        self.quota, self.limit, self.used, self.resets_at, self.asked = quota, limit, used, resets_at, asked
        what = {"runs": "runs", "bytes": "bytes uploaded for analysis", "tokens": "LLM tokens"}[quota]
        extra = f" (this run needs {asked:,} more)" if asked else ""
        super().__init__(
            f"daily quota of {what} reached: {used:,} of {limit:,} used today{extra}; it resets at {resets_at}"
            " (UTC midnight): wait until then, or ask the operator to raise the quota"
        )


def day_of(epoch: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def resets_at(epoch: float) -> str:
    midnight = (int(epoch) // 86400 + 1) * 86400
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(midnight))


class DailyUsage:
    """Runs, bytes and LLM tokens one owner used today (one item per owner and UTC day)."""

    def __init__(self, table: Any, owner: str, *, clock: Callable[[], float] = time.time) -> None:
        self._table = table
        self._pk = owner_pk(owner)
        self._clock = clock

    def _key(self) -> dict[str, str]:
        return {"PK": self._pk, "SK": f"{USAGE_PREFIX}{day_of(self._clock())}"}

    def today(self) -> dict[str, int]:
        item = self._table.get_item(Key=self._key(), ConsistentRead=True).get("Item") or {}
        return {k: int(item.get(k) or 0) for k in ("runs", "bytes", "tokens")}

    def resets_at(self) -> str:
        return resets_at(self._clock())

    def charge_run(self, size: int, limits: QuotaLimits) -> None:
        """Count one run of `size` bytes, unless a quota would be passed (QuotaExceededError naming it)."""
        if size > limits.bytes:
            raise self.refusal(size, limits)
        try:
            self._table.update_item(Key=self._key(), **self._charge(size, limits))
            return
        except Exception as exc:
            if not _cancelled(exc):
                raise
        raise self.refusal(size, limits)

    def charge_run_write(self, size: int, limits: QuotaLimits) -> dict[str, Any]:
        """`charge_run` as one write of a TransactWriteItems (it fails its condition when a quota would be
        passed: `refusal` says which). A run larger than the bytes quota has no such write: refuse it first."""
        return {"Update": {"TableName": self._table.name, "Key": self._key(), **self._charge(size, limits)}}

    def refusal(self, size: int, limits: QuotaLimits) -> QuotaExceededError:
        """The quota a run of `size` bytes passes, as today's use says (after its charge was refused)."""
        used = self.today()
        reset = self.resets_at()
        if size > limits.bytes:
            return QuotaExceededError("bytes", limits.bytes, used["bytes"], reset, asked=size)
        if used["runs"] >= limits.runs:
            return QuotaExceededError("runs", limits.runs, used["runs"], reset)
        if used["tokens"] >= limits.tokens:
            return QuotaExceededError("tokens", limits.tokens, used["tokens"], reset)
        return QuotaExceededError("bytes", limits.bytes, used["bytes"], reset, asked=size)

    def _charge(self, size: int, limits: QuotaLimits) -> dict[str, Any]:
        return {
            "UpdateExpression": "ADD runs :one, #b :size SET entity = :e, expiresAt = :ttl",
            "ConditionExpression": (
                "(attribute_not_exists(runs) OR runs < :runs) AND (attribute_not_exists(#b) OR #b <= :room)"
                " AND (attribute_not_exists(tokens) OR tokens < :tokens)"
            ),
            "ExpressionAttributeNames": {"#b": "bytes"},
            "ExpressionAttributeValues": {
                ":one": 1,
                ":size": size,
                ":runs": limits.runs,
                ":room": limits.bytes - size,
                ":tokens": limits.tokens,
                ":e": "usage",
                ":ttl": int(self._clock()) + USAGE_TTL_S,
            },
        }

    def refund_run(self, size: int) -> None:
        """A counted run that never started after all (it was refused by something else): not charged."""
        self._table.update_item(
            Key=self._key(),
            UpdateExpression="ADD runs :m, #b :s",
            ExpressionAttributeNames={"#b": "bytes"},
            ExpressionAttributeValues={":m": -1, ":s": -size},
        )

    def add_tokens(self, tokens: int) -> None:
        if tokens <= 0:
            return
        self._table.update_item(
            Key=self._key(),
            UpdateExpression="ADD tokens :t SET entity = :e, expiresAt = :ttl",
            ExpressionAttributeValues={
                ":t": tokens,
                ":e": "usage",
                ":ttl": int(self._clock()) + USAGE_TTL_S,
            },
        )


class TokenBucketEmptyError(RuntimeError):
    """A bucket (the deployment's LLM token rate, an owner's API rate) is empty for longer than the caller
    may wait; `retry_after_s`: when what was asked for will be there."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DynamoTokenBucket:
    """A token bucket in one item: `rate` tokens a second refill it up to `capacity`. A caller takes tokens
    with a conditional write on the bucket's last state (optimistic; a lost race re-reads), waiting for the
    refill when they are not there yet, at most `max_wait_s` in all (0: never waits). By default the
    deployment's LLM token rate, which every owner's calls share; `key` gives another (an owner's API rate)."""

    def __init__(
        self,
        table: Any,
        *,
        rate: float,
        capacity: int,
        max_wait_s: float = 30.0,
        key: dict[str, str] | None = None,
        what: str = "the deployment's LLM token rate",
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = table
        self.rate, self.capacity, self.max_wait_s = rate, capacity, max_wait_s
        self._clock, self._sleep = clock, sleep
        self._key = key or {"PK": GLOBAL_PK, "SK": TOKEN_BUCKET_SK}
        self._what = what

    def take(self, tokens: int) -> float:
        """Take `tokens` (capped at the capacity), waiting for them if needed; the seconds waited."""
        want = min(int(tokens), self.capacity)
        waited = 0.0
        while True:
            item = self._table.get_item(Key=self._key, ConsistentRead=True).get("Item")
            now = self._clock()
            if item is None:
                level, stamp, condition = float(self.capacity), None, "attribute_not_exists(PK)"
            else:
                stamp = item["at"]
                elapsed = max(0.0, now - float(stamp))
                level = min(float(self.capacity), float(item["tokens"]) + elapsed * self.rate)
                condition = "#at = :stamp"
            if level >= want:
                values: dict[str, Any] = {":t": _num(level - want), ":now": _num(now), ":e": "bucket"}
                kwargs: dict[str, Any] = {
                    "Key": self._key,
                    "UpdateExpression": "SET tokens = :t, #at = :now, entity = :e",
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": {"#at": "at"},
                    "ExpressionAttributeValues": values,
                }
                if stamp is not None:
                    values[":stamp"] = stamp
                try:
                    self._table.update_item(**kwargs)
                    return waited
                except Exception as exc:
                    if not _cancelled(exc):
                        raise
                    continue  # another call took tokens meanwhile: read again
            delay = (want - level) / self.rate
            if waited + delay > self.max_wait_s:
                raise TokenBucketEmptyError(
                    f"{self._what} ({self.rate:g}/s, bursts of {self.capacity:,}) is used up: {want:,} more"
                    f" in {delay:.1f} s",
                    retry_after_s=delay,
                )
            self._sleep(delay)
            waited += delay


def _num(value: float) -> Any:
    from decimal import Decimal

    return Decimal(str(round(value, 3)))
