"""What the API's route modules share: error answers, the caller, record views and starting a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, UnauthorizedError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query

from iterate.api.models import (
    DatasetVersion,
    ErrorBody,
    Run,
)
from iterate.aws.admission import queue_place
from iterate.aws.deps import AwsDeps
from iterate.aws.payloads import S3ObjectRef
from iterate.aws.runs import queue_run
from iterate.storage.dynamo import (
    DynamoRunRepository,
)

DepsProvider = Callable[[], AwsDeps]
PRESIGN_UPLOAD_S = 900
FOLLOWUP_LLM_BUDGET_S = 20.0
ERROR_TEXTS = {
    400: "the body is not valid JSON, or nextToken is not one this listing issued to this caller",
    401: "no authenticated user",
    404: "no such id for this caller (another owner's ids are 404 too)",
    409: "the resource is not in a state that allows this",
    422: "the request does not match the model; `errors` names each field and its problem",
    429: "a daily quota is used up (the body names it: quota, limit, used, resetsAt), or the caller sends requests"
    " faster than its rate; retry after Retry-After seconds",
}
PAGE_LIMIT = 50
Limit = Annotated[int, Query(ge=1, le=100, description="items per page (default 50)")]
PageToken = Annotated[
    str | None, Query(alias="nextToken", max_length=4096, description="the previous page's nextToken")
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=256,
        description="a key of the caller's choosing: a retry with the same key and body answers with the same "
        "run instead of starting another (kept 24 h); the same key with another body is a 409",
    ),
]


def responses(success: int, model: Any, *errors: int) -> dict[int, Any]:
    """The OpenAPI responses of a route: its success body and the error bodies it can answer with (401, 422 and
    429 on every route: each passes the authorizer, its model and the caller's request bucket)."""
    documented: dict[int, Any] = {success: {"description": "OK"}}
    if model is not None:
        documented[success]["content"] = {"application/json": {"model": model}}
    for code in (401, 422, 429, *errors):
        documented[code] = {
            "description": ERROR_TEXTS[code],
            "content": {"application/json": {"model": ErrorBody}},
        }
    return documented


class UnprocessableError(Exception):
    """A body that matches its model but that this deployment refuses (422, naming the field)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ConflictError(Exception):
    """The resource exists but is not in a state that allows the request (e.g. cancelling a finished run)."""


def owner_of(app: APIGatewayRestResolver) -> str:
    """The caller: the Cognito user pool authorizer's `sub` claim. Nothing else identifies an owner."""
    claims = app.current_event.request_context.authorizer.claims or {}
    sub = claims.get("sub")
    if not sub or not isinstance(sub, str):
        raise UnauthorizedError("no authenticated user on this request")
    return sub


def split_issue_ref(issue_ref: str) -> tuple[str, str]:
    run_id, sep, issue_id = issue_ref.partition(".")
    if not sep or not run_id or not issue_id:
        raise NotFoundError(f"issue {issue_ref} not found")
    return run_id, issue_id


def _run_view(record: dict[str, Any], *, place: int | None = None) -> Run:
    keep = set(Run.model_fields)
    data = {k: v for k, v in record.items() if k in keep and v is not None}
    data.setdefault("trigger", "s3")
    if place is not None:
        data["queuePlace"] = place
    return Run.model_validate(data)


def _version_view(record: dict[str, Any]) -> DatasetVersion:
    keep = set(DatasetVersion.model_fields)
    return DatasetVersion.model_validate({k: v for k, v in record.items() if k in keep and v is not None})


def _clear_validation_errors(exc: RequestValidationError) -> Response[Any]:
    errors = []
    for err in exc.errors():
        location = ".".join(str(part) for part in err.get("loc", ()))
        errors.append({"field": location, "problem": err.get("msg") or err.get("type", "invalid")})
    malformed = any(err.get("type") == "json_invalid" for err in exc.errors())
    body = {
        "message": "the request body is not valid JSON" if malformed else "the request is not valid",
        "errors": errors,
    }
    return Response(
        status_code=400 if malformed else 422, content_type=content_types.APPLICATION_JSON, body=body
    )


def start_run_on(
    deps: AwsDeps,
    r: DynamoRunRepository,
    owner: str,
    dataset_id: str,
    run_id: str,
    source: S3ObjectRef,
    instructions: str | None,
) -> Run:
    """Queue run `run_id` of `source` (counted among the owner's runs in progress) and start its execution."""
    if owner != r.owner:
        raise ValueError("a run is started for the repository's owner")
    record = queue_run(deps, r, dataset_id, run_id, source, instructions, on_quota="raise")
    return _run_view(record, place=queue_place(deps, owner, record))
