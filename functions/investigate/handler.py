"""GenerateCode / RecordAttempt: the investigation agent writes code for the sandbox and keeps each outcome."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field, TypeAdapter

from iterate.aws import steps
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import GenerateCodeInput, RecordAttemptInput

# Both Map states call this one function; the ASL's "action" field says which half of the loop this is.
InvestigateInput = TypeAdapter(
    Annotated[GenerateCodeInput | RecordAttemptInput, Field(discriminator="action")]
)


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = InvestigateInput.validate_python(event)
    if isinstance(payload, GenerateCodeInput):
        return steps.generate_code(payload, _deps()).model_dump(mode="json")
    return steps.record_attempt(payload, _deps()).model_dump(mode="json")
