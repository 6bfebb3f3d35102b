"""`iterate analyze` end to end on a file whose cells and headers are hostile: report and flags stay safe."""

from __future__ import annotations

import csv
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from iterate.contracts import AnalysisResult

pytestmark = pytest.mark.slow

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
HEADER = ["id", "=HYPERLINK(1)", "city, state", IMG, "amount"]


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.handlers: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.names.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append(name)
            if name in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, list[list[str]]]:
    # Given 300 rows with planted problems: hostile text in cells, a missing-value marker, a unit in a number
    tmp = tmp_path_factory.mktemp("hostile")
    rows = []
    for i in range(300):
        city = ["Paris, FR", "Lyon, FR", "Nice, FR"][i % 3]
        amount = f"{10 + i % 17}.50"
        if i % 50 == 7:
            amount = f"{amount} EUR"
        text = SCRIPT if i % 40 == 3 else ("N/A" if i % 30 == 5 else f"ok {i % 4}")
        rows.append([str(i), ["a", "b"][i % 2], city, text, amount])
    data = tmp / "hostile.csv"
    with data.open("w", newline="") as fh:
        csv.writer(fh).writerows([HEADER, *rows])
    out = tmp / "out"
    # When it is analyzed by the real command
    done = subprocess.run(
        [sys.executable, "-m", "iterate", "analyze", str(data), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, out, rows


def test_it_succeeds_and_writes_everything(run):
    done, out, _ = run
    assert done.returncode == 0, done.stderr
    for name in ("analysis.json", "profile.json", "understanding.json", "flags.csv", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert "issues:" in done.stdout and str(out / "report.html") in done.stdout
    # progress went to stderr, one line per step (stderr is not a terminal here)
    assert "Writing report: done" in done.stderr


def test_the_report_runs_no_injected_markup(run):
    _, out, _ = run
    page = (out / "report.html").read_text(encoding="utf-8")
    tags = Tags()
    tags.feed(page)
    assert tags.names.count("script") == 1 and "img" not in tags.names
    assert tags.handlers == [] and tags.external == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # shown, as text


def test_flags_use_the_exact_header_names_except_formula_like_ones(run):
    _, out, rows = run
    with (out / "flags.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        assert next(reader) == ["row", "column", "issue_id", "score"]
        flags = list(reader)
    analysis = AnalysisResult.model_validate_json((out / "analysis.json").read_text())
    ids = {i.id for i in analysis.issues}
    allowed = {h if not h.startswith("=") else "'" + h for h in HEADER}
    assert flags
    for row, column, issue_id, score in flags:
        assert 0 <= int(row) < len(rows) and column in allowed and issue_id in ids and 0 <= float(score) <= 1
    keys = [
        (int(r), HEADER.index(c.removeprefix("'")) if c.startswith("'=") else HEADER.index(c))
        for r, c, _, _ in flags
    ]
    assert keys == sorted(keys)
    # the planted units in the amount column are flagged on their rows
    planted = {i for i, r in enumerate(rows) if r[4].endswith("EUR")}
    assert planted <= {int(r) for r, c, _, _ in flags if c == "amount"}


def test_json_output_is_the_analysis(run, tmp_path):
    _, out, _ = run
    data = out.parent / "hostile.csv"
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "iterate",
            "analyze",
            str(data),
            "--out",
            str(tmp_path / "o"),
            "--json",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0 and again.stderr == ""
    result = AnalysisResult.model_validate_json(again.stdout)
    assert result.run is not None and result.run.rowCount == 300 and result.run.columnCount == len(HEADER)
