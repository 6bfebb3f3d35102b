"""Claude analysis agent: reviews the detectors' candidates; code merges the review under strict rules."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from iterate.agents.claude.numbers import scrub
from iterate.agents.claude.render import issue_brief, profile_brief, tagged, truncate
from iterate.contracts import (
    SEVERITIES,
    Category,
    Contract,
    DatasetProfile,
    DatasetUnderstanding,
    Issue,
    Severity,
)
from iterate.llm.session import CacheScope, LLMSession
from iterate.ports import AnalysisDraft
from iterate.prompts import load

AGENT = "analysis"
MAX_CANDIDATES_IN_PROMPT = 80
MAX_HYPOTHESES = 5
LEVEL = {"low": 0, "medium": 1, "high": 2}


class ReviewedIssue(Contract):
    id: str
    severity: Severity | None = None
    description: str | None = Field(default=None, max_length=2000)
    suggestedAction: str | None = Field(default=None, max_length=1000)
    businessImpact: str | None = Field(default=None, max_length=1000)
    duplicateOf: str | None = None


class Hypothesis(Contract):
    type: str = Field(max_length=80)
    description: str = Field(max_length=2000)
    affectedColumns: list[str] = Field(min_length=1)
    severity: Severity = "medium"
    category: Category = "smart_fixes"
    suggestedAction: str = Field(max_length=1000)
    businessImpact: str | None = Field(default=None, max_length=1000)


class AnalysisAnswer(Contract):
    summary: str = Field(max_length=3000)
    ranking: list[str] = Field(default_factory=list, description="candidate ids, most important first")
    issues: list[ReviewedIssue] = Field(default_factory=list)
    hypotheses: list[Hypothesis] = Field(default_factory=list)


def user_message(
    candidates: list[Issue],
    profile: DatasetProfile,
    understanding: DatasetUnderstanding,
    instructions: str | None,
    previous_issues: list[Issue] | None,
) -> str:
    # The most severe candidates first, so that a huge list loses only its tail (which stays unchanged).
    shown = sorted(candidates, key=lambda c: -LEVEL.get(c.severity, 0))[:MAX_CANDIDATES_IN_PROMPT]
    parts = [
        "Review these candidate issues, rank them, explain them for the business and add hypotheses.",
        # Row numbers are left out: the model must not quote them, and the report takes them from code.
        tagged("candidates", [issue_brief(c, rows=False, description_chars=220) for c in shown]),
        tagged(
            "understanding",
            {
                "dataset": truncate(understanding.summary.description, 600),
                "context": truncate(understanding.suggested_context, 600),
                "columns": {
                    truncate(c.name, 120): truncate(c.description, 160) for c in understanding.columns
                },
            },
        ),
        # The candidates carry their own examples; three top values per column are enough for hypotheses.
        tagged("dataset_profile", profile_brief(profile, top=3)),
    ]
    if previous_issues:
        parts.append(
            tagged(
                "previous_issues",
                [
                    {"type": i.type, "columns": i.affectedColumns[:4], "severity": i.severity}
                    for i in previous_issues[:50]
                ],
            )
        )
    if instructions:
        parts.append(tagged("user_instructions", instructions[:2000]))
    return "\n\n".join(parts)


class ClaudeAnalysisAgent:
    def __init__(self, session: LLMSession) -> None:
        self.session = session
        self.prompt = load("analysis")

    def analyze(
        self,
        candidates: list[Issue],
        *,
        profile: DatasetProfile,
        understanding: DatasetUnderstanding,
        instructions: str | None = None,
        previous_issues: list[Issue] | None = None,
    ) -> AnalysisDraft:
        answer = self.session.structured(
            agent=AGENT,
            prompt=self.prompt,
            user=user_message(candidates, profile, understanding, instructions, previous_issues),
            output=AnalysisAnswer,
            tool_name="record_review",
            tool_description="Record the review of the candidate issues and any new hypotheses.",
            max_tokens=min(16000, 2048 + 250 * min(len(candidates), MAX_CANDIDATES_IN_PROMPT)),
            scope=CacheScope(profile.contentHash, instructions),
        )
        return merge_review(candidates, answer, profile)


def merge_review(candidates: list[Issue], answer: AnalysisAnswer, profile: DatasetProfile) -> AnalysisDraft:
    """Apply the review without trusting it: no candidate dropped, no count changed, numbers re-checked,
    columns checked against the profile, hypotheses kept as hypotheses."""
    notes: list[str] = []
    by_id = {c.id: c for c in candidates}
    reviews: dict[str, ReviewedIssue] = {}
    for r in answer.issues:
        if r.id in by_id:
            reviews.setdefault(r.id, r)
        else:
            notes.append(f"review of unknown issue id ignored: {truncate(r.id, 60)}")

    merged: dict[str, str] = {}
    for cid, r in reviews.items():
        target = by_id.get(r.duplicateOf or "")
        if target is None or target.id == cid or target.id in merged:
            continue
        c = by_id[cid]
        # Only true duplicates, and only into an issue that counts at least as much: no count is ever lost.
        if (
            c.type == target.type
            and set(c.affectedColumns) == set(target.affectedColumns)
            and (target.affectedRows or 0) >= (c.affectedRows or 0)
        ):
            merged[cid] = target.id
            notes.append(f"{cid} merged into {target.id} (same type and columns)")
        else:
            notes.append(f"merge of {cid} into {target.id} refused: not the same finding")

    reviewed = [_apply(c, reviews.get(c.id), profile) for c in candidates if c.id not in merged]
    rank = {cid: i for i, cid in enumerate(dict.fromkeys(x for x in answer.ranking if x in by_id))}
    order = {c.id: i for i, c in enumerate(candidates)}
    reviewed.sort(key=lambda c: (rank.get(c.id, len(rank)), order[c.id]))

    hypotheses = _hypotheses(answer.hypotheses, candidates, profile, notes)
    issues = reviewed + hypotheses
    counts = {s: sum(1 for i in reviewed if i.severity == s) for s in SEVERITIES}
    proposed = f"{len(hypotheses)} hypothesis" if len(hypotheses) == 1 else f"{len(hypotheses)} hypotheses"
    measured = (
        f"{len(reviewed)} issues found by the detectors ({counts['high']} high, {counts['medium']} medium, "
        f"{counts['low']} low) in {profile.rowCount} rows; {proposed} proposed for investigation."
    )
    summary = scrub(
        answer.summary, counts=[profile.rowCount, profile.columnCount, len(reviewed), len(hypotheses)]
    )
    return AnalysisDraft(issues=issues, summary=f"{summary} {measured}".strip(), notes=notes)


def _apply(c: Issue, r: ReviewedIssue | None, profile: DatasetProfile) -> Issue:
    if r is None:
        return c
    counts: list[int] = [profile.rowCount]
    share = None
    if c.affectedRows is not None:
        counts.append(c.affectedRows)
    if c.evidence is not None:
        counts += [c.evidence.affectedRows, c.evidence.affectedCells]
        share = c.evidence.affectedShare
    update: dict[str, Any] = {}
    if r.severity is not None:
        # Raising is free; lowering by one level at most, so data cannot talk a finding down to nothing.
        level = max(LEVEL[r.severity], LEVEL[c.severity] - 1)
        update["severity"] = next(name for name, v in LEVEL.items() if v == level)
    if r.description and r.description.strip():
        update["description"] = (
            f"{scrub(r.description, counts=counts, share=share)} Detector finding: {c.description}"
        )
    if r.suggestedAction and r.suggestedAction.strip():
        update["suggestedAction"] = scrub(r.suggestedAction, counts=counts, share=share)
    if r.businessImpact and r.businessImpact.strip():
        update["businessImpact"] = scrub(r.businessImpact, counts=counts, share=share)
    return c.model_copy(update=update)


def _hypotheses(
    proposed: list[Hypothesis], candidates: list[Issue], profile: DatasetProfile, notes: list[str]
) -> list[Issue]:
    names = {c.name for c in profile.columns}
    folded = {c.name.casefold(): c.name for c in profile.columns}
    seen = {(c.type, frozenset(c.affectedColumns)) for c in candidates}
    used_ids = {c.id for c in candidates}
    out: list[Issue] = []
    for h in proposed:
        if len(out) >= MAX_HYPOTHESES:
            notes.append("hypotheses beyond the first few ignored")
            break
        columns = [n if n in names else folded.get(n.casefold(), "") for n in h.affectedColumns]
        unknown = [n for n, real in zip(h.affectedColumns, columns, strict=True) if not real]
        columns = list(dict.fromkeys(c for c in columns if c))
        if unknown:
            notes.append(
                "hypothesis names columns that do not exist: " + ", ".join(truncate(u, 40) for u in unknown)
            )
        if not columns:
            continue
        kind = re.sub(r"[^a-z0-9]+", "_", h.type.casefold()).strip("_")[:60] or "business_rule"
        if (kind, frozenset(columns)) in seen:
            continue
        seen.add((kind, frozenset(columns)))
        n = len(out) + 1
        while f"llm-{n}" in used_ids:
            n += 1
        used_ids.add(f"llm-{n}")
        out.append(
            Issue(
                id=f"llm-{n}",
                type=kind,
                severity=h.severity,
                description=scrub(h.description),
                affectedColumns=columns,
                suggestedAction=scrub(h.suggestedAction),
                category=h.category,
                status="hypothesis",
                source="llm",
                businessImpact=scrub(h.businessImpact) if h.businessImpact else None,
            )
        )
    return out
