"""Token budget: a 50-column dataset's understanding + analysis stay under 30,000 input tokens."""

from __future__ import annotations

import pytest
from agent_helpers import agents_for
from fake_anthropic import tool_reply
from llm_fixtures import make_candidates, make_profile, review_answer, understanding_answer

pytestmark = pytest.mark.unit

BUDGET = 30_000


def input_tokens(usage) -> int:
    return usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens


@pytest.mark.parametrize("rows", [1_000, 1_000_000])
def test_a_50_column_run_stays_under_the_input_budget_whatever_the_row_count(fake, make_llm, rows, capsys):
    # Given a 50-column profile with long sample values and about two detector candidates per column
    profile = make_profile(n_columns=50, rows=rows)
    candidates = make_candidates(profile)
    fake.add(
        tool_reply("record_understanding", understanding_answer(profile)),
        tool_reply("record_review", review_answer(candidates)),
    )
    agents = agents_for(make_llm())
    # When understanding and analysis run (investigations excluded)
    understanding = agents.understanding.understand(profile, instructions="Focus on revenue columns.")
    agents.analysis.analyze(candidates, profile=profile, understanding=understanding)
    # Then the input tokens (fake server's conservative estimate: 3 chars per token) stay under budget
    usage = agents.usage()
    total = input_tokens(usage["total"])
    with capsys.disabled():
        print(
            f"\n[budget] 50 columns, {rows} rows, {len(candidates)} candidates: understanding "
            f"{input_tokens(usage['understanding'])} + analysis {input_tokens(usage['analysis'])} = {total} input tokens"
        )
    assert agents.mode == "llm"
    assert 0 < total < BUDGET
