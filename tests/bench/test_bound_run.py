"""scripts/bound_run.py: a command and everything it starts, inside a hard memory limit."""

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bound_run  # noqa: E402

# A child of the command allocates and touches 300 MiB, holds it half a second (the peak is sampled every 0.05 s:
# a grandchild that exits at once was seen at 244 MiB on a loaded machine), then exits 0: the limit must hold
# every process.
ALLOCATE = [
    sys.executable,
    "-c",
    "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', "
    "'import time; b = bytearray(300 * 2**20); b[::4096] = bytes(len(b[::4096])); time.sleep(0.5); "
    'print("done")\']))',
]


def _run(limit_mb: int) -> bound_run.Bounded:
    try:
        return bound_run.run_bounded(ALLOCATE, limit_mb * 2**20)
    except OSError as exc:
        pytest.skip(f"no writable memory cgroup here: {exc}")


def test_a_run_over_the_limit_is_killed_and_one_under_it_finishes() -> None:
    over = _run(128)
    assert not over.finished() and over.oom_kills >= 1 and "done" not in over.output
    under = _run(1024)
    assert under.finished() and "done" in under.output and under.oom_kills == 0
    # The grandchild's 300 MiB were charged to the group: the sample saw them.
    assert under.peak_anon >= 250 * 2**20


def test_the_proofs_line_counts_proofs_not_statuses(tmp_path: Path) -> None:
    import json

    analysis = tmp_path / "analysis.json"
    issues = [
        {
            "id": "shape-phone",
            "status": "confirmed",
            "investigation": {"success": False, "stopped": "memory", "attempts": 2},
        },
        {"id": "duplicates-exact", "status": "confirmed", "investigation": {"success": True, "attempts": 2}},
        {"id": "typos-city", "status": "confirmed", "investigation": {"success": True, "attempts": 1}},
        {"id": "notes", "status": "confirmed", "investigation": None},  # not proven by code
    ]
    analysis.write_text(json.dumps({"issues": issues}))
    assert bound_run.proofs_line(analysis) == (
        "proofs: 2 of 3 succeeded; not: shape-phone (memory); ran more than once: shape-phone, duplicates-exact"
    )
    assert bound_run.proofs_line(tmp_path / "missing.json") is None
