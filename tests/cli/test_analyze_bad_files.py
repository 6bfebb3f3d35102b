"""`iterate analyze` on every bad file of issue 11: exit 2 with one line naming the file and what is wrong,
in seconds, under a 4 GiB address-space cap (so that a regression fails here instead of on the machine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hostile_files import (
    big_cell_csv,
    deep_json,
    fifo,
    gzip_bomb,
    iterate_cli,
    run_capped,
    wide_csv,
    xlsx_deflate_bomb,
    xlsx_dimension_bomb,
    xlsx_entity_bomb,
)

pytestmark = pytest.mark.slow


def device(path: Path) -> Path:
    path.symlink_to("/dev/zero")  # an endless stream behind an innocent name
    return path


CASES: dict[str, tuple[str, Callable[[Path], Path], str]] = {
    # what the issue saw → (file name, builder, what the one line must say)
    "gzip bomb 8 MB → 8 GiB (was killed for memory)": (
        "orders.csv.gz",
        lambda p: gzip_bomb(p, gib=8),
        "ITERATE_MAX_COMPRESSION_RATIO",
    ),
    "xlsx dimension bomb (was killed for memory)": (
        "orders.xlsx",
        xlsx_dimension_bomb,
        "ITERATE_MAX_COLUMNS",
    ),
    "xlsx deflate bomb (ran past 300 s)": ("orders.xlsx", xlsx_deflate_bomb, "ITERATE_MAX_COMPRESSION_RATIO"),
    "xlsx entity expansion (unexpected ParseError)": ("orders.xlsx", xlsx_entity_bomb, "declares entities"),
    "FIFO (hung forever)": ("orders.csv", fifo, "named pipe"),
    "character device": ("orders.csv", device, "character device"),
    "20,000 columns × 50 rows (took 436 s)": (
        "wide.csv",
        lambda p: wide_csv(p, columns=20_000, rows=50),
        "ITERATE_MAX_COLUMNS",
    ),
    "JSON nested 500 levels (unexpected RecursionError)": (
        "events.jsonl",
        lambda p: deep_json(p, depth=500),
        "ITERATE_MAX_JSON_DEPTH",
    ),
    "JSON nested 100,000 levels": (
        "events.jsonl",
        lambda p: deep_json(p, depth=100_000),
        "ITERATE_MAX_JSON_DEPTH",
    ),
    "valid CSV with a 200 MB value (pyarrow's internal message)": (
        "blobs.csv",
        lambda p: big_cell_csv(p, cell_bytes=200_000_000),
        "ITERATE_MAX_CELL_BYTES",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_file_ends_in_one_line_exit_2_quickly_and_in_bounded_memory(tmp_path: Path, case: str) -> None:
    name, build, says = CASES[case]
    # Given the hostile file, built in the test's directory
    path = build(tmp_path / name)
    # When the real command analyzes it, its address space capped at 4 GiB
    done = run_capped(
        iterate_cli("analyze", str(path), "--out", str(tmp_path / "out")), memory_gib=4, timeout=60
    )
    # Then it exits 2 with one line that names the file and what is wrong, within seconds
    assert done.returncode == 2, done.stderr[-3000:]
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"iterate: error: {name}") and says in message
    assert done.seconds < 20, f"{case}: {done.seconds:.1f} s"
    assert done.max_rss_mb < 4096
    assert done.stdout == ""


def test_a_wide_file_is_refused_before_any_analysis(tmp_path: Path) -> None:
    # The 20,000-column file that took 436 s: refused at its header, in about the time Python starts
    path = wide_csv(tmp_path / "wide.csv", columns=20_000, rows=50)
    done = run_capped(
        iterate_cli("analyze", str(path), "--out", str(tmp_path / "out"), "--quiet"), timeout=60
    )
    assert done.returncode == 2 and "20,000 columns" in done.stderr and "10,000 allowed" in done.stderr
    assert done.seconds < 10
    assert not (tmp_path / "out" / "report.html").exists()


def test_a_limit_raised_in_the_environment_lets_the_file_through(tmp_path: Path) -> None:
    # Given a 12-column file and ITERATE_MAX_COLUMNS=10: refused, then read once the limit is raised
    import os

    path = wide_csv(tmp_path / "wide.csv", columns=12, rows=30)
    argv = iterate_cli("analyze", str(path), "--out", str(tmp_path / "out"), "--quiet")
    refused = run_capped(argv, env={**os.environ, "ITERATE_MAX_COLUMNS": "10"}, timeout=60)
    assert refused.returncode == 2 and "ITERATE_MAX_COLUMNS above 10" in refused.stderr
    allowed = run_capped(argv, env={**os.environ, "ITERATE_MAX_COLUMNS": "12"}, timeout=120)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
