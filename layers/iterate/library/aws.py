"""AWS adapter of the ScriptLibrary port: the code in S3 under library/, the index in the one DynamoDB table.

Keys follow the table's design: the owner is the partition (`OWNER#<owner>`), the sort key names the dataset
and the script (`SCRIPT#<dataset>#<scriptId>`), so one query returns a dataset's scripts and can never
return another owner's. The code lives at `library/<owner>/<dataset>/<scriptId>.py`, a key computed from the
same three values (never read from the item), and is returned only when it matches the hash the item holds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from pydantic import ValidationError

from iterate.contracts import StoredScript

log = logging.getLogger("iterate.library")
LIBRARY_PREFIX = "library/"
_SCRIPT_ID = re.compile(r"[0-9a-f]{8,64}")


def _segment(value: str, what: str) -> str:
    if not value or "/" in value or value in {".", ".."}:
        raise ValueError(f"{what} {value!r} cannot name a library key")
    return value


def script_sort_key(dataset_id: str, script_id: str = "") -> str:
    return f"SCRIPT#{dataset_id}#{script_id}"


class AwsScriptLibrary:
    """Clients are injected (the step's cached ones); the bucket is the artifacts bucket."""

    def __init__(self, s3: Any, bucket: str, table: Any) -> None:
        self._s3 = s3
        self.bucket = bucket
        self._table = table

    def code_key(self, owner: str, dataset_id: str, script_id: str) -> str:
        if not _SCRIPT_ID.fullmatch(script_id):
            raise ValueError(f"not a script id: {script_id!r}")
        return f"{LIBRARY_PREFIX}{_segment(owner, 'owner')}/{_segment(dataset_id, 'dataset')}/{script_id}.py"

    def entries(self, owner: str, dataset_id: str) -> list[StoredScript]:
        from boto3.dynamodb.conditions import Key

        _segment(owner, "owner")
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("PK").eq(f"OWNER#{owner}")
            & Key("SK").begins_with(script_sort_key(dataset_id))
        }
        found: list[StoredScript] = []
        while True:
            page = self._table.query(**kwargs)
            for item in page.get("Items", []):
                try:
                    entry = StoredScript.model_validate(json.loads(item["scriptJson"]))
                except (KeyError, TypeError, ValueError, ValidationError):
                    continue
                # A dataset id that is a prefix of another's ("a" and "a#b") shares the key prefix.
                if entry.owner == owner and entry.datasetId == dataset_id:
                    found.append(entry)
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def code(self, entry: StoredScript) -> str | None:
        key = self.code_key(entry.owner, entry.datasetId, entry.scriptId)
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None
        if hashlib.sha256(body).hexdigest() != entry.codeSha256:
            log.warning("stored script ignored: its code does not match the index")
            return None
        try:
            return str(body.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    def save(self, entry: StoredScript, code: str) -> None:
        key = self.code_key(entry.owner, entry.datasetId, entry.scriptId)
        # The code first, then the index entry that points at it (a reader never finds an entry without code;
        # a concurrent writer of the same script is caught by the hash check).
        self._s3.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=code.encode("utf-8"),
            ContentType="text/x-python",
            ServerSideEncryption="AES256",
        )
        self._table.put_item(
            Item={
                "PK": f"OWNER#{entry.owner}",
                "SK": script_sort_key(entry.datasetId, entry.scriptId),
                "entity": "script",
                "owner": entry.owner,
                "datasetId": entry.datasetId,
                "scriptId": entry.scriptId,
                "storedAt": entry.storedAt,
                "codeKey": key,
                # As JSON text, as issues are: the entry's column names may be keys DynamoDB maps refuse.
                "scriptJson": entry.model_dump_json(),
            }
        )
