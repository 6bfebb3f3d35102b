"""boto3 clients and resources, created once per container on first use (cold-start discipline)."""

from __future__ import annotations

from functools import cache
from typing import Any

_RETRIES: Any = {"max_attempts": 5, "mode": "adaptive"}


@cache
def _session() -> Any:
    import boto3  # lazily: importing boto3 costs ~100 ms that a warm container should not pay again

    return boto3.session.Session()


@cache
def client(service: str) -> Any:
    """The shared client for `service` (s3, stepfunctions, events, scheduler, lambda, secretsmanager)."""
    from botocore.config import Config

    extra: dict[str, Any] = {}
    if service == "s3":
        # Presigned URLs must name the regional endpoint (bucket.s3.<region>.amazonaws.com, SigV4): the sandbox
        # reaches S3 only through its VPC's gateway endpoint, which serves that region's endpoint, not the global one.
        extra["s3"] = {"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"}
        extra["signature_version"] = "s3v4"
    return _session().client(service, config=Config(retries=_RETRIES, **extra))  # type: ignore[arg-type]


@cache
def dynamodb_table(name: str) -> Any:
    """The DynamoDB Table resource (Python values in and out)."""
    from botocore.config import Config

    return _session().resource("dynamodb", config=Config(retries=_RETRIES)).Table(name)


def reset() -> None:
    """Forget every cached client (tests start each moto context with fresh ones)."""
    _session.cache_clear()
    client.cache_clear()
    dynamodb_table.cache_clear()
