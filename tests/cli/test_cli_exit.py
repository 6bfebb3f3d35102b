"""The program's exit: main()'s code, the exit handlers run, the streams flushed, no interpreter teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys
atexit.register(lambda: print("exit handlers ran", flush=True))
sys.argv = ["iterate", "analyze", sys.argv[1], "--quiet"]
from iterate.cli import entry
print("buffered, not yet flushed", end="")
entry()
print("never printed")
"""


def test_entry_ends_with_mains_code_after_the_exit_handlers_and_a_flush(tmp_path: Path) -> None:
    missing = tmp_path / "missing.csv"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(missing)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2  # a file that cannot be read
    assert proc.stdout.startswith("buffered, not yet flushed")
    assert "exit handlers ran" in proc.stdout and "never printed" not in proc.stdout
    assert "missing.csv" in proc.stderr


def test_python_m_iterate_keeps_the_exit_code(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "iterate", "analyze", str(tmp_path / "none.csv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr
