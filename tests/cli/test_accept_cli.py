"""iterate accept: an accepted issue is still reported, marked, and never fails --fail-on; matched by values."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from iterate.contracts import AcceptedFile, AnalysisResult

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "orders.csv"


def iterate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iterate", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def analysis(out: Path) -> AnalysisResult:
    return AnalysisResult.model_validate_json((out / "analysis.json").read_text(encoding="utf-8"))


def with_rows(src: Path, dst: Path, price: str, n: int) -> None:
    """`src` plus `n` copies of its first row with a new order id and `price` as the unit price."""
    with src.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    extra = [rows[0] | {"order_id": f"SO-9{k:05d}", "unit_price": price} for k in range(n)]
    with dst.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows + extra)


def test_analyze_accept_reanalyze_gates_only_the_issues_not_accepted(tmp_path):
    # Given the sample in a data directory, analysed with a gate at medium (three medium issues: repeated rows, a
    # zip its customer's other orders contradict, a misspelt city)
    data = tmp_path / "data"
    data.mkdir()
    src = data / "orders.csv"
    shutil.copy(SAMPLE, src)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "out"
    first = iterate("analyze", str(src), "--out", str(out), "--quiet", "--fail-on", "medium")
    assert first.returncode == 3
    medium = sorted(i.id for i in analysis(out).issues if i.severity == "medium")
    assert medium == ["duplicates-exact", "fd-zip", "typos-city"]
    # When the first medium issue is accepted
    done = iterate("accept", str(out), medium[0], "--reason", "known, fixed downstream", "--by", "ana")
    assert done.returncode == 0, done.stderr
    # Then the acceptance lives beside the data, without run ids or data values
    stored = AcceptedFile.model_validate_json(
        (data / ".iterate" / "accepted.json").read_text(encoding="utf-8")
    )
    assert [a.issueId for a in stored.accepted] == [medium[0]]
    text = (data / ".iterate" / "accepted.json").read_text(encoding="utf-8")
    assert "$24.50" not in text and analysis(out).run.runId not in text  # type: ignore[union-attr]
    # and a re-analysis still fails the gate, on the other issues only
    second = iterate("analyze", str(src), "--out", str(out), "--quiet", "--fail-on", "medium")
    assert second.returncode == 3
    assert "iterate: gate: 2 issues " in second.stderr
    assert any(m in second.stderr for m in medium[1:])  # e.g. the first of them by rank
    # and the accepted issue is still reported, marked with the reason, who and when
    marked = {i.id: i for i in analysis(out).issues}
    mark = marked[medium[0]].accepted
    assert (
        mark is not None and mark.reason == "known, fixed downstream" and mark.by == "ana" and not mark.grown
    )
    assert marked[medium[1]].accepted is None and marked[medium[2]].accepted is None
    assert "known, fixed downstream" in (out / "report.html").read_text(encoding="utf-8")
    # When the others are accepted too, the gate passes and the summary says what it let through
    for other in medium[1:]:
        assert iterate("accept", str(out), other, "--reason", "ok for now").returncode == 0
    third = iterate("analyze", str(src), "--out", str(out), "--fail-on", "medium")
    assert third.returncode == 0, third.stderr
    assert "accepted: 3 issues" in third.stdout and "3 accepted issues at medium" in third.stderr
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before  # the input is never modified


def test_more_rows_with_the_same_values_stay_accepted_but_grown_and_a_new_value_does_not(tmp_path):
    # Given the unit issue of the sample accepted
    shutil.copy(SAMPLE, tmp_path / "orders.csv")
    out = tmp_path / "out"
    assert iterate("analyze", str(tmp_path / "orders.csv"), "--out", str(out), "--quiet").returncode == 0
    unit = next(i for i in analysis(out).issues if i.type == "unit_in_number")
    assert iterate("accept", str(out), unit.id, "--reason", "legacy prices").returncode == 0
    # When the file gains rows holding a unit price already seen when it was accepted
    grown = tmp_path / "grown"
    grown.mkdir()
    with_rows(SAMPLE, grown / "orders.csv", "$24.50", 10)
    shutil.copytree(tmp_path / ".iterate", grown / ".iterate")
    run = iterate(
        "analyze", str(grown / "orders.csv"), "--out", str(grown / "out"), "--quiet", "--fail-on", "low"
    )
    # Then it is still accepted, flagged as grown
    found = next(i for i in analysis(grown / "out").issues if i.type == "unit_in_number")
    assert found.accepted is not None and found.accepted.grown
    assert found.accepted.cellsWhenAccepted == unit.evidence.affectedCells  # type: ignore[union-attr]
    assert unit.id not in run.stderr
    assert "grew since accepted" in (grown / "out" / "report.html").read_text(encoding="utf-8")
    # When instead it gains a unit price never seen when accepting
    new = tmp_path / "new"
    new.mkdir()
    with_rows(SAMPLE, new / "orders.csv", "$77.00", 10)
    run = iterate(
        "analyze", str(new / "orders.csv"), "--out", str(new / "out"), "--quiet", "--fail-on", "low",
        "--accepted", str(tmp_path / ".iterate" / "accepted.json"),
    )  # fmt: skip
    # Then the acceptance does not cover it: the gate fails on it (a unit written another way is low severity)
    found = next(i for i in analysis(new / "out").issues if i.type == "unit_in_number")
    assert found.accepted is None and found.severity == "low"
    assert run.returncode == 3


def test_bad_usage_gets_a_clear_error(tmp_path):
    shutil.copy(SAMPLE, tmp_path / "orders.csv")
    out = tmp_path / "out"
    # Given no run yet: accept says which file is missing and what to run
    none = iterate("accept", str(out), "x", "--reason", "r")
    assert none.returncode == 2 and "iterate analyze" in none.stderr
    assert iterate("analyze", str(tmp_path / "orders.csv"), "--out", str(out), "--quiet").returncode == 0
    # An unknown issue id lists the run's ids
    bad = iterate("accept", str(out), "no-such-issue", "--reason", "r")
    assert bad.returncode == 2 and "no such issue" in bad.stderr and "units-unit_price" in bad.stderr
    # An empty reason is refused
    assert iterate("accept", str(out), "units-unit_price", "--reason", "  ").returncode == 2
    # A damaged accepted file stops the analysis with its path, and is not overwritten
    (tmp_path / ".iterate").mkdir()
    (tmp_path / ".iterate" / "accepted.json").write_text(json.dumps({"version": 1, "accepted": [{}]}))
    run = iterate("analyze", str(tmp_path / "orders.csv"), "--out", str(out), "--quiet")
    assert run.returncode == 2 and "accepted.json" in run.stderr and "fix it or delete it" in run.stderr
    missing = iterate("analyze", str(tmp_path / "orders.csv"), "--accepted", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json" in missing.stderr
