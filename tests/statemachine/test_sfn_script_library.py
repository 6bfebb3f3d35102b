"""The feedback loop on AWS: the report step stores Claude's proofs, the next run's GenerateCode reruns them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REGION,
    load_handler,
    object_created_event,
    orders_csv,
    route_lambdas,
    run_execution,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from claude_models import reading_claude
from fake_anthropic import FakeAnthropic

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def _code_requests(fake: FakeAnthropic, since: int) -> int:
    return [(r.get("tool_choice") or {}).get("name") for r in fake.requests[since:]].count("run_python")


def _analysis(machine: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
    prefix = json.loads(done["output"])["run"]["prefix"]
    body = machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "analysis.json")["Body"].read()
    return dict(json.loads(body))


def test_the_next_upload_of_a_dataset_reruns_stored_proofs_and_another_owner_does_not(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from aws_lambda_powertools.utilities import parameters

    from iterate.aws.clients import reset
    from iterate.settings import get_settings

    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="anthropic", SecretString="k"
    )["ARN"]
    sandbox = load_handler("sandbox").lambda_handler
    with FakeAnthropic(default=reading_claude) as claude:
        # Given functions that reach a healthy (fake) Claude
        monkeypatch.setenv("ITERATE_ANTHROPIC_SECRET_ARN", arn)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        parameters.clear_caches()
        reset()
        get_settings.cache_clear()

        def upload(key: str, body: bytes) -> dict[str, Any]:
            version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=body)["VersionId"]
            with route_lambdas({"sandbox": sandbox}) as calls:
                done = run_execution(
                    machine["sfn"], machine["arn"], object_created_event(BUCKET, key, version)
                )
            assert done["status"] == "SUCCEEDED" and not calls.failures, calls.failures
            return done

        # When alice uploads orders, then the same orders with new rows (new content: no cached answer fits)
        first = upload("uploads/alice/orders/orders.csv", orders_csv())
        asked_first = _code_requests(claude, 0)
        seen = len(claude.requests)
        more = orders_csv() + b"1100,Customer 40,user40@example.com,NY,41.00,2026-03-10\n"
        second = upload("uploads/alice/orders/orders.csv", more)
        asked_second = _code_requests(claude, seen)
        seen = len(claude.requests)
        # And bob uploads the very same file as alice's second upload
        third = upload("uploads/bob/orders/orders.csv", more)
        asked_bob = _code_requests(claude, seen)

    # Then alice's first run had Claude write code, and stored it: the index in her partition, code in S3
    assert asked_first >= 1
    items = machine["table"].query(
        KeyConditionExpression="PK = :pk AND begins_with(SK, :sk)",
        ExpressionAttributeValues={":pk": "OWNER#alice", ":sk": "SCRIPT#orders#"},
    )["Items"]
    assert items and all(i["codeKey"].startswith("library/alice/orders/") for i in items)
    first_llm = [
        i for i in _analysis(machine, first)["issues"] if (i["investigation"] or {}).get("source") == "llm"
    ]
    assert first_llm and all(i["investigation"]["reused"] is None for i in first_llm)
    # And her second run asked Claude for no code: GenerateCode offered the stored proofs, which still held
    assert asked_second == 0
    reused = [i for i in _analysis(machine, second)["issues"] if (i["investigation"] or {}).get("reused")]
    assert {i["id"] for i in reused} == {i["id"] for i in first_llm}
    assert all(i["investigation"]["success"] and i["status"] in {"confirmed", "unverified"} for i in reused)
    # And bob's run of the same file reused nothing of alice's: Claude wrote his code
    assert asked_bob >= 1
    assert not [i for i in _analysis(machine, third)["issues"] if (i["investigation"] or {}).get("reused")]
    # And every LLM call took its tokens from the deployment's bucket and counted into its owner's day
    from iterate.storage.admission import GLOBAL_PK, TOKEN_BUCKET_SK, DailyUsage
    from iterate.storage.dynamo import DynamoRunRepository

    assert machine["table"].get_item(Key={"PK": GLOBAL_PK, "SK": TOKEN_BUCKET_SK}).get("Item")
    for owner in ("alice", "bob"):
        used = DailyUsage(machine["table"], owner).today()["tokens"]
        runs = DynamoRunRepository(machine["table"], owner).list_runs()
        billed = sum(
            int(r["usage"].get("inputTokens", 0)) + int(r["usage"].get("outputTokens", 0)) for r in runs
        )
        assert 0 < used <= billed, (owner, used, billed)
