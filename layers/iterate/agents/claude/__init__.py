"""Claude agents: the four agent protocols on the Anthropic API, every answer validated and re-checked by code."""

from iterate.agents.claude.analysis import ClaudeAnalysisAgent
from iterate.agents.claude.followup import ClaudeFollowupAgent
from iterate.agents.claude.investigation import ClaudeInvestigationAgent
from iterate.agents.claude.understanding import ClaudeUnderstandingAgent

__all__ = [
    "ClaudeAnalysisAgent",
    "ClaudeFollowupAgent",
    "ClaudeInvestigationAgent",
    "ClaudeUnderstandingAgent",
]
