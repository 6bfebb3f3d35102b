"""With a key in Secrets Manager the LLM functions call Claude; when Claude is down the run ends degraded, not failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REGION,
    UPLOAD_KEY,
    object_created_event,
    orders_csv,
    received_events,
    route_lambdas,
    run_execution,
)

from iterate.storage.dynamo import DynamoRunRepository

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from fake_anthropic import FakeAnthropic, error_reply

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]


def test_claude_unavailable_degrades_the_run_and_says_so(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from aws_lambda_powertools.utilities import parameters

    from iterate.aws.clients import reset

    # Given the Anthropic key stored in Secrets Manager (never in the functions' environment)
    secret = "sk-ant-from-secrets-manager"
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="anthropic", SecretString=secret
    )["ARN"]
    with FakeAnthropic(default=error_reply(529, "overloaded_error")) as claude:
        # And functions configured with its ARN, talking to a Messages API that is overloaded
        monkeypatch.setenv("ITERATE_ANTHROPIC_SECRET_ARN", arn)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        monkeypatch.setenv("ITERATE_LLM_MAX_RETRIES", "0")
        monkeypatch.setenv("ITERATE_LLM_TIMEOUT_S", "5")
        parameters.clear_caches()
        reset()
        from iterate.settings import get_settings

        get_settings.cache_clear()
        version = machine["s3"].put_object(Bucket=BUCKET, Key=UPLOAD_KEY, Body=orders_csv())["VersionId"]
        # When an upload runs
        with route_lambdas() as calls:
            done = run_execution(
                machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
            )
    # Then Claude was called with the key from Secrets Manager
    assert claude.requests, "the LLM functions never called the Messages API"
    sent = {h.get("x-api-key") or h.get("Authorization", "").removeprefix("Bearer ") for h in claude.headers}
    assert sent == {secret}
    # And the run still SUCCEEDED, in degraded mode with the reasons recorded and announced
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    run_id = json.loads(done["output"])["run"]["runId"]
    run = DynamoRunRepository(machine["table"], "alice").require_run(run_id)
    assert run["mode"] == "degraded" and run["degradedReasons"]
    prefix = json.loads(done["output"])["run"]["prefix"]
    analysis = json.loads(
        machine["s3"].get_object(Bucket=BUCKET, Key=prefix + "analysis.json")["Body"].read()
    )
    assert analysis["mode"] == "degraded" and analysis["run"]["degradedReasons"]
    (event,) = received_events(machine["sqs"], machine["queue_url"])
    assert event["detail"]["outcome"] == "degraded" and event["detail"]["mode"] == "degraded"
    # And the key never reached the state machine's payloads
    assert all(secret not in json.dumps(event_in) for _, event_in in calls)


@pytest.mark.parametrize("stored", ["placeholder", "{not-json"])
def test_a_fresh_deployments_secret_runs_offline_not_degraded(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, stored: str
) -> None:
    import boto3
    from aws_lambda_powertools.utilities import parameters

    from iterate.aws.clients import reset
    from iterate.aws.secrets import SECRET_PLACEHOLDER
    from iterate.settings import get_settings

    # Given the secret as a fresh stack creates it (its placeholder), or a value that only starts like JSON
    value = SECRET_PLACEHOLDER if stored == "placeholder" else stored
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name="anthropic", SecretString=value
    )["ARN"]
    with FakeAnthropic(default=error_reply(401, "authentication_error")) as claude:
        # And the LLM functions configured with its ARN (and a Messages API that would refuse any key)
        monkeypatch.setenv("ITERATE_ANTHROPIC_SECRET_ARN", arn)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        parameters.clear_caches()
        reset()
        get_settings.cache_clear()
        version = machine["s3"].put_object(Bucket=BUCKET, Key=UPLOAD_KEY, Body=orders_csv())["VersionId"]
        # When an upload runs
        with route_lambdas() as calls:
            done = run_execution(
                machine["sfn"], machine["arn"], object_created_event(BUCKET, UPLOAD_KEY, version)
            )
    # Then no step failed and Claude was never called: the run is offline, not degraded
    assert done["status"] == "SUCCEEDED", done
    assert not calls.failures, calls.failures
    assert not claude.requests
    run = DynamoRunRepository(machine["table"], "alice").require_run(
        json.loads(done["output"])["run"]["runId"]
    )
    assert run["mode"] == "offline" and not run.get("degradedReasons")
