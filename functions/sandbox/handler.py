"""RunInSandbox: untrusted investigation code run against one run's dataset, inside this isolated function."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws.observability import logger, metrics, tracer
from iterate.sandbox import SandboxEvent, SandboxLimits, run_event
from iterate.settings import get_settings


@lru_cache(maxsize=1)
def _limits() -> SandboxLimits:
    # The Lambda refuses namespaces; the worker notices and falls back to Landlock, limits and the audit hook.
    return SandboxLimits.from_settings(get_settings())


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = SandboxEvent.model_validate(event)
    result = run_event(payload, limits=_limits(), scratch=os.environ.get("TMPDIR") or None)
    logger.info(
        "sandbox run",
        success=result.success,
        stopped=result.stopped,
        execution_time_ms=result.execution_time_ms,
    )
    metrics.add_metric(name="SandboxStopped" if result.stopped else "SandboxSucceeded", unit="Count", value=1)
    return result.model_dump(mode="json")
