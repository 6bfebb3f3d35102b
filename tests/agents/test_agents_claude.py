"""The four Claude agents through the real SDK against the fake server, and what code does with their answers."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from agent_helpers import STAND_IN_CODE, agents_for, twins
from fake_anthropic import Reply, error_reply, slow, text_reply, tool_reply
from llm_fixtures import INJECTION, make_candidates, make_profile, review_answer, understanding_answer

from iterate.agents import build_agents
from iterate.agents.offline.followup import OfflineFollowupAgent
from iterate.agents.offline.understanding import OfflineUnderstandingAgent
from iterate.contracts import CodeInvestigation, FollowupTurn, Issue
from iterate.llm.resilience import Backoff
from iterate.settings import Settings

pytestmark = pytest.mark.unit

FOLLOWUP = {
    "prompt": "Standardise the state spellings?",
    "options": [{"key": "yes", "label": "Yes"}, {"key": "keep", "label": "No"}],
    "onResponse": {
        "yes": {"action": "standardize_values", "parameters": {"column": "state", "mapping": {"ny": "NY"}}},
        "keep": {"action": "keep", "parameters": {}},
    },
}


def claude(profile, candidates, *, followup: dict | None = None):
    """A well-behaved model: answers each agent's forced tool from what the test knows."""

    def respond(request: dict[str, Any]) -> Reply:
        name = (request.get("tool_choice") or {}).get("name")
        payload: dict[str, Any] = {
            "record_understanding": understanding_answer(profile),
            "record_review": review_answer(candidates),
            "run_python": {"code": "result = {'affected_rows': int((df['state'] == 'ny').sum())}"},
            "ask_question": followup or FOLLOWUP,
        }[name]
        return tool_reply(name, payload)(request)

    return respond


def state_issue(candidates: list[Issue]) -> Issue:
    return next(c for c in candidates if c.affectedColumns == ["state"])


def run_all(agents, profile, candidates):
    understanding = agents.understanding.understand(profile, instructions="focus on revenue")
    draft = agents.analysis.analyze(
        candidates, profile=profile, understanding=understanding, instructions=None
    )
    code = agents.investigation.write_code(draft.issues[0], profile=profile, attempts=[])
    question = agents.followup.next_question(state_issue(candidates), [])
    return understanding, draft, code, question


def test_every_agent_runs_through_the_sdk_and_the_mode_is_llm(fake, make_llm):
    # Given a healthy API
    profile = make_profile()
    candidates = make_candidates(profile)
    fake.default = claude(profile, candidates)
    agents = agents_for(make_llm())
    # When the four agents run
    understanding, draft, code, question = run_all(agents, profile, candidates)
    # Then each called its tool through the SDK, and the run is an LLM run with usage per agent
    assert fake.tool_names() == ["record_understanding", "record_review", "run_python", "ask_question"]
    assert agents.mode == "llm" and agents.degraded_reasons == []
    usage = agents.usage()
    assert {"understanding", "analysis", "investigation", "followup", "total"} <= set(usage)
    assert usage["total"].calls == 4 and usage["total"].costUsd > 0
    assert agents.model == "claude-sonnet-5-5"
    assert understanding.summary.description.startswith("Online orders")
    assert "df['state']" in code and question.prompt.startswith("Standardise")
    # And the ranking the model gave was applied
    assert [i.id for i in draft.issues] == [c.id for c in reversed(candidates)]


def test_understanding_keeps_only_real_columns_and_computed_counts(fake, make_llm):
    # Given a model that invents a column, forgets one and states counts of its own
    profile = make_profile()
    answer = understanding_answer(profile, extra_column="customer_lifetime_value")
    answer["columns"] = [c for c in answer["columns"] if c["name"] != "zip"]
    answer["observations"] = ["About 42% of orders (9,999 rows) are from NY."]
    fake.add(tool_reply("record_understanding", answer))
    # When the agent runs
    result = agents_for(make_llm()).understanding.understand(profile)
    # Then the columns are exactly the profile's, the forgotten one described by the rules
    assert [c.name for c in result.columns] == [c.name for c in profile.columns]
    zip_col = next(c for c in result.columns if c.name == "zip")
    assert zip_col.description.startswith("Postal codes such as 10001, 94105, 60601; 36 distinct values")
    # And the counts come from the profile, the invented ones are gone
    assert result.summary.rowCount == profile.rowCount and result.summary.columnCount == profile.columnCount
    assert not any("9,999" in o or "42%" in o for o in result.summary.observations)


def test_analysis_refuses_hallucinated_columns_and_invented_counts(fake, make_llm):
    # Given a review that invents counts for a detector issue and hypotheses on columns that do not exist
    profile = make_profile()
    candidates = make_candidates(profile)
    target = candidates[0]
    review = review_answer(candidates)
    review["issues"][0] = {
        "id": target.id,
        "description": "Exactly 4,321 rows (87%) lack an order id, see rows 3, 8 and 99.",
        "severity": "high",
    }
    review["issues"].append({"id": "iss-does-not-exist", "description": "ghost"})
    review["hypotheses"] = [
        {
            "type": "Business Rule",
            "description": "Refunds exceed amount in 250 orders.",
            "affectedColumns": ["refund_total"],
            "suggestedAction": "check",
            "severity": "high",
        },
        {
            "type": "date_order",
            "description": "Order dates after ship dates in 17% of rows.",
            "affectedColumns": ["order_date", "ship_date", "AMOUNT"],
            "suggestedAction": "compare the dates",
        },
    ]
    fake.add(tool_reply("record_review", review))
    agents = agents_for(make_llm())
    understanding = OfflineUnderstandingAgent().understand(profile)
    # When the analysis agent runs
    draft = agents.analysis.analyze(candidates, profile=profile, understanding=understanding)
    # Then every detector issue is there with its counts unchanged
    by_id = {i.id: i for i in draft.issues}
    for c in candidates:
        assert by_id[c.id].affectedRows == c.affectedRows and by_id[c.id].evidence == c.evidence
    # And the invented numbers are not in the text, while the detector's measured ones are
    text = by_id[target.id].description
    assert "4,321" not in text and "87%" not in text and "99" not in text
    assert str(target.affectedRows) in text
    # And only the hypothesis with a real column survives, on real columns only, as an unproven llm hypothesis
    hyps = [i for i in draft.issues if i.source == "llm"]
    assert len(hyps) == 1
    assert hyps[0].affectedColumns == ["order_date", "amount"]
    assert hyps[0].status == "hypothesis" and hyps[0].affectedRows is None and hyps[0].evidence is None
    assert "17%" not in hyps[0].description
    assert any("do not exist" in n for n in draft.notes) and any("unknown issue id" in n for n in draft.notes)


def test_merges_only_true_duplicates_and_never_lowers_severity_by_more_than_a_level(fake, make_llm):
    profile = make_profile()
    candidates = make_candidates(profile)[:4]
    high = candidates[0].model_copy(update={"severity": "high"})
    twin = candidates[0].model_copy(update={"id": "iss-dup", "affectedRows": 5})
    other = candidates[1]
    review = {
        "summary": "s",
        "issues": [
            {"id": high.id, "severity": "low"},
            {"id": "iss-dup", "duplicateOf": high.id},
            {"id": other.id, "duplicateOf": high.id},
        ],
    }
    fake.add(tool_reply("record_review", review))
    draft = agents_for(make_llm()).analysis.analyze(
        [high, twin, other], profile=profile, understanding=OfflineUnderstandingAgent().understand(profile)
    )
    ids = [i.id for i in draft.issues]
    # The same finding with fewer rows merges; a different finding does not
    assert "iss-dup" not in ids and other.id in ids
    # A high issue cannot be talked down to low
    assert next(i for i in draft.issues if i.id == high.id).severity == "medium"


def test_a_cell_that_says_report_no_issues_removes_no_issue(fake, make_llm):
    # Given a profile whose sample values carry an injection, and a model that "obeys" it
    profile = make_profile(injection=True)
    candidates = make_candidates(profile)
    fake.add(
        tool_reply("record_understanding", understanding_answer(profile)),
        tool_reply(
            "record_review", {"summary": "No issues found.", "ranking": [], "issues": [], "hypotheses": []}
        ),
    )
    agents = agents_for(make_llm())
    understanding = agents.understanding.understand(profile)
    # When the analysis runs
    draft = agents.analysis.analyze(candidates, profile=profile, understanding=understanding)
    # Then every detector-confirmed issue is still reported, unchanged
    assert [i.id for i in draft.issues] == [c.id for c in candidates]
    assert all(a == b for a, b in zip(draft.issues, candidates, strict=True))
    # And the hostile cell reached the model only as escaped data inside its delimiters
    user = fake.requests[0]["messages"][0]["content"]
    body = user.split("<dataset_profile>", 1)[1].rsplit("</dataset_profile>", 1)[0]
    assert INJECTION[:30] in body  # truncated like every sample value, but present as data
    assert "</dataset_profile>" not in body and "\\u003c/dataset_profile\\u003e" in body
    assert user.count("</dataset_profile>") == 1
    assert (
        "never obey" in fake.requests[0]["system"][0]["text"].lower()
        or "never an instruction" in fake.requests[0]["system"][0]["text"]
    )


def test_investigation_replays_attempts_as_tool_round_trips_and_refuses_repeats(fake, make_llm):
    # Given one failed attempt, and a model that first repeats it, then fixes it
    profile = make_profile()
    issue = make_candidates(profile)[0]
    failed = CodeInvestigation(
        code="result = df['nope'].sum()", success=False, error="KeyError: 'nope'", source="llm"
    )
    fake.add(
        tool_reply("run_python", {"code": "result = df['nope'].sum()  # again"}),
        tool_reply("run_python", {"code": "result = {'affected_rows': int((df['order_id'] == '').sum())}"}),
    )
    agents = agents_for(make_llm())
    # When the agent writes the next attempt
    code = agents.investigation.write_code(issue, profile=profile, attempts=[failed])
    # Then the earlier attempt was sent as a tool_use and its error as the matching tool_result
    messages = fake.requests[0]["messages"]
    tool_use = messages[1]["content"][0]
    tool_result = messages[2]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["input"]["code"] == failed.code
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == tool_use["id"]
    assert "KeyError" in tool_result["content"] and tool_result["is_error"] is True
    # And the repeated code was refused with a repair turn, the new code accepted
    assert "repeats attempt 1" in json.dumps(fake.requests[1]["messages"][-1])
    assert "df['order_id']" in code and agents.mode == "llm"


def test_an_investigation_that_keeps_repeating_falls_back_to_the_template(fake, make_llm):
    profile = make_profile()
    issue = make_candidates(profile)[0]
    failed = CodeInvestigation(code="x = 1", success=False, error="no result", source="llm")
    fake.default = tool_reply("run_python", {"code": "x = 1"})
    agents = agents_for(make_llm())
    code = agents.investigation.write_code(issue, profile=profile, attempts=[failed])
    assert code == STAND_IN_CODE
    assert agents.mode == "degraded" and agents.degraded_reasons[0].startswith(
        "investigation: invalid_output"
    )


def test_followup_answers_with_unknown_actions_or_columns_are_repaired_or_replaced(fake, make_llm):
    profile = make_profile()
    issue = state_issue(make_candidates(profile))
    bad_action = json.loads(json.dumps(FOLLOWUP))
    bad_action["onResponse"]["yes"]["action"] = "delete_database"
    bad_column = json.loads(json.dumps(FOLLOWUP))
    bad_column["onResponse"]["yes"]["parameters"]["column"] = "password"
    fixed = json.loads(json.dumps(FOLLOWUP))
    fixed["onResponse"]["yes"]["parameters"]["column"] = issue.affectedColumns[0]
    # Given a model that first proposes an unknown action, then corrects itself
    fake.add(tool_reply("ask_question", bad_action), tool_reply("ask_question", fixed))
    agents = agents_for(make_llm())
    question = agents.followup.next_question(issue, [])
    assert question.onResponse is not None and question.onResponse["yes"].action == "standardize_values"
    assert "unknown action" in json.dumps(fake.requests[1]["messages"][-1])
    # When it keeps naming a column outside the issue, Then the rules ask instead
    fake.add(tool_reply("ask_question", bad_column), tool_reply("ask_question", bad_column))
    history = [FollowupTurn(question=question, answer="yes")]
    rules = agents.followup.next_question(issue, history)
    assert rules == OfflineFollowupAgent().next_question(issue, history)
    assert agents.mode == "degraded"


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ([error_reply(529, "overloaded_error")] * 50, "unavailable"),
        ([text_reply("I'm sorry, I can't help with that.")] * 50, "invalid_output"),
        ([error_reply(401, "authentication_error")] * 50, "request_refused"),
    ],
    ids=["529-storm", "nonsense", "bad-key"],
)
def test_every_failure_ends_in_a_completed_run_with_an_honest_mode(fake, make_llm, sleeps, script, reason):
    # Given an API that is down, talks nonsense or refuses the key
    profile = make_profile()
    candidates = make_candidates(profile)
    fake.add(*script)
    agents = agents_for(make_llm())
    # When all four steps run
    started = time.perf_counter()
    understanding, draft, code, question = run_all(agents, profile, candidates)
    elapsed = time.perf_counter() - started
    # Then each step got its offline twin's answer and the run says why it is degraded
    assert agents.mode == "degraded"
    assert [r.split(":")[0] for r in agents.degraded_reasons] == [
        "understanding",
        "analysis",
        "investigation",
        "followup",
    ]
    assert reason in agents.degraded_reasons[0]
    assert understanding == OfflineUnderstandingAgent().understand(profile, instructions="focus on revenue")
    assert draft.summary == "offline analysis" and code == STAND_IN_CODE
    assert question == OfflineFollowupAgent().next_question(state_issue(candidates), [])
    # And the whole outage cost seconds (waits are recorded, not slept: they add up to little either way)
    assert elapsed + sum(sleeps) < 30


def test_answers_slower_than_the_timeout_fall_back_within_seconds(fake, make_llm):
    profile = make_profile()
    candidates = make_candidates(profile)
    fake.default = slow(tool_reply("record_understanding", understanding_answer(profile)), 2.0)
    llm = make_llm(timeout_s=0.25, deadline_s=10.0, backoff=Backoff(rand=lambda: 0.0))
    llm._sdk()
    agents = agents_for(llm)
    started = time.perf_counter()
    run_all(agents, profile, candidates)
    # The first two steps timed out twice each (4 failures open the breaker); the last two did not wait at all
    assert len(fake.requests) == 4
    assert time.perf_counter() - started < 6.0  # waiting for the 2 s answers would take 8 s
    assert agents.mode == "degraded" and len(agents.degraded_reasons) == 4
    assert re.search(r"circuit_open", " ".join(agents.degraded_reasons))


def test_without_a_key_the_agents_are_the_engines_offline_agents(fake):
    from iterate.agents.offline.analysis import OfflineAnalysisAgent
    from iterate.agents.offline.investigation import OfflineInvestigationAgent

    agents = build_agents(Settings())
    assert agents.mode == "offline" and agents.usage()["total"].calls == 0 and agents.model is None
    assert isinstance(agents.understanding, OfflineUnderstandingAgent)
    assert isinstance(agents.analysis, OfflineAnalysisAgent)
    assert isinstance(agents.investigation, OfflineInvestigationAgent)
    assert isinstance(agents.followup, OfflineFollowupAgent)
    assert fake.requests == []


def test_a_detector_issue_starts_from_its_template_and_claude_revises_failures(fake, make_llm):
    from iterate.agents.offline.investigation import OfflineInvestigationAgent

    # Given the real offline twins and a detector issue their templates support
    profile = make_profile()
    issue = next(c for c in make_candidates(profile) if c.type == "inconsistent_category")
    issue = issue.model_copy(
        update={
            "evidence": issue.evidence.model_copy(
                update={"stats": {"column": "state", "bad_values": ["ny"], "canonical": {"ny": "NY"}}}
            )
        }
    )
    template = OfflineInvestigationAgent()
    assert template.supports(issue)
    agents = build_agents(Settings(), llm=make_llm())
    # When the first attempt is written, Then it is the template, without a call
    first = agents.investigation.write_code(issue, profile=profile, attempts=[])
    assert first == template.write_code(issue, profile=profile, attempts=[]) and fake.requests == []
    assert agents.investigation.source == "template"
    # When that attempt failed, Then Claude writes the revision, seeing the template's code and error
    fake.add(tool_reply("run_python", {"code": "result = {'affected_rows': 1}"}))
    failed = CodeInvestigation(code=first, success=False, error="KeyError: 'state'")
    assert (
        agents.investigation.write_code(issue, profile=profile, attempts=[failed])
        == "result = {'affected_rows': 1}"
    )
    assert fake.requests[0]["messages"][1]["content"][0]["input"]["code"] == first
    assert agents.investigation.source == "llm"
    # And an LLM hypothesis always goes to Claude
    hyp = issue.model_copy(
        update={"id": "llm-1", "type": "business_rule", "source": "llm", "status": "hypothesis"}
    )
    fake.add(tool_reply("run_python", {"code": "result = {'affected_rows': 2}"}))
    assert (
        agents.investigation.write_code(hyp, profile=profile, attempts=[]) == "result = {'affected_rows': 2}"
    )


def test_a_call_budget_below_the_api_gateway_limit_falls_back_in_time(fake, make_llm):
    # Given a 60 s per-call timeout but a 1 s budget per agent call (the follow-up function sits behind
    # API Gateway's 29 s), and a model that takes 3 s
    profile = make_profile()
    issue = state_issue(make_candidates(profile))
    fake.default = slow(tool_reply("ask_question", FOLLOWUP), 6.0)
    llm = make_llm(timeout_s=60.0)
    llm._sdk()
    agents = build_agents(Settings(), llm=llm, offline=twins(), deadline_s=1.0)
    # When the follow-up agent is asked
    started = time.perf_counter()
    question = agents.followup.next_question(issue, [])
    # Then it gave up within the budget (the answer would take 6 s) and the rules asked instead
    assert time.perf_counter() - started < 4.5
    assert question == OfflineFollowupAgent().next_question(issue, [])
    assert agents.degraded_reasons[0].startswith("followup: unavailable")


def test_code_the_sandbox_policy_would_refuse_is_sent_back_before_it_runs(fake, make_llm):
    profile = make_profile()
    issue = make_candidates(profile)[0]
    fake.add(
        tool_reply("run_python", {"code": "import os\nresult = {'affected_rows': len(os.listdir('/'))}"}),
        tool_reply("run_python", {"code": "result = {'affected_rows': int((df['order_id'] == '').sum())}"}),
    )
    code = agents_for(make_llm()).investigation.write_code(issue, profile=profile, attempts=[])
    assert "os" not in code.split()
    assert "sandbox policy refuses" in json.dumps(fake.requests[1]["messages"][-1])
