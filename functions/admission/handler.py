"""Admission: queues the runs uploads and schedules ask for, starts queued runs as slots free up (the FIFO
queue's batches), and releases a run's slots when its execution ends (the execution-status rule)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws import admission
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return admission.handle(event, _deps())
