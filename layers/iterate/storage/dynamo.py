"""DynamoDB adapter of the RunRepository port: one table, the owner in every key, guarded status changes."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Key

from iterate.contracts import InfraCost
from iterate.storage import StatusConflictError

# Status changes a run may make; anything else is refused before it reaches DynamoDB.
TRANSITIONS: dict[str, frozenset[str]] = {
    "QUEUED": frozenset({"RUNNING", "FAILED", "CANCELLED"}),
    "RUNNING": frozenset({"SUCCEEDED", "FAILED", "CANCELLED"}),
}
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
# Idempotency claims only need to outlive EventBridge's 24 h redelivery window; a week is generous.
CLAIM_TTL_S = 7 * 24 * 3600
# An API Idempotency-Key answers with the same run for a day (what clients retry within).
IDEMPOTENCY_TTL_S = 24 * 3600
# The one index, GSI1: an owner's runs of one dataset, newest first (GSI1PK OWNER#<o>#DATASET#<d>,
# GSI1SK RUN#<startedAt>#<run id>). Only run items carry GSI1 keys (a sparse index).
GSI1 = "GSI1"
# The steps whose infrastructure is booked on the run (iterate.aws.cost); their maps exist from creation.
INFRA_STEPS = ("profile", "understand", "analyze", "investigate", "report", "failure")


class RunNotFoundError(LookupError):
    """No run with that id for this owner."""


class RunTransitionError(StatusConflictError):
    """The run was not in the expected status (a concurrent change won, or the transition is not allowed)."""


class InvalidPageTokenError(ValueError):
    """A pagination token that this repository did not issue for this owner and this listing."""


def encode_page_token(last_key: dict[str, Any]) -> str:
    """DynamoDB's LastEvaluatedKey as an opaque URL-safe token."""
    raw = json.dumps(from_item(last_key), separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


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


def dataset_runs_pk(owner: str, dataset_id: str) -> str:
    """GSI1's partition: one owner's runs of one dataset."""
    return f"{owner_pk(owner)}#DATASET#{dataset_id}"


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

    @property
    def pk(self) -> str:
        """The owner's partition key (every item of this repository is in it)."""
        return self._pk

    def _conditional_failed(self, exc: Exception) -> bool:
        return type(exc).__name__ == "ConditionalCheckFailedException" or (
            getattr(exc, "response", {}).get("Error", {}).get("Code") == "ConditionalCheckFailedException"
        )

    def _now_iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))

    # --- the RunRepository port -------------------------------------------------------------------
    def create_run(self, run: dict[str, Any]) -> None:
        try:
            self._table.put_item(Item=self._run_item(run), ConditionExpression="attribute_not_exists(PK)")
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(f"run {run['runId']} already exists") from exc
            raise

    def create_run_write(self, run: dict[str, Any]) -> dict[str, Any]:
        """`create_run` as one write of a TransactWriteItems (it fails its condition when the run exists)."""
        return {
            "Put": {
                "TableName": self._table.name,
                "Item": self._run_item(run),
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        }

    def _run_item(self, run: dict[str, Any]) -> dict[str, Any]:
        run_id = run["runId"]
        started = run.get("startedAt") or self._now_iso()
        item = {
            **to_item(run),
            "PK": self._pk,
            "SK": f"RUN#{run_id}",
            "GSI1PK": dataset_runs_pk(self.owner, run["datasetId"]),
            "GSI1SK": f"RUN#{started}#{run_id}",
            "entity": "run",
            "status": run.get("status", "QUEUED"),
            "owner": self.owner,
        }
        # Nested counters are updated in place later, so their maps must exist from the start.
        item.setdefault("usage", {})
        item.setdefault("timingsMs", {})
        item.setdefault("infra", {})
        item.setdefault("stepInfra", {step: {} for step in INFRA_STEPS})
        item.setdefault("stepUsage", {step: {} for step in ("understand", "analyze", "investigate")})
        item.setdefault("stepDegraded", {})
        return item

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
        self._move_status(
            f"RUN#{run_id}",
            from_status,
            to_status,
            fields,
            f"run {run_id} is not {from_status}; cannot move to {to_status}",
        )

    def _move_status(
        self, sk: str, from_status: str, to_status: str, fields: dict[str, Any], refused: str
    ) -> None:
        """Set an item's status (and `fields`) only if it is `from_status` now: one conditional write, so two
        deliveries of the same step cannot both move it; a refusal is a RunTransitionError(`refused`)."""
        names = {"#s": "status"}
        values: dict[str, Any] = {":from": from_status, ":to": to_status, ":now": self._now_iso()}
        sets = ["#s = :to", "updatedAt = :now"]
        for i, (name, value) in enumerate(sorted(fields.items())):
            names[f"#f{i}"] = name
            values[f":v{i}"] = to_item(value)
            sets.append(f"#f{i} = :v{i}")
        try:
            self._table.update_item(
                Key={"PK": self._pk, "SK": sk},
                UpdateExpression="SET " + ", ".join(sets),
                ConditionExpression="attribute_exists(PK) AND #s = :from",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                raise RunTransitionError(refused) from exc
            raise

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        return _strip(self._table.get_item(Key={"PK": self._pk, "SK": f"RUN#{run_id}"}).get("Item"))

    def run_fields(self, run_id: str, *names: str) -> dict[str, Any] | None:
        """A few attributes of a run, read alone and strongly consistent (a run item carries its whole
        progress and cost: most readers need its status); None when there is no such run."""
        projected = ("PK", *names)
        item = self._table.get_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            ProjectionExpression=", ".join(f"#n{i}" for i in range(len(projected))),
            ExpressionAttributeNames={f"#n{i}": name for i, name in enumerate(projected)},
            ConsistentRead=True,
        ).get("Item")
        return _strip(item) if item else None

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

    def add_infra(self, run_id: str, step: str, cost: InfraCost) -> None:
        """Add one step invocation's infrastructure estimate to the run's and the step's totals (atomic ADD:
        the investigation Map's children add theirs at once)."""
        names = {"#i": "infra", "#si": "stepInfra", "#step": step}
        values: dict[str, Any] = {}
        adds = []
        for i, (field, value) in enumerate(cost.model_dump().items()):
            names[f"#a{i}"] = field
            values[f":a{i}"] = to_item(value)
            adds.append(f"#i.#a{i} :a{i}")
            adds.append(f"#si.#step.#a{i} :a{i}")
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            UpdateExpression="ADD " + ", ".join(adds),
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
        """Every run of the owner (or of one dataset), newest first."""
        if dataset_id is not None:
            return list(self.iter_runs(dataset_id))
        runs = self._query_prefix("RUN#")
        return sorted(runs, key=lambda r: r.get("startedAt") or r.get("createdAt") or "", reverse=True)

    def iter_runs(self, dataset_id: str) -> Iterator[dict[str, Any]]:
        """One dataset's runs, newest first, page by page through GSI1 (never a filter over all runs)."""
        token = None
        while True:
            runs, token = self.page_runs(dataset_id, limit=100, token=token)
            yield from runs
            if token is None:
                return

    def page_runs(
        self, dataset_id: str, *, limit: int, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of one dataset's runs, newest first, and the token of the next page (None: last page)."""
        gsi_pk = dataset_runs_pk(self.owner, dataset_id)
        kwargs: dict[str, Any] = {
            "IndexName": GSI1,
            "KeyConditionExpression": Key("GSI1PK").eq(gsi_pk) & Key("GSI1SK").begins_with("RUN#"),
            "ScanIndexForward": False,
        }
        return self._page(kwargs, limit, token, {"GSI1PK": gsi_pk}, sk_prefix="RUN#")

    def page_datasets(
        self, *, limit: int, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        return self._page(self._prefix_query("DATASET#"), limit, token, {}, sk_prefix="DATASET#")

    def page_issues(
        self, run_id: str, *, limit: int, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        prefix = f"ISSUE#{run_id}#"
        items, next_token = self._page(self._prefix_query(prefix), limit, token, {}, sk_prefix=prefix)
        return [json.loads(i["issueJson"]) for i in items], next_token

    def put_version(self, dataset_id: str, version: dict[str, Any]) -> None:
        """A dataset version written by a fix, with its lineage; version ids sort by creation time."""
        self._table.put_item(
            Item={
                **to_item(version),
                "PK": self._pk,
                "SK": f"VERSION#{dataset_id}#{version['versionId']}",
                "entity": "version",
            },
            ConditionExpression="attribute_not_exists(PK)",
        )

    def set_version_run(self, dataset_id: str, version_id: str, run_id: str) -> None:
        """The run started on a version (lineage: the version's parent run, and its own first run)."""
        self._table.update_item(
            Key={"PK": self._pk, "SK": f"VERSION#{dataset_id}#{version_id}"},
            UpdateExpression="SET runId = :r",
            ExpressionAttributeValues={":r": run_id},
            ConditionExpression="attribute_exists(PK)",
        )

    def get_version(self, dataset_id: str, version_id: str) -> dict[str, Any] | None:
        return _strip(
            self._table.get_item(Key={"PK": self._pk, "SK": f"VERSION#{dataset_id}#{version_id}"}).get("Item")
        )

    def page_versions(
        self, dataset_id: str, *, limit: int, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of one dataset's versions, newest first."""
        prefix = f"VERSION#{dataset_id}#"
        kwargs = {**self._prefix_query(prefix), "ScanIndexForward": False}
        return self._page(kwargs, limit, token, {}, sk_prefix=prefix)

    def delete_run(self, run_id: str) -> None:
        """Remove a run record that never started (the API refused it after creating it)."""
        self._table.delete_item(
            Key={"PK": self._pk, "SK": f"RUN#{run_id}"},
            ConditionExpression="#s = :q",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":q": "QUEUED"},
        )

    # --- API idempotency keys ---------------------------------------------------------------------
    def claim_idempotency_key(self, key: str, *, request_hash: str, run_id: str) -> dict[str, Any] | None:
        """Bind the caller's Idempotency-Key to `run_id`; None when this call holds it, else the earlier
        claim (`runId`, `requestHash`): the request is a retry (or a misuse of the key)."""
        sk = f"IDEMPOTENCY#{hashlib.sha256(key.encode()).hexdigest()}"
        try:
            self._table.put_item(
                Item={
                    "PK": self._pk,
                    "SK": sk,
                    "entity": "idempotency",
                    "runId": run_id,
                    "requestHash": request_hash,
                    "expiresAt": int(self._clock()) + IDEMPOTENCY_TTL_S,
                },
                # An expired claim may still be there until DynamoDB's TTL sweep removes it.
                ConditionExpression="attribute_not_exists(PK) OR expiresAt < :now",
                ExpressionAttributeValues={":now": int(self._clock())},
            )
        except Exception as exc:
            if not self._conditional_failed(exc):
                raise
            existing = self._table.get_item(Key={"PK": self._pk, "SK": sk}, ConsistentRead=True).get("Item")
            return _strip(existing) or {"runId": None, "requestHash": None}
        return None

    def release_idempotency_key(self, key: str) -> None:
        """Forget a key whose request did not start a run, so the caller's retry can."""
        sk = f"IDEMPOTENCY#{hashlib.sha256(key.encode()).hexdigest()}"
        self._table.delete_item(Key={"PK": self._pk, "SK": sk})

    # --- idempotency ------------------------------------------------------------------------------
    def claim_object(
        self, bucket: str, key: str, version_id: str | None, run_id: str, *, execution_id: str
    ) -> str | None:
        """Record that this object version starts `run_id` in `execution_id`.

        Returns None when this execution holds the claim (first delivery, or a retry of the same execution),
        else the run id of the execution that claimed it first: the event is a duplicate.
        """
        write = self.claim_object_write(bucket, key, version_id, run_id, execution_id=execution_id)["Put"]
        try:
            self._table.put_item(**{k: v for k, v in write.items() if k != "TableName"})
        except Exception as exc:
            if not self._conditional_failed(exc):
                raise
            return self.object_claimant(bucket, key, version_id) or run_id
        return None

    def claim_object_write(
        self, bucket: str, key: str, version_id: str | None, run_id: str, *, execution_id: str
    ) -> dict[str, Any]:
        """`claim_object` as one write of a TransactWriteItems (it fails its condition when another execution
        holds the claim: `object_claimant` names its run)."""
        return {
            "Put": {
                "TableName": self._table.name,
                "Item": {
                    "PK": self._pk,
                    "SK": object_claim_key(bucket, key, version_id),
                    "entity": "object_claim",
                    "runId": run_id,
                    "executionId": execution_id,
                    "expiresAt": int(self._clock()) + CLAIM_TTL_S,
                },
                "ConditionExpression": "attribute_not_exists(PK) OR executionId = :e",
                "ExpressionAttributeValues": {":e": execution_id},
            }
        }

    def object_claimant(self, bucket: str, key: str, version_id: str | None) -> str | None:
        """The run that claimed this object version, if any."""
        existing = self._table.get_item(
            Key={"PK": self._pk, "SK": object_claim_key(bucket, key, version_id)}, ConsistentRead=True
        ).get("Item")
        return str(existing["runId"]) if existing else None

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
        """Remember the dataset's latest upload, or import (a file in the owner's bucket named with the role
        that reads it, no version): what schedules and POST …/runs re-analyse. Creates the dataset if new."""
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

    # --- fix jobs (POST /runs/{id}/fixes: applied by the fix worker, polled with GET …/fixes/{fixId}) --------
    def create_fix(self, run_id: str, fix: dict[str, Any]) -> None:
        self._table.put_item(
            Item={
                **to_item(fix),
                "PK": self._pk,
                "SK": f"FIX#{run_id}#{fix['fixId']}",
                "entity": "fix",
                "runId": run_id,
                "status": "PENDING",
            },
            ConditionExpression="attribute_not_exists(PK)",
        )

    def get_fix(self, run_id: str, fix_id: str) -> dict[str, Any] | None:
        item = self._table.get_item(Key={"PK": self._pk, "SK": f"FIX#{run_id}#{fix_id}"}, ConsistentRead=True)
        return _strip(item.get("Item"))

    def transition_fix(
        self, run_id: str, fix_id: str, *, from_status: str, to_status: str, **fields: Any
    ) -> None:
        """Move a fix job on (PENDING → RUNNING → SUCCEEDED/FAILED) only from the status expected: a duplicate
        delivery of the job, or a status already decided, is a RunTransitionError."""
        self._move_status(
            f"FIX#{run_id}#{fix_id}", from_status, to_status, fields, f"fix {fix_id} is not {from_status}"
        )

    # --- accepted issues (iterate.accepted: matched by type, columns and value hashes) -------------
    def put_acceptance(self, dataset_id: str, acceptance: dict[str, Any]) -> None:
        self._table.put_item(
            Item={
                **to_item(acceptance),
                "PK": self._pk,
                "SK": f"ACCEPTED#{dataset_id}#{acceptance['id']}",
                "entity": "accepted",
            }
        )

    def list_acceptances(self, dataset_id: str) -> list[dict[str, Any]]:
        return self._query_prefix(f"ACCEPTED#{dataset_id}#")

    def page_acceptances(
        self, dataset_id: str, *, limit: int, token: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        prefix = f"ACCEPTED#{dataset_id}#"
        return self._page(self._prefix_query(prefix), limit, token, {}, sk_prefix=prefix)

    def delete_acceptance(self, dataset_id: str, acceptance_id: str) -> bool:
        """Delete one acceptance; False when the owner has none with that id for the dataset."""
        try:
            self._table.delete_item(
                Key={"PK": self._pk, "SK": f"ACCEPTED#{dataset_id}#{acceptance_id}"},
                ConditionExpression="attribute_exists(PK)",
            )
        except Exception as exc:
            if self._conditional_failed(exc):
                return False
            raise
        return True

    # --- helpers ----------------------------------------------------------------------------------
    def _prefix_query(self, prefix: str) -> dict[str, Any]:
        return {"KeyConditionExpression": Key("PK").eq(self._pk) & Key("SK").begins_with(prefix)}

    def _page(
        self,
        kwargs: dict[str, Any],
        limit: int,
        token: str | None,
        expected: dict[str, str],
        *,
        sk_prefix: str,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a query; the token must be one this owner got for this same listing."""
        kwargs = {**kwargs, "Limit": max(1, int(limit))}
        if token:
            kwargs["ExclusiveStartKey"] = self._decode_token(token, expected, sk_prefix)
        page = self._table.query(**kwargs)
        items = [i for i in (_strip(it) for it in page.get("Items", [])) if i is not None]
        last = page.get("LastEvaluatedKey")
        return items, (encode_page_token(last) if last else None)

    def _decode_token(self, token: str, expected: dict[str, str], sk_prefix: str) -> dict[str, Any]:
        try:
            key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (binascii.Error, ValueError) as exc:
            raise InvalidPageTokenError("nextToken is not a token this API issued") from exc
        wanted = {"PK": self._pk, **expected}
        names = {"PK", "SK", *expected} | ({"GSI1SK"} if "GSI1PK" in expected else set())
        if (
            not isinstance(key, dict)
            or not all(isinstance(v, str) for v in key.values())
            or set(key) != names
            or any(key.get(k) != v for k, v in wanted.items())
            or not str(key.get("SK", "")).startswith(sk_prefix)
        ):
            # Another owner's key, another listing's key, or a forged one: never a way into other items.
            raise InvalidPageTokenError("nextToken does not belong to this listing")
        return key

    def _query_prefix(self, prefix: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = self._prefix_query(prefix)
        while True:
            page = self._table.query(**kwargs)
            items.extend(i for i in (_strip(it) for it in page.get("Items", [])) if i is not None)
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
