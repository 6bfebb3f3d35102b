"""API request and response bodies: what callers send and get back (unknown fields refused)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from iterate.contracts import Acceptance, FixAction, InfraCost, Issue, RunComparison, SmartFixFollowup
from iterate.contracts.base import Contract

RunStatus = Literal["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
# Formats the engine reads; the extension picks the reader, so the upload's name must carry one of them.
FILE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.(csv|tsv|txt|parquet|jsonl|json|xlsx)$"


class CreateDatasetRequest(Contract):
    name: str = Field(min_length=1, max_length=200, description="a label for people")
    fileName: str = Field(pattern=FILE_NAME_PATTERN, description="the file to upload, e.g. orders.csv")


class UploadTarget(Contract):
    url: str = Field(
        description="presigned POST URL: send a multipart form with `fields`, then the file as `file`"
    )
    method: Literal["POST"] = "POST"
    fields: dict[str, str] = Field(description="form fields to send as they are, before the file")
    key: str
    expiresIn: int
    maxBytes: int = Field(
        description="the largest file S3 accepts on this URL (ITERATE_MAX_FILE_BYTES); a larger one is refused"
    )


class Dataset(Contract):
    datasetId: str
    name: str
    createdAt: str | None = None
    updatedAt: str | None = None
    uploadKey: str | None = None
    latestUpload: dict[str, Any] | None = Field(
        default=None,
        description="what a re-analysis reads: the latest upload (its version), or the latest import (the file in the owner's bucket and the role that reads it, no version: read as it is when a run is queued)",
    )
    schedule: dict[str, Any] | None = None


class CreateDatasetResponse(Contract):
    dataset: Dataset
    upload: UploadTarget


PAGE_TOKEN = "nextToken: pass it back as ?nextToken= for the next page; absent on the last page"


class DatasetList(Contract):
    datasets: list[Dataset]
    nextToken: str | None = Field(default=None, description=PAGE_TOKEN)


class Progress(Contract):
    step: str
    percent: int = Field(ge=0, le=100)
    message: str = ""


class Run(Contract):
    runId: str
    datasetId: str
    status: RunStatus
    trigger: str
    progress: Progress | None = None
    queuePlace: int | None = Field(
        default=None,
        description="a QUEUED run's place in its owner's queue (1: the next to start once a run slot is free)",
    )
    queuedAt: str | None = None
    admittedAt: str | None = Field(default=None, description="when admission started its execution")
    mode: str | None = None
    startedAt: str | None = None
    completedAt: str | None = None
    instructions: str | None = None
    error: str | None = None
    reason: str | None = None
    issueCount: int | None = None
    severityCounts: dict[str, int] = Field(default_factory=dict)
    usage: dict[str, int] = Field(default_factory=dict)
    costUsd: float | None = Field(default=None, description="the run's LLM tokens at list prices (usage)")
    infra: InfraCost | None = Field(
        default=None,
        description="the run's AWS infrastructure, measured per step and priced at list prices (an estimate: "
        "docs/cost-model.md); beside costUsd, the tokens",
    )
    timingsMs: dict[str, float] = Field(default_factory=dict)
    degradedReasons: list[str] = Field(default_factory=list)
    comparison: RunComparison | None = Field(
        default=None,
        description="against the dataset's previous successful run: issues new, persisting, regressed (more "
        "rows), improved (fewer rows), and the ids resolved; absent on a first run",
    )


class QuotaUse(Contract):
    used: int
    limit: int


class Quota(Contract):
    """The caller's daily quotas (UTC day): a run over one is refused before it starts (429, or a FAILED
    upload run whose error is QuotaExceededError)."""

    day: str
    resetsAt: str
    runs: QuotaUse
    bytes: QuotaUse
    tokens: QuotaUse = Field(description="LLM tokens used by the owner's runs today")
    runsInProgress: QuotaUse = Field(description="run slots held now, and the owner's concurrent-run limit")
    runsWaiting: int = Field(description="runs queued for a slot")


class DatasetDetail(Contract):
    dataset: Dataset
    runs: list[Run] = Field(description="the newest runs (first page of GET /datasets/{id}/runs)")
    runsNextToken: str | None = Field(default=None, description="nextToken of GET /datasets/{id}/runs")


class RunList(Contract):
    datasetId: str
    runs: list[Run] = Field(description="newest first")
    nextToken: str | None = Field(default=None, description=PAGE_TOKEN)


class StartRunBody(Contract):
    instructions: str | None = Field(
        default=None, max_length=4000, description="what to look at or ignore, in plain words"
    )


class IssueItem(Contract):
    issueRef: str = Field(description="<runId>.<issueId>: the id the follow-up route takes")
    issue: Issue


class IssueList(Contract):
    runId: str
    issues: list[IssueItem]
    nextToken: str | None = Field(default=None, description=PAGE_TOKEN)


class ReportLink(Contract):
    runId: str
    url: str
    expiresIn: int


class FollowupRequest(Contract):
    answer: str | None = Field(
        default=None, min_length=1, max_length=64, description="the option key chosen for the open question"
    )


class FollowupResponse(Contract):
    issueRef: str
    turn: int = Field(description="0-based index of the question now open (or last answered)")
    question: SmartFixFollowup | None = Field(default=None, description="the open question, if any")
    action: FixAction | None = Field(default=None, description="what the last answer decided")
    done: bool


class ScheduleRequest(Contract):
    expression: str = Field(
        pattern=r"^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\([^)]{9,100}\))$",
        description="EventBridge Scheduler expression, e.g. rate(1 day) or cron(0 6 * * ? *)",
    )
    timezone: str = Field(default="UTC", max_length=64)
    instructions: str | None = Field(default=None, max_length=4000)


class Schedule(Contract):
    datasetId: str
    expression: str
    timezone: str
    scheduleName: str
    instructions: str | None = None


class AcceptRequest(Contract):
    runId: str = Field(min_length=1, max_length=64, description="a succeeded run of this dataset")
    issueId: str = Field(min_length=1, max_length=200, description="the issue's id in that run")
    reason: str = Field(min_length=1, max_length=2000, description="why it is accepted (shown beside it)")


class AcceptedList(Contract):
    datasetId: str
    accepted: list[Acceptance]
    nextToken: str | None = Field(default=None, description=PAGE_TOKEN)


class HistoryPoint(Contract):
    runId: str
    at: str | None = Field(default=None, description="when the run started")
    status: Literal["new", "persisting", "regressed", "improved", "resolved"] = Field(
        description="against the run before it (the dataset's first run: new)"
    )
    severity: str | None = Field(default=None, description="absent when resolved")
    affectedRows: int | None = None
    affectedCells: int | None = None
    accepted: bool = False


class IssueTimeline(Contract):
    issueId: str
    type: str | None = Field(default=None, description="absent when this page only holds its resolution")
    columns: list[str]
    points: list[HistoryPoint] = Field(description="newest run first, one point per run that reports it")


class DatasetHistory(Contract):
    datasetId: str
    runs: list[Run] = Field(description="the succeeded runs this page covers, newest first")
    issues: list[IssueTimeline]
    nextToken: str | None = Field(default=None, description=PAGE_TOKEN + " (older runs)")


class ErrorBody(Contract):
    statusCode: int | None = None
    message: str
    errors: list[dict[str, Any]] = Field(default_factory=list)


class FixRequest(Contract):
    """POST /runs/{id}/fixes: which issues to fix and how; the run's input is never changed."""

    issues: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="issue ids of the run to fix (none: every issue whose follow-up has ended)",
    )
    answers: dict[str, Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=dict,
        description="issue id → the key of the option chosen for its follow-up's pending question (its first "
        "question when none was asked; a new answer replaces an ended conversation's last one)",
    )
    quick: bool = Field(default=False, description="also apply every quick fix")

    @field_validator("answers")
    @classmethod
    def _few_answers(cls, answers: dict[str, str]) -> dict[str, str]:
        # not `max_length` on the field: API Gateway's draft-04 models have no maxProperties
        if len(answers) > 200:
            raise ValueError("at most 200 answers")
        return answers

    confirm: list[Literal["drop", "clear"]] = Field(
        default_factory=list,
        description="destructive fixes allowed: drop (rows or columns), clear (values set to empty); without "
        "them such a fix is a 409 naming its impact",
    )


class DatasetVersion(Contract):
    """A version of a dataset written by a fix, with its lineage."""

    versionId: str
    datasetId: str
    createdAt: str
    parentRunId: str
    parentSha256: str
    parentKey: str
    key: str = Field(
        description="the fixed file in the data bucket: versions/<owner>/<dataset>/<version>/<file>"
    )
    changesKey: str
    sha256: str
    format: str
    rows: int
    columns: int
    issuesApplied: list[str]
    counts: dict[str, dict[str, int]]
    runId: str | None = Field(default=None, description="the run started on this version")


class FixStatus(Contract):
    """A fix job: POST /runs/{id}/fixes answers 202 with it; poll GET /runs/{id}/fixes/{fixId} until it ends."""

    fixId: str
    runId: str = Field(description="the finished run whose input is fixed")
    datasetId: str
    status: Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED"] = Field(
        description="PENDING: waiting for the fix worker; RUNNING: being applied; SUCCEEDED: `version` written "
        "and `run` started on it; FAILED: `reason` says why and what to do (nothing was written)"
    )
    createdAt: str
    updatedAt: str | None = None
    completedAt: str | None = None
    request: FixRequest
    statusUrl: str = Field(description="the path to poll: /runs/{runId}/fixes/{fixId}")
    error: str | None = Field(default=None, description="the failure's class (FixError: the request's)")
    reason: str | None = None
    version: DatasetVersion | None = None
    run: Run | None = Field(default=None, description="the run started on the version, as it is now")


class VersionList(Contract):
    datasetId: str
    versions: list[DatasetVersion]
    nextToken: str | None = None
