"""Builders for hand-made contract objects: an analysis, its profile and understanding, of any width."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from iterate.contracts import (
    AnalysisResult,
    CodeInvestigation,
    ColumnProfile,
    ColumnSummary,
    DatasetProfile,
    DatasetSummary,
    DatasetUnderstanding,
    DuplicateStats,
    Evidence,
    EvidenceExample,
    FunctionalDependency,
    Issue,
    LengthStats,
    NumericStats,
    RunMetadata,
    TokenUsage,
    ValueCount,
)

SEVERITIES = ("high", "medium", "low")


def column_profile(name: str, index: int, *, numeric: bool, top: list[str], rows: int) -> ColumnProfile:
    return ColumnProfile(
        name=name,
        index=index,
        semanticType="decimal" if numeric else "categorical",
        dataType="numeric" if numeric else "categorical",
        count=rows,
        missing=3,
        disguisedMissing=1,
        distinct=len(top) + 5,
        distinctRatio=0.1,
        uniqueRatio=0.05,
        topValues=[ValueCount(value=v, count=100 - i) for i, v in enumerate(top)],
        patterns=[ValueCount(value="Aaaa", count=40), ValueCount(value=" 9.9", count=2)],
        length=LengthStats(min=1, max=12, mean=5.5),
        numeric=NumericStats(
            count=rows, min=-5, max=10_000, mean=50.5, std=12.1, median=48, mad=4, q1=40, q3=60
        )
        if numeric
        else None,
    )


def issue(
    n: int, *, columns: list[str], value: str, examples: int = 3, severity: str | None = None, code: str = ""
) -> Issue:
    return Issue(
        id=f"issue-{n:03d}",
        type="inconsistent_category" if n % 2 else "numeric_outlier",
        severity=severity or SEVERITIES[n % 3],  # type: ignore[arg-type]
        description=f"Issue {n}: values like {value} break the pattern",
        affectedColumns=columns,
        suggestedAction=f"Replace {value} with the expected value",
        category="smart_fixes" if n % 2 else "quick_fixes",
        status=("confirmed", "hypothesis", "unconfirmed")[n % 3],  # type: ignore[arg-type]
        evidence=Evidence(
            affectedCells=10 + n,
            affectedRows=7 + n,
            affectedShare=min((7 + n) / 1000, 1.0),
            examples=[
                EvidenceExample(row=i, column=columns[0], value=value, expected="ok", note=f"note {value}")
                for i in range(examples)
            ],
            stats={"ratio": 0.25, "label": value},
        ),
        investigation=CodeInvestigation(
            code=code or f"print({value!r})",
            success=n % 4 != 3,
            output={"count": 10 + n, "example": value},
            error=None if n % 4 != 3 else f"KeyError: {value}",
            stopped=None if n % 4 != 3 else "error",
            attempts=1 + n % 3,
            execution_time_ms=123.0,
        ),
        businessImpact=f"Reports that group by {value} are wrong",
    )


@pytest.fixture
def build() -> Callable[..., tuple[AnalysisResult, DatasetProfile, DatasetUnderstanding]]:
    """build(columns=, issues=, value=, examples=, rows=, long_value=) -> (analysis, profile, understanding)."""

    def _build(
        *,
        columns: int = 6,
        issues: int = 5,
        value: str = "Widget",
        examples: int = 3,
        rows: int = 1000,
        top_values: int = 5,
        mode: str = "llm",
        code: str = "",
    ) -> tuple[AnalysisResult, DatasetProfile, DatasetUnderstanding]:
        names = [f"col_{i}" for i in range(columns)]
        names[0] = value  # a header name is data too
        profile = DatasetProfile(
            name="orders.csv",
            rowCount=rows,
            columnCount=columns,
            contentHash="abc123",
            nullMarker="",
            columns=[
                column_profile(
                    n, i, numeric=i % 2 == 1, top=[f"{value}{k}" for k in range(top_values)], rows=rows
                )
                for i, n in enumerate(names)
            ],
            duplicates=DuplicateStats(exactRows=4, exactGroups=2, nearRows=9),
            candidateKeys=[[names[0]]],
            functionalDependencies=[
                FunctionalDependency(lhs=[names[0]], rhs=names[-1], confidence=0.97, violatingRows=12)
            ],
            readNotes=[f"repaired a ragged row holding {value}"],
        )
        understanding = DatasetUnderstanding(
            summary=DatasetSummary(
                name="orders",
                description=f"Customer orders; some say {value}",
                rowCount=rows,
                columnCount=columns,
                observations=[f"observation about {value}"],
            ),
            columns=[
                ColumnSummary(name=n, dataType="string", description=f"meaning of {n} ({value})")
                for n in names
            ],
            suggested_context=f"context {value}",
        )
        analysis = AnalysisResult(
            mode=mode,  # type: ignore[arg-type]
            issues=[
                issue(
                    k,
                    columns=[names[k % columns], names[(k + 1) % columns]],
                    value=value,
                    examples=examples,
                    code=code,
                )
                for k in range(issues)
            ],
            summary=f"{issues} issues; worst is {value}",
            completedAt="2026-11-22T00:00:00Z",
            run=RunMetadata(
                runId="run-1",
                datasetName="orders.csv",
                sourceFile="/data/orders.csv",
                contentHash="abc123",
                rowCount=rows,
                columnCount=columns,
                startedAt="2026-11-22T00:00:00Z",
                durationMs=4321.0,
                engineVersion="0.1.0",
                instructions=f"focus on {value}",
                degradedReasons=[f"LLM timed out near {value}"] if mode == "degraded" else [],
                usage={"total": TokenUsage(inputTokens=12000, outputTokens=3400, calls=7, costUsd=0.0871)},
                timingsMs={"profile": 812.0, "detect": 233.0, "investigate": 2100.0},
                model="claude-sonnet-5-5",
            ),
            severityCounts={},
        )
        return analysis, profile, understanding

    return _build
