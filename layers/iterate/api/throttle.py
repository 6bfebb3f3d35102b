"""Per-owner API throttling (a token bucket per Cognito `sub` in DynamoDB) and the 429 answers of the API:
a throttled request, and a run refused by a daily quota."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from iterate.api.common import DepsProvider
from iterate.storage.admission import DynamoTokenBucket, QuotaExceededError, TokenBucketEmptyError
from iterate.storage.dynamo import owner_pk

API_BUCKET_SK = "BUCKET#api"


def owner_bucket(
    table: Any, owner: str, *, rps: float, burst: int, clock: Callable[[], float]
) -> DynamoTokenBucket:
    """The owner's request bucket: `rps` a second, `burst` at once; never waits (the caller gets a 429)."""
    return DynamoTokenBucket(
        table,
        rate=rps,
        capacity=burst,
        max_wait_s=0.0,
        key={"PK": owner_pk(owner), "SK": API_BUCKET_SK},
        what="your API request rate",
        clock=clock,
    )


def owner_throttle(
    get_deps: DepsProvider,
) -> Callable[[APIGatewayRestResolver, NextMiddleware], Response[Any]]:
    """A middleware taking one request from the caller's bucket before any route runs (TokenBucketEmptyError:
    429 with Retry-After). A request without an owner goes on: the route refuses it (401)."""

    def middleware(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
        claims = app.current_event.request_context.authorizer.claims or {}
        owner = claims.get("sub")
        if isinstance(owner, str) and owner:
            deps = get_deps()
            c = deps.config
            bucket = owner_bucket(
                deps.dynamo_table(), owner, rps=c.api_owner_rps, burst=c.api_owner_burst, clock=deps.clock
            )
            try:
                bucket.take(1)
            except TokenBucketEmptyError as exc:
                return throttled_response(exc)
        return next_middleware(app)

    return middleware


def throttled_response(exc: TokenBucketEmptyError) -> Response[Any]:
    return Response(
        status_code=429,
        content_type=content_types.APPLICATION_JSON,
        body={"message": f"too many requests: {exc}; retry after the Retry-After header's seconds"},
        headers={"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))},
    )


def quota_response(exc: QuotaExceededError, now: float) -> Response[Any]:
    """429 naming the quota, its limit, the use and when it resets (Retry-After: seconds until then)."""
    until_reset = (int(now) // 86400 + 1) * 86400 - int(now)
    return Response(
        status_code=429,
        content_type=content_types.APPLICATION_JSON,
        body={
            "message": str(exc),
            "quota": exc.quota,
            "limit": exc.limit,
            "used": exc.used,
            "resetsAt": exc.resets_at,
        },
        headers={"Retry-After": str(max(1, until_reset))},
    )
