"""Smoke test of the benchmark scripts on a 2,000-row file: generator shape and determinism, bench numbers."""

import json
import sys
from pathlib import Path

import pyarrow.csv as pacsv
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench  # noqa: E402
import gen_bench  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "bench_2k.csv"
    gen_bench.write(path, n_rows=2000, seed=7)
    return path


def test_given_a_seed_when_generated_then_20_columns_2000_rows_and_planted_errors(small_csv: Path):
    table = pacsv.read_csv(small_csv)
    assert (table.num_rows, table.num_columns) == (2000, 20)
    planted = json.loads(small_csv.with_suffix(".planted.json").read_text())
    assert planted["exact_duplicate_rows"] == 10
    assert planted["zip_city_violation"] > 0
    # the zip codes keep their leading zeros in the text
    text = small_csv.read_text()
    assert any(line.split(",")[14].startswith("0") for line in text.splitlines()[1:] if "," in line)


def test_given_the_same_seed_when_generated_twice_then_identical_bytes(small_csv: Path, tmp_path: Path):
    again = tmp_path / "again.csv"
    gen_bench.write(again, n_rows=2000, seed=7)
    assert again.read_bytes() == small_csv.read_bytes()


def test_given_a_small_file_when_benchmarked_then_numbers_and_json_are_written(
    small_csv: Path, tmp_path: Path
):
    results = bench.run(small_csv, tmp_path / "out", repeats=1, with_analyze=False, with_sandbox=False)
    assert results["bare"]["rows"] == 2000 and results["bare"]["best_s"] > 0
    assert results["profile"]["rows"] == 2000 and results["profile"]["profile_s"] > 0
    assert results["profile"]["peak_mb"] > 0
    saved = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert saved["profile"]["rows"] == 2000
    # what memory new to a process costs here, beside what rewriting it costs (both measured, both positive)
    assert saved["first_touch"]["first_gb_s"] > 0 and saved["first_touch"]["again_gb_s"] > 0


def test_given_chunks_when_benchmarked_then_workers_1_and_2_agree_and_the_process_ratio_is_printed(
    small_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setenv("ITERATE_CHUNK_BYTES", "20000")  # the 2,000-row file in ~9 ranges
    results = bench.run(small_csv, tmp_path / "out", repeats=1, with_sandbox=False)
    assert results["workers"]["workers 1"]["rc"] == 0 and results["workers"]["workers 2"]["rc"] == 0
    assert results["workers"]["identical"] is True
    assert results["process_ratio"] == round(
        results["analyze"]["wall_s"] / results["bare_process"]["wall_s"], 2
    )
    printed = capsys.readouterr().out
    assert "iterate analyze --workers 2" in printed and "whole process against whole process" in printed
