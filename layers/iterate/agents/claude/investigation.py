"""Claude investigation agent: one step of the bounded ReAct loop, earlier attempts replayed as tool round trips."""

from __future__ import annotations

import json
import re
from typing import Any

from iterate.agents.claude.render import column_brief, issue_brief, tagged, truncate
from iterate.contracts import CodeInvestigation, DatasetProfile, Issue
from iterate.llm.errors import LLMOutputError
from iterate.llm.session import CacheScope, LLMSession
from iterate.llm.types import LLMRequest, LLMResponse
from iterate.prompts import load

AGENT = "investigation"
TOOL = {
    "name": "run_python",
    "description": "Run Python in the sandbox with `df` (all-text DataFrame), `pd` and `np`; set `result` to a dict.",
    "input_schema": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "complete Python code that sets `result`"}},
        "required": ["code"],
        "additionalProperties": False,
    },
}
MAX_RESULT_CHARS = 1500
MAX_CODE_CHARS = 20_000


def policy_violations(code: str) -> list[str]:
    """The sandbox's static policy, applied before the code leaves the agent (empty when it may run)."""
    try:
        from iterate.sandbox.policy import check_policy
    except ImportError:  # a function shipped without the sandbox package: the sandbox still checks
        return []
    return [f"line {v.line}: {v.detail}" for v in check_policy(code)]


def normalize(code: str) -> str:
    """Code with comments, blank lines and trailing spaces removed: what 'the same action' means."""
    lines = (re.sub(r"\s+#.*$|^\s*#.*$", "", line).rstrip() for line in code.strip().splitlines())
    return "\n".join(line for line in lines if line)


def issue_payload(issue: Issue, profile: DatasetProfile) -> dict[str, Any]:
    cols = {c.name: c for c in profile.columns}
    payload: dict[str, Any] = {
        "issue": issue_brief(issue, examples=5),
        "columns_of_issue": [column_brief(cols[n]) for n in issue.affectedColumns if n in cols],
        "all_columns": [truncate(c.name, 120) for c in profile.columns],
        "rows": profile.rowCount,
    }
    if issue.evidence and issue.evidence.stats:
        stats = json.dumps(issue.evidence.stats, default=str)
        # The detector's parameters let the model recompute its exact claim; huge maps are cut, not dropped.
        payload["detector_parameters"] = issue.evidence.stats if len(stats) <= 3000 else truncate(stats, 3000)
    return payload


def build_messages(
    issue: Issue, profile: DatasetProfile, attempts: list[CodeInvestigation]
) -> list[dict[str, Any]]:
    """The first user turn, then each earlier attempt as an assistant tool_use and its tool_result."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Write code that measures this issue in `df`.\n\n"
            + tagged("issue", issue_payload(issue, profile)),
        }
    ]
    for i, a in enumerate(attempts, start=1):
        tool_id = f"toolu_attempt_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": tool_id, "name": TOOL["name"], "input": {"code": a.code}}
                ],
            }
        )
        if a.success:
            body = "ran, but the result was rejected: " + truncate(
                json.dumps(a.output, default=str), MAX_RESULT_CHARS
            )
        else:
            body = truncate(f"{a.stopped or 'error'}: {a.error or 'no error text'}", MAX_RESULT_CHARS)
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_id, "is_error": True, "content": body},
                    {"type": "text", "text": "Fix the cause and run the corrected code."},
                ],
            }
        )
    return messages


class ClaudeInvestigationAgent:
    """`static_policy=False` (ITERATE_SANDBOX_INPROCESS_CHECKS=0, red teams only) sends code on unchecked."""

    def __init__(self, session: LLMSession, *, static_policy: bool = True) -> None:
        self.session = session
        self.prompt = load("investigation")
        self.static_policy = static_policy

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        previous = {normalize(a.code): i for i, a in enumerate(attempts, start=1)}

        def parse(response: LLMResponse) -> str:
            call = next((c for c in response.tool_calls if c.name == TOOL["name"]), None)
            code = call.input.get("code") if call is not None else None
            if not isinstance(code, str) or not code.strip():
                raise LLMOutputError("no code submitted through run_python")
            if len(code) > MAX_CODE_CHARS:
                raise LLMOutputError("code too long")
            seen = previous.get(normalize(code))
            if seen is not None:
                # Repeated-action detection: the same code cannot give a different result.
                raise LLMOutputError(f"this code repeats attempt {seen}, which failed")
            try:
                compile(code, "<investigation>", "exec")
            except SyntaxError as exc:
                raise LLMOutputError(f"SyntaxError line {exc.lineno}: {exc.msg}") from exc
            refused = policy_violations(code) if self.static_policy else []
            if refused:
                # The sandbox would refuse it anyway: a repair turn now saves a sandbox round trip.
                raise LLMOutputError("the sandbox policy refuses this code: " + "; ".join(refused[:5]))
            return code

        request = LLMRequest(
            agent=AGENT,
            system=self.prompt.text,
            messages=build_messages(issue, profile, attempts),
            max_tokens=4096,
            tools=[TOOL],
            tool_choice={"type": "tool", "name": TOOL["name"]},
        )
        return self.session.run(
            request,
            prompt=self.prompt,
            parse=parse,
            scope=CacheScope(profile.contentHash),
            repair_hint="Call run_python with new, complete, syntactically valid code.",
        )
