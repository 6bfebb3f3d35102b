"""The harness's GetObject without moto's whole-object copies, and its aws-chunked decoding of uploads in linear
time, answer exactly what moto answers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import requests
from awsenv import BUCKET, decode_aws_chunked, s3_reads_by_seek, s3_uploads_decoded_linearly
from botocore.exceptions import ClientError

pytestmark = pytest.mark.handler

# Over moto's spool size (5 MiB - 1 KiB), so the object sits in a temp file as a large upload does.
BIG = os.urandom(6 * 1024 * 1024 + 123)
SMALL = b"order_id,amount\n1,2.50\n2,3.75\n"
RANGES = (
    "bytes=0-0",
    "bytes=0-99",
    "bytes=1000-5242879",
    "bytes=5000000-",
    "bytes=-17",
    "bytes=6291000-9999999",
)


@pytest.fixture
def objects(aws: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Given a large and a small object (the large one with a second version), and moto's FakeKey.value
    counted: how many times the whole object was copied out of its buffer."""
    from moto.s3.models import FakeKey

    s3 = aws["s3"]
    older = s3.put_object(Bucket=BUCKET, Key="uploads/a/big.csv", Body=b"an older version")["VersionId"]
    version = s3.put_object(Bucket=BUCKET, Key="uploads/a/big.csv", Body=BIG)["VersionId"]
    s3.put_object(Bucket=BUCKET, Key="uploads/a/small.csv", Body=SMALL)
    whole_reads: list[str] = []
    real = FakeKey.value

    def counted(key: Any) -> bytes:
        whole_reads.append(key.name)
        return real.fget(key)  # type: ignore[attr-defined, no-any-return]

    with mock.patch.object(FakeKey, "value", property(counted, real.fset)):
        yield {"s3": s3, "version": version, "older": older, "whole_reads": whole_reads}


def _get(s3: Any, key: str, **kwargs: Any) -> dict[str, Any]:
    response = s3.get_object(Bucket=BUCKET, Key=key, **kwargs)
    return {
        "body": response["Body"].read(),
        "range": response.get("ContentRange"),
        "length": response["ContentLength"],
        "status": response["ResponseMetadata"]["HTTPStatusCode"],
    }


def test_ranged_gets_answer_moto_s_own_bytes_without_copying_the_object(objects: dict[str, Any]) -> None:
    s3, version = objects["s3"], objects["version"]
    # When every kind of range is asked with and without the harness's reads
    plain = {r: _get(s3, "uploads/a/big.csv", Range=r, VersionId=version) for r in RANGES}
    copies_without = len(objects["whole_reads"])
    objects["whole_reads"].clear()
    with s3_reads_by_seek():
        seek = {r: _get(s3, "uploads/a/big.csv", Range=r, VersionId=version) for r in RANGES}
        small = _get(s3, "uploads/a/small.csv", Range="bytes=3-9")
    # Then the answers are the same: bytes, Content-Range, length and 206
    assert seek == plain
    assert seek["bytes=1000-5242879"]["body"] == BIG[1000:5242880]
    assert seek["bytes=-17"]["body"] == BIG[-17:]
    assert seek["bytes=6291000-9999999"] == {
        "body": BIG[6291000:],
        "range": f"bytes 6291000-{len(BIG) - 1}/{len(BIG)}",
        "length": len(BIG) - 6291000,
        "status": 206,
    }
    assert small["body"] == SMALL[3:10] and small["status"] == 206
    # And moto copied the whole object once per GET without them, never with them
    assert copies_without == len(RANGES)
    assert objects["whole_reads"] == []


def test_whole_gets_stream_the_same_bytes_and_range_errors_are_unchanged(objects: dict[str, Any]) -> None:
    s3, version = objects["s3"], objects["version"]
    with s3_reads_by_seek():
        # When the whole object is read at once, in pieces, as another version, and out of range
        whole = s3.get_object(Bucket=BUCKET, Key="uploads/a/big.csv", VersionId=version)
        body = whole["Body"].read()
        pieces = list(s3.get_object(Bucket=BUCKET, Key="uploads/a/big.csv")["Body"].iter_chunks(1 << 20))
        older = _get(s3, "uploads/a/big.csv", VersionId=objects["older"])
        small = _get(s3, "uploads/a/small.csv")
        head = s3.head_object(Bucket=BUCKET, Key="uploads/a/big.csv")
        url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "uploads/a/big.csv"})
        with requests.get(url, stream=True, timeout=10) as response:
            fetched = (response.status_code, response.raw.read())
        with pytest.raises(ClientError) as refused:
            s3.get_object(Bucket=BUCKET, Key="uploads/a/big.csv", Range=f"bytes={len(BIG)}-")
    # Then the bytes are the object's, the length and status moto's, and nothing was copied whole
    assert body == BIG and whole["ContentLength"] == len(BIG)
    assert b"".join(pieces) == BIG and max(len(p) for p in pieces) == 1 << 20
    assert older["body"] == b"an older version" and older["status"] == 200
    assert small == {"body": SMALL, "range": None, "length": len(SMALL), "status": 200}
    assert head["ContentLength"] == len(BIG)
    assert fetched == (200, BIG)
    assert refused.value.response["Error"]["Code"] == "InvalidRange"
    assert objects["whole_reads"] == []


def _aws_chunked(data: bytes, piece: int) -> bytes:
    """`data` as botocore sends an upload with a trailing checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER)."""
    chunks = [
        b"%x\r\n%s\r\n" % (len(data[i : i + piece]), data[i : i + piece]) for i in range(0, len(data), piece)
    ]
    return b"".join(chunks) + b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"


def test_aws_chunked_uploads_decode_to_moto_s_bytes(aws: dict[str, Any]) -> None:
    from moto.s3.responses import S3Response

    moto_decode = S3Response._handle_encoded_body
    # When bodies are decoded by moto's own parse and by the harness's
    for data, piece in ((BIG, 65536), (BIG, 1 << 20), (SMALL, 7), (b"", 1)):
        encoded = _aws_chunked(data, piece)
        # Then both give the object's bytes
        assert decode_aws_chunked(encoded) == moto_decode(None, encoded) == data  # type: ignore[arg-type]
    assert decode_aws_chunked(b"") == b""
    # And an upload through botocore (aws-chunked, CRC32 trailer) is stored as sent
    s3 = aws["s3"]
    with s3_uploads_decoded_linearly(), s3_reads_by_seek():
        s3.put_object(Bucket=BUCKET, Key="uploads/a/put.csv", Body=BIG)
        stored = s3.get_object(Bucket=BUCKET, Key="uploads/a/put.csv")["Body"].read()
    assert stored == BIG
