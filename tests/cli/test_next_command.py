"""The summary ends with the command to try next (what `make demo` ends on), and that command runs as printed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from iterate.cli import analyze

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "orders.csv"


@pytest.mark.slow
def test_the_next_command_of_the_demo_runs_when_pasted(tmp_path: Path) -> None:
    # Given the installed command started by its path, as `make demo` starts it, with no `iterate` on PATH
    script = Path(sys.executable).parent / "iterate"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PATH"] = "/usr/bin:/bin"
    # When it analyzes the sample into a relative --out
    done = subprocess.run(
        [str(script), "analyze", str(SAMPLE), "--out", "out/demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # Then its last line is the follow-up on the summary's first issue, by the program's own path
    last = done.stdout.splitlines()[-1]
    first_handle = next(line.split()[0] for line in done.stdout.splitlines() if line.startswith("  "))
    assert last == f"next:     {shlex.quote(str(script))} followup out/demo {first_handle}"
    # and pasted into a shell in the same directory it asks the first question
    pasted = subprocess.run(
        last.removeprefix("next:").strip(),
        shell=True,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pasted.returncode == 0, pasted.stderr
    assert "[" in pasted.stdout and "?" in pasted.stdout  # a question with its option keys


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv0", "on_path", "expected"),
    [
        (".venv/bin/iterate", False, ".venv/bin/iterate"),
        ("/opt/my tools/bin/iterate", False, "'/opt/my tools/bin/iterate'"),
        ("/somewhere/bin/iterate", True, "iterate"),
        ("/usr/lib/python3/site-packages/pytest.py", False, "iterate"),
    ],
)
def test_the_program_is_named_as_the_shell_can_start_it(
    monkeypatch: pytest.MonkeyPatch, argv0: str, on_path: bool, expected: str
) -> None:
    # Given the path the program was started by, and whether PATH finds that same program
    monkeypatch.setattr(sys, "argv", [argv0, "analyze"])
    monkeypatch.setattr(analyze.shutil, "which", lambda name: argv0 if on_path else None)
    # Then the summary names it so that pasting the next command runs this program
    assert analyze.program() == expected


@pytest.mark.unit
def test_python_m_is_named_with_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/x/iterate/__main__.py", "analyze"])
    assert analyze.program() == f"{shlex.quote(sys.executable)} -m iterate"
