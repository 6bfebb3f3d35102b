"""`iterate analyze` end to end on a file whose name, header names and cells hold terminal controls: the
terminal, report.html and flags.csv get them escaped; analysis.json (JSON escapes them) keeps them exact."""

from __future__ import annotations

import csv
import json
import re

import pytest
from hostile_files import iterate_cli, run_capped

from iterate.visible import visible

pytestmark = pytest.mark.slow

# clear screen + home, a colour, BEL, an 8-bit CSI, a right-to-left override, a newline, a tab
NAME = "amount\x1b[2J\x1b[H\x1b[31m\x07\x9b2J\u202e\nnet\tEUR"
CELL = "\x1b[2J\x1b[3J\x1bc\u202egnp.exe"
HEADER = ["id", NAME, "city", "note"]
ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # Given 300 rows, units planted in the hostile-named amount column, hostile text in some notes,
    # and a file name that would clear the screen and reverse the rest of the line
    tmp = tmp_path_factory.mktemp("names")
    rows = []
    for i in range(300):
        amount = f"{10 + i % 17}.50" + (" EUR" if i % 50 == 7 else "")
        note = CELL if i % 40 == 3 else f"ok {i % 4}"
        rows.append([str(i), amount, ["Paris", "Lyon", "Nice"][i % 3], note])
    data = tmp / "orders\x1b[2J\u202e.csv"
    with data.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([HEADER, *rows])
    out = tmp / "out"
    # When the real command analyzes it
    done = run_capped(iterate_cli("analyze", str(data), "--out", str(out)), timeout=300)
    return done, out, rows


def test_the_terminal_gets_no_raw_control(run) -> None:  # type: ignore[no-untyped-def]
    done, _, _ = run
    assert done.returncode == 0, done.stderr[-3000:]
    assert ACTING.findall(done.stdout) == [] and ACTING.findall(done.stderr) == []
    assert "\t" not in done.stdout + done.stderr
    assert "orders\\x1b[2J\\u202e: 300 rows" in done.stdout  # the dataset's name, escaped


def test_the_report_gets_no_raw_control_and_shows_the_name_escaped(run) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = run
    page = (out / "report.html").read_text(encoding="utf-8")
    assert ACTING.findall(page) == []
    assert "amount\\x1b[2J\\x1b[H\\x1b[31m\\x07\\x9b2J\\u202e\\nnet\\tEUR" in page


def test_flags_name_the_hostile_column_escaped_and_plain_ones_exactly(run) -> None:  # type: ignore[no-untyped-def]
    _, out, rows = run
    text = (out / "flags.csv").read_text(encoding="utf-8")
    # no raw control but the TAB and newline inside the quoted hostile name (decided: CSV carries them)
    assert ACTING.findall(text) == []
    with (out / "flags.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["row", "column", "issue_id", "score"]
        flags = list(reader)
    shown = visible(NAME, keep="\t\n\r")
    assert {c for _, c, _, _ in flags} <= {"id", shown, "city", "note"}
    planted = {i for i, r in enumerate(rows) if r[1].endswith("EUR")}
    assert planted <= {int(r) for r, c, _, _ in flags if c == shown}


def test_analysis_json_keeps_the_exact_names(run) -> None:  # type: ignore[no-untyped-def]
    _, out, _ = run
    analysis = json.loads((out / "analysis.json").read_text(encoding="utf-8"))
    assert any(NAME in issue["affectedColumns"] for issue in analysis["issues"])
