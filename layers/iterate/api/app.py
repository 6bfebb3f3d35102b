"""The REST API's routes: every read and write is keyed by the caller's Cognito `sub`; other owners' ids are 404."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from iterate.api.common import (
    PAGE_LIMIT,
    PRESIGN_UPLOAD_S,
    ConflictError,
    DepsProvider,
    IdempotencyKey,
    Limit,
    PageToken,
    UnprocessableError,
    _clear_validation_errors,
    _run_view,
    _version_view,
    owner_of,
    responses,
    start_run_on,
)
from iterate.api.models import (
    AcceptedList,
    AcceptRequest,
    CreateDatasetRequest,
    CreateDatasetResponse,
    Dataset,
    DatasetDetail,
    DatasetHistory,
    DatasetList,
    HistoryPoint,
    IssueItem,
    IssueList,
    IssueTimeline,
    Quota,
    ReportLink,
    Run,
    RunList,
    Schedule,
    ScheduleRequest,
    StartRunBody,
    UploadTarget,
    VersionList,
)
from iterate.api.throttle import owner_throttle, quota_response, throttled_response
from iterate.aws.admission import leave_queue, queue_place, quota_view, release_run
from iterate.aws.deletion import DatasetBusyError
from iterate.aws.payloads import S3ObjectRef, StartRunRequest
from iterate.aws.schedules import schedule_name
from iterate.contracts import Acceptance, Issue
from iterate.storage.admission import QuotaExceededError, TokenBucketEmptyError
from iterate.storage.dynamo import (
    TERMINAL,
    DynamoRunRepository,
    InvalidPageTokenError,
    RunTransitionError,
)


def _history(
    runs: list[dict[str, Any]], issues_of: Callable[[str], list[dict[str, Any]]]
) -> list[IssueTimeline]:
    """Each issue's points over `runs` (newest first): its status against the run before, its counts."""
    timelines: dict[str, IssueTimeline] = {}
    for run in runs:
        run_id = str(run["runId"])
        for raw in issues_of(run_id):
            issue = Issue.model_validate(raw)
            line = timelines.setdefault(
                issue.id,
                IssueTimeline(issueId=issue.id, type=issue.type, columns=issue.affectedColumns, points=[]),
            )
            line.points.append(
                HistoryPoint(
                    runId=run_id,
                    at=run.get("startedAt"),
                    status=issue.change or "new",
                    severity=issue.severity,
                    affectedRows=issue.evidence.affectedRows if issue.evidence else issue.affectedRows,
                    affectedCells=issue.evidence.affectedCells if issue.evidence else None,
                    accepted=issue.accepted is not None,
                )
            )
        for gone in (run.get("comparison") or {}).get("resolved", []):
            line = timelines.setdefault(gone, IssueTimeline(issueId=gone, type=None, columns=[], points=[]))
            line.points.append(HistoryPoint(runId=run_id, at=run.get("startedAt"), status="resolved"))
    for line in timelines.values():
        line.points.sort(key=lambda p: p.at or "", reverse=True)
    return sorted(timelines.values(), key=lambda t: t.issueId)


def _dataset_view(record: dict[str, Any], schedule: dict[str, Any] | None = None) -> Dataset:
    keep = set(Dataset.model_fields)
    data = {k: v for k, v in record.items() if k in keep and v is not None}
    data.setdefault("name", record["datasetId"])
    if schedule:
        data["schedule"] = schedule
    return Dataset.model_validate(data)


def create_app(
    get_deps: DepsProvider, *, core: bool = True, followup: bool = False, fixes: bool = False
) -> APIGatewayRestResolver:
    """The resolver with the core routes (functions/api), the follow-up route (functions/followup) and/or the
    fix route (functions/fix)."""
    app = APIGatewayRestResolver(enable_validation=True)
    app.exception_handler(RequestValidationError)(_clear_validation_errors)

    @app.exception_handler(ConflictError)
    def _conflict(exc: ConflictError) -> Response[Any]:
        return Response(
            status_code=409, content_type=content_types.APPLICATION_JSON, body={"message": str(exc)}
        )

    @app.exception_handler(UnprocessableError)
    def _unprocessable(exc: UnprocessableError) -> Response[Any]:
        return Response(
            status_code=422,
            content_type=content_types.APPLICATION_JSON,
            body={"message": str(exc), "errors": [{"field": exc.field, "problem": str(exc)}]},
        )

    @app.exception_handler(InvalidPageTokenError)
    def _bad_token(exc: InvalidPageTokenError) -> Response[Any]:
        return Response(
            status_code=400, content_type=content_types.APPLICATION_JSON, body={"message": str(exc)}
        )

    @app.exception_handler(QuotaExceededError)
    def _over_quota(exc: QuotaExceededError) -> Response[Any]:
        return quota_response(exc, get_deps().clock())

    @app.exception_handler(TokenBucketEmptyError)
    def _throttled(exc: TokenBucketEmptyError) -> Response[Any]:
        return throttled_response(exc)

    app.use(middlewares=[owner_throttle(get_deps)])

    @app.exception_handler(DatasetBusyError)
    def _busy(exc: DatasetBusyError) -> Response[Any]:
        retry = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
        return Response(
            status_code=409,
            content_type=content_types.APPLICATION_JSON,
            body={"message": str(exc)},
            headers=retry,
        )

    def repo() -> DynamoRunRepository:
        deps = get_deps()
        return DynamoRunRepository(deps.dynamo_table(), owner_of(app), clock=deps.clock)

    def require_run(run_id: str) -> dict[str, Any]:
        record = repo().get_run(run_id)
        if record is None:
            raise NotFoundError(f"run {run_id} not found")
        return record

    def require_dataset(dataset_id: str) -> dict[str, Any]:
        record = repo().get_dataset(dataset_id)
        if record is None:
            raise NotFoundError(f"dataset {dataset_id} not found")
        return record

    if core:
        from iterate.api.upload_routes import register_uploads

        _register_core(app, get_deps, repo, require_run, require_dataset)
        register_uploads(app, get_deps, require_dataset, repo)
    if followup:
        from iterate.api.followup_routes import register_followup

        register_followup(app, get_deps, repo)
    if fixes:
        from iterate.api.fix_routes import register_fixes

        register_fixes(app, get_deps, repo, require_run)
    return app


def _register_core(
    app: APIGatewayRestResolver,
    get_deps: DepsProvider,
    repo: Callable[[], DynamoRunRepository],
    require_run: Callable[[str], dict[str, Any]],
    require_dataset: Callable[[str], dict[str, Any]],
) -> None:
    @app.post(
        "/datasets",
        summary="Create a dataset and get a presigned POST (size-limited) to upload its file",
        responses=responses(201, CreateDatasetResponse, 400),
    )
    def create_dataset(body: CreateDatasetRequest) -> tuple[CreateDatasetResponse, int]:
        deps = get_deps()
        owner = owner_of(app)
        dataset_id = f"d{uuid.uuid4().hex[:16]}"
        key = f"uploads/{owner}/{dataset_id}/{body.fileName}"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deps.clock()))
        record = {"datasetId": dataset_id, "name": body.name, "createdAt": now, "uploadKey": key}
        repo().put_dataset(record)
        # A POST policy, unlike a presigned PUT, can bound the size: S3 itself refuses a file over the limit
        # (the profile step checks it again for files dropped into the bucket directly).
        max_bytes = deps.settings.max_file_bytes
        post = deps.s3_client().generate_presigned_post(
            Bucket=deps.config.need("bucket"),
            Key=key,
            Conditions=[["content-length-range", 1, max_bytes]],
            ExpiresIn=PRESIGN_UPLOAD_S,
        )
        upload = UploadTarget(
            url=post["url"], fields=post["fields"], key=key, expiresIn=PRESIGN_UPLOAD_S, maxBytes=max_bytes
        )
        return CreateDatasetResponse(dataset=_dataset_view(record), upload=upload), 201

    @app.get(
        "/datasets",
        summary="List the caller's datasets, a page at a time",
        responses=responses(200, DatasetList, 400),
    )
    def list_datasets(limit: Limit = PAGE_LIMIT, next_token: PageToken = None) -> DatasetList:
        datasets, token = repo().page_datasets(limit=limit, token=next_token)
        return DatasetList(datasets=[_dataset_view(d) for d in datasets], nextToken=token)

    @app.get(
        "/datasets/<dataset_id>",
        summary="One dataset with its schedule and newest runs",
        responses=responses(200, DatasetDetail, 404),
    )
    def get_dataset(dataset_id: str) -> DatasetDetail:
        record = require_dataset(dataset_id)
        r = repo()
        runs, token = r.page_runs(dataset_id, limit=PAGE_LIMIT)
        return DatasetDetail(
            dataset=_dataset_view(record, r.get_schedule(dataset_id)),
            runs=[_run_view(run) for run in runs],
            runsNextToken=token,
        )

    @app.get(
        "/datasets/<dataset_id>/runs",
        summary="The dataset's runs, newest first, a page at a time",
        responses=responses(200, RunList, 400, 404),
    )
    def list_runs(dataset_id: str, limit: Limit = PAGE_LIMIT, next_token: PageToken = None) -> RunList:
        require_dataset(dataset_id)
        runs, token = repo().page_runs(dataset_id, limit=limit, token=next_token)
        return RunList(datasetId=dataset_id, runs=[_run_view(run) for run in runs], nextToken=token)

    @app.get(
        "/datasets/<dataset_id>/versions",
        summary="The dataset's versions written by fixes, newest first, a page at a time",
        responses=responses(200, VersionList, 400, 404),
    )
    def list_versions(
        dataset_id: str, limit: Limit = PAGE_LIMIT, next_token: PageToken = None
    ) -> VersionList:
        require_dataset(dataset_id)
        found, token = repo().page_versions(dataset_id, limit=limit, token=next_token)
        return VersionList(datasetId=dataset_id, versions=[_version_view(v) for v in found], nextToken=token)

    @app.post(
        "/datasets/<dataset_id>/runs",
        summary="Re-analyse the dataset's latest upload (or import: the file in the owner's bucket, as it is now)",
        responses=responses(202, Run, 400, 404, 409, 429),
    )
    def start_run(
        dataset_id: str, body: StartRunBody, idempotency_key: IdempotencyKey = None
    ) -> tuple[Run, int]:
        deps = get_deps()
        owner = owner_of(app)
        record = require_dataset(dataset_id)
        if not record.get("latestUpload"):
            raise ConflictError(
                f"dataset {dataset_id} has no upload yet: PUT the file to its upload URL first"
            )
        # API Gateway keeps the client's header case (HTTP/2 sends it lower-case): look it up either way.
        key = idempotency_key or app.current_event.headers.get("idempotency-key")
        run_id = f"r{uuid.uuid4().hex[:24]}"
        r = repo()
        if key:
            request_hash = hashlib.sha256(
                json.dumps(
                    {"datasetId": dataset_id, "body": body.model_dump(mode="json")}, sort_keys=True
                ).encode()
            ).hexdigest()
            earlier = r.claim_idempotency_key(key, request_hash=request_hash, run_id=run_id)
            if earlier is not None:
                if earlier.get("requestHash") != request_hash:
                    raise ConflictError("this Idempotency-Key was used for another request; use a new key")
                existing = r.get_run(str(earlier.get("runId")))
                if existing is None:
                    raise ConflictError(
                        "the first request with this Idempotency-Key is still starting; retry"
                    )
                return _run_view(existing), 202
        try:
            source = S3ObjectRef.model_validate(record["latestUpload"])
            return start_run_on(deps, r, owner, dataset_id, run_id, source, body.instructions), 202
        except Exception:
            if key:
                r.release_idempotency_key(
                    key
                )  # nothing started: the caller's retry with this key may start it
            raise

    @app.get("/runs/<run_id>", summary="A run's status and progress", responses=responses(200, Run, 404))
    def get_run(run_id: str) -> Run:
        record = require_run(run_id)
        return _run_view(record, place=queue_place(get_deps(), owner_of(app), record))

    @app.delete(
        "/runs/<run_id>", summary="Cancel a queued or running run", responses=responses(200, Run, 404, 409)
    )
    def cancel_run(run_id: str) -> Run:
        deps = get_deps()
        record = require_run(run_id)
        if record["status"] in TERMINAL:
            raise ConflictError(f"run {run_id} already ended ({record['status']})")
        r = repo()
        try:
            r.transition(
                run_id, from_status=record["status"], to_status="CANCELLED", reason="cancelled by the owner"
            )
        except RunTransitionError as exc:
            raise ConflictError(f"run {run_id} changed status meanwhile; try again") from exc
        if record["status"] == "QUEUED":
            leave_queue(deps, r.owner, record)
        release_run(deps, run_id)
        execution_arn = record.get("executionArn") or record.get("executionId")
        if execution_arn:
            deps.sfn_client().stop_execution(
                executionArn=execution_arn, error="RunCancelled", cause="cancelled by the owner"
            )
        return _run_view(r.require_run(run_id))

    @app.get(
        "/runs/<run_id>/issues",
        summary="The issues a run found, a page at a time",
        responses=responses(200, IssueList, 400, 404),
    )
    def list_issues(run_id: str, limit: Limit = PAGE_LIMIT, next_token: PageToken = None) -> IssueList:
        require_run(run_id)
        found, token = repo().page_issues(run_id, limit=limit, token=next_token)
        issues = [
            IssueItem(issueRef=f"{run_id}.{issue['id']}", issue=Issue.model_validate(issue))
            for issue in found
        ]
        return IssueList(runId=run_id, issues=issues, nextToken=token)

    @app.get(
        "/runs/<run_id>/report",
        summary="A short-lived link to the run's HTML report",
        responses=responses(200, ReportLink, 404, 409),
    )
    def report_link(run_id: str) -> ReportLink:
        deps = get_deps()
        record = require_run(run_id)
        if record["status"] != "SUCCEEDED" or not record.get("reportKey"):
            raise ConflictError(f"run {run_id} has no report yet ({record['status']})")
        expires = deps.config.presign_expiry_s
        url = deps.s3_client().generate_presigned_url(
            "get_object",
            Params={"Bucket": deps.config.need("bucket"), "Key": record["reportKey"]},
            ExpiresIn=expires,
        )
        return ReportLink(runId=run_id, url=url, expiresIn=expires)

    @app.get(
        "/datasets/<dataset_id>/history",
        summary="Each issue's timeline across the dataset's runs (a page of runs at a time, newest first)",
        responses=responses(200, DatasetHistory, 400, 404),
    )
    def dataset_history(
        dataset_id: str, limit: Limit = PAGE_LIMIT, next_token: PageToken = None
    ) -> DatasetHistory:
        require_dataset(dataset_id)
        r = repo()
        runs, token = r.page_runs(dataset_id, limit=limit, token=next_token)
        done = [run for run in runs if run.get("status") == "SUCCEEDED"]
        return DatasetHistory(
            datasetId=dataset_id,
            runs=[_run_view(run) for run in done],
            issues=_history(done, r.list_issues),
            nextToken=token,
        )

    @app.post(
        "/datasets/<dataset_id>/accepted",
        summary="Accept an issue of one of the dataset's runs: later runs mark it, and it never fails a gate",
        responses=responses(201, Acceptance, 404, 409),
    )
    def accept_issue(dataset_id: str, body: AcceptRequest) -> tuple[Acceptance, int]:
        from iterate.accepted import AcceptError, accept, issue_values
        from iterate.storage.s3 import S3ArtifactStore

        deps = get_deps()
        require_dataset(dataset_id)
        record = require_run(body.runId)
        if record.get("datasetId") != dataset_id:
            raise NotFoundError(f"run {body.runId} not found for dataset {dataset_id}")
        if record["status"] != "SUCCEEDED" or not record.get("analysisKey"):
            raise ConflictError(f"run {body.runId} has no issues yet ({record['status']})")
        r = repo()
        raw = r.get_issue(body.runId, body.issueId)
        if raw is None:
            raise NotFoundError(f"issue {body.issueId} not found in run {body.runId}")
        issue = Issue.model_validate(raw)
        prefix = str(record["analysisKey"]).removesuffix("analysis.json")
        store = S3ArtifactStore(deps.s3_client(), deps.config.need("bucket"), prefix)
        try:
            acceptance = accept(
                issue, issue_values(store, [issue.id])[issue.id], reason=body.reason, by=owner_of(app)
            )
        except AcceptError as exc:
            raise ConflictError(str(exc)) from exc
        for old in r.list_acceptances(dataset_id):  # accepting the same issue again replaces its entry
            if (old.get("type"), old.get("columns")) == (acceptance.type, acceptance.columns):
                r.delete_acceptance(dataset_id, str(old["id"]))
        r.put_acceptance(dataset_id, acceptance.model_dump(mode="json"))
        return acceptance, 201

    @app.get(
        "/datasets/<dataset_id>/accepted",
        summary="The dataset's accepted issues, a page at a time",
        responses=responses(200, AcceptedList, 400, 404),
    )
    def list_accepted(
        dataset_id: str, limit: Limit = PAGE_LIMIT, next_token: PageToken = None
    ) -> AcceptedList:
        require_dataset(dataset_id)
        items, token = repo().page_acceptances(dataset_id, limit=limit, token=next_token)
        return AcceptedList(
            datasetId=dataset_id, accepted=[Acceptance.model_validate(i) for i in items], nextToken=token
        )

    @app.delete(
        "/datasets/<dataset_id>/accepted/<acceptance_id>",
        summary="Withdraw an acceptance: later runs gate the issue again",
        responses=responses(204, None, 404),
    )
    def delete_accepted(dataset_id: str, acceptance_id: str) -> Response[Any]:
        require_dataset(dataset_id)
        if not repo().delete_acceptance(dataset_id, acceptance_id):
            raise NotFoundError(f"acceptance {acceptance_id} not found for dataset {dataset_id}")
        return Response(status_code=204, body="")

    @app.put(
        "/datasets/<dataset_id>/schedule",
        summary="Re-analyse the dataset on a schedule",
        responses=responses(200, Schedule, 400, 404),
    )
    def put_schedule(dataset_id: str, body: ScheduleRequest) -> Schedule:
        from iterate.aws.schedules import ScheduleTooFrequentError, check_interval

        deps = get_deps()
        owner = owner_of(app)
        require_dataset(dataset_id)
        try:
            check_interval(body.expression, deps.config.min_schedule_minutes)
        except ScheduleTooFrequentError as exc:
            raise UnprocessableError(str(exc), field="body.expression") from exc
        name = schedule_name(owner, dataset_id)
        # No source: each scheduled run analyses the dataset's latest upload or import at the time it fires (an
        # import through the owner's role, its version then current: iterate.aws.admission.enqueue).
        request = StartRunRequest(
            trigger="schedule", owner=owner, datasetId=dataset_id, instructions=body.instructions
        )
        spec = {
            "Name": name,
            "GroupName": deps.config.schedule_group,
            "ScheduleExpression": body.expression,
            "ScheduleExpressionTimezone": body.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {
                # The admission function queues the run like any other (quotas, slots), never a direct start.
                "Arn": deps.config.need("admission_function_arn"),
                "RoleArn": deps.config.need("scheduler_role_arn"),
                "Input": request.model_dump_json(exclude_none=True),
                "RetryPolicy": {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600},
                # A run the scheduler could not start after its retries lands here instead of vanishing.
                **(
                    {"DeadLetterConfig": {"Arn": deps.config.schedule_dlq_arn}}
                    if deps.config.schedule_dlq_arn
                    else {}
                ),
            },
            "State": "ENABLED",
        }
        scheduler = deps.scheduler_client()
        r = repo()
        if r.get_schedule(dataset_id):
            scheduler.update_schedule(**spec)
        else:
            scheduler.create_schedule(**spec)
        schedule = Schedule(
            datasetId=dataset_id,
            expression=body.expression,
            timezone=body.timezone,
            scheduleName=name,
            instructions=body.instructions,
        )
        r.put_schedule(dataset_id, schedule.model_dump(mode="json"))
        return schedule

    @app.delete(
        "/datasets/<dataset_id>/schedule",
        summary="Stop the dataset's scheduled runs",
        responses=responses(204, None, 404),
    )
    def delete_schedule(dataset_id: str) -> Response[Any]:
        deps = get_deps()
        require_dataset(dataset_id)
        r = repo()
        existing = r.get_schedule(dataset_id)
        if not existing:
            raise NotFoundError(f"dataset {dataset_id} has no schedule")
        deps.scheduler_client().delete_schedule(
            Name=existing["scheduleName"], GroupName=deps.config.schedule_group
        )
        r.delete_schedule(dataset_id)
        return Response(status_code=204, body="")

    @app.get(
        "/quota",
        summary="Today's use of the caller's daily quotas (runs, bytes, LLM tokens), their limits and reset time; "
        "runs in progress and waiting for a slot",
        responses=responses(200, Quota),
    )
    def get_quota() -> Quota:
        return Quota.model_validate(quota_view(get_deps(), owner_of(app)))

    @app.delete(
        "/datasets/<dataset_id>",
        summary="Delete the dataset: its uploads, versions, runs' artifacts, stored scripts, records and schedule. "
        "Deleting it again answers 204 too (for a week); a run or fix of it in progress is a 409",
        responses=responses(204, None, 404, 409),
    )
    def delete_dataset(dataset_id: str) -> Response[Any]:
        from iterate.aws.deletion import delete_dataset as sweep
        from iterate.aws.deletion import was_deleted
        from iterate.aws.observability import logger

        deps = get_deps()
        r = repo()
        if r.get_dataset(dataset_id) is None and not was_deleted(deps.dynamo_table(), r.pk, dataset_id):
            raise NotFoundError(f"dataset {dataset_id} not found")
        report = sweep(deps, r, dataset_id)
        logger.info(
            "dataset deleted",
            dataset_id=dataset_id,
            objects=report.objects,
            items=report.items,
            schedule=report.schedule,
        )
        return Response(status_code=204, body="")
