"""Step payloads of the state machine: what each Lambda receives and returns (S3 keys, never data)."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from iterate.contracts import CodeInvestigation, StopReason
from iterate.contracts.base import Contract

# The events the run publishes on its bus (users route them with rules; the CDK app routes regressions to SNS).
EVENT_SOURCE = "iterate"
COMPLETION_DETAIL_TYPE = "Iterate Run Completed"
# One event per run whose issues got worse than the previous run's (new, or more rows).
REGRESSION_DETAIL_TYPE = "Iterate.IssueRegressed"

Trigger = Literal["s3", "api", "schedule"]
UPLOADS_PREFIX = "uploads/"
# Step Functions fails an execution whose state (input or output of any state) reaches 256 KiB of UTF-8, and
# no Catch sees that error. What a state may hold, at most: the run (~1 KB), the code it sends to the sandbox
# (MAX_SANDBOX_CODE_BYTES), the presigned URLs (~3 KB) and the sandbox's inline result
# (ITERATE_SANDBOX_INLINE_RESULT_BYTES on the sandbox function); anything larger travels as an S3 key.
STATE_LIMIT_BYTES = 256 * 1024
MAX_SANDBOX_CODE_BYTES = 100_000


class InvalidUploadKeyError(ValueError):
    """An object outside `uploads/<owner>/<dataset>/<file>`: it cannot be attributed to an owner."""


class S3ObjectRef(Contract):
    bucket: str
    key: str
    versionId: str | None = None
    roleArn: str | None = Field(
        default=None,
        description="an object in the owner's bucket: the role Iterate assumes to read it (iterate.aws.sources)",
    )

    @model_serializer(mode="wrap")
    def _without_absent_role(self, handler: Any) -> Any:
        # An upload's reference (every run before owners' buckets) keeps its shape: no "roleArn": null in records.
        data = handler(self)
        if isinstance(data, dict) and data.get("roleArn") is None:
            data.pop("roleArn", None)
        return data


# --- what starts a run --------------------------------------------------------------------------


class _AwsEvent(BaseModel):
    # AWS owns these shapes and adds fields over time: unknown fields are ignored, not refused.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Bucket(_AwsEvent):
    name: str


class _Object(_AwsEvent):
    key: str
    size: int | None = None
    etag: str | None = None
    version_id: str | None = Field(default=None, alias="version-id")


class ObjectCreatedDetail(_AwsEvent):
    bucket: _Bucket
    object: _Object


class ObjectCreatedEvent(_AwsEvent):
    """The EventBridge "Object Created" event S3 sends, delivered unchanged to the state machine."""

    id: str
    detail_type: Literal["Object Created"] = Field(alias="detail-type")
    source: Literal["aws.s3"]
    time: str | None = None
    detail: ObjectCreatedDetail

    def upload(self) -> S3ObjectRef:
        return S3ObjectRef(
            bucket=self.detail.bucket.name,
            key=self.detail.object.key,
            versionId=self.detail.object.version_id,
        )


class StartRunRequest(Contract):
    """A run asked for by the API, a schedule, a fix or an upload (admission's message and the execution input
    it starts; the run id is chosen by the caller, or by admission)."""

    trigger: Trigger
    owner: str = Field(min_length=1)
    datasetId: str = Field(min_length=1)
    runId: str | None = None
    source: S3ObjectRef | None = Field(default=None, description="None: the dataset's latest upload")
    instructions: str | None = Field(default=None, max_length=4000)


def parse_upload_key(key: str) -> tuple[str, str, str]:
    """`uploads/<owner>/<dataset>/<file>` → (owner, dataset, file); anything else is refused."""
    parts = key.split("/")
    if len(parts) < 4 or parts[0] + "/" != UPLOADS_PREFIX or not all(parts[1:]):
        raise InvalidUploadKeyError(f"upload key must be uploads/<owner>/<dataset>/<file>: {key!r}")
    return parts[1], parts[2], "/".join(parts[3:])


def run_id_for_object(obj: S3ObjectRef) -> str:
    """A deterministic run id for an S3-triggered run: the same object version always maps to the same id."""
    digest = hashlib.sha256(f"{obj.bucket}/{obj.key}#{obj.versionId or 'null'}".encode()).hexdigest()
    return f"r{digest[:24]}"


# --- the run as it flows through the states -----------------------------------------------------


class RunState(Contract):
    """Everything a step needs to find a run's files and records; carried in every step's input."""

    runId: str
    owner: str
    datasetId: str
    trigger: Trigger
    bucket: str = Field(description="the artifacts bucket")
    prefix: str = Field(description="artifacts/<owner>/<dataset>/<run>/")
    source: S3ObjectRef
    startedAt: str
    instructions: str | None = None


def artifacts_prefix(owner: str, dataset_id: str, run_id: str) -> str:
    return f"artifacts/{owner}/{dataset_id}/{run_id}/"


class ProfileInput(Contract):
    trigger: dict[str, Any] = Field(description="the execution input: an S3 event or a StartRunRequest")
    executionId: str = Field(
        description="$$.Execution.Id: tells a retry of this execution from a duplicate event"
    )


# Every chunk partial is PUT with this tag: the bucket's lifecycle rule expires objects carrying it.
PARTIAL_TAG_KEY, PARTIAL_TAG_VALUE = "iterate-chunk-partial", "true"


class ChunkItem(Contract):
    """One entry of the chunk manifest (a JSON array in S3 the ProfileChunks Map reads): a byte range."""

    index: int = Field(ge=0, description="the range's place in the file; its partial is chunks/part-<index>")
    start: int = Field(ge=0)
    end: int = Field(gt=0, description="exclusive; just after a line feed, or the end of the file")
    last: bool
    skip: int = Field(ge=0, description="lines the range starts with that are not data (the header)")


class ChunkParseSettings(Contract):
    """The single pass's parse settings for every range of the file (decided once, from its head)."""

    delimiter: str = Field(min_length=1, max_length=1)
    quotechar: str | None = Field(default=None, max_length=1)
    width: int = Field(ge=1)
    encoding: Literal["utf-8", "utf-8-sig"]
    parts: Literal["arrow", "parquet"] = Field(
        default="arrow",
        description="arrow: encoded columns for MergeChunks; parquet: text columns for the engine (Athena)",
    )


class ChunkedRead(Contract):
    """ProfileDataset's answer for a large plain CSV/TSV: it is read in `count` byte ranges by the
    ProfileChunks Map (items from `manifestKey`), then merged by MergeChunks."""

    source: S3ObjectRef = Field(description="the upload's exact object version, its key as stored")
    fileName: str = Field(
        min_length=1, description="the name the single pass gives the file (its dataset name)"
    )
    size: int = Field(gt=0)
    manifestKey: str = Field(description="the full key of the manifest (a JSON array of ChunkItem)")
    count: int = Field(ge=2)
    parse: ChunkParseSettings


class EngineLoop(Contract):
    """The engine path on Athena, between EngineStep and RunEngineQuery: the next statement to run (None when
    the profile is written), and the last one's execution as the Athena integration answered it."""

    names: dict[str, str] = Field(
        default_factory=dict, description="the run's Glue table of the Parquet parts, and its database"
    )
    query: str | None = Field(default=None, description="the next statement for Athena (UNLOAD ... TO s3)")
    key: str | None = Field(default=None, description="where that statement's result lands, by content")
    ran: dict[str, Any] | None = Field(
        default=None,
        description="RunEngineQuery's answer: id, state, bytes scanned of the statement just run",
    )
    done: bool = False
    summary: dict[str, Any] = Field(default_factory=dict)


class EngineStepInput(Contract):
    action: Literal["engine"]
    run: RunState
    chunked: ChunkedRead
    engine: EngineLoop


class ProfileOutput(Contract):
    duplicate: bool = False
    duplicateOf: str | None = None
    run: RunState | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    chunked: ChunkedRead | None = Field(
        default=None, description="set when the file is read in chunks: the profile is MergeChunks' to write"
    )
    engine: EngineLoop | None = Field(
        default=None, description="set when the chunks feed the engine (Athena) instead of MergeChunks"
    )


class ChunkInput(Contract):
    """The chunk function's event: one range of the upload to parse into the run's chunks/ prefix."""

    run: RunState
    source: S3ObjectRef
    parse: ChunkParseSettings
    chunk: ChunkItem


class ChunkOutput(Contract):
    """What one range gave: its row count, and the reason when it cannot be trusted (the merge then reads
    the whole file in one pass). The encoded columns themselves are in S3, never in the state."""

    index: int
    rows: int
    partKey: str
    trusted: bool
    reason: str = ""


class MergeChunksInput(Contract):
    action: Literal["merge"]
    run: RunState
    chunked: ChunkedRead


class StepInput(Contract):
    run: RunState


class StepOutput(Contract):
    step: str
    summary: dict[str, Any] = Field(default_factory=dict)


class AnalyzeOutput(Contract):
    """The issues to investigate are a JSON array in S3 (`itemsKey`, a full key): the Map reads it with its
    ItemReader, so a table with thousands of issues never puts their ids in the state."""

    count: int
    itemsKey: str


# --- the investigation loop inside the Map ------------------------------------------------------


class SandboxDataset(Contract):
    presigned_url: str
    # A template's columns: the sandbox fetches and loads only these (None: every column).
    columns: list[str] | None = None


class SandboxRequest(Contract):
    """The sandbox function's event: the code, a presigned GET for exactly this run's data.parquet, and a
    presigned PUT for this attempt's result object, used only when the result is too large to return."""

    code: str
    dataset: SandboxDataset
    timeout_s: float
    result_url: str
    result_key: str


class GenerateCodeInput(Contract):
    action: Literal["generate"]
    run: RunState
    issueId: str


class GenerateCodeOutput(Contract):
    stop: bool
    attempt: int = Field(ge=0, description="1-based number of the attempt this code is for; 0 when stopping")
    sandboxRequest: SandboxRequest | None = None


class SandboxResultRef(Contract):
    """What the sandbox function returns instead of a result over its inline cap: where it PUT the result."""

    resultKey: str = Field(description="the full S3 key of the CodeInvestigation JSON")
    resultBytes: int = Field(ge=0)
    success: bool
    stopped: StopReason | None = None


class SandboxFailure(Contract):
    """What a Catch puts in the state when the sandbox function itself failed (crash, timeout, throttle)."""

    Error: str
    Cause: str | None = None


class RecordAttemptInput(Contract):
    action: Literal["record"]
    run: RunState
    issueId: str
    attempt: int = Field(ge=1)
    sandboxResult: CodeInvestigation | SandboxResultRef | SandboxFailure


class RecordAttemptOutput(Contract):
    finished: bool
    success: bool
    attempts: int


# --- template proofs in batches, before the Map (ProveTemplates) ---------------------------------


class ProofsOutput(Contract):
    """PlanProofs: `batches` of template proofs in S3 (`batchesKey`, a JSON array of {issueIds}) for the
    ProveTemplates Map; ListUnsettled: the issues the Map still has to investigate one by one (`itemsKey`, a
    JSON array of issue ids, what InvestigateEach reads)."""

    batches: int = Field(ge=0)
    batchesKey: str | None = None
    count: int = Field(ge=0)
    itemsKey: str


class PlanProofsInput(Contract):
    action: Literal["plan"]
    run: RunState
    analysis: AnalyzeOutput


class SandboxBatchItem(Contract):
    code: str
    columns: list[str] | None = None


class SandboxBatchRequest(Contract):
    """The sandbox function's batch event: the proofs' code and columns, one presigned GET of the run's
    data.parquet (the union of their columns), each proof's timeout, and a presigned PUT for a result over the
    sandbox's inline cap."""

    items: list[SandboxBatchItem]
    dataset: SandboxDataset
    timeout_s: float
    result_url: str
    result_key: str


class PrepareBatchInput(Contract):
    action: Literal["batch"]
    run: RunState
    batch: int = Field(ge=0, description="the batch's index in the batches file")
    issueIds: list[str]


class PrepareBatchOutput(Contract):
    count: int = Field(ge=0, description="proofs in the request; 0: nothing to run (the batch is done)")
    issueIds: list[str] = Field(description="the issues of the request's items, in their order")
    sandboxRequest: SandboxBatchRequest | None = None


class SandboxBatchVerdicts(Contract):
    """What the sandbox function returns for a batch, inline: one verdict per item, None where not settled."""

    items: list[CodeInvestigation | None]


class RecordBatchInput(Contract):
    action: Literal["record-batch"]
    run: RunState
    batch: int = Field(ge=0)
    issueIds: list[str] = Field(description="PrepareBatch's: one per verdict, in order")
    sandboxResult: SandboxBatchVerdicts | SandboxResultRef | SandboxFailure


class RecordBatchOutput(Contract):
    settled: int = Field(ge=0, description="issues whose first attempt the batch recorded")
    unsettled: int = Field(ge=0, description="issues left to InvestigateEach")


class ListUnsettledInput(Contract):
    action: Literal["unsettled"]
    run: RunState
    analysis: AnalyzeOutput
    proofs: ProofsOutput


class ReportOutput(Contract):
    runId: str
    status: Literal["SUCCEEDED"]
    mode: str
    issueCount: int
    severityCounts: dict[str, int]


# RecordFailure's metrics (Powertools EMF: namespace, the `service` dimension). A run that failed on its input
# or by its owner's hand counts as the user's; any other failure as the system's, which the run-failure alarm
# watches (infra/constructs/monitoring.py). Routed by error class name, never by message text.
METRICS_NAMESPACE = "Iterate"
METRICS_SERVICE = "iterate"
USER_FAILURE_METRIC = "RunsFailedUser"
SYSTEM_FAILURE_METRIC = "RunsFailedSystem"
USER_ERRORS = frozenset(
    {
        "DatasetReadError",  # the file cannot be read as a table, or is over a size/shape limit
        "InvalidUploadKeyError",  # an object outside uploads/<owner>/<dataset>/<file>
        "DatasetNotFoundError",  # a schedule or API start for a dataset with no upload (or deleted)
        "RunCancelledError",  # the owner cancelled it
        "QuotaExceededError",  # the owner's daily quota of runs, bytes or LLM tokens was used up
    }
)


def failure_metric(error: str) -> str:
    """The metric a failed run with this error class counts in: the user's or the system's."""
    return USER_FAILURE_METRIC if error in USER_ERRORS else SYSTEM_FAILURE_METRIC


class StateError(Contract):
    Error: str
    Cause: str | None = None


class FailureInput(Contract):
    state: dict[str, Any] = Field(description="the state at the failure, with the caught error under 'error'")
    executionId: str


class FailureOutput(Contract):
    runId: str | None
    status: Literal["FAILED", "CANCELLED", "SUCCEEDED"]
    error: str
    reason: str
