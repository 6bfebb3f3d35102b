"""The README's loop, run as a shell runs it: every command works and the counts its comments state are printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def the_loop() -> str:
    """The README's block that starts with `cp samples/orders.csv`."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)```", readme, flags=re.S)
    return next(block for block in blocks if block.startswith("cp samples/orders.csv"))


def test_the_readme_loop_runs_and_prints_what_it_says(tmp_path: Path) -> None:
    # Given the README's loop, with the sample and the command where this checkout has them
    script = the_loop()
    script = script.replace("cp samples/orders.csv .", f"cp {REPO / 'samples' / 'orders.csv'} .", 1)
    script = script.replace("I=.venv/bin/iterate", f"I={Path(sys.executable).parent / 'iterate'}", 1)
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    # When a shell runs it, stopping at the first command that fails
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    # Then every command succeeded, the gate passed at the end
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "0"
    # and the counts its comments state are the ones the commands printed
    issues = re.search(r"# (\d+) issues", script)
    compared = re.search(r"(\d+ new, \d+ resolved)", script)
    assert issues and compared
    assert f"{issues.group(1)} issues:" in done.stdout
    assert f"since the last run of this file: {compared.group(1)}" in done.stdout
