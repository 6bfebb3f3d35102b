"""ReportRun: analysis.json, report.html and flags; issues to DynamoDB; run SUCCEEDED; completion event."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws import completion
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import StepInput


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = StepInput.model_validate(event)
    return completion.report(payload, _deps()).model_dump(mode="json")
