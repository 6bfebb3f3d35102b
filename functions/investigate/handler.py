"""GenerateCode / RecordAttempt: the investigation agent writes code for the sandbox and keeps each outcome;
PlanProofs / PrepareBatch / RecordBatch / ListUnsettled: the same for batches of template proofs."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field, TypeAdapter

from iterate.aws import investigation, proofs
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import (
    GenerateCodeInput,
    ListUnsettledInput,
    PlanProofsInput,
    PrepareBatchInput,
    RecordAttemptInput,
    RecordBatchInput,
)

# Every investigation state calls this one function; the ASL's "action" field says which one it is.
InvestigateInput = TypeAdapter(
    Annotated[
        GenerateCodeInput
        | RecordAttemptInput
        | PlanProofsInput
        | PrepareBatchInput
        | RecordBatchInput
        | ListUnsettledInput,
        Field(discriminator="action"),
    ]
)


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


_STEPS: dict[type, Any] = {
    GenerateCodeInput: investigation.generate_code,
    RecordAttemptInput: investigation.record_attempt,
    PlanProofsInput: proofs.plan_proofs,
    PrepareBatchInput: proofs.prepare_batch,
    RecordBatchInput: proofs.record_batch,
    ListUnsettledInput: proofs.list_unsettled,
}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = InvestigateInput.validate_python(event)
    return dict(_STEPS[type(payload)](payload, _deps()).model_dump(mode="json"))
