"""From detector findings to Issue contracts: ids, severity, evidence examples, and the flags they imply."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from iterate.contracts import (
    SEVERITIES,
    SEVERITY_RANK,
    DatasetProfile,
    Evidence,
    EvidenceExample,
    Issue,
    RunComparison,
    Severity,
)
from iterate.detect import Finding
from iterate.table import Table
from iterate.wording import fmt_share

if TYPE_CHECKING:
    from iterate.report import FlagArrays

MAX_EXAMPLES = 20
MAX_VALUE_CHARS = 200


def issue_id(finding: Finding) -> str:
    """A stable id (the same problem in the same column gets the same id in every run of a dataset)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", finding.key or finding.type).strip("-")[:120]


# What an issue costs the user, by the kind of damage and the share of rows it touches: one rule for every
# detector (issue 32). The shares are lower bounds of each severity: (medium from, high from).
SEVERITY_SHARES: dict[str, tuple[float, float]] = {
    "wrong": (0.01, 0.10),  # wrong values: 15% of a category misspelt is high, a handful of typos low
    "missing": (0.05, 0.20),  # gaps where the record should have a value
}


def severity_of(
    damage: str, share: float, *, blocks_analysis: bool = False, key_column: bool = False
) -> Severity:
    """The severity rule: "format" (the same value written another way) and "fact" (a pattern reported,
    nothing flagged: an optional column's blanks, a constant column) are low; wrong and missing values rise
    with the share of rows they touch (SEVERITY_SHARES); wrong values in a key or determining column rise one
    step (they spread to everything joined on it); whatever blocks the analysis (rows that do not parse) is
    high."""
    if blocks_analysis:
        return "high"
    if damage not in SEVERITY_SHARES:
        return "low"
    medium, high = SEVERITY_SHARES[damage]
    severity: Severity = "high" if share >= high else "medium" if share >= medium else "low"
    return _bump(severity, 1) if damage == "wrong" and key_column else severity


def _bump(severity: Severity, steps: int) -> Severity:
    order = SEVERITIES[::-1]  # least severe first
    return order[max(0, min(len(order) - 1, order.index(severity) + steps))]


def key_columns(profile: DatasetProfile | None) -> set[str]:
    """Columns that matter most: candidate keys and columns that determine others."""
    if profile is None:
        return set()
    keys = {c for key in profile.candidateKeys for c in key}
    keys |= {c for fd in profile.functionalDependencies for c in fd.lhs}
    return keys


def _clip(value: str) -> str:
    return value if len(value) <= MAX_VALUE_CHARS else value[: MAX_VALUE_CHARS - 1] + "…"


def _examples(finding: Finding, table: Table, profile: DatasetProfile | None = None) -> list[EvidenceExample]:
    """The cells most surely wrong first (by score, then row), each with its statistic, the row's place in
    the file and, where the value alone says little, the row's other cells that explain or identify it."""
    out: list[EvidenceExample] = []
    names = table.column_names
    if finding.score is not None and finding.n_cells:
        order = np.lexsort((finding.rows, -np.round(finding.score, 4)))[:MAX_EXAMPLES]
    else:
        order = np.arange(min(finding.n_cells, MAX_EXAMPLES))
    context = _context_columns(finding, table, profile)
    for k in order.tolist():
        row, col = int(finding.rows[k]), int(finding.cols[k])
        line = table.source.place_of(row)
        if col < 0:  # a whole row
            preview = " | ".join(_clip(c.value(row)) for c in table.columns[:6])
            out.append(EvidenceExample(row=row, column="*", value=_clip(preview), line=line))
            continue
        expected = finding.expected[k] if finding.expected is not None else None
        note = None
        if finding.stat is not None and finding.stat_name:
            note = f"{finding.stat_name}: {_stat_text(finding.stat_name, float(finding.stat[k]))}"
        out.append(
            EvidenceExample(
                row=row,
                column=names[col],
                value=_clip(table.columns[col].value(row)),
                expected=None if expected is None else _clip(expected),
                note=note,
                score=None if finding.score is None else round(float(finding.score[k]), 4),
                line=line,
                context={names[c]: _clip(table.columns[c].value(row)) for c in context if c != col},
            )
        )
    return out


# An empty cell says nothing by itself: its row's identifying values let a reader find the record.
_IDENTIFY_TYPES = {"missing_values", "disguised_missing"}
CONTEXT_COLUMNS = 3
# Semantic types whose values name or identify a record (not measures or free text).
_NAMING_TYPES = {"identifier", "categorical", "email", "phone", "postal_code", "date", "datetime", "integer"}


def _context_columns(finding: Finding, table: Table, profile: DatasetProfile | None) -> list[int]:
    """Positions of the columns shown beside each example of this finding (none for most findings)."""
    names = table.column_names
    position = {n: i for i, n in reversed(list(enumerate(names)))}
    if finding.type == "dependency_violation":
        # A conflicting value: the values that determine it. A blamed key: the values that contradict it.
        related = finding.stats.get("determinants") or finding.stats.get("dependents") or []
        # A determinant of several columns read together shows each of them.
        flat = [n for d in related for n in (d if isinstance(d, list) else [d])]
        return [position[d] for d in dict.fromkeys(flat[:4]) if isinstance(d, str) and d in position]
    if finding.type not in _IDENTIFY_TYPES:
        return []
    affected = set(finding.columns)
    chosen: list[int] = []
    if profile is not None:
        for key in profile.candidateKeys[:1]:
            chosen += [position[c] for c in key if c in position and c not in affected]
        rows = max(profile.rowCount, 1)
        for c in profile.columns:
            if len(chosen) >= CONTEXT_COLUMNS:
                break
            usable = c.semanticType in _NAMING_TYPES and c.missing / rows < 0.5 and c.distinct > 1
            if usable and c.name in position and c.name not in affected and position[c.name] not in chosen:
                chosen.append(position[c.name])
    else:
        chosen = [i for i, n in enumerate(names) if n not in affected][:CONTEXT_COLUMNS]
    return chosen


def _stat_text(name: str, value: float) -> str:
    """A detector's statistic as a sentence shows it: a share as a percentage, any other number to 4 digits."""
    if "share" in name and 0.0 <= value <= 1.0:
        return fmt_share(value, 1.0)
    return f"{value:.4g}"


def minor_columns(profile: DatasetProfile | None) -> set[str]:
    """Columns that matter least: free text (notes, comments), whose gaps rarely block an analysis."""
    if profile is None:
        return set()
    return {c.name for c in profile.columns if c.semanticType == "text"}


def to_issue(
    finding: Finding,
    table: Table,
    *,
    important: set[str],
    minor: set[str] | None = None,
    profile: DatasetProfile | None = None,
) -> Issue:
    n_rows = max(table.n_rows, 1)
    affected_rows = finding.n_rows
    share = affected_rows / n_rows
    damage = finding.damage_kind
    if damage == "missing" and minor and set(finding.columns) <= minor:
        damage = "fact"  # an optional comment field left empty is normal
    severity = severity_of(
        damage,
        share,
        blocks_analysis=finding.blocks_analysis,
        key_column=bool(important & set(finding.columns)),
    )
    return Issue(
        id=issue_id(finding),
        type=finding.type,
        severity=severity,
        description=finding.description,
        affectedColumns=finding.columns,
        suggestedAction=finding.suggested_action,
        category=finding.category,
        affectedRows=affected_rows,
        evidence=Evidence(
            affectedCells=finding.n_cells if not finding.row_level else affected_rows * len(table.columns),
            affectedRows=affected_rows,
            affectedShare=round(share, 6),
            examples=_examples(finding, table, profile),
            stats={
                **finding.stats,
                "title": finding.title,
                "flagged": finding.flag,
                **_listed(finding, table),
                **_data_type(finding, profile),
            },
        ),
        status="confirmed",
        source="detector",
        detector=finding.detector,
    )


def _data_type(finding: Finding, profile: DatasetProfile | None) -> dict[str, str]:
    """For missing values: the profile's type of their column, so that a fix offers what fits it (a median
    for numbers, never the text 'Unknown')."""
    if (
        profile is None
        or finding.type not in ("missing_values", "disguised_missing")
        or len(finding.columns) != 1
    ):
        return {}
    column = next((c for c in profile.columns if c.name == finding.columns[0]), None)
    return {"dataType": str(column.dataType)} if column is not None else {}


def sort_issues(issues: Iterable[Issue]) -> list[Issue]:
    return sorted(
        issues,
        key=lambda i: (SEVERITY_RANK[i.severity], -(i.evidence.affectedShare if i.evidence else 0.0), i.id),
    )


class Timeline:
    """Each row's month, from the dataset's main date column, to tell when affected rows happened."""

    def __init__(self, table: Table, profile: DatasetProfile | None) -> None:
        self.column: str | None = None
        self.months: np.ndarray | None = None
        self.labels: list[str] = []
        if profile is None:
            return
        dated = [c for c in profile.columns if c.semanticType in {"date", "datetime"} and c.format]
        if not dated:
            return
        import pandas as pd

        best = dated[0]
        column = table.column(best.name)
        parsed = pd.to_datetime(pd.Series(column.uniques), format=best.format, errors="coerce")
        month = parsed.dt.strftime("%Y-%m").fillna("")
        labels = sorted(set(month) - {""})
        if len(labels) < 3:
            return
        index = {m: i for i, m in enumerate(labels)}
        per_unique = np.array([index.get(m, -1) for m in month], dtype=np.int64)
        self.column, self.labels = best.name, labels
        self.months = per_unique[column.codes]

    def pattern(self, rows: np.ndarray) -> str | None:
        """A sentence when the affected rows crowd into a few months, None when they are spread out."""
        if self.months is None or rows.size < 10:
            return None
        n = len(self.labels)
        all_counts = np.bincount(self.months[self.months >= 0], minlength=n)
        months = self.months[rows]
        hit = np.bincount(months[months >= 0], minlength=n)
        if hit.sum() < 20:
            return None
        # The shortest run of months holding at least half of the affected rows.
        best: tuple[int, int] | None = None
        for lo in range(n):
            acc = 0
            for hi in range(lo, n):
                acc += hit[hi]
                if acc * 2 >= hit.sum():
                    if best is None or hi - lo < best[1] - best[0]:
                        best = (lo, hi)
                    break
        if best is None:
            return None
        lo, hi = best
        share_hit = hit[lo : hi + 1].sum() / hit.sum()
        share_all = all_counts[lo : hi + 1].sum() / max(all_counts.sum(), 1)
        if share_all > 0.25 or share_hit < 3 * share_all:
            return None
        span = self.labels[lo] if lo == hi else f"{self.labels[lo]} to {self.labels[hi]}"
        return (
            f"{share_hit:.0%} of the affected rows have a '{self.column}' in {span}, a period that holds "
            f"{share_all:.0%} of all rows."
        )


def _listed(finding: Finding, table: Table) -> dict[str, int]:
    """When a finding lists only the first MAX_LISTED of its values: `listed_rows`, how many of its rows hold a
    listed value, which is what a proof recounting the listed values can confirm (the issue's own count covers
    every value).

    The list was cut at MAX_LISTED when the finding was made; the decision then takes out the values it gave up
    (`excluded_values`), so a cut list can end up shorter than MAX_LISTED (10M rows of the bench file: 2,487
    spellings of customer_name left of the first 5,000, on 8,648 of the issue's 10,000 rows)."""
    from iterate.detect.findings import MAX_LISTED

    values = finding.stats.get("bad_values")
    name = finding.stats.get("column")
    given_up = finding.stats.get("excluded_values")
    if not isinstance(values, list) or not isinstance(name, str):
        return {}
    if len(values) + (len(given_up) if isinstance(given_up, list) else 0) < MAX_LISTED:
        return {}  # the list was never cut
    positions = [i for i, n in enumerate(table.column_names) if n == name]
    if len(positions) != 1 or finding.n_cells == 0:
        return {}
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.columns[positions[0]]
    listed = np.asarray(
        pc.is_in(column.dictionary, value_set=pa.array([str(v) for v in values])).to_numpy(
            zero_copy_only=False
        ),
        dtype=bool,
    )
    rows = np.unique(finding.rows[finding.cols == positions[0]])
    held = int(listed[column.codes[rows]].sum())
    # Every row holding a listed value: nothing the finding keeps was left out of the list.
    return {"listed_rows": held} if held < rows.size else {}


def issues_from_findings(
    findings: list[Finding], table: Table, profile: DatasetProfile | None
) -> list[Issue]:
    important = key_columns(profile)
    minor = minor_columns(profile)
    timeline = Timeline(table, profile)
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        issue = to_issue(f, table, important=important, minor=minor, profile=profile)
        pattern = timeline.pattern(f.unique_rows()) if f.type not in {"constant_column"} else None
        if pattern:
            issue = issue.model_copy(update={"temporalPattern": pattern})
        n = seen.get(issue.id, 0)
        seen[issue.id] = n + 1
        if n:  # two findings with one key (rare): keep ids unique
            issue = issue.model_copy(update={"id": f"{issue.id}-{n + 1}"})
            f.key = issue.id
        out.append(issue)
    return sort_issues(out)


def flags_of(findings: list[Finding], table: Table) -> FlagArrays:
    """Every flagged cell with the issue that reports it and its score (the combiner's posterior)."""
    from iterate.report import FlagArrays

    names = np.array(table.column_names, dtype=object)
    rows, cols, ids, scores = [], [], [], []
    for f in findings:
        if not f.flag or f.n_cells == 0:
            continue
        keep = f.cols >= 0
        rows.append(f.rows[keep])
        cols.append(names[f.cols[keep]])
        ids.append(np.full(int(keep.sum()), issue_id(f), dtype=object))
        scores.append(f.score[keep] if f.score is not None else np.ones(int(keep.sum())))
    if not rows:
        empty = np.array([], dtype=object)
        return FlagArrays(np.array([], dtype=np.int64), empty, empty, np.array([], dtype=np.float64))
    return FlagArrays(np.concatenate(rows), np.concatenate(cols), np.concatenate(ids), np.concatenate(scores))


def compare_runs(issues: list[Issue], previous: list[Issue]) -> tuple[list[Issue], RunComparison]:
    """Mark each issue new / persisting / regressed / improved against the previous run; list the resolved."""
    before = {i.id: i for i in previous}
    marked = []
    tally = {"new": 0, "persisting": 0, "regressed": 0, "improved": 0}
    for issue in issues:
        old = before.get(issue.id)
        if old is None:
            change = "new"
        elif (issue.affectedRows or 0) > (old.affectedRows or 0):
            change = "regressed"
        elif (issue.affectedRows or 0) < (old.affectedRows or 0):
            change = "improved"
        else:
            change = "persisting"
        tally[change] += 1
        marked.append(issue.model_copy(update={"change": change}))
    now = {i.id for i in issues}
    resolved = sorted(i for i in before if i not in now)
    return marked, RunComparison(**tally, resolved=resolved)
