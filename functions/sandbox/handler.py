"""RunInSandbox: untrusted investigation code run against one run's dataset, inside this isolated function."""

# What this function needs from its deployment (the CDK construct is not here):
# - its own role with no policy beyond basic execution (logs; X-Ray if traced): the dataset arrives as a
#   presigned GET for exactly that run's data.parquet, so no S3, DynamoDB or Secrets Manager permission;
# - VPC isolated subnets, no NAT, a security group with no inbound and HTTPS out only to the S3 gateway
#   endpoint's prefix list; the endpoint policy limited to GetObject on the artifacts bucket;
# - reserved concurrency (blast-radius cap), timeout > ITERATE_SANDBOX_TIMEOUT_S + about 15 s for download
#   and start-up, memory above ITERATE_SANDBOX_MEMORY_MB plus the loaded dataset, ephemeral storage for it;
# - env: ITERATE_SANDBOX_TIMEOUT_S, ITERATE_SANDBOX_MEMORY_MB, ITERATE_SANDBOX_MAX_OUTPUT_BYTES (below Step
#   Functions' 256 KiB), ITERATE_SANDBOX_INLINE_RESULT_BYTES, and ITERATE_SANDBOX_SCRATCH=/tmp (the only writable
#   place, emptied after every invocation);
# - the S3 endpoint also lets a presigned PUT through for `artifacts/*/investigations/*.result.json`: a result
#   over the inline cap is written there (through the URL in the event) and the state carries its key.
# Which layers hold here and which do not (no namespaces, no cgroups): docs/runtime.md.

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from aws_lambda_powertools.utilities.typing import LambdaContext

from iterate.aws.observability import logger, metrics, tracer
from iterate.sandbox import (
    SandboxBatchEvent,
    SandboxEnvironmentDirty,
    SandboxEvent,
    SandboxLimits,
    deliver_batch_result,
    deliver_result,
    run_batch_in_clean_environment,
    run_in_clean_environment,
)
from iterate.settings import get_settings


@lru_cache(maxsize=1)
def _limits() -> SandboxLimits:
    # Lambda grants no namespaces and no cgroups; one fresh process per invocation.
    return SandboxLimits.from_settings(get_settings(), namespaces=False, prefork=False)


def _scratch() -> Path:
    # Unset (a laptop, tests): this process's own folder, which it may empty without touching another's.
    default = Path(tempfile.gettempdir()) / f"iterate-sandbox-scratch-{os.getpid()}"
    return Path(get_settings().sandbox_scratch or default)


@logger.inject_lambda_context(clear_state=True, log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "items" in event:  # a batch of template proofs (the ProveTemplates Map)
        return _batch(SandboxBatchEvent.model_validate(event), context)
    payload = SandboxEvent.model_validate(event)
    try:
        result = run_in_clean_environment(payload, limits=_limits(), scratch=_scratch())
    except SandboxEnvironmentDirty as exc:
        _end_environment(exc)
    logger.info(
        "sandbox run",
        success=result.success,
        stopped=result.stopped,
        execution_time_ms=result.execution_time_ms,
    )
    metrics.add_metric(name="SandboxStopped" if result.stopped else "SandboxSucceeded", unit="Count", value=1)
    return deliver_result(result, payload, inline_limit=get_settings().sandbox_inline_result_bytes)


def _end_environment(exc: SandboxEnvironmentDirty) -> NoReturn:
    # Never serve another invocation from this environment: exiting makes Lambda start a fresh one.
    logger.error("sandbox environment not clean", reason=str(exc))
    os._exit(70)


def _batch(payload: SandboxBatchEvent, context: LambdaContext) -> dict[str, Any]:
    try:
        result = run_batch_in_clean_environment(
            payload,
            limits=_limits(),
            scratch=_scratch(),
            remaining_s=lambda: context.get_remaining_time_in_millis() / 1000,
        )
    except SandboxEnvironmentDirty as exc:
        _end_environment(exc)
    settled = [item for item in result.items if item is not None]
    logger.info(
        "sandbox batch",
        items=len(result.items),
        settled=len(settled),
        succeeded=sum(1 for item in settled if item.success),
    )
    metrics.add_metric(name="SandboxBatchItems", unit="Count", value=len(result.items))
    return deliver_batch_result(result, payload, inline_limit=get_settings().sandbox_inline_result_bytes)
