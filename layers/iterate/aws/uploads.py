"""Big files in: an S3 multipart upload presigned part by part (S3 caps a single PUT or POST at 5 GB).

The API creates the upload on the dataset's key with SHA-256 checksums, presigns one URL per part, and
completes it from the parts' ETags and checksums: the file goes from the caller to S3, never through the API.
S3 then holds a SHA-256 of every part and of the whole (`ChecksumSHA256`, "-N" for N parts), the content identity
the engine path reads (`iterate.aws.large.content_identity`) instead of streaming the object through a hash.
"""

from __future__ import annotations

import math
from typing import Any

MiB = 1024 * 1024
# S3's own limits: parts of 5 MiB to 5 GiB (the last may be smaller), at most 10,000 parts, 5 TiB an object.
MIN_PART_BYTES = 5 * MiB
MAX_PART_BYTES = 5 * 1024 * MiB
MAX_PARTS = 10_000
# Parts of 64 MiB by default (a 100 GB file in 1,491 parts), larger when the file needs more than 10,000.
DEFAULT_PART_BYTES = 64 * MiB
CHECKSUM_HEADER = "x-amz-checksum-sha256"


class PartsMissingError(ValueError):
    """Completing an upload before S3 holds every part (the message names the missing ones)."""


def part_bytes(size: int) -> int:
    """The part size for a file of `size` bytes: DEFAULT_PART_BYTES, or the least whole MiB that keeps the
    parts at MAX_PARTS or fewer."""
    need = math.ceil(size / MAX_PARTS / MiB) * MiB
    return min(max(DEFAULT_PART_BYTES, need, MIN_PART_BYTES), MAX_PART_BYTES)


def start_upload(s3: Any, bucket: str, key: str, size: int, *, expires_s: int) -> dict[str, Any]:
    """Create the multipart upload and presign each part's PUT; the caller sends part n's bytes
    [(n-1)·partBytes, n·partBytes) to its URL with the header x-amz-checksum-sha256 (its base64 SHA-256)."""
    size_part = part_bytes(size)
    count = max(1, math.ceil(size / size_part))
    created = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")
    upload_id = created["UploadId"]
    urls = [
        {
            "partNumber": n,
            "url": s3.generate_presigned_url(
                "upload_part",
                Params={"Bucket": bucket, "Key": key, "UploadId": upload_id, "PartNumber": n},
                ExpiresIn=expires_s,
            ),
        }
        for n in range(1, count + 1)
    ]
    return {"uploadId": upload_id, "key": key, "partBytes": size_part, "parts": urls, "expiresIn": expires_s}


def complete_upload(s3: Any, bucket: str, key: str, upload_id: str, *, part_count: int) -> dict[str, Any]:
    """Join the parts S3 holds (ListParts: their ETags and SHA-256s as S3 recorded them) into the object, once
    all `part_count` are there; its ObjectCreated event starts the run. The object's version and checksum."""
    parts: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload_id):
        parts += page.get("Parts", [])
    numbers = sorted(p["PartNumber"] for p in parts)
    if numbers != list(range(1, part_count + 1)):
        missing = sorted(set(range(1, part_count + 1)) - set(numbers))[:10]
        raise PartsMissingError(
            f"S3 holds {len(numbers)} of the {part_count} parts (missing: {missing}); send them, then complete"
        )
    listed = [
        {"PartNumber": p["PartNumber"], "ETag": p["ETag"]}
        | ({"ChecksumSHA256": p["ChecksumSHA256"]} if p.get("ChecksumSHA256") else {})
        for p in sorted(parts, key=lambda p: p["PartNumber"])
    ]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}
    )
    extra = {"VersionId": done["VersionId"]} if done.get("VersionId") else {}
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED", **extra)
    return {
        "key": key,
        "versionId": done.get("VersionId"),
        "etag": str(done.get("ETag", "")).strip('"'),
        "checksumSha256": head.get("ChecksumSHA256"),
        "size": int(head["ContentLength"]),
    }


def abort_upload(s3: Any, bucket: str, key: str, upload_id: str) -> None:
    """Drop the parts sent so far (the bucket's lifecycle rule drops those of an upload never completed)."""
    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
