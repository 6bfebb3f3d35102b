"""Issue 34's loop end to end on real tables: analyze -> followup (each fixable issue's first choice that
changes data, through the CLI's --answer / --json) -> fix --yes -> analyze the version -> export (gx, soda) ->
the real engines on the corrected file: every failure-level check passes, and the fixed issues are resolved.

What no choice fixes (a neighbours issue offers review or keep) is kept and accepted (`iterate accept`), as an
owner who looked at it would; a second round fixes what the first fixes revealed (a trimmed 'Delivered ' is
then a case variant of 'delivered'). Five tables of different shapes, staged from installed packages.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import engines
import matrix
import pytest

from iterate.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import stage_realdata as staging

pytestmark = [pytest.mark.slow, pytest.mark.engines]

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"
# Shapes: dated records with free-text comments; numbers with gaps; contact records (phones, postcodes,
# e-mails); coordinates and codes; a small table with NA written out.
TABLES = ("penguins_raw", "vega_cars", "gt_peeps", "nyc_airports", "pn_msleep")
NOT_A_FIX = {"flag_for_review", "keep", "ask_next"}
ROUNDS = 3


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def answer(run: Path, issue_id: str) -> bool:
    """Answer the issue's questions with the first option whose action changes data; False when none does
    (or followup refuses it), and the issue is kept."""
    code, out, err = cli("followup", run, issue_id, "--json")
    assert code == 0, err
    step = json.loads(out)
    while step["action"] is None:
        question = step["question"]
        actions = question.get("onResponse") or {}
        keys = [o["key"] for o in question["options"]]
        chosen = [k for k in keys if (actions.get(k) or {}).get("action", "ask_next") not in NOT_A_FIX]
        chosen = chosen or [k for k in keys if (actions.get(k) or {}).get("action") == "ask_next"]
        if not chosen:
            return False
        code, out, err = cli("followup", run, issue_id, "--answer", chosen[0], "--json")
        if code != 0:  # refused now because fix could not apply it (#1): keep it
            assert "cannot be applied" in err, err
            return False
        step = json.loads(out)
    return step["action"]["action"] not in NOT_A_FIX


def loop(data: Path, run: Path) -> tuple[Path, dict, set[str]]:
    """Rounds of analyze -> answer -> fix until nothing fixable is left; (the last file, its analysis, the
    issues fixed on the way)."""
    code, _, err = cli("analyze", data, "--out", run, "--quiet")
    assert code == 0, err
    fixed: set[str] = set()
    for _ in range(ROUNDS):
        analysis = json.loads((run / "analysis.json").read_text())
        fixable = [i["id"] for i in analysis["issues"] if i["accepted"] is None and answer(run, i["id"])]
        for issue in analysis["issues"]:
            if issue["id"] not in fixable and issue["accepted"] is None and issue["status"] == "confirmed":
                code, _, err = cli("accept", run, issue["id"], "--reason", "reviewed: kept as it is")
                assert code == 0, err
        if not fixable:
            break
        code, _, err = cli("fix", run, "--yes")
        assert code == 0, err
        versions = sorted((run / "versions").iterdir(), key=lambda p: int(p.name[1:]))
        data = versions[-1] / json.loads((versions[-1] / "version.json").read_text())["file"]
        applied = json.loads((versions[-1] / "version.json").read_text())["issuesApplied"]
        fixed |= {a["id"] for a in applied if a["action"]["action"] not in NOT_A_FIX}
        code, _, err = cli("analyze", data, "--out", run, "--quiet")
        assert code == 0, err
        again = json.loads((run / "analysis.json").read_text())
        # The issues fixed in this round are resolved, none reported again
        assert {a["id"] for a in applied if a["action"]["action"] not in NOT_A_FIX} <= set(
            again["comparison"]["resolved"]
        ), (data, again["comparison"])
    # Accepting writes beside the input: the last round's issues are accepted for the file analysed last
    code, _, err = cli("analyze", data, "--out", run, "--quiet")
    assert code == 0, err
    return data, json.loads((run / "analysis.json").read_text()), fixed


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    dest = tmp_path_factory.mktemp("realdata")
    staging.stage(dest, list(TABLES))
    return [dest / f"{name}.csv" for name in TABLES] + [SAMPLE]


def test_the_loop_converges_on_real_tables_and_the_gate_passes_the_corrected_file(
    tables: list[Path], tmp_path: Path
) -> None:
    finals: list[tuple[str, Path, Path]] = []
    fixes: list[int] = []
    for source in tables:
        # Given a copy of the table (accept and fix write beside it)
        work = tmp_path / source.stem
        work.mkdir()
        data = work / source.name
        shutil.copy(source, data)
        # When the loop runs until nothing fixable is left
        final, analysis, fixed = loop(data, work / "run")
        # Then no confirmed issue is left that someone did not accept
        left = [i["id"] for i in analysis["issues"] if i["status"] == "confirmed" and i["accepted"] is None]
        assert left == [], (source.name, left)
        finals.append((source.stem, work / "run", final))
        fixes.append(len(fixed))
    # And the loop fixed something on most tables (it is not vacuous)
    assert len(finals) == 6 and sum(1 for n in fixes if n) >= 4, fixes
    # And the checks exported from each final run pass on its corrected file, every failure-level one
    # (one engine process for every job: GX and Soda take seconds to import)
    exported = [
        (name, engine, *matrix.export_job(run, engine, final, run.parent / engine))
        for engine in ("gx", "soda")
        for name, run, final in finals
    ]
    results = engines.run_batch([job for *_, job in exported])
    for (name, engine, checks, _), result in zip(exported, results, strict=True):
        assert result["errors"] == [], (name, engine, result["errors"])
        got = matrix.outcome(engine, checks, result)
        failed = [c.id for c in checks if c.level == "fail" and got[c.id] != "pass"]
        assert failed == [], (name, engine, failed)
        assert sum(1 for c in checks if c.level == "fail") >= 2
