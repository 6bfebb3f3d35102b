"""DynamoDB adapter of the RunRepository port: one table, the owner in every key, guarded status changes."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from iterate.storage import StatusConflictError

# Status changes a run may make; anything else is refused before it reaches DynamoDB.
TRANSITIONS: dict[str, frozenset[str]] = {
    "QUEUED": frozenset({"RUNNING", "FAILED", "CANCELLED"}),
    "RUNNING": frozenset({"SUCCEEDED", "FAILED", "CANCELLED"}),
}
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
# Idempotency claims only need to outlive EventBridge's 24 h redelivery window; a week is generous.
CLAIM_TTL_S = 7 * 24 * 3600


class RunNotFoundError(LookupError):
    """No run with that id for this owner."""


class RunTransitionError(StatusConflictError):
    """The run was not in the expected status (a concurrent change won, or the transition is not allowed)."""


def to_item(value: Any) -> Any:
    """Python/JSON values → DynamoDB attribute values (floats become Decimal, empty strings kept)."""
    return json.loads(json.dumps(value, default=str), parse_float=Decimal)


def from_item(value: Any) -> Any:
    """DynamoDB values → plain JSON values (Decimal → int or float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: from_item(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [from_item(v) for v in value]
    return value


def owner_pk(owner: str) -> str:
    return f"OWNER#{owner}"


def object_claim_key(bucket: str, key: str, version_id: str | None) -> str:
    return f"OBJ#{bucket}/{key}#{version_id or 'null'}"


_KEY_ATTRS = ("PK", "SK", "GSI1PK", "GSI1SK", "expiresAt", "entity")


def _strip(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {k: from_item(v) for k, v in item.items() if k not in _KEY_ATTRS}


class DynamoRunRepository:
    """Runs, datasets, issues, follow-up turns and schedules of ONE owner; every key carries that owner."""

    def __init__(self, table: Any, owner: str, *, clock: Any = time.time) -> None:
        if not owner:
            raise ValueError("owner is required: every item is keyed by its owner")
        self._table = table
        self.owner = owner
        self._clock = clock
        self._pk = owner_pk(owner)

    def _conditional_failed(self, exc: Exception) -> bool:
        return type(exc).__name__ == "ConditionalCheckFailedException" or (
            getattr(exc, "response", {}).get("Error", {}).get("Code") == "ConditionalCheckFailedException"
        )

    def _now_iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))

    # --- the RunRepository port -------------------------------------------------------------------
    def create_run(self, run: dict[str, Any]) -> None:
        run_id = run["runId"]
        item = {
            **to_item(run),
            "PK": self._pk,
            "SK": f"RUN#{run_id}",
            "GSI1PK": f"RUN#{run_id}",
            "GSI1SK": self._pk,
            "entity": "run",
            "status": run.get("status", "QUEUED"),
            "owner": self.owner,
        }
        # Nested counters are updated in place later, so their maps must exist from the start.
        item.setdefault("usage", {})
        item.setdefault("timingsMs", {})
        item.setdefault("stepUsage", {step: {} for step in ("understand", "analyze", "investigate")})
        item.setdefault("stepDegraded", {})
        try:
            self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(PK)")
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(f"run {run_id} already exists") from exc
            raise

    def update_progress(self, run_id: str, *, step: str, percent: int, message: str = "") -> None:
        progress = {"step": step, "percent": max(0, min(100, int(percent))), "message": message}
        try:
            # Only a live run takes progress: a cancelled run must not look alive again.
            self._table.update_item(
                Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
                UpdateExpression="SET progress = :p, updatedAt = :now",
                ConditionExpression="attribute_exists(PK) AND #s IN (:q, :r)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":p": progress,
                    ":now": self._now_iso(),
                    ":q": "QUEUED",
                    ":r": "RUNNING",
                },
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(f"run {run_id} is not running; progress not recorded") from exc
            raise

    def transition(self, run_id: str, *, from_status: str, to_status: str, **fields: Any) -> None:
        if to_status not in TRANSITIONS.get(from_status, frozenset()):
            raise RunTransitionError(f"{from_status} → {to_status} is not an allowed run transition")
        names = {"#s": "status"}
        values: dict[str, Any] = {":from": from_status, ":to": to_status, ":now": self._now_iso()}
        sets = ["#s = :to", "updatedAt = :now"]
        for i, (name, value) in enumerate(sorted(fields.items())):
            names[f"#f{i}"] = name
            values[f":v{i}"] = to_item(value)
            sets.append(f"#f{i} = :v{i}")
        try:
            self._table.update_item(
                Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="attribute_exists(PK) AND #s = :from",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(
                    f"run {run_id} is not {from_status}; cannot move to {to_status}"
                ) from exc
            raise

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return _strip(self._table.get_item(Key={"PK": self._pk, "SK": f"RUN#{run_id}"}).get("Item"))

    # --- runs ------------------------------------------------------------------------------------
    def require_run(self, run_id: str) -> dict[str, Any]:
        run = self.get_run(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        return run

    def set_run_fields(self, run_id: str, **fields: Any) -> None:
        """Unguarded attribute update (execution ARN, usage) on an existing run of this owner."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets = []
        for i, (name, value) in enumerate(sorted(fields.items())):
            names[f"#f{i}"] = name
            values[f":v{i}"] = to_item(value)
            sets.append(f"#f{i} = :v{i}")
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def add_usage(self, run_id: str, step: str, usage: dict[str, Any], degraded: list[str]) -> None:
        """Add one step's token usage to the run's and the step's totals (ADD is atomic across the Map)."""
        names = {"#u": "usage", "#su": "stepUsage", "#step": step}
        values: dict[str, Any] = {}
        adds = []
        for i, field in enumerate(
            ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "calls")
        ):
            names[f"#a{i}"] = field
            values[f":a{i}"] = int(usage.get(field, 0) or 0)
            adds.append(f"#u.#a{i} :a{i}")
            adds.append(f"#su.#step.#a{i} :a{i}")
        names["#cost"] = "costUsd"
        values[":cost"] = to_item(float(usage.get("costUsd", 0.0) or 0.0))
        adds += ["#cost :cost", "#su.#step.#cost :cost"]
        expression = "ADD " + ", ".join(adds)
        if degraded:
            names |= {"#d": "degradedReasons", "#sd": "stepDegraded"}
            values[":d"] = list(degraded)
            values[":empty"] = []
            expression += (
                " SET #d = list_append(if_not_exists(#d, :empty), :d),"
                " #sd.#step = list_append(if_not_exists(#sd.#step, :empty), :d)"
            )
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            UpdateExpression=expression,
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def record_timing(self, run_id: str, step: str, ms: float) -> None:
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            UpdateExpression="SET #t.#s = :ms",
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeNames={"#t": "timingsMs", "#s": step},
            ExpressionAttributeValues={":ms": to_item(round(ms, 1))},
        )

    def count_investigation(self, run_id: str) -> tuple[int, int]:
        """One more investigation finished: (done, total) after the atomic increment."""
        response = self._table.update_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            UpdateExpression="ADD investigationsDone :one",
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeValues={":one": 1},
            ReturnValues="ALL_NEW",
        )
        item = response["Attributes"]
        return int(item.get("investigationsDone", 0)), int(item.get("investigationsTotal", 0))

    def list_runs(self, dataset_id: str | None = None) -> list[dict[str, Any]]:
        runs = self._query_prefix("RUN#")
        if dataset_id is not None:
            runs = [r for r in runs if r.get("datasetId") == dataset_id]
        return sorted(runs, key=lambda r: r.get("startedAt") or r.get("createdAt") or "", reverse=True)

    # --- idempotency ------------------------------------------------------------------------------
    def claim_object(
        self, bucket: str, key: str, version_id: str | None, run_id: str, *, execution_id: str
    ) -> str | None:
        """Record that this object version starts `run_id` in `execution_id`.

        Returns None when this execution holds the claim (first delivery, or a retry of the same execution),
        else the run id of the execution that claimed it first: the event is a duplicate.
        """
        sk = object_claim_key(bucket, key, version_id)
        try:
            self._table.put_item(
                Item={
                    "PK": self._pk,
                    "SK": sk,
                    "GSI1PK": sk,
                    "GSI1SK": self._pk,
                    "entity": "object_claim",
                    "runId": run_id,
                    "executionId": execution_id,
                    "expiresAt": int(self._clock()) + CLAIM_TTL_S,
                },
                ConditionExpression="attribute_not_exists(PK) OR executionId = :e",
                ExpressionAttributeValues={":e": execution_id},
            )
        except Exception as exc:
            if not self._conditional_failed(exc):
                raise
            existing = self._table.get_item(Key={"PK": self._pk, "SK": sk}, ConsistentRead=True).get("Item")
            return str(existing["runId"]) if existing else run_id
        return None

    # --- datasets ---------------------------------------------------------------------------------
    def put_dataset(self, dataset: dict[str, Any]) -> None:
        dataset_id = dataset["datasetId"]
        self._table.put_item(
            Item={**to_item(dataset), "PK": self._pk, "SK": f"DATASET#{dataset_id}", "entity": "dataset"},
            ConditionExpression="attribute_not_exists(PK)",
        )

    def get_dataset(self, dataset_id: str) -> dict[str, Any] | None:
        return _strip(self._table.get_item(Key={"PK": self._pk, "SK": f"DATASET#{dataset_id}"}).get("Item"))

    def list_datasets(self) -> list[dict[str, Any]]:
        return self._query_prefix("DATASET#")

    def record_upload(self, dataset_id: str, upload: dict[str, Any]) -> None:
        """Remember the dataset's latest upload (what schedules re-analyse); creates the dataset if new."""
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"DATASET#{dataset_id}"},
            UpdateExpression=(
                "SET latestUpload = :u, updatedAt = :now, datasetId = :d, entity = :e, "
                "createdAt = if_not_exists(createdAt, :now), #n = if_not_exists(#n, :d)"
            ),
            ExpressionAttributeNames={"#n": "name"},
            ExpressionAttributeValues={
                ":u": to_item(upload),
                ":now": self._now_iso(),
                ":d": dataset_id,
                ":e": "dataset",
            },
        )

    # --- issues -----------------------------------------------------------------------------------
    def put_issues(self, run_id: str, issues: list[dict[str, Any]]) -> None:
        with self._table.batch_writer() as batch:
            for issue in issues:
                batch.put_item(
                    Item={
                        "PK": self._pk,
                        "SK": f"ISSUE#{run_id}#{issue['id']}",
                        "entity": "issue",
                        "runId": run_id,
                        "issueId": issue["id"],
                        "severity": issue.get("severity"),
                        "type": issue.get("type"),
                        # As JSON text: evidence stats may hold keys DynamoDB maps refuse (e.g. "" for blanks).
                        "issueJson": json.dumps(issue, default=str),
                    }
                )

    def list_issues(self, run_id: str) -> list[dict[str, Any]]:
        return [json.loads(i["issueJson"]) for i in self._query_prefix(f"ISSUE#{run_id}#")]

    def get_issue(self, run_id: str, issue_id: str) -> dict[str, Any] | None:
        item = _strip(
            self._table.get_item(Key={"PK": self._pk, "SK": f"ISSUE#{run_id}#{issue_id}"}).get("Item")
        )
        return None if item is None else json.loads(item["issueJson"])

    # --- follow-up turns --------------------------------------------------------------------------
    def list_followups(self, issue_ref: str) -> list[dict[str, Any]]:
        return self._query_prefix(f"FOLLOWUP#{issue_ref}#")

    def put_followup(self, issue_ref: str, n: int, turn: dict[str, Any]) -> None:
        """Turn `n` (0-based); conditional so two concurrent answers cannot both become turn n."""
        try:
            self._table.put_item(
                Item={
                    **to_item(turn),
                    "PK": self._pk,
                    "SK": f"FOLLOWUP#{issue_ref}#{n:04d}",
                    "entity": "followup",
                    "turn": n,
                },
                ConditionExpression="attribute_not_exists(PK)",
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(f"follow-up turn {n} of {issue_ref} already exists") from exc
            raise

    def answer_followup(self, issue_ref: str, n: int, answer: str) -> None:
        try:
            self._table.update_item(
                Key={"PK": self._pk, "SK": f"FOLLOWUP#{issue_ref}#{n:04d}"},
                UpdateExpression="SET answer = :a, answeredAt = :now",
                ConditionExpression="attribute_exists(PK) AND attribute_not_exists(answer)",
                ExpressionAttributeValues={":a": answer, ":now": self._now_iso()},
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(f"follow-up turn {n} of {issue_ref} is already answered") from exc
            raise

    # --- schedules --------------------------------------------------------------------------------
    def put_schedule(self, dataset_id: str, schedule: dict[str, Any]) -> None:
        self._table.put_item(
            Item={**to_item(schedule), "PK": self._pk, "SK": f"SCHEDULE#{dataset_id}", "entity": "schedule"}
        )

    def get_schedule(self, dataset_id: str) -> dict[str, Any] | None:
        return _strip(self._table.get_item(Key={"PK": self._pk, "SK": f"SCHEDULE#{dataset_id}"}).get("Item"))

    def delete_schedule(self, dataset_id: str) -> None:
        self._table.delete_item(Key={"PK": self._pk, "SK": f"SCHEDULE#{dataset_id}"})

    # --- helpers ----------------------------------------------------------------------------------
    def _query_prefix(self, prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("PK").eq(self._pk) & Key("SK").begins_with(prefix)
        }
        while True:
            page = self._table.query(**kwargs)
            items.extend(i for i in (_strip(it) for it in page.get("Items", [])) if i is not None)
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def find_run_owner(table: Any, run_id: str) -> str | None:
    """The owner of a run, through GSI1 (used by system steps that only know the run id)."""
    page = table.query(IndexName="GSI1", KeyConditionExpression=Key("GSI1PK").eq(f"RUN#{run_id}"))
    items = page.get("Items", [])
    return str(items[0]["owner"]) if items else None
