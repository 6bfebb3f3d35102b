"""Deterministic detectors: every finding carries its cells and the parameters code needs to re-check it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from iterate.detect.arithmetic import detect_arithmetic
from iterate.detect.calibration import DEFAULT, Calibration
from iterate.detect.context import ColumnFacts, dataset_null_marker, facts_for
from iterate.detect.conventions import detect_float_written_integers, detect_thousands_separators
from iterate.detect.cooccur import detect_cooccurrence
from iterate.detect.decide import Decision, decide
from iterate.detect.dependencies import Judgement, detect_dependency_violations
from iterate.detect.derived import Derivation, detect_derived, find_derivations
from iterate.detect.digits import detect_code_width, detect_precision, detect_short_decimals, detect_zero_led
from iterate.detect.discovery import Dependency
from iterate.detect.explained import (
    context_columns,
    discount_explained_outliers,
    discount_small_samples,
    excuse_shared_zeros,
)
from iterate.detect.findings import MAX_LISTED, Finding
from iterate.detect.formats import (
    detect_date_formats,
    detect_impossible_dates,
    detect_shape_violations,
    detect_units,
)
from iterate.detect.frequency import (
    detect_foreign_values,
    detect_number_in_words,
    detect_rare_values,
    detect_repeated_placeholder,
)
from iterate.detect.missing import detect_missing, detect_sentinels, unflagged_gaps, unflagged_pattern
from iterate.detect.numcontext import detect_numeric_context
from iterate.detect.numeric import detect_invalid_numbers, detect_numeric_outliers
from iterate.detect.order import detect_neighbour_breaks
from iterate.detect.rows import detect_column_shape, detect_duplicates, detect_merged_columns
from iterate.detect.rules import detect_rule_violations
from iterate.detect.sequence import detect_sequence_breaks
from iterate.detect.sources import detect_source_conflicts
from iterate.detect.text import detect_encoding, detect_escaped, detect_stray_symbols, detect_whitespace
from iterate.detect.typos import detect_typos
from iterate.detect.words import detect_word_slips
from iterate.table import Table

__all__ = ["Detection", "Finding", "detect"]


@dataclass
class Detection:
    findings: list[Finding]
    null_marker: str
    dependencies: list[Dependency]
    facts: list[ColumnFacts]
    decision: Decision | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)


def _read_findings(table: Table) -> list[Finding]:
    out: list[Finding] = []
    ragged = [p for p in table.problems if p.kind == "ragged_row" and p.row is not None]
    if ragged:
        rows = np.array(sorted({p.row for p in ragged if p.row is not None}), dtype=np.int64)
        out.append(
            Finding(
                type="ragged_rows",
                columns=table.column_names,
                rows=rows,
                cols=np.full(rows.size, -1),
                title="Rows with the wrong number of fields",
                description=f"{rows.size:,} rows have more or fewer fields than the header (first at line "
                f"{ragged[0].line}); their values may sit in the wrong columns.",
                suggested_action="Re-export the file with consistent quoting, or fix these rows at the source.",
                category="smart_fixes",
                detector="reader",
                stats={"rows": rows[:MAX_LISTED].tolist(), "lines": [p.line for p in ragged[:MAX_LISTED]]},
                flag=False,
                row_level=True,
                key="read:ragged",
            )
        )
    blank = [p for p in table.problems if p.kind in {"blank_header", "duplicate_header"}]
    for p in blank:
        col = p.column or ""
        idx = table.column_names.index(col) if col in table.column_names else -1
        out.append(
            Finding(
                type=p.kind,
                columns=[col],
                rows=np.array([], dtype=np.int64),
                cols=np.array([], dtype=np.int64),
                title=("A column without a name" if p.kind == "blank_header" else f"Two columns named {col}"),
                description=p.detail,
                suggested_action="Give every column a unique, meaningful name in the header row.",
                category="quick_fixes",
                detector="reader",
                stats={"column": col, "index": idx},
                flag=False,
                key=f"read:{p.kind}:{idx}",
            )
        )
    return out


def _discount_consistent(
    f: Finding, judgements: dict[int, Judgement], table: Table, cal: Calibration
) -> Finding:
    """Evidence against a value yields to the dependencies that vouch for it: a rare spelling, odd format or
    far-off number that every row of its entity repeats (a small state among many rows of a big one, the
    zip of the one hospital in another state) is that entity's value. The dependencies' evidence on the
    value's rows (what every dependency that agrees says for it, added up) is averaged per value, so an issue stays
    "these values" and code can recount it exactly."""
    if (
        not f.flag
        or not f.n_cells
        or not f.value_level
        or not f.vouchable
        or f.type == "dependency_violation"
    ):
        return f
    col = int(f.cols[0])
    judgement = judgements.get(col)
    if judgement is None or not (f.cols == col).all():
        return f
    codes = table.columns[col].codes[f.rows]
    # What the dependencies that agree with the value's rows say for it, averaged per value.
    vouch = judgement.vouch[f.rows]
    _, inverse = np.unique(codes, return_inverse=True)
    per_value = np.bincount(inverse, weights=vouch) / np.bincount(inverse)
    discount = np.maximum(per_value[inverse], -cal.consistent_discount)
    if (discount < 0).any():
        llr = f.llr if f.llr is not None else np.full(f.n_cells, cal.certain_llr)
        f.llr = llr + discount
    return f


def _suspect_masks(findings: list[Finding], n_rows: int) -> dict[int, np.ndarray]:
    masks: dict[int, np.ndarray] = {}
    for f in findings:
        if not f.flag:
            continue
        for c in np.unique(f.cols[f.cols >= 0]):
            mask = masks.setdefault(int(c), np.zeros(n_rows, dtype=bool))
            mask[f.rows[f.cols == c]] = True
    return masks


def _veto_derived(f: Finding, derivations: list[Derivation], table: Table) -> Finding:
    """A value equal to the concatenation of its row's sources is right, however rare it is."""
    if not f.flag or not f.n_cells:
        return f
    for d in derivations:
        on_target = f.cols == d.target
        drop = on_target & d.holds[f.rows]
        if drop.any():
            f.keep(~drop)
            # Code recounting the finding leaves out values equal to left + separator + right in their row.
            f.stats["derivation"] = {
                "left": table.column_names[d.left],
                "separator": d.sep,
                "right": table.column_names[d.right],
            }
    return f


def detect(
    table: Table,
    calibration: Calibration = DEFAULT,
    *,
    null_marker: str | None = None,
    phase_done: Callable[[str], None] | None = None,
    keep_evidence: bool = False,
) -> Detection:
    """Run every detector over the table, then decide on their evidence together.

    Findings are in a stable order (by detector, then column); each flagged cell is reported by one finding.
    `null_marker`: `dataset_null_marker(table)`, when the caller has it already. `phase_done`: called with
    each phase's name as it ends ("setup", "columns", "dependencies", "rows", "decide", the keys of
    `timings_ms`); from "columns" on, the rest runs on one core (the pipeline starts the sandbox's load then).
    `keep_evidence`: keep the decision's per-cell evidence and features (`make calibrate`).
    """
    timings: dict[str, float] = {}

    def timed(name: str, start: float) -> None:
        timings[name] = timings.get(name, 0.0) + (time.perf_counter() - start) * 1000
        if phase_done is not None:
            phase_done(name)

    t = time.perf_counter()
    if null_marker is None:
        null_marker = dataset_null_marker(table)
    facts = facts_for(table, null_marker)
    n = table.n_rows
    findings: list[Finding] = _read_findings(table)
    n_read = len(findings)
    timed("setup", t)

    def per_column(f: ColumnFacts) -> list[Finding]:
        if f.column.n_unique <= 1:
            return []
        found = [detect_sentinels(f), detect_units(f), detect_date_formats(f), detect_shape_violations(f)]
        found += [detect_impossible_dates(f)]
        found += detect_typos(f)
        found += [detect_word_slips(f, calibration)]
        found += [detect_whitespace(f), detect_encoding(f), detect_escaped(f), detect_stray_symbols(f)]
        found += [detect_invalid_numbers(f, f.numeric), detect_precision(f, f.numeric)]
        found += [detect_numeric_outliers(f, f.numeric), detect_code_width(f, f.numeric)]
        found += [detect_float_written_integers(f, f.numeric), detect_sequence_breaks(f, f.numeric)]
        found += [detect_thousands_separators(f, f.numeric)]
        found += [detect_zero_led(f, f.numeric), detect_short_decimals(f, f.numeric)]
        found += [detect_rare_values(f), detect_repeated_placeholder(f), detect_number_in_words(f)]
        return [x for x in found if x is not None]

    t = time.perf_counter()
    # pyarrow and numpy release the GIL: columns are examined side by side, results kept in column order.
    # The dependencies (search and votes), the row-level detectors and the missing values need no column's
    # findings: they start first and run alongside the columns.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        voted = pool.submit(detect_dependency_violations, facts, n)
        duplicates = pool.submit(detect_duplicates, table, facts)
        merged = pool.submit(detect_merged_columns, facts, n)
        missing = pool.submit(detect_missing, facts, n)
        derivations = pool.submit(find_derivations, facts, n)
        neighbours = pool.submit(detect_neighbour_breaks, facts, n, calibration)
        cooccurring = pool.submit(detect_cooccurrence, facts, n)
        in_context = pool.submit(detect_numeric_context, facts, n)
        arithmetic = pool.submit(detect_arithmetic, facts, n)
        for found_in_column in pool.map(per_column, facts):
            findings += found_in_column
        timed("columns", t)
        t = time.perf_counter()
        findings = findings[:n_read] + missing.result() + findings[n_read:]
        fd_findings, deps, judgements = voted.result()
    findings = [_discount_consistent(f, judgements, table, calibration) for f in findings]
    # One per-row array per dependent column (24 MB a column on 3M rows), needed no further: not held (nor by
    # their future) through the decision, the detection's peak.
    del judgements, voted
    determines = {(d.lhs, d.rhs) for d in deps}
    if any(f.type == "numeric_outlier" and f.n_cells for f in findings):
        contexts = context_columns(facts, n)
        findings = [
            discount_explained_outliers(f, facts, determines, calibration, contexts) for f in findings
        ]
        findings = discount_small_samples(findings, facts, calibration)
        findings = excuse_shared_zeros(findings, facts)
    findings += fd_findings
    findings += neighbours.result()
    findings += cooccurring.result()
    findings += in_context.result()
    findings += arithmetic.result()
    findings += detect_rule_violations(facts, n, deps)
    findings += detect_source_conflicts(facts, n, deps, calibration)
    suspect = _suspect_masks(findings, n)
    derived_findings, rules = detect_derived(facts, n, suspect, derivations.result())
    findings = [_veto_derived(f, rules, table) for f in findings]
    # A row mask per suspected column and a per-row `holds` per derivation: neither is read after this, and
    # held through the decision (the detection's peak) they were ~160 MB on 10M rows.
    del suspect, rules, derivations
    findings = [f for f in findings if not f.flag or f.n_cells]
    findings += derived_findings
    timed("dependencies", t)
    t = time.perf_counter()
    findings += merged.result()
    findings += detect_foreign_values(facts, calibration)
    findings += duplicates.result()
    findings += detect_column_shape(facts, n)
    timed("rows", t)
    t = time.perf_counter()
    # No step after the detectors reads the columns' per-value caches: not held through the decision (on 10M
    # rows x 20 columns its peak fell from 4,354 to ~3,300 MB; the detectors' own phase is then the peak).
    for f in facts:
        f.release()
    gaps = {id(f): (f.rows.copy(), f.columns[0]) for f in findings if f.type == "missing_values" and f.flag}
    patterns = {id(f): f for f in findings if f.type == "missing_together" and f.flag}
    decision = decide(
        findings,
        n,
        table.column_names,
        calibration,
        codes_of=lambda c: table.columns[c].codes,
        counts_of=lambda c: table.columns[c].counts,
        texts_of=lambda c, ids: table.columns[c].texts(ids),
        keep_evidence=keep_evidence,
    )
    # Gaps the decision did not flag are still gaps: reported as a fact about the column.
    kept = {id(f) for f in decision.findings}
    for key, (rows, name) in gaps.items():
        if key not in kept:
            decision.findings.append(unflagged_gaps(facts[table.column_names.index(name)], rows, n, facts))
    # So is a pattern of gaps: told as a fact about the records.
    for key, pattern in patterns.items():
        if key not in kept:
            decision.findings.append(unflagged_pattern(pattern, facts, n))
    timed("decide", t)
    return Detection(decision.findings, null_marker, deps, facts, decision, timings)
