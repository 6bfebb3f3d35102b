"""Models for the fake Messages server that read the prompt they are given and answer as a careful Claude would."""

from __future__ import annotations

import json
import re
from typing import Any

from fake_anthropic import Reply, error_reply, tool_reply


def tagged(user: str, tag: str) -> Any:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", user, re.DOTALL)
    assert match, f"no <{tag}> block in the prompt"
    return json.loads(match.group(1))


def first_user_text(request: dict[str, Any]) -> str:
    content = request["messages"][0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def _count_filled(column: str) -> str:
    return (
        f"col = {column!r}\n"
        "mask = df[col].str.strip() != ''\n"
        "rows = [int(i) for i in mask[mask].index[:3]]\n"
        "result = {'affected_rows': int(mask.sum()), 'affected_cells': int(mask.sum()),\n"
        "          'share': float(mask.mean()),\n"
        "          'examples': [{'row': r, 'column': col, 'value': str(df[col].iloc[r])} for r in rows]}\n"
    )


def _exact_code(payload: dict[str, Any]) -> str | None:
    """Code that recomputes a detector's claim from the parameters in the prompt (what the engine's own
    template computes), or None when the prompt does not carry them whole."""
    from iterate.agents.offline.investigation import supports, template_code
    from iterate.contracts import Evidence, Issue

    brief, params = payload["issue"], payload.get("detector_parameters")
    if not isinstance(params, dict):
        return None
    issue = Issue(
        id=brief["id"],
        type=brief["type"],
        severity=brief["severity"],
        description=brief["description"],
        affectedColumns=brief["columns"],
        suggestedAction="-",
        category="quick_fixes",
        evidence=Evidence(affectedCells=0, affectedRows=0, affectedShare=0.0, stats=params),
    )
    return template_code(issue) if supports(issue) else None


def _careful_claude(request: dict[str, Any], code_for: Any) -> Reply:
    """Describes the columns it is shown, keeps every candidate, adds one hypothesis on the first column, and
    writes the investigation code `code_for(issue prompt)` returns."""
    name = (request.get("tool_choice") or {}).get("name")
    user = first_user_text(request)
    if name == "record_understanding":
        cols = [c["name"] for c in tagged(user, "dataset_profile")["columns"]]
        payload: dict[str, Any] = {
            "description": "Orders of an online shop, one row per order line.",
            "observations": ["Prices carry currency text in some rows."],
            "columns": [{"name": c, "description": f"The order's {c.replace('_', ' ')}."} for c in cols],
            "suggested_context": "Used for revenue reporting.",
        }
    elif name == "record_review":
        candidates = tagged(user, "candidates")
        cols = [c["name"] for c in tagged(user, "dataset_profile")["columns"]]
        payload = {
            "summary": "Several formatting problems that distort revenue by region.",
            "ranking": [c["id"] for c in candidates],
            "issues": [{"id": c["id"], "businessImpact": "Distorts monthly revenue."} for c in candidates],
            "hypotheses": [
                {
                    "type": "business_rule",
                    "description": "Some orders may have no customer contact at all.",
                    "affectedColumns": [cols[0]],
                    "suggestedAction": "Ask sales for the missing contacts.",
                }
            ],
        }
    elif name == "run_python":
        payload = {"code": code_for(tagged(user, "issue"))}
    else:
        return error_reply(400, "invalid_request_error")(request)
    return tool_reply(name, payload)(request)


def reading_claude(request: dict[str, Any]) -> Reply:
    """A careful Claude whose investigation code recomputes each detector's claim exactly (a hypothesis: a
    count of the filled cells of its column)."""
    return _careful_claude(
        request, lambda issue: _exact_code(issue) or _count_filled(issue["issue"]["columns"][0])
    )


def smart_claude(request: dict[str, Any]) -> Reply:
    """A careful Claude whose investigation code counts the filled cells of the issue's first column."""
    return _careful_claude(request, lambda issue: _count_filled(issue["issue"]["columns"][0]))
