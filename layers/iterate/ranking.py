"""Which columns issues count against, and how columns rank by them: contracts only, no data or heavy imports."""

from __future__ import annotations

from collections.abc import Iterable

from iterate.contracts import SEVERITY_RANK, Issue

# Issues about whole rows: they touch every column alike, so they are not counted against any one column.
WHOLE_ROW_TYPES = frozenset({"duplicate_rows", "near_duplicate_rows", "ragged_rows"})


def is_whole_row(issue: Issue, n_columns: int) -> bool:
    """Whether an issue is about whole rows (duplicates, or every column of a table wider than two)."""
    return issue.type in WHOLE_ROW_TYPES or (n_columns > 2 and len(set(issue.affectedColumns)) >= n_columns)


def issues_by_column(issues: Iterable[Issue], n_columns: int) -> dict[str, list[Issue]]:
    """Each column's issues, in the given order; whole-row issues are left out (see is_whole_row)."""
    out: dict[str, list[Issue]] = {}
    for issue in issues:
        if is_whole_row(issue, n_columns):
            continue
        for col in dict.fromkeys(issue.affectedColumns):
            out.setdefault(col, []).append(issue)
    return out


def rank_columns(issues: Iterable[Issue], n_columns: int) -> list[tuple[str, list[Issue]]]:
    """Columns by how many issues touch them, then by the worst severity, then by rows touched: the one
    ranking the summary's "columns with the most issues" and the report's chart both use."""

    def rows(issue: Issue) -> int:
        return issue.evidence.affectedRows if issue.evidence is not None else issue.affectedRows or 0

    return sorted(
        issues_by_column(issues, n_columns).items(),
        key=lambda kv: (
            -len(kv[1]),
            min(SEVERITY_RANK.get(i.severity, 9) for i in kv[1]),
            -max(rows(i) for i in kv[1]),
            kv[0],
        ),
    )
