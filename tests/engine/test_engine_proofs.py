"""Proofs at scale, locally (DuckDB): a model's proof runs on the bounded sample; where its claim is the
issue's predicate the count shown is the engine's over every row, and where it is not (a hypothesis of the
model's own) the report says the count is the sample's and how large the sample was."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from proof_agents import BAD, HYPOTHESIS, ROWS, model_agents, write_orders

from iterate.settings import Settings

pytestmark = pytest.mark.slow


def test_a_models_proof_counts_over_every_row_where_it_is_the_predicate_else_says_sample(
    tmp_path: Path,
) -> None:
    from iterate.pipeline import run_local

    # Given 6,000 rows analysed on the engine path with a 1,000-row sample, and a model writing the proofs
    src = tmp_path / "orders.csv"
    expensive = write_orders(src)
    env = {
        "ITERATE_ENGINE": "always",
        "ITERATE_ENGINE_SAMPLE_ROWS": "1000",
        "ITERATE_INVESTIGATION_WORKERS": "1",
    }
    settings = Settings.from_env({**os.environ, **env})
    # When the run ends
    result = run_local(src, tmp_path / "out", settings=settings, agents=model_agents(settings))
    # Then the placeholder issue's proof is the model's code, run on the sample, and its claim there is the
    # predicate's: the count shown is the engine's over all 6,000 rows
    quantity = next(i for i in result.issues if i.source == "detector" and i.affectedColumns == ["quantity"])
    assert quantity.investigation is not None and quantity.investigation.source == "llm"
    assert quantity.status == "confirmed"
    stats = quantity.evidence.stats if quantity.evidence else {}
    assert quantity.affectedRows == stats["proof_population_rows"] == len(BAD)
    assert 0 < stats["proof_sample_rows"] == quantity.investigation.output["affected_rows"] < len(BAD)
    assert f"over all 6,000 rows: {len(BAD)}" in stats["proof_recount"]
    assert quantity.evidence is not None and quantity.evidence.sampleRows is None
    # And the model's own hypothesis, which no predicate counts, shows the sample's count as the sample's
    hypothesis = next(i for i in result.issues if i.id == HYPOTHESIS)
    assert hypothesis.investigation is not None and hypothesis.investigation.success
    assert hypothesis.status == "unverified"
    ev = hypothesis.evidence
    assert ev is not None
    sample = int(stats["sample_rows"])
    assert 1000 <= sample < ROWS and ev.sampleRows == sample
    claimed = hypothesis.investigation.output["affected_rows"]
    assert ev.affectedRows == claimed and claimed < expensive  # a sample's count, not the 6,000 rows'
    assert ev.affectedShare == pytest.approx(claimed / sample, abs=1e-6)
    assert (
        f"Counted on a sample of {sample:,} of the 6,000 rows: {claimed:,} rows there"
        in hypothesis.description
    )
    # And its examples (places in the sample where its code ran) name the file's rows that hold them
    with src.open() as fh:
        prices = [r["price"] for r in csv.DictReader(fh)]
    assert len(ev.examples) == 5
    assert all(prices[e.row] == e.value and int(e.value) > 45 for e in ev.examples)
    # And the report says so where it shows the count
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"of a {sample:,}-row sample" in html
    assert f"rows of a sample of {sample:,} rows" in html
    assert "counted on the sample only, not over all 6,000 rows" in html
    # And so does the terminal summary: the hypothesis's rows as "N of S", with what that means
    from iterate.cli.analyze import summary_text

    text = summary_text(result, tmp_path / "out", width=200)
    assert f"{claimed:,} of {sample:,}" in text and "counted on a sample of S rows only" in text
