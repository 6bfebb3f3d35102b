"""Claude follow-up agent: the next multiple-choice question for a smart fix, checked before it is shown."""

from __future__ import annotations

from typing import Any

from iterate.agents.claude.render import issue_brief, tagged, truncate
from iterate.agents.offline.followup import FIX_ACTIONS
from iterate.contracts import FollowupTurn, Issue, SmartFixFollowup
from iterate.llm.errors import LLMOutputError
from iterate.llm.session import CacheScope, LLMSession
from iterate.prompts import load

AGENT = "followup"


def conversation(history: list[FollowupTurn]) -> list[dict[str, Any]]:
    out = []
    for t in history:
        chosen = (t.question.onResponse or {}).get(t.answer or "")
        out.append(
            {
                "question": truncate(t.question.prompt, 400),
                "options": {o.key: truncate(o.label, 120) for o in t.question.options},
                "answer": t.answer,
                "action": chosen.model_dump() if chosen else None,
            }
        )
    return out


def check_question(q: SmartFixFollowup, issue: Issue) -> None:
    """Options unique, every option mapped to an allowed action, columns only those of the issue."""
    keys = [o.key for o in q.options]
    if len(set(keys)) != len(keys):
        raise LLMOutputError("option keys must be unique")
    mapping = q.onResponse or {}
    if set(mapping) != set(keys):
        raise LLMOutputError("onResponse must map exactly the option keys")
    for key, action in mapping.items():
        if action.action not in FIX_ACTIONS:
            raise LLMOutputError(f"option {key}: unknown action {truncate(action.action, 40)}")
        column = action.parameters.get("column")
        if column is not None and column not in issue.affectedColumns:
            raise LLMOutputError(
                f"option {key}: column {truncate(str(column), 40)} is not affected by this issue"
            )


class ClaudeFollowupAgent:
    def __init__(self, session: LLMSession, *, content_hash: str = "") -> None:
        self.session = session
        self.prompt = load("followup")
        self.content_hash = content_hash

    def next_question(self, issue: Issue, history: list[FollowupTurn]) -> SmartFixFollowup:
        if history and history[-1].answer is None:
            return history[-1].question  # one question at a time: the pending one stands
        payload = issue_brief(issue, examples=5) | {"suggestedAction": truncate(issue.suggestedAction, 400)}
        if issue.evidence and issue.evidence.stats:
            payload["parameters"] = {
                k: truncate(str(v), 400) for k, v in list(issue.evidence.stats.items())[:10]
            }
        user = "\n\n".join(
            [
                "Ask the next question for this issue.",
                tagged("issue", payload),
                tagged("conversation", conversation(history)),
            ]
        )
        return self.session.structured(
            agent=AGENT,
            prompt=self.prompt,
            user=user,
            output=SmartFixFollowup,
            tool_name="ask_question",
            tool_description="Ask the owner one multiple-choice question; map each option to a fix action.",
            max_tokens=2048,
            scope=CacheScope(self.content_hash or f"issue:{issue.id}"),
            check=lambda q: check_question(q, issue),
        )
