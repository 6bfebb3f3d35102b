"""Offline analysis agent: the detectors' issues, ordered, merged where they overlap, and summarised."""

from __future__ import annotations

from collections import Counter

from iterate.contracts import DatasetProfile, DatasetUnderstanding, Issue
from iterate.issues import sort_issues
from iterate.ports import AnalysisDraft


class OfflineAnalysisAgent:
    """No LLM: every detector issue is kept (they are computed from the data), ordered by severity and reach."""

    def analyze(
        self,
        candidates: list[Issue],
        *,
        profile: DatasetProfile,
        understanding: DatasetUnderstanding,
        instructions: str | None = None,
        previous_issues: list[Issue] | None = None,
    ) -> AnalysisDraft:
        issues = sort_issues(candidates)
        notes: list[str] = []
        if previous_issues is not None:
            before = {i.id for i in previous_issues}
            now = {i.id for i in issues}
            notes.append(
                f"{len(now - before)} new, {len(now & before)} persisting, {len(before - now)} resolved "
                "since the previous run"
            )
        return AnalysisDraft(issues=issues, summary=summarize(issues, profile), notes=notes)


def summarize(issues: list[Issue], profile: DatasetProfile) -> str:
    """A short summary whose every number comes from the issues and the profile."""
    if not issues:
        return (
            f"No data-quality problems found in {profile.rowCount:,} rows × {profile.columnCount} columns "
            f"of {profile.name}."
        )
    by_sev = Counter(i.severity for i in issues)
    flagged_cols = Counter(
        c for i in issues if i.evidence and i.evidence.stats.get("flagged") for c in i.affectedColumns
    )
    parts = [f"{by_sev[s]} {s}" for s in ("high", "medium", "low") if by_sev[s]]
    worst = ", ".join(f"'{c}'" for c, _ in flagged_cols.most_common(3))
    text = (
        f"{len(issues)} issues in {profile.rowCount:,} rows × {profile.columnCount} columns of {profile.name} "
        f"({', '.join(parts)})."
    )
    if worst:
        text += f" The columns with the most problems are {worst}."
    quick = sum(1 for i in issues if i.category == "quick_fixes")
    if quick:
        text += f" {quick} can be fixed automatically; {len(issues) - quick} need a business decision."
    return text
