"""The fix worker: applies one recorded fix job (POST /runs/{id}/fixes), invoked asynchronously by the fix route."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.fixes import FixJob, run_fix_job
from iterate.aws.observability import logger, metrics, tracer


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_fix_job(FixJob.model_validate(event), _deps()).model_dump(mode="json")
