"""Offline stand-ins and the agents bundle the Claude-agent tests build against the fake server."""

from __future__ import annotations

from typing import Any

from iterate.agents import build_agents
from iterate.agents.offline.followup import OfflineFollowupAgent
from iterate.agents.offline.understanding import OfflineUnderstandingAgent
from iterate.contracts import CodeInvestigation, Issue
from iterate.ports import Agents, AnalysisDraft
from iterate.settings import Settings

STAND_IN_CODE = "result = {'affected_rows': 0, 'stand_in': True}"


class StandInAnalysis:
    """Stand-in for OfflineAnalysisAgent (owned elsewhere, not merged yet): candidates unchanged."""

    def analyze(self, candidates: list[Issue], **_: Any) -> AnalysisDraft:
        return AnalysisDraft(issues=list(candidates), summary="offline analysis")


class StandInInvestigation:
    """Stand-in for OfflineInvestigationAgent (owned by the sandbox engineer, not merged yet)."""

    def write_code(self, issue: Issue, *, profile: Any, attempts: list[CodeInvestigation]) -> str:
        return STAND_IN_CODE


def twins() -> Agents:
    return Agents(
        understanding=OfflineUnderstandingAgent(),
        analysis=StandInAnalysis(),
        investigation=StandInInvestigation(),
        followup=OfflineFollowupAgent(),
    )


def agents_for(llm) -> Any:
    return build_agents(Settings(), llm=llm, offline=twins())
