"""Ports: what the engine needs from the world. Each has a local adapter and an AWS (or LLM) adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from iterate.contracts import (
    CodeInvestigation,
    DatasetProfile,
    DatasetUnderstanding,
    FollowupTurn,
    Issue,
    SmartFixFollowup,
    StoredScript,
)


class ArtifactStore(Protocol):
    """Where a run's files live: a local directory, or an S3 prefix."""

    def put_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream") -> str: ...
    def get_bytes(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def uri(self, key: str) -> str: ...


class RunRepository(Protocol):
    """Run records and their status transitions: a local JSON file store, or DynamoDB."""

    def create_run(self, run: dict[str, Any]) -> None: ...
    def update_progress(self, run_id: str, *, step: str, percent: int, message: str = "") -> None: ...
    def transition(self, run_id: str, *, from_status: str, to_status: str, **fields: Any) -> None: ...
    def get_run(self, run_id: str) -> dict[str, Any] | None: ...


class ScriptLibrary(Protocol):
    """Investigation scripts that proved an issue, kept per owner and dataset for the next run to rerun:
    a local directory, or S3 (the code) with DynamoDB (the index). Every call names the owner, and an
    adapter never returns another owner's scripts."""

    def entries(self, owner: str, dataset_id: str) -> list[StoredScript]: ...
    def code(self, entry: StoredScript) -> str | None:
        """The entry's code, or None when it is missing or does not match the entry's hash."""
        ...

    def save(self, entry: StoredScript, code: str) -> None: ...


@dataclass(frozen=True)
class DatasetRef:
    """How investigation code reaches the data: a local path (subprocess sandbox) or an S3 object (Lambda)."""

    path: str | None = None
    bucket: str | None = None
    key: str | None = None
    version_id: str | None = None
    format: str = "parquet"
    # Only these columns are loaded (template code names the columns it reads); None loads every column.
    columns: tuple[str, ...] | None = None


class Sandbox(Protocol):
    """Runs untrusted investigation code against the dataset and returns what it printed or set."""

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation: ...


@dataclass
class AnalysisDraft:
    """The analysis agent's answer: issues (detector-confirmed or hypotheses) and a summary."""

    issues: list[Issue]
    summary: str
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class UnderstandingAgent(Protocol):
    def understand(
        self, profile: DatasetProfile, *, instructions: str | None = None
    ) -> DatasetUnderstanding: ...


@runtime_checkable
class AnalysisAgent(Protocol):
    def analyze(
        self,
        candidates: list[Issue],
        *,
        profile: DatasetProfile,
        understanding: DatasetUnderstanding,
        instructions: str | None = None,
        previous_issues: list[Issue] | None = None,
    ) -> AnalysisDraft: ...


@runtime_checkable
class InvestigationAgent(Protocol):
    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        """Code for the next attempt; `attempts` holds the earlier failed ones (code and error)."""
        ...


@runtime_checkable
class FollowupAgent(Protocol):
    def next_question(self, issue: Issue, history: list[FollowupTurn]) -> SmartFixFollowup: ...


@dataclass
class Agents:
    """The four agents a run uses; offline ones by default, Claude ones when a key is configured."""

    understanding: UnderstandingAgent
    analysis: AnalysisAgent
    investigation: InvestigationAgent
    followup: FollowupAgent
    mode: str = "offline"
    degraded_reasons: list[str] = field(default_factory=list)
