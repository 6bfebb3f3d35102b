"""POST /runs/{id}/fixes: a finished run's fixes applied to its input as a new dataset version, and a run started on it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.api.app import create_app
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@lru_cache(maxsize=1)
def _app() -> APIGatewayRestResolver:
    return create_app(_deps, core=False, fixes=True)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _app().resolve(event, context)
