"""Data already in the owner's bucket, read where it is through a role the owner grants.

A run's source may name a role (`S3ObjectRef.roleArn`): the steps that read the source (admission's size check,
ProfileDataset, the chunk functions, EngineStep's first round, MergeChunks) read it with credentials of
`sts:AssumeRole(RoleArn, ExternalId="iterate-<owner>")`. The external id is the owner's, so a role whose trust
policy names it can be used by that owner's runs only (another owner's runs present another id: the confused
deputy). Everything a run writes stays in Iterate's bucket; the owner's object is only read. Light: the API and
admission functions import it.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from iterate.aws.payloads import S3ObjectRef

ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}$")
S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>.+)$")
SESSION_S = 3600
_SESSION_UNSAFE = re.compile(r"[^\w+=,.@-]")
# A client is reused until this long before its credentials expire.
_MARGIN_S = 300
_lock = threading.Lock()


def content_identity(head: dict[str, Any]) -> str:
    """The object's identity from S3's own checksums (HeadObject with ChecksumMode=ENABLED), never from
    streaming its bytes: the SHA-256 S3 verified at upload (full object, or per part for a multipart upload:
    `-N`), else the ETag (an MD5 for a single PUT, the MD5 of the parts' MD5s for a multipart one), with the
    version id where the bucket keeps versions."""
    version = head.get("VersionId")
    suffix = f"@{version}" if version and version != "null" else ""
    checksum = head.get("ChecksumSHA256")
    if checksum:
        kind = str(head.get("ChecksumType") or "FULL_OBJECT").lower()
        return f"s3-sha256-{kind}:{checksum}{suffix}"
    return f"s3-etag:{str(head.get('ETag', '')).strip(chr(34))}{suffix}"


class SourceAccessError(PermissionError):
    """The owner's role could not be assumed, or did not let Iterate read the object (the message says what
    the role's trust policy and permissions must hold)."""


def external_id(owner: str) -> str:
    """The external id Iterate presents for `owner`'s runs: what the owner's trust policy must require."""
    return f"iterate-{owner}"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` → (bucket, key); anything else is refused."""
    found = S3_URI.match(uri)
    if found is None:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return found["bucket"], found["key"]


def source_client(deps: Any, source: S3ObjectRef, owner: str) -> Any:
    """The S3 client that reads `source`: Iterate's own, or one acting as the owner's role (kept by the
    container's deps until shortly before its credentials expire)."""
    if not source.roleArn:
        return deps.s3_client()
    key = (source.roleArn, owner)
    with _lock:
        cached = deps.source_clients.get(key)
        if cached is not None and cached[0] - _MARGIN_S > time.time():
            return cached[1]
    from botocore.exceptions import ClientError

    try:
        credentials = deps.sts_client().assume_role(
            RoleArn=source.roleArn,
            RoleSessionName=("iterate-" + _SESSION_UNSAFE.sub("-", owner))[:64],
            ExternalId=external_id(owner),
            DurationSeconds=SESSION_S,
        )["Credentials"]
    except ClientError as exc:
        raise SourceAccessError(
            f"Iterate could not assume {source.roleArn} ({exc.response.get('Error', {}).get('Code')}): its trust "
            f"policy must let this deployment assume it with sts:ExternalId {external_id(owner)!r}"
        ) from None
    import boto3

    client = boto3.client(
        "s3",
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )
    expires = credentials["Expiration"]
    expires_at = expires.timestamp() if hasattr(expires, "timestamp") else time.time() + SESSION_S
    with _lock:
        deps.source_clients[key] = (expires_at, client)
    return deps._metered(client)
