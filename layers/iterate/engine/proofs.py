"""On the engine path, whose count an issue shows: the engine's over every row where the issue has a predicate
(and a proof's claim on the sample is the predicate's there), else the sample's, said so with the sample's size
(docs/engine.md: "Proofs at scale"). Never a sample's count shown as the population's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iterate.contracts import EvidenceExample, Issue

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


def read_sample_rows(store: Any) -> list[int] | None:
    """Each sample row's data row in the file, as the engine path's profile step wrote it (None: not written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from iterate.engine.pipeline import SAMPLE_ROWS

    if not store.exists(SAMPLE_ROWS):
        return None
    return [
        int(r) for r in pq.read_table(pa.BufferReader(store.get_bytes(SAMPLE_ROWS))).column("row").to_pylist()
    ]


def _file_examples(examples: list[EvidenceExample], rows: list[int] | None) -> list[EvidenceExample]:
    """A proof's examples (places in the sample it ran on) renamed to the file's data rows; an example whose
    place is not in the sample is left out rather than shown under a wrong row."""
    if rows is None:
        return []
    return [e.model_copy(update={"row": rows[e.row]}) for e in examples if 0 <= e.row < len(rows)]


def _sample_only(issue: Issue, counts: EngineCounts, sample_rows: list[int] | None) -> Issue:
    """An issue no predicate counts (a model's hypothesis, near duplicates): its counts are the sample's, and its
    evidence and description say so, with the sample's size; its share is of the sample. A hypothesis's examples
    came from its proof's output, which names places in the sample: they are renamed to the file's rows."""
    assert issue.evidence is not None
    sample, total = counts.sampleRows, counts.rowCount
    rows = issue.evidence.affectedRows
    share = rows / max(sample, 1)
    stats = {
        **issue.evidence.stats,
        "count_scope": f"the sample's: {rows:,} of its {sample:,} rows; not counted over all {total:,} rows",
    }
    update: dict[str, Any] = {
        "sampleRows": sample,
        "affectedShare": round(min(share, 1.0), 6),
        "stats": stats,
    }
    if issue.source == "llm":  # detector issues' examples were renamed when the profile step wrote them
        update["examples"] = _file_examples(issue.evidence.examples, sample_rows)
    evidence = issue.evidence.model_copy(update=update)
    description = issue.description + (
        f" Counted on a sample of {sample:,} of the {total:,} rows: {rows:,} rows there ({share:.1%});"
        " not counted over all rows."
    )
    return issue.model_copy(update={"evidence": evidence, "description": description})


def apply_counts(
    issues: list[Issue], counts: EngineCounts, *, sample_rows: list[int] | None = None
) -> list[Issue]:
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
            out.append(_sample_only(issue, counts, sample_rows))
        else:  # the sample was the whole input: its counts are every row's
            out.append(issue)
    return out
