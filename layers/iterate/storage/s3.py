"""S3 adapter of the ArtifactStore port: a run's files under one key prefix of the artifacts bucket."""

from __future__ import annotations

from typing import Any


class ArtifactNotFoundError(KeyError):
    """The requested artifact does not exist under the store's prefix."""


class S3ArtifactStore:
    """Keys are relative to `prefix` (e.g. `artifacts/<owner>/<dataset>/<run>/`); the client is injected."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        self._s3 = client
        self.bucket = bucket
        self.prefix = prefix

    def _key(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"artifact key must be relative and stay under the prefix: {key!r}")
        return self.prefix + key

    def put_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> str:
        full = self._key(key)
        # SSE is the bucket default (KMS/S3-managed); being explicit keeps objects encrypted even if it changes.
        self._s3.put_object(
            Bucket=self.bucket, Key=full, Body=data, ContentType=content_type, ServerSideEncryption="AES256"
        )
        return self.uri(key)

    def put_file(self, key: str, path: Any) -> str:
        """Upload a local file (multipart for large data files, never read whole into memory)."""
        self._s3.upload_file(
            str(path), self.bucket, self._key(key), ExtraArgs={"ServerSideEncryption": "AES256"}
        )
        return self.uri(key)

    def get_bytes(self, key: str) -> bytes:
        try:
            response = self._s3.get_object(Bucket=self.bucket, Key=self._key(key))
        except self._s3.exceptions.NoSuchKey as exc:
            raise ArtifactNotFoundError(key) from exc
        body: bytes = response["Body"].read()
        return body

    def exists(self, key: str) -> bool:
        try:
            self._s3.head_object(Bucket=self.bucket, Key=self._key(key))
        except self._s3.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def presigned_get(self, key: str, *, expires_s: int = 900) -> str:
        """A time-limited GET URL for exactly one artifact (how the sandbox reads data without S3 rights)."""
        url: str = self._s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._key(key)}, ExpiresIn=expires_s
        )
        return url

    def presigned_put(self, key: str, *, expires_s: int = 900) -> str:
        """A time-limited PUT URL for exactly one artifact (how the sandbox writes its result without S3 rights)."""
        url: str = self._s3.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": self._key(key)}, ExpiresIn=expires_s
        )
        return url

    def list_keys(self, sub_prefix: str = "") -> list[str]:
        """Keys (relative to the store's prefix) under `sub_prefix`."""
        keys: list[str] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + sub_prefix):
            keys.extend(obj["Key"][len(self.prefix) :] for obj in page.get("Contents", []))
        return keys
