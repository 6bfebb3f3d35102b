"""API tests: the real API and follow-up handlers over moto, called with API Gateway proxy events."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "handlers"))
from awsenv import (
    MOTO_CONFIG,
    REGION,
    FakeContext,
    api_event,
    base_env,
    create_resources,
    load_handler,
    reset_caches,
)
from moto import mock_aws

SCHEDULE_GROUP = "iterate-schedules"


Call = Callable[..., tuple[int, Any]]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Given a moto account with the bucket, the table, a state machine, a schedule group and a scheduler role."""
    import boto3

    base_env(monkeypatch)
    with mock_aws(config=MOTO_CONFIG):
        resources = create_resources()
        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="scheduler", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(
            name="iterate-analysis",
            definition=json.dumps({"StartAt": "Noop", "States": {"Noop": {"Type": "Pass", "End": True}}}),
            roleArn=role,
        )["stateMachineArn"]
        boto3.client("scheduler", region_name=REGION).create_schedule_group(Name=SCHEDULE_GROUP)
        monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", machine)
        monkeypatch.setenv("ITERATE_SCHEDULER_ROLE_ARN", role)
        monkeypatch.setenv("ITERATE_SCHEDULE_GROUP", SCHEDULE_GROUP)
        reset_caches()
        yield {**resources, "sfn": sfn, "machine": machine}
        reset_caches()


@pytest.fixture
def call(world: dict[str, Any]) -> Call:
    """Call the deployed routes: (method, path, owner, body) → (status, parsed JSON body)."""

    def _call(
        method: str, path: str, owner: str | None = "alice", body: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        name = "followup" if path.endswith("/followup") else "fix" if "/fixes" in path else "api"
        response = load_handler(name).lambda_handler(
            api_event(method, path, owner=owner, body=body, **kw), FakeContext(f"iterate-{name}")
        )
        text = response.get("body") or ""
        return int(response["statusCode"]), (json.loads(text) if text else None)

    return _call
