"""The real ASL in moto's Step Functions interpreter, with every Lambda invoke running the real handler."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "handlers"))
from awsenv import (
    MOTO_CONFIG,
    REGION,
    base_env,
    capture_events,
    create_resources,
    create_state_machine,
    reset_caches,
)
from moto import mock_aws


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Given the deployed shape in moto: bucket, table, default bus (captured to SQS) and the state machine."""
    import boto3

    base_env(monkeypatch, ITERATE_SANDBOX_TIMEOUT_S="20")
    with mock_aws(config=MOTO_CONFIG):
        reset_caches()
        resources = create_resources()
        sqs, queue_url = capture_events()
        arn = create_state_machine()
        yield {
            **resources,
            "sfn": boto3.client("stepfunctions", region_name=REGION),
            "arn": arn,
            "sqs": sqs,
            "queue_url": queue_url,
        }
        reset_caches()
