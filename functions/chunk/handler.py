"""ParseChunk: one byte range of a large upload parsed into its encoded columns, stored under the run's chunks/."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws import steps
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import ChunkInput


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = ChunkInput.model_validate(event)
    return steps.parse_chunk(payload, _deps()).model_dump(mode="json")
