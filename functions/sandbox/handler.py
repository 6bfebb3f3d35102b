"""RunInSandbox: untrusted investigation code run against one run's dataset, inside this isolated function."""

# What this function needs from its deployment (the CDK construct is not here):
# - its own role with no policy beyond basic execution (logs; X-Ray if traced): the dataset arrives as a
#   presigned GET for exactly that run's data.parquet, so no S3, DynamoDB or Secrets Manager permission;
# - VPC isolated subnets, no NAT, a security group with no inbound and HTTPS out only to the S3 gateway
#   endpoint's prefix list; the endpoint policy limited to GetObject on the artifacts bucket;
# - reserved concurrency (blast-radius cap), timeout > ITERATE_SANDBOX_TIMEOUT_S + about 15 s for download
#   and start-up, memory above ITERATE_SANDBOX_MEMORY_MB plus the loaded dataset, ephemeral storage for it;
# - env: ITERATE_SANDBOX_TIMEOUT_S, ITERATE_SANDBOX_MEMORY_MB, ITERATE_SANDBOX_MAX_OUTPUT_BYTES only.

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
