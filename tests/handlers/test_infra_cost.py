"""iterate.aws.cost: calls counted by price class through botocore's events, and priced."""

from __future__ import annotations

from typing import Any

import pytest
from awsenv import MOTO_CONFIG, REGION, base_env, reset_caches
from moto import mock_aws

from iterate.aws import cost
from iterate.aws.config import AwsConfig


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    import boto3

    base_env(monkeypatch)
    with mock_aws(config=MOTO_CONFIG):
        reset_caches()
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket="cost-test")
        yield client


def test_calls_are_counted_by_price_class_once_per_client(s3: Any) -> None:
    # Given a watched client, watched twice (a step may ask for it again)
    cost.watch(s3)
    cost.watch(s3)
    meter = cost.StepMeter.start(transitions=2)
    # When it writes twice, lists once and reads three times
    s3.put_object(Bucket="cost-test", Key="k1", Body=b"x")
    s3.put_object(Bucket="cost-test", Key="k2", Body=b"y")
    s3.list_objects_v2(Bucket="cost-test")
    for _ in range(3):
        s3.get_object(Bucket="cost-test", Key="k1")["Body"].read()
    booked = meter.finish(elapsed_ms=1500, memory_mb=2048)
    # Then PUT and LIST are write-class requests, GETs read-class, each counted once
    assert (booked.s3WriteRequests, booked.s3ReadRequests) == (3, 3)
    # And the time is 1.5 s at 2 GB, one invocation and its two transitions, all priced
    assert booked.lambdaGbSeconds == pytest.approx(3.0)
    assert (booked.lambdaInvocations, booked.stateTransitions) == (1, 2)
    expected = (
        3.0 * cost.PRICES["lambda_gb_second"]
        + cost.PRICES["lambda_request"]
        + 2 * cost.PRICES["state_transition"]
        + 3 * cost.PRICES["s3_write_request"]
        + 3 * cost.PRICES["s3_read_request"]
    )
    assert booked.costUsd == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_an_unwatched_client_and_off_lambda_time_cost_nothing(s3: Any) -> None:
    import boto3

    # Given a client nobody watched, and no memory known (a laptop, not Lambda)
    other = boto3.client("s3", region_name=REGION)
    meter = cost.StepMeter.start(transitions=1)
    other.put_object(Bucket="cost-test", Key="k", Body=b"x")
    booked = meter.finish(elapsed_ms=1000, memory_mb=None)
    # Then nothing is counted for it and its time is not priced
    assert (booked.s3WriteRequests, booked.lambdaGbSeconds) == (0, 0.0)


@pytest.mark.parametrize(
    ("service", "operation", "kind"),
    [
        ("s3", "CreateMultipartUpload", "s3_write_request"),
        ("s3", "HeadObject", "s3_read_request"),
        ("dynamodb", "UpdateItem", "dynamo_write_request"),
        ("dynamodb", "TransactWriteItems", "dynamo_write_request"),
        ("dynamodb", "Query", "dynamo_read_request"),
        ("eventbridge", "PutEvents", "event"),
        ("stepfunctions", "StartExecution", None),
    ],
)
def test_price_classes(service: str, operation: str, kind: str | None) -> None:
    assert cost._kind(service, operation) == kind


def test_memory_comes_from_lambdas_own_variable() -> None:
    config = AwsConfig.from_env(
        {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "4096", "ITERATE_SANDBOX_FUNCTION_MEMORY_MB": "2048"}
    )
    assert (config.function_memory_mb, config.sandbox_memory_mb) == (4096, 2048)
    assert AwsConfig.from_env({}).function_memory_mb is None
