"""Token budget: a 50-column dataset's understanding + analysis stay under 30,000 input tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import agents_for
from fake_anthropic import tool_reply
from llm_fixtures import make_candidates, make_profile, review_answer, understanding_answer

from iterate.settings import Settings

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


SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


@pytest.mark.slow
def test_a_real_50_column_file_stays_under_the_budget(fake, make_llm, tmp_path, capsys):
    """The benchmark files side by side (20 + 11 + 11 columns) plus 8 sample columns: real profiler output,
    real detector candidates, the real prompts."""
    import csv

    from test_agents_pipeline_e2e import smart_claude

    from iterate.pipeline import RunContext, analyze_step, profile_step, understand_step
    from iterate.storage.local import LocalArtifactStore

    sources = [(SHARED / "hospital" / "dirty.csv", 20), (SHARED / "beers" / "dirty.csv", 11)]
    sources += [(SHARED / "food" / "dirty.csv", 11), (SAMPLE, 8)]
    if not all(p.exists() for p, _ in sources):
        pytest.skip("benchmark datasets not present beside the repo")
    # Given a 1,000-row, 50-column file built from real dirty datasets
    tables = []
    for path, width in sources:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))[:1001]
        tables.append([[f"{path.parent.name}_{h}" for h in rows[0][:width]], *[r[:width] for r in rows[1:]]])
    wide = tmp_path / "wide.csv"
    with wide.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([[cell for t in tables for cell in t[i]] for i in range(1001)])
    fake.default = smart_claude
    agents = agents_for(make_llm())
    ctx = RunContext(
        run_id="budget",
        store=LocalArtifactStore(tmp_path / "run"),
        agents=agents,
        sandbox=None,  # type: ignore[arg-type]
        settings=Settings(),
    )
    # When profile, understanding and analysis run
    profile_step(ctx, wide)
    understand_step(ctx)
    analyze_step(ctx)
    # Then understanding + analysis stay under the budget
    usage = agents.usage()
    total = input_tokens(usage["total"])
    with capsys.disabled():
        print(
            f"\n[budget] real 50-column file: understanding {input_tokens(usage['understanding'])} + analysis "
            f"{input_tokens(usage['analysis'])} = {total} input tokens"
        )
    assert agents.mode == "llm" and fake.tool_names() == ["record_understanding", "record_review"]
    assert 0 < total < BUDGET
