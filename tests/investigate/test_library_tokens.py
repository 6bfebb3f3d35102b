"""The feedback loop measured: LLM mode against the fake Messages server, the same file twice, then new rows."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "llm"))  # the fake Messages server and its models

import bench_library  # noqa: E402

pytestmark = pytest.mark.slow


def test_claude_written_proofs_are_reused_for_free_and_new_rows_cost_at_most_a_fifth(tmp_path: Path) -> None:
    # Given Claude writing every investigation of the sample (a fresh response cache for every run)
    figures = bench_library.measure(tmp_path, prefer_templates=False)
    first, unchanged, grown = figures["first"], figures["unchanged"], figures["new_rows"]
    assert first["mode"] == "llm" and first["by_llm_code"] >= 10 and first["investigation_tokens"] > 10_000
    # When the unchanged file is analysed again
    # Then no investigation costs a token: every proof Claude wrote is rerun from the library
    assert unchanged["investigation_tokens"] == 0 and unchanged["code_requests"] == 0
    assert unchanged["reused"] == first["proven"] == unchanged["proven"]
    # And with 300 new rows (same columns and types), every proof but one is reused
    assert grown["reused"] >= first["proven"] - 1
    # And the report says which proofs were reused
    html = (tmp_path / "out2" / "report.html").read_text(encoding="utf-8")
    assert html.count("reused from the script library") == unchanged["reused"]
    analysis = json.loads((tmp_path / "out2" / "analysis.json").read_text())
    assert all(
        i["investigation"]["reused"]["runId"]
        for i in analysis["issues"]
        if i["investigation"]["source"] == "llm"
    )
    # And the new rows cost at most a fifth of the first run's tokens. Known debt since issue 32 (29% measured):
    # the appended rows repeat old ones, problems and all, so a wrong zip now recurs in its customer's rows; the
    # dependency evidence weakens (log-likelihood ratio 4.9 -> 3.3), fd-zip flags 6 of its 10 rows and its stored
    # proof no longer reproduces the claim; and the copied blank e-mails make a new issue. Both are re-proven.
    share = grown["investigation_tokens"] / first["investigation_tokens"]
    if share > 0.2:
        assert share <= 0.35, share  # the debt may not grow
        pytest.xfail(f"known debt: new rows cost {share:.1%} of the first run's tokens (target 20%)")


def test_in_the_default_mode_the_hypotheses_code_is_reused(tmp_path: Path) -> None:
    # Given the product's default: templates prove detector issues, Claude writes code for its hypotheses
    figures = bench_library.measure(tmp_path, prefer_templates=True)
    # Then the rerun and the grown file spend no investigation tokens at all
    assert figures["first"]["investigation_tokens"] > 0 and figures["first"]["code_requests"] >= 1
    assert figures["unchanged"]["investigation_tokens"] == 0 and figures["unchanged"]["reused"] >= 1
    assert figures["new_rows"]["investigation_tokens"] == 0


def test_a_stored_proof_a_new_value_breaks_is_where_claude_starts(tmp_path: Path) -> None:
    from claude_models import reading_claude
    from fake_anthropic import FakeAnthropic

    from iterate.agents import build_agents
    from iterate.pipeline import run_local
    from iterate.settings import Settings

    data = tmp_path / "orders.csv"
    shutil.copyfile(bench_library.SAMPLE, data)
    library = tmp_path / "library"

    def run(n: int) -> tuple[object, list[dict]]:
        with FakeAnthropic(default=reading_claude) as fake:
            settings = Settings(
                anthropic_api_key="k", anthropic_base_url=fake.url, script_library=str(library)
            )
            agents = build_agents(settings, prefer_templates=False, cache_dir=tmp_path / f"cache{n}")
            return run_local(data, tmp_path / f"out{n}", settings=settings, agents=agents), fake.requests

    # Given a first run whose Claude-written proof of the status typos lists the misspellings it saw
    first, _ = run(1)
    typos = next(i for i in first.issues if i.id == "typos-status")
    assert typos.status == "confirmed" and typos.investigation.source == "llm"
    # When new rows bring a misspelling the stored code does not know
    rows = list(csv.reader(data.open(newline="")))
    status = rows[0].index("status")
    for k, row in enumerate(rows[1:40], start=1):
        if row[status] == "delivered" and k % 3 == 0:
            row[status] = "deliverd"
    with data.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    second, requests = run(2)
    # Then the stored code ran, disagreed with the detector, and Claude was shown it as its starting point
    again = next(i for i in second.issues if i.id == "typos-status")
    asked = [r for r in requests if (r.get("tool_choice") or {}).get("name") == "run_python"]
    started = [r for r in asked if len(r["messages"]) > 1 and "no longer proves" in json.dumps(r["messages"])]
    assert len(started) == 1
    assert started[0]["messages"][1]["content"][0]["input"]["code"] == typos.investigation.code
    # And its new proof is confirmed, not reused, and replaces the stored one
    assert again.status == "confirmed" and again.investigation.reused is None
    assert again.evidence.affectedRows > typos.evidence.affectedRows
    third, requests = run(3)
    assert next(i for i in third.issues if i.id == "typos-status").investigation.reused is not None
    assert not [r for r in requests if (r.get("tool_choice") or {}).get("name") == "run_python"]
