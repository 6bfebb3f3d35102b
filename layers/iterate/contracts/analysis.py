"""AnalysisResult and Issue: what a run found (field names kept from the original design)."""

from typing import Any, Literal

from pydantic import Field

from iterate.contracts.accepted import AcceptedMark
from iterate.contracts.base import SCHEMA_VERSION, Contract
from iterate.contracts.investigation import CodeInvestigation

Severity = Literal["low", "medium", "high"]
SEVERITIES: tuple[Severity, ...] = ("high", "medium", "low")  # most severe first
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}  # 0: most severe
Category = Literal["quick_fixes", "smart_fixes"]
Mode = Literal["offline", "llm", "degraded"]

# The issue types the detectors produce; an LLM may add hypotheses of other types.
ISSUE_TYPES = (
    "missing_values",
    "missing_together",
    "disguised_missing",
    "duplicate_rows",
    "near_duplicate_rows",
    "mixed_types",
    "format_violation",
    "unit_in_number",
    "inconsistent_category",
    "numeric_outlier",
    "out_of_domain",
    "dependency_violation",
    "merged_columns",
    "encoding_damage",
    "stray_whitespace",
    "constant_column",
    "all_unique_column",
    "ragged_rows",
    "blank_header",
    "duplicate_header",
)
# Problems found while reading the file: reported with the reader's evidence, no code can recount them.
READ_LEVEL_TYPES = frozenset({"ragged_rows", "blank_header", "duplicate_header"})


class EvidenceExample(Contract):
    """One affected cell: where it is, what it holds and, when the detector knows, what was expected."""

    row: int = Field(ge=0, description="0-based data row of the input (header excluded)")
    column: str
    value: str
    expected: str | None = None
    note: str | None = None
    score: float | None = Field(
        default=None, ge=0.0, le=1.0, description="probability the value is wrong, from the combined evidence"
    )
    line: int | None = Field(
        default=None,
        ge=1,
        description="where the row is in the file: its 1-based line (CSV, JSON Lines) or the row number a "
        "spreadsheet shows (xlsx); absent when the reader cannot tell (a value spanning lines, Parquet, a JSON array)",
    )
    context: dict[str, str] = Field(
        default_factory=dict,
        description="other cells of the same row, by column: the determining values of a dependency, or values "
        "that let a reader recognise a record whose cell is empty",
    )


class Evidence(Contract):
    """Counts and examples computed by code from the data; never copied from LLM text."""

    affectedCells: int = Field(ge=0)
    affectedRows: int = Field(ge=0)
    affectedShare: float = Field(ge=0.0, le=1.0, description="affected rows / all rows")
    examples: list[EvidenceExample] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    sampleRows: int | None = Field(
        default=None,
        ge=1,
        description="set when the counts are a sample's, not every row's: the rows of the sample they were counted "
        "on (the engine path, for what no predicate counts over every row); affectedShare is then of the sample",
    )


class Issue(Contract):
    id: str
    type: str
    severity: Severity
    description: str
    affectedColumns: list[str]
    suggestedAction: str
    category: Category
    affectedRows: int | None = None
    temporalPattern: str | None = None
    evidence: Evidence | None = None
    investigation: CodeInvestigation | None = None
    status: Literal["confirmed", "hypothesis", "unconfirmed", "unverified"] = Field(
        default="confirmed",
        description="unverified: an LLM-written investigation ran, but no engine recount could check its numbers",
    )
    change: Literal["new", "persisting", "regressed", "improved"] | None = Field(
        default=None, description="against the previous run of the same dataset (None on a first run)"
    )
    source: Literal["detector", "llm"] = "detector"
    detector: str | None = None
    businessImpact: str | None = None
    accepted: AcceptedMark | None = Field(
        default=None,
        description="accepted by a user (see iterate accept): still shown, never fails --fail-on",
    )


class TokenUsage(Contract):
    inputTokens: int = 0
    outputTokens: int = 0
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0
    calls: int = 0
    costUsd: float = 0.0


class InfraCost(Contract):
    """A run's AWS infrastructure, measured step by step and priced at list prices (iterate.aws.cost)."""

    lambdaGbSeconds: float = Field(default=0.0, ge=0, description="function time × configured memory")
    lambdaInvocations: int = Field(default=0, ge=0)
    stateTransitions: int = Field(default=0, ge=0)
    s3WriteRequests: int = Field(default=0, ge=0, description="PUT, COPY, POST, LIST")
    s3ReadRequests: int = Field(default=0, ge=0, description="GET, HEAD and the rest")
    dynamoWriteRequests: int = Field(default=0, ge=0)
    dynamoReadRequests: int = Field(default=0, ge=0)
    events: int = Field(default=0, ge=0, description="EventBridge events published")
    costUsd: float = Field(default=0.0, ge=0, description="estimate in USD, list prices (docs/cost-model.md)")


class RunMetadata(Contract):
    runId: str
    datasetName: str
    sourceFile: str
    contentHash: str
    rowCount: int
    columnCount: int
    startedAt: str
    durationMs: float
    engineVersion: str
    instructions: str | None = None
    degradedReasons: list[str] = Field(default_factory=list)
    usage: dict[str, TokenUsage] = Field(default_factory=dict, description="per agent, plus 'total'")
    timingsMs: dict[str, float] = Field(default_factory=dict)
    model: str | None = None
    flaggedCells: int | None = Field(
        default=None, description="lines of flags.csv: cells flagged as wrong, per issue"
    )
    flaggedRows: int | None = Field(
        default=None, description="distinct rows with at least one cell in flags.csv"
    )
    detection: dict[str, Any] = Field(
        default_factory=dict,
        description="the detection decision's parameters and the error rates it estimated from the table",
    )
    expectedBlanks: dict[str, int] = Field(
        default_factory=dict,
        description=(
            "per column, blank cells the fix this file is a version of left on purpose (version.json's "
            "expectedBlanks): not reported as missing values, and not a failure of the exported checks"
        ),
    )


class RunComparison(Contract):
    """How this run's issues differ from the previous run's (matched by issue id)."""

    new: int = 0
    persisting: int = 0
    regressed: int = Field(default=0, description="still there, affecting more rows than before")
    improved: int = Field(default=0, description="still there, affecting fewer rows than before")
    resolved: list[str] = Field(default_factory=list, description="ids of previous issues no longer found")


class AnalysisResult(Contract):
    mode: Mode
    schemaVersion: str = SCHEMA_VERSION
    issues: list[Issue]
    summary: str
    completedAt: str
    run: RunMetadata | None = None
    severityCounts: dict[str, int] = Field(default_factory=dict)
    comparison: RunComparison | None = None
