"""Offline analysis agent: the detectors' issues, ordered, merged where they overlap, and summarised."""

from __future__ import annotations

from collections import Counter

from iterate.contracts import SEVERITIES, DatasetProfile, DatasetUnderstanding, Issue
from iterate.issues import sort_issues
from iterate.ports import AnalysisDraft
from iterate.ranking import rank_columns
from iterate.wording import agree


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


def most_affected(issues: list[Issue], n_columns: int) -> str:
    """A sentence naming the columns with the most issues (ranked as the report ranks them, whole-row issues
    such as duplicates not counted per column); empty when no column has more than one issue."""
    ranked = rank_columns(issues, n_columns)
    top = len(ranked[0][1]) if ranked else 0
    if top < 2:
        return ""
    tied = [c for c, its in ranked if len(its) == top]
    names = [f"'{c}'" for c in tied[:3]]
    if len(tied) > 3:
        names.append(f"{len(tied) - 3} more")
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    each = " each" if len(tied) > 1 else ""
    return f" {listed} {'has' if len(tied) == 1 else 'have'} the most issues ({top}{each})."


def summarize(issues: list[Issue], profile: DatasetProfile) -> str:
    """A short summary whose every number comes from the issues and the profile."""
    if not issues:
        return (
            f"No data-quality problems found in {profile.rowCount:,} rows × {profile.columnCount} columns "
            f"of {profile.name}."
        )
    by_sev = Counter(i.severity for i in issues)
    parts = [f"{by_sev[s]} {s}" for s in SEVERITIES if by_sev[s]]
    text = (
        f"{len(issues)} issue{'s' if len(issues) != 1 else ''} in {profile.rowCount:,} rows × "
        f"{profile.columnCount} columns of {profile.name} ({', '.join(parts)})."
    )
    text += most_affected(issues, profile.columnCount)
    quick = sum(1 for i in issues if i.category == "quick_fixes")
    if quick:
        text += (
            f" {quick} {agree(quick, 'is a quick fix', 'are quick fixes')} (one mechanical change once you accept it); "
            f"{len(issues) - quick} {agree(len(issues) - quick, 'needs', 'need')} a business decision."
        )
    return text
