"""`iterate analyze` as a shell runs it: the --out directory, --json, --quiet, stdin, pipes, the times shown."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "orders.csv"


def iterate(
    *args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "iterate", *args],
        capture_output=True,
        input=stdin,
        cwd=cwd,
        timeout=300,
        env=env,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    )


def offline_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}


# ---- the --out directory ------------------------------------------------------------------------------


def test_a_rerun_clears_the_last_runs_files_so_followup_starts_afresh(tmp_path):
    # Given a run whose follow-up conversation on a typo issue was answered
    out = tmp_path / "run"
    assert iterate("analyze", str(SAMPLE), "--out", str(out), cwd=tmp_path).returncode == 0
    assert "[standardize]" in iterate("followup", str(out), "typos-city", cwd=tmp_path).stdout
    answered = iterate("followup", str(out), "typos-city", "--answer", "standardize", cwd=tmp_path)
    assert answered.stdout.startswith("Fix action: standardize_values")
    # and files of the run's kind that this run will not write, and a file of the user's
    (out / "scripts" / "gone-issue.py").write_text("stale\n")
    (out / "investigations" / "gone-issue.json").write_text("{}\n")
    (out / "notes.txt").write_text("mine\n")
    # When the same file is analyzed into the same directory
    again = iterate("analyze", str(SAMPLE), "--out", str(out), cwd=tmp_path)
    # Then it says it replaced the previous run, and nothing of that run is left but what it rewrote
    assert again.returncode == 0, again.stderr
    assert f"replacing the previous run of orders.csv in {out}" in again.stderr
    assert not (out / "followups").exists()
    assert not (out / "scripts" / "gone-issue.py").exists()
    assert not (out / "investigations" / "gone-issue.json").exists()
    assert (out / "notes.txt").read_text() == "mine\n"
    # And the follow-up asks its first question again instead of answering from the old run
    asked = iterate("followup", str(out), "typos-city", cwd=tmp_path)
    assert asked.returncode == 0 and "[standardize]" in asked.stdout
    # And the new run is still compared with the one it replaced
    assert json.loads((out / "analysis.json").read_text())["comparison"] is not None


def test_a_directory_of_another_input_is_refused_untouched(tmp_path):
    # Given a run of orders.csv
    out = tmp_path / "run"
    assert iterate("analyze", str(SAMPLE), "--out", str(out), cwd=tmp_path).returncode == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    other = tmp_path / "customers.csv"
    other.write_text("id,name\n1,Ann\n2,Bob\n3,Cy\n")
    # When another file is analyzed into it
    done = iterate("analyze", str(other), "--out", str(out), cwd=tmp_path)
    # Then it is refused on one line naming both files, and the directory is as it was
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "holds the run of orders.csv, not of customers.csv" in done.stderr
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_a_non_empty_directory_without_a_run_is_refused_untouched(tmp_path):
    # Given a project directory with its own scripts/ folder
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    (project / "scripts" / "etl.py").write_text("print('mine')\n")
    # When it is given as --out
    done = iterate("analyze", str(SAMPLE), "--out", str(project), cwd=tmp_path)
    # Then it is refused, and nothing in it is touched or added
    assert done.returncode == 2 and "holds no Iterate run" in done.stderr
    assert sorted(p.name for p in project.rglob("*")) == ["etl.py", "scripts"]


# ---- --json, --quiet, stdin, pipes --------------------------------------------------------------------


def test_json_without_out_writes_no_files(tmp_path):
    # When --json is asked for without --out
    done = iterate("analyze", str(SAMPLE), "--json", "--quiet", cwd=tmp_path)
    # Then stdout is the analysis and the working directory holds nothing new (no ./iterate-out/)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run"]["rowCount"] == 1503
    assert list(tmp_path.iterdir()) == []
    assert done.stderr == ""


def test_quiet_prints_nothing_but_writes_the_run(tmp_path):
    done = iterate("analyze", str(SAMPLE), "--out", str(tmp_path / "run"), "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert (tmp_path / "run" / "report.html").is_file()


def test_quiet_still_prints_errors(tmp_path):
    done = iterate("analyze", str(tmp_path / "missing.csv"), "--quiet", cwd=tmp_path)
    assert done.returncode == 2 and "file not found" in done.stderr and done.stdout == ""


def test_a_dash_reads_the_data_from_stdin(tmp_path):
    # When the sample comes on stdin
    done = iterate(
        "analyze",
        "-",
        "--out",
        str(tmp_path / "run"),
        "--json",
        "--quiet",
        cwd=tmp_path,
        stdin=SAMPLE.read_bytes(),
    )
    # Then it is analyzed like the file, under the name "stdin"
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run"]
    assert (run["rowCount"], run["columnCount"], run["sourceFile"]) == (1503, 16, "stdin")
    # And an empty stdin is one line and exit 2, like an empty file
    empty = iterate("analyze", "-", "--out", str(tmp_path / "run2"), cwd=tmp_path, stdin=b"")
    assert empty.returncode == 2 and empty.stderr.startswith("iterate: error: stdin: file is empty")


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # Given `iterate analyze f.csv --quiet --json | head -2`
    proc = subprocess.Popen(
        [sys.executable, "-m", "iterate", "analyze", str(SAMPLE), "--quiet", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # When the reader takes two lines and closes the pipe
    head = [proc.stdout.readline(), proc.stdout.readline()]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    # Then the command ends quietly with the code of a command stopped by SIGPIPE, no traceback
    assert head[0] == b"{\n" and b'"mode"' in head[1]
    assert "Traceback" not in err and "BrokenPipeError" not in err and err == ""
    assert code == 141


# ---- what the output says -----------------------------------------------------------------------------


def test_instructions_offline_are_said_to_change_nothing(tmp_path):
    out = tmp_path / "run"
    done = iterate(
        "analyze",
        str(SAMPLE),
        "--out",
        str(out),
        "--instructions",
        "amounts in EUR",
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 0, done.stderr
    assert "--instructions changes nothing offline" in done.stderr
    assert "instructions: not used offline" in done.stdout
    assert json.loads((out / "analysis.json").read_text())["run"]["instructions"] == "amounts in EUR"


def test_the_summary_and_the_progress_end_on_the_same_time(tmp_path):
    done = iterate("analyze", str(SAMPLE), "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = re.search(r"orders: 1,503 rows × 16 columns, (\d+\.\d)s", done.stdout)
    finished = re.search(r"(\d+\.\d)s 100%  Done", done.stderr)
    assert summary is not None and finished is not None
    assert summary.group(1) == finished.group(1)
    # And the run's own duration is counted from the same start (it ends when the report is written)
    took = json.loads((tmp_path / "run" / "analysis.json").read_text())["run"]["durationMs"] / 1000
    assert took <= float(summary.group(1)) + 0.05
    # And the steps off a terminal end with the whole run's share, never a bare 0/1
    assert "0/1" not in done.stderr and "100%  Writing report: done" in done.stderr


def test_every_issue_in_the_summary_has_a_proof_status(tmp_path):
    # Given a file with a ragged row (the reader's own issue, which no template investigates) and a typo
    data = tmp_path / "cities.csv"
    rows = (
        ["id,city"]
        + [f"{n},{'Paris' if n % 2 else 'Lyon'}" for n in range(200)]
        + ["200,Parsi", "201,Lyon,extra"]
    )
    data.write_text("\n".join(rows) + "\n")
    done = iterate("analyze", str(data), "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    issue_lines = [line for line in done.stdout.splitlines() if line.startswith("  ") and "…" not in line]
    assert issue_lines
    status = re.compile(r"%  (proven|seen on read|not investigated|proof failed|unconfirmed|unverified) ")
    for line in issue_lines:
        assert status.search(line), line
    assert any("%  seen on read " in line for line in issue_lines)
