"""Whose count an issue shows on the engine path (iterate.engine.proofs.apply_counts), without running one."""

from __future__ import annotations

from typing import Any

from iterate.contracts import CodeInvestigation, Evidence, Issue
from iterate.engine.proofs import apply_counts
from iterate.engine.step import EngineCounts


def _issue(
    issue_id: str, rows: int, *, source: str = "detector", claim: dict[str, Any] | None = None
) -> Issue:
    investigation = None
    if claim is not None:
        investigation = CodeInvestigation(code="result = {}", success=True, output=claim, source="llm")
    return Issue(
        id=issue_id,
        type="format_violation",
        severity="medium",
        description="Some values are written otherwise.",
        affectedColumns=["a"],
        suggestedAction="Rewrite them.",
        category="quick_fixes",
        affectedRows=rows,
        evidence=Evidence(affectedCells=rows, affectedRows=rows, affectedShare=rows / 1000),
        investigation=investigation,
        source=source,  # type: ignore[arg-type]
    )


COUNTS = EngineCounts(
    rowCount=50_000,
    sampleRows=1_000,
    randomRows=1_000,
    rows={"same": 400, "other": 900},
    cells={"same": 400, "other": 900},
    sampleCounted=[],
    predicateSampleRows={"same": 8, "other": 17},
    predicateSampleCells={"same": 8, "other": 17},
)


def test_a_claim_that_is_the_predicate_on_the_sample_takes_the_engines_count_over_every_row() -> None:
    (issue,) = apply_counts([_issue("same", 8, claim={"affected_rows": 8, "affected_cells": 8})], COUNTS)
    assert issue.affectedRows == 400 and issue.evidence is not None and issue.evidence.sampleRows is None
    assert issue.evidence.stats["proof_population_rows"] == 400
    assert "over all 50,000 rows: 400" in issue.evidence.stats["proof_recount"]


def test_a_claim_that_is_not_the_predicate_is_said_to_be_the_samples_only() -> None:
    # Given code claiming 16 rows where the predicate holds for 17 on the sample
    (issue,) = apply_counts([_issue("other", 17, claim={"affected_rows": 16})], COUNTS)
    # Then the issue's count is still its predicate's over every row, and the proof's is named as the sample's
    assert issue.affectedRows == 900 and issue.evidence is not None
    assert "proof_population_rows" not in issue.evidence.stats
    assert issue.evidence.stats["proof_sample_rows"] == 16
    assert "the sample's only, not recounted over all 50,000 rows" in issue.evidence.stats["proof_recount"]
    assert "holds for 17 there" in issue.evidence.stats["proof_recount"]


def test_what_no_predicate_counts_is_shown_as_the_samples_with_its_size() -> None:
    hypothesis = _issue("llm-h", 25, source="llm", claim={"affected_rows": 25})
    (issue,) = apply_counts([hypothesis], COUNTS)
    assert issue.evidence is not None and issue.evidence.sampleRows == 1_000
    assert issue.evidence.affectedRows == 25 and issue.evidence.affectedShare == 0.025
    assert "Counted on a sample of 1,000 of the 50,000 rows: 25 rows there (2.5%)" in issue.description
    # And when the sample was the whole input, its counts are every row's: nothing to say
    whole = COUNTS.model_copy(update={"rowCount": 1_000})
    (same,) = apply_counts([hypothesis], whole)
    assert same == hypothesis
