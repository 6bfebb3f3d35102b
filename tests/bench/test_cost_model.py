"""scripts/cost_model.py: the measured parts of a run scaled to 1 MB, 1 GB and 100 GB and priced."""

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import cost_model  # noqa: E402
from iterate.aws.cost import PRICES  # noqa: E402

MEMORY = {"profile": 4096, "chunk": 2048, "understand": 512, "analyze": 1024, "investigate": 1024}
MEMORY |= {"sandbox": 2048, "report": 2048}
TIMEOUT = {"profile": 600}


def _measured() -> tuple[cost_model.Measured, cost_model.Measured]:
    steps_small = {"profile": 1.0, "understand": 0.1, "analyze": 0.1, "investigate": 0.3, "report": 0.1}
    steps_large = {"profile": 11.0, "understand": 0.1, "analyze": 0.3, "investigate": 1.0, "report": 0.3}
    small = cost_model.Measured(size_mb=1.0, steps_s=steps_small, proofs=10, load_s=0.02)
    large = cost_model.Measured(
        size_mb=201.0, steps_s=steps_large, proofs=10, load_s=0.5, parse_s_per_mb=0.01
    )
    return small, large


def test_sizes_scale_the_row_bound_work_and_not_the_tokens() -> None:
    small, large = _measured()
    rows = cost_model.model(small, large, {"tokens": 9000, "usd": 0.04}, MEMORY, TIMEOUT, 64.0)
    by = {r["input"]: r for r in rows}
    # A 1 MB file is one pass; 1 GB is 16 ranges of 64 MB, 100 GB 1,600
    assert [by[k]["chunks"] for k in ("1 MB", "1 GB", "100 GB")] == [0, 16, 1600]
    # Two transitions a chunk, six a proof, seven for the run's own states
    assert by["1 GB"]["transitions"] == 7 + 2 * 16 + 6 * 10
    # The merge of 1 GB takes (11 - 1) / 200 s per MB more than 1 MB, less the chunks' parse: 1 + 1023 * 0.05 - 10.24
    assert by["1 GB"]["merge_s"] == pytest.approx(1.0 + 1023 * 0.05 - 1024 * 0.01)
    # 100 GB does not fit one merging Lambda (memory and timeout); tokens do not grow with the rows
    assert (by["1 GB"]["fits_one_merge_lambda"], by["100 GB"]["fits_one_merge_lambda"]) == (True, False)
    assert {r["tokens"] for r in rows} == {9000}
    # Costs grow with the input, and the estimate holds at least its Lambda seconds' price
    costs = [by[k]["infra_usd"] for k in ("1 MB", "1 GB", "100 GB")]
    assert costs == sorted(costs) and costs[0] > 0
    assert by["100 GB"]["infra_usd"] >= by["100 GB"]["lambda_gb_s"] * PRICES["lambda_gb_second"]
    assert "| 100 GB | 1,600 |" in cost_model.table(rows)
