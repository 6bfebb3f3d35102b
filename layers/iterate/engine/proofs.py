"""On the engine path, whose count an issue shows: the engine's over every row where the issue has a predicate
(and a proof's claim on the sample is the predicate's there), else the sample's, said so with the sample's size
(docs/engine.md: "Proofs at scale"). Never a sample's count shown as the population's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iterate.contracts import Issue

if TYPE_CHECKING:
    from iterate.engine.step import EngineCounts


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _claim(issue: Issue) -> tuple[int, int | None] | None:
    """The rows (and cells, when given) a proof that ran counted on the sample, or None."""
    inv = issue.investigation
    if inv is None or not inv.success or not isinstance(inv.output, dict):
        return None
    rows = _count(inv.output.get("affected_rows"))
    return None if rows is None else (rows, _count(inv.output.get("affected_cells")))


def _proof_recount(issue: Issue, counts: EngineCounts, rows: int) -> dict[str, Any]:
    """What the proof's own claim is worth over every row: the engine's count when its claim on the sample is
    what the issue's predicate counts there (rows, and cells when it gave them), else the sample's only."""
    claim = _claim(issue)
    if claim is None:
        return {}
    claimed_rows, claimed_cells = claim
    sample, total = counts.sampleRows, counts.rowCount
    predicate = counts.predicateSampleRows.get(issue.id)
    predicate_cells = counts.predicateSampleCells.get(issue.id)
    who = (
        "the engine's template"
        if issue.investigation and issue.investigation.source == "template"
        else "the code"
    )
    if predicate is not None and claimed_rows == predicate and claimed_cells in (None, predicate_cells):
        return {
            "proof_sample_rows": claimed_rows,
            "proof_population_rows": rows,
            "proof_recount": (
                f"{who} counted {claimed_rows:,} rows on the sample of {sample:,}, the rows the issue's predicate"
                f" holds for there; the engine counted that predicate over all {total:,} rows: {rows:,}"
            ),
        }
    there = (
        f"the issue's predicate holds for {predicate:,} there" if predicate is not None else "no predicate"
    )
    return {
        "proof_sample_rows": claimed_rows,
        "proof_recount": (
            f"{who} counted {claimed_rows:,} rows on the sample of {sample:,} ({there}): that count is the"
            f" sample's only, not recounted over all {total:,} rows"
        ),
    }


def _population(issue: Issue, counts: EngineCounts) -> Issue:
    """A detector issue with the engine's population counts in place of the sample's (kept beside them)."""
    assert issue.evidence is not None
    n = max(counts.rowCount, 1)
    rows, cells = counts.rows[issue.id], counts.cells.get(issue.id, 0)
    stats = {
        **issue.evidence.stats,
        "sample_affected_rows": issue.evidence.affectedRows,
        "sample_rows": counts.sampleRows,
        "population_count": f"engine predicate over all {counts.rowCount:,} rows",
        **_proof_recount(issue, counts, rows),
    }
    evidence = issue.evidence.model_copy(
        update={
            "affectedRows": rows,
            "affectedCells": cells,
            "affectedShare": round(rows / n, 6),
            "stats": stats,
        }
    )
    description = issue.description
    if counts.sampleRows < counts.rowCount:  # the detector's sentence counted the sample's rows
        description += (
            f" Over all {counts.rowCount:,} rows: {rows:,} rows ({rows / n:.1%}); the figures before are the"
            f" sample's ({counts.sampleRows:,} rows)."
        )
    return issue.model_copy(update={"affectedRows": rows, "evidence": evidence, "description": description})


def _sample_only(issue: Issue, counts: EngineCounts) -> Issue:
    """An issue no predicate counts (a model's hypothesis, near duplicates): its counts are the sample's, and its
    evidence and description say so, with the sample's size; its share is of the sample."""
    assert issue.evidence is not None
    sample, total = counts.sampleRows, counts.rowCount
    rows = issue.evidence.affectedRows
    share = rows / max(sample, 1)
    stats = {
        **issue.evidence.stats,
        "count_scope": f"the sample's: {rows:,} of its {sample:,} rows; not counted over all {total:,} rows",
    }
    evidence = issue.evidence.model_copy(
        update={"sampleRows": sample, "affectedShare": round(min(share, 1.0), 6), "stats": stats}
    )
    description = issue.description + (
        f" Counted on a sample of {sample:,} of the {total:,} rows: {rows:,} rows there ({share:.1%});"
        " not counted over all rows."
    )
    return issue.model_copy(update={"evidence": evidence, "description": description})


def apply_counts(issues: list[Issue], counts: EngineCounts) -> list[Issue]:
    """The issues as the report shows them on the engine path. A detector issue the engine counted takes its
    population counts (over every row) in place of the sample's, kept beside them; its proof's claim on the
    sample is the predicate's or not, and its stats say which (`proof_recount`). Any other issue with counts (a
    model's hypothesis proven by its code, a whole-row fact counted on the sample) keeps the sample's, marked as
    such (`Evidence.sampleRows`), when the sample is not the whole input. The severity stays the sample's: a
    random sample's share of affected rows estimates the population's."""
    out = []
    for issue in issues:
        if issue.evidence is None:
            out.append(issue)
        elif issue.source == "detector" and issue.id in counts.rows:
            out.append(_population(issue, counts))
        elif counts.sampleRows < counts.rowCount:
            out.append(_sample_only(issue, counts))
        else:  # the sample was the whole input: its counts are every row's
            out.append(issue)
    return out
