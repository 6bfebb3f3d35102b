"""A file past the presigned POST's 5 GB goes in as a multipart upload: parts PUT to presigned URLs, completed by
the API, the object's identity S3's own SHA-256 of its parts (moto)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import requests
from awsenv import BUCKET

from iterate.aws.uploads import DEFAULT_PART_BYTES, MAX_PARTS, MiB, part_bytes


def test_the_part_size_keeps_any_file_within_s3s_ten_thousand_parts() -> None:
    # Given files from a few bytes to 5 TB, When their part size is chosen, Then S3's limits hold
    assert part_bytes(1) == DEFAULT_PART_BYTES
    assert part_bytes(100 * 10**9) == DEFAULT_PART_BYTES  # 1,491 parts of 64 MiB
    big = 5 * 10**12
    assert part_bytes(big) % MiB == 0 and -(-big // part_bytes(big)) <= MAX_PARTS


def test_a_multipart_upload_is_presigned_part_by_part_and_completed_with_s3s_checksum(
    call: Any, world: dict[str, Any]
) -> None:
    # Given a dataset
    status, created = call("POST", "/datasets", body={"name": "Big", "fileName": "big.csv"})
    assert status == 201
    dataset = created["dataset"]["datasetId"]
    # When a multipart upload of 70 MiB is started (two parts of 64 MiB and 6 MiB)
    size = 70 * MiB
    status, upload = call("POST", f"/datasets/{dataset}/uploads", body={"size": size})
    assert status == 201, upload
    assert upload["key"] == created["dataset"]["uploadKey"] and upload["partBytes"] == 64 * MiB
    assert [p["partNumber"] for p in upload["parts"]] == [1, 2]
    # And each part is PUT to its presigned URL with its SHA-256, as a client would
    data = (b"id,value\n" + b"1,abcdefgh\n" * (size // 11))[:size]
    sent = []
    for part in upload["parts"]:
        start = (part["partNumber"] - 1) * upload["partBytes"]
        chunk = data[start : start + upload["partBytes"]]
        checksum = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
        response = requests.put(
            part["url"], data=chunk, headers={upload["checksumHeader"]: checksum}, timeout=60
        )
        assert response.status_code == 200, response.text
        sent.append(part["partNumber"])
    complete = f"/datasets/{dataset}/uploads/{upload['uploadId']}/complete"
    # (completing before every part is there is refused, naming what is missing)
    status, early = call("POST", complete, body={"partCount": 3})
    assert status == 422 and "missing: [3]" in str(early)
    status, done = call("POST", complete, body={"partCount": len(sent)})
    # Then the object is the file, and its identity is S3's checksum of its two parts
    assert status == 200, done
    stored = world["s3"].get_object(Bucket=BUCKET, Key=upload["key"])["Body"].read()
    assert stored == data and done["size"] == size
    # (S3 answers the SHA-256 of the parts' SHA-256s with "-2"; moto 5.2 leaves the suffix out)
    parts_digest = b"".join(hashlib.sha256(data[i : i + 64 * MiB]).digest() for i in range(0, size, 64 * MiB))
    assert (
        done["checksumSha256"].split("-")[0]
        == base64.b64encode(hashlib.sha256(parts_digest).digest()).decode()
    )
    assert done["etag"].endswith("-2")


def test_a_size_past_what_a_run_takes_is_refused_before_any_upload(call: Any, world: dict[str, Any]) -> None:
    _, created = call("POST", "/datasets", body={"name": "Huge", "fileName": "huge.xlsx"})
    dataset = created["dataset"]["datasetId"]
    # When a 6 GB spreadsheet is announced (ITERATE_MAX_FILE_BYTES, 5 GB, binds: only CSV/TSV take the engine)
    status, body = call("POST", f"/datasets/{dataset}/uploads", body={"size": 6 * 10**9})
    # Then it is refused naming the limit, and no upload was created
    assert status == 422 and "ITERATE_MAX_FILE_BYTES" in str(body)
    assert not world["s3"].list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    # While a 100 GB CSV is taken (the engine path's limit), and can be aborted
    _, csv_created = call("POST", "/datasets", body={"name": "Wide", "fileName": "wide.csv"})
    csv_dataset = csv_created["dataset"]["datasetId"]
    status, upload = call("POST", f"/datasets/{csv_dataset}/uploads", body={"size": 100 * 10**9})
    assert status == 201 and len(upload["parts"]) == 1491
    assert call("DELETE", f"/datasets/{csv_dataset}/uploads/{upload['uploadId']}")[0] == 204
    assert not world["s3"].list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    # And another owner cannot start one on this dataset
    assert call("POST", f"/datasets/{csv_dataset}/uploads", owner="bob", body={"size": 10})[0] == 404


def _assume_role_calls() -> tuple[list[dict[str, Any]], Any]:
    """Record every sts:AssumeRole a client makes (moto accepts any trust; the test checks what is asked)."""
    from unittest import mock

    from botocore.client import BaseClient

    seen: list[dict[str, Any]] = []
    real = BaseClient._make_api_call

    def recording(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "AssumeRole":
            seen.append(params)
        return real(self, operation, params)

    return seen, mock.patch.object(BaseClient, "_make_api_call", recording)


def test_a_file_in_the_owners_bucket_is_analysed_through_the_role_they_grant(
    call: Any, world: dict[str, Any]
) -> None:
    # Given an object in the owner's own bucket and a role of theirs
    world["s3"].create_bucket(Bucket="customer-data")
    body = b"id,amount\n1,10\n2,20\n"
    version = (
        world["s3"].put_object(Bucket="customer-data", Key="exports/orders.csv", Body=body).get("VersionId")
    )
    role = "arn:aws:iam::123456789012:role/iterate-reader"
    _, created = call("POST", "/datasets", body={"name": "Theirs", "fileName": "orders.csv"})
    dataset = created["dataset"]["datasetId"]
    # When the owner asks for it to be analysed where it is
    seen, patched = _assume_role_calls()
    with patched:
        status, run = call(
            "POST",
            f"/datasets/{dataset}/imports",
            body={"uri": "s3://customer-data/exports/orders.csv", "roleArn": role},
        )
    # Then the run is queued on that object, read through the role with the owner's external id
    assert status == 202, run
    assert run["status"] == "QUEUED"
    assert seen and {(p["RoleArn"], p["ExternalId"]) for p in seen} == {(role, "iterate-alice")}
    from iterate.storage.dynamo import DynamoRunRepository

    queued = DynamoRunRepository(world["table"], "alice").get_run(run["runId"])
    assert queued is not None and queued["source"]["bucket"] == "customer-data"
    assert queued["source"]["roleArn"] == role and queued["source"].get("versionId") == version
    # And a missing object, a malformed role or another owner's dataset are refused before any run
    missing = {"uri": "s3://customer-data/exports/none.csv", "roleArn": role}
    status, problem = call("POST", f"/datasets/{dataset}/imports", body=missing)
    assert status == 422 and "s3:GetObject" in str(problem) and "iterate-alice" in str(problem)
    bad_role = {"uri": "s3://customer-data/exports/orders.csv", "roleArn": "arn:aws:iam::1:user/x"}
    assert call("POST", f"/datasets/{dataset}/imports", body=bad_role)[0] == 422
    theirs = {"uri": "s3://customer-data/exports/orders.csv", "roleArn": role}
    assert call("POST", f"/datasets/{dataset}/imports", owner="bob", body=theirs)[0] == 404
