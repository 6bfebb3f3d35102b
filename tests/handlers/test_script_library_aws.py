"""The AWS script library over moto: code in S3 under library/<owner>/, the index in the one table, owner-keyed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from awsenv import BUCKET

from iterate.contracts import StoredScript
from iterate.library.aws import AwsScriptLibrary

pytestmark = pytest.mark.handler

CODE = "result = {'affected_rows': int((df['city'] == 'Bostn').sum())}\n"


def entry(
    owner: str = "alice", dataset: str = "orders", script: str = "a" * 32, code: str = CODE
) -> StoredScript:
    return StoredScript(
        scriptId=script,
        owner=owner,
        datasetId=dataset,
        issueType="inconsistent_category",
        issueSource="detector",
        detector="typos",
        rule="rare",
        columns={"city": "text"},
        schemaFingerprint="f" * 32,
        codeSha256=hashlib.sha256(code.encode()).hexdigest(),
        status="confirmed",
        affectedRows=3,
        issueId="typos-city",
        runId="r1",
        storedAt="2026-11-24T10:00:00+00:00",
        engineVersion="0",
    )


def test_a_stored_script_round_trips_keyed_by_owner_and_dataset(aws: dict[str, Any]) -> None:
    # Given the library over the artifacts bucket and the table
    library = AwsScriptLibrary(aws["s3"], BUCKET, aws["table"])
    # When alice's proof is saved
    library.save(entry(), CODE)
    # Then its code sits under library/<owner>/<dataset>/, encrypted, and its index item under her partition
    key = f"library/alice/orders/{'a' * 32}.py"
    head = aws["s3"].head_object(Bucket=BUCKET, Key=key)
    assert head["ServerSideEncryption"] == "AES256" and head["ContentType"] == "text/x-python"
    item = aws["table"].get_item(Key={"PK": "OWNER#alice", "SK": f"SCRIPT#orders#{'a' * 32}"})["Item"]
    assert item["entity"] == "script" and item["codeKey"] == key
    # and it reads back: entry and code
    (found,) = library.entries("alice", "orders")
    assert found == entry() and library.code(found) == CODE


def test_another_owners_scripts_are_never_returned(aws: dict[str, Any]) -> None:
    # Given bob's proof for a dataset of the same name, and alice's for a dataset whose id extends it
    library = AwsScriptLibrary(aws["s3"], BUCKET, aws["table"])
    library.save(entry(owner="bob"), CODE)
    library.save(entry(dataset="orders#2024"), CODE)
    # Then alice's "orders" has no scripts, and bob's entry cannot be read as alice's
    assert library.entries("alice", "orders") == []
    assert [e.owner for e in library.entries("bob", "orders")] == ["bob"]
    assert library.code(entry(owner="alice")) is None  # the key is computed from the owner: nothing there


def test_code_that_does_not_match_its_index_is_not_returned(aws: dict[str, Any]) -> None:
    library = AwsScriptLibrary(aws["s3"], BUCKET, aws["table"])
    library.save(entry(), CODE)
    # When someone rewrites the object (but not the index)
    aws["s3"].put_object(Bucket=BUCKET, Key=f"library/alice/orders/{'a' * 32}.py", Body=b"import os\n")
    # Then the code is refused, and so are keys that would leave the owner's prefix
    assert library.code(entry()) is None
    with pytest.raises(ValueError):
        library.code_key("alice", "../bob", "a" * 32)
    with pytest.raises(ValueError):
        library.code_key("alice/x", "orders", "a" * 32)
    with pytest.raises(ValueError):
        library.code_key("alice", "orders", "../../x")
