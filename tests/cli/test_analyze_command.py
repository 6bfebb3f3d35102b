"""`iterate analyze` in-process with a stand-in pipeline: progress display, summary, --json, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from iterate.cli.analyze import Progress, default_out, summary_text
from iterate.cli.main import main
from iterate.contracts import AnalysisResult, Evidence, Issue, RunMetadata
from iterate.io import DatasetReadError

pytestmark = pytest.mark.unit

STEPS = ("read", "detect", "profile", "understand", "analyze", "investigate", "report")


def make_issue(n: int, severity: str, rows: int) -> Issue:
    return Issue(
        id=f"iss-{n}",
        type="missing_values",
        severity=severity,  # type: ignore[arg-type]
        description=f"issue {n}",
        affectedColumns=[f"col\n{n}"],
        suggestedAction="fix it",
        category="quick_fixes",
        evidence=Evidence(affectedCells=rows, affectedRows=rows, affectedShare=rows / 1000),
    )


def make_result(issues: list[Issue]) -> AnalysisResult:
    return AnalysisResult(
        mode="degraded",
        issues=issues,
        summary="s",
        completedAt="2026-11-22T00:00:00Z",
        run=RunMetadata(
            runId="r",
            datasetName="orders.csv",
            sourceFile="orders.csv",
            contentHash="h",
            rowCount=1000,
            columnCount=7,
            startedAt="2026-11-22T00:00:00Z",
            durationMs=2500,
            engineVersion="0.1.0",
            degradedReasons=["LLM timed out"],
        ),
    )


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "orders.csv"
    path.write_text("a,b\n1,2\n")
    return path


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch):
    """Replace run_local; the test sets `.raises` or `.issues`, and reads `.calls`."""

    class Fake:
        def __init__(self) -> None:
            self.calls: list[dict] = []
            self.raises: BaseException | None = None
            self.issues = [make_issue(0, "low", 5), make_issue(1, "high", 3), make_issue(2, "high", 90)]

        def __call__(self, path, out, **kw):
            self.calls.append({"path": path, "out": out, **kw})
            for step in STEPS:
                kw["progress"](step, 0, 2, f"{step} starting")
                kw["progress"](step, 2, 2, f"{step}\nfinished")
            if self.raises is not None:
                raise self.raises
            result = make_result(self.issues)
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "analysis.json").write_text(result.model_dump_json(indent=2))
            return result

    fake = Fake()
    monkeypatch.setattr("iterate.pipeline.run_local", fake)
    for var in ("ITERATE_DEBUG", "ITERATE_SANDBOX_TIMEOUT_S"):
        monkeypatch.delenv(var, raising=False)
    return fake


def test_summary_lists_issues_worst_first_and_where_the_files_are(data_file, tmp_path, fake_pipeline, capsys):
    # Given a pipeline that finds one low and two high issues
    out = tmp_path / "o"
    # When the command runs
    code = main(["analyze", str(data_file), "--out", str(out), "--instructions", "EUR amounts"])
    # Then it exits 0 and the summary puts the widest high issue first, then the other high, then low
    assert code == 0
    stdout = capsys.readouterr().out
    assert "orders.csv: 1,000 rows × 7 columns" in stdout
    assert "mode: degraded (LLM timed out)" in stdout
    assert "3 issues: 2 high, 0 medium, 1 low" in stdout
    lines = stdout.splitlines()
    issue_lines = [line for line in lines if "missing_values" in line]
    assert ["90 rows" in issue_lines[0], "3 rows" in issue_lines[1], "5 rows" in issue_lines[2]] == [True] * 3
    assert f"report:   {out / 'report.html'}" in stdout
    # and the instructions reached the pipeline
    assert fake_pipeline.calls[-1]["instructions"] == "EUR amounts"


def test_the_summary_fits_one_screen_even_with_many_issues():
    result = make_result([make_issue(n, "medium", n) for n in range(300)])
    text = summary_text(result, Path("out"), width=80)
    lines = text.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    assert "… and 290 more in the report" in text


def test_json_prints_the_file_that_was_written(data_file, tmp_path, fake_pipeline, capsys):
    out = tmp_path / "o"
    assert main(["analyze", str(data_file), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == (out / "analysis.json").read_text().strip()
    assert AnalysisResult.model_validate(json.loads(captured.out)).mode == "degraded"
    assert "Writing report: done" in captured.err  # progress still on stderr


def test_quiet_silences_progress(data_file, tmp_path, fake_pipeline, capsys):
    assert main(["analyze", str(data_file), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_progress_off_a_terminal_is_one_line_per_finished_step():
    stream = io.StringIO()
    ticks = iter(range(100))
    progress = Progress(stream, quiet=False, tty=False, clock=lambda: float(next(ticks)))
    for step in STEPS:
        progress(step, 0, 3, "start")
        progress(step, 1, 3, "middle")
        progress(step, 3, 3, "over\ntwo lines")
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(STEPS)
    assert lines[0].endswith("Reading: done — over\\ntwo lines")  # a line break is shown, never made
    assert "\r" not in stream.getvalue()


class Terminal(io.StringIO):
    def __init__(self, encoding: str) -> None:
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


def test_progress_on_a_terminal_redraws_one_line_with_a_bar_and_elapsed_time():
    stream = Terminal("utf-8")
    ticks = iter([0.0, 1.5, 3.0, 4.5])
    progress = Progress(stream, quiet=False, tty=True, clock=lambda: next(ticks))
    progress("investigate", 1, 4, "issue 1")
    progress("investigate", 4, 4, "all done")
    progress("report", 1, 1, "written")
    text = stream.getvalue()
    # Then every update starts with a carriage return, only the last one ends the line
    assert text.count("\r") == 3 and text.count("\n") == 1 and text.endswith("\n")
    first = text.split("\r")[1]
    assert "Investigating" in first and "1/4" in first and "1.5s" in first
    assert "██████░░░░░░░░░░░░░░░░░░" in first  # a quarter of the 24-cell bar


def test_a_terminal_that_cannot_print_blocks_gets_an_ascii_bar():
    stream = Terminal("ascii")
    Progress(stream, quiet=False, tty=True, clock=lambda: 0.0)("read", 1, 2, "half")
    assert "############------------" in stream.getvalue()


def test_unreadable_input_is_one_line_and_exit_2(data_file, tmp_path, fake_pipeline, capsys):
    fake_pipeline.raises = DatasetReadError(data_file, "no data rows", "add rows below the header", line=1)
    code = main(["analyze", str(data_file), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "iterate: error: orders.csv, line 1: no data rows — add rows below the header\n"


def test_an_unexpected_error_is_one_line_exit_1_and_a_hint(data_file, tmp_path, fake_pipeline, capsys):
    fake_pipeline.raises = RuntimeError("boom\nsecond line")
    code = main(["analyze", str(data_file), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "RuntimeError: boom second line" in err and "ITERATE_DEBUG=1" in err


def test_iterate_debug_prints_the_traceback(data_file, tmp_path, fake_pipeline, capsys, monkeypatch):
    monkeypatch.setenv("ITERATE_DEBUG", "1")
    fake_pipeline.raises = RuntimeError("boom")
    assert main(["analyze", str(data_file), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["missing.csv", "."])
def test_missing_files_and_directories_exit_2_without_running(tmp_path, fake_pipeline, capsys, target):
    code = main(["analyze", str(tmp_path / target), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("iterate: error: ") and len(err.splitlines()) == 1
    assert fake_pipeline.calls == []


def test_a_bad_setting_in_the_environment_exits_2(data_file, fake_pipeline, capsys, monkeypatch):
    monkeypatch.setenv("ITERATE_SANDBOX_TIMEOUT_S", "soon")
    assert main(["analyze", str(data_file), "--quiet"]) == 2
    assert "sandbox_timeout_s" in capsys.readouterr().err


def test_default_out_dir_is_named_after_the_file():
    assert default_out(Path("/data/orders.csv.gz")) == Path("iterate-out/orders")
    assert default_out(Path("sales.parquet")) == Path("iterate-out/sales")
