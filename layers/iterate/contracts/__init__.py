"""Versioned pydantic contracts: the shapes every step, file, API body and LLM answer must have."""

from iterate.contracts.accepted import Acceptance, AcceptedFile, AcceptedMark
from iterate.contracts.analysis import (
    ISSUE_TYPES,
    READ_LEVEL_TYPES,
    SEVERITIES,
    SEVERITY_RANK,
    AnalysisResult,
    Category,
    Evidence,
    EvidenceExample,
    InfraCost,
    Issue,
    Mode,
    RunComparison,
    RunMetadata,
    Severity,
    TokenUsage,
)
from iterate.contracts.base import SCHEMA_VERSION, Contract
from iterate.contracts.followup import FixAction, FollowupTurn, SmartFixFollowup, SmartFixOption
from iterate.contracts.investigation import CodeInvestigation, ReusedScript, StopReason
from iterate.contracts.library import StoredScript
from iterate.contracts.profile import (
    ColumnProfile,
    DatasetProfile,
    DateStats,
    DuplicateStats,
    FunctionalDependency,
    LengthStats,
    NumericStats,
    RowNumbering,
    ValueCount,
)
from iterate.contracts.understanding import ColumnSummary, DatasetSummary, DatasetUnderstanding

__all__ = [
    "ISSUE_TYPES",
    "READ_LEVEL_TYPES",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "SEVERITY_RANK",
    "Acceptance",
    "AcceptedFile",
    "AcceptedMark",
    "AnalysisResult",
    "Category",
    "CodeInvestigation",
    "ColumnProfile",
    "ColumnSummary",
    "Contract",
    "DatasetProfile",
    "DatasetSummary",
    "DatasetUnderstanding",
    "DateStats",
    "DuplicateStats",
    "Evidence",
    "EvidenceExample",
    "FixAction",
    "FollowupTurn",
    "FunctionalDependency",
    "InfraCost",
    "Issue",
    "LengthStats",
    "Mode",
    "NumericStats",
    "ReusedScript",
    "RowNumbering",
    "RunComparison",
    "RunMetadata",
    "Severity",
    "SmartFixFollowup",
    "SmartFixOption",
    "StopReason",
    "StoredScript",
    "TokenUsage",
    "ValueCount",
]
