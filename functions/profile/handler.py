"""ProfileDataset / MergeChunks / EngineStep: claim the upload, create the run, profile the file (or cut it
into chunks); merge the chunks the ProfileChunks Map parsed and profile the result; or one round of the engine
path on Athena over the Parquet copy the Map wrote."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import TypeAdapter

from iterate.aws import steps
from iterate.aws.deps import AwsDeps, build_deps
from iterate.aws.observability import logger, metrics, tracer
from iterate.aws.payloads import EngineStepInput, MergeChunksInput, ProfileInput

# Three states call this one function; MergeChunks' and EngineStep's inputs carry their "action", so the models
# (extra fields forbidden) tell them apart.
ProfileEvent = TypeAdapter(ProfileInput | MergeChunksInput | EngineStepInput)


@lru_cache(maxsize=1)
def _deps() -> AwsDeps:
    return build_deps()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = ProfileEvent.validate_python(event)
    if isinstance(payload, EngineStepInput):
        from iterate.aws import large

        return large.engine_step(payload, _deps()).model_dump(mode="json")
    if isinstance(payload, MergeChunksInput):
        return steps.merge_chunks(payload, _deps()).model_dump(mode="json")
    return steps.profile(payload, _deps(), execution_id=payload.executionId).model_dump(mode="json")
