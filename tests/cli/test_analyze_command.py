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


def test_progress_on_a_terminal_redraws_one_line_with_the_whole_runs_bar():
    # Given a terminal and a clock
    stream = Terminal("utf-8")
    ticks = iter([1.5, 3.0, 4.5, 5.0])
    progress = Progress(stream, quiet=False, tty=True, clock=lambda: next(ticks), started=0.0, columns=200)
    # When the steps before investigate are done, then 1 of 4 investigations, then all, then the report
    progress("investigate", 1, 4, "issue 1")
    progress("investigate", 4, 4, "all done")
    progress("report", 1, 1, "written")
    progress.finish(5.0)
    text = stream.getvalue()
    # Then every update starts with a carriage return, only the last one ends the line
    assert text.count("\r") == 4 and text.count("\n") == 1 and text.endswith("\n")
    first = text.split("\r")[1]
    # the bar is the run's: 64 of 100 weights before investigate, a quarter of its 30 → 71.5%
    assert "Investigating 1/4" in first and "1.5s" in first and " 72%" in first
    assert "██████████████░░░░░░" in first  # 14 of 20 cells
    assert text.split("\r")[-1] == "████████████████████ 100%  Done  5.0s\x1b[K\n"


def test_steps_of_one_item_show_no_count():
    stream = Terminal("utf-8")
    Progress(stream, quiet=False, tty=True, clock=lambda: 0.2, started=0.0, columns=200)("detect", 0, 1, "x")
    assert "Detecting  0.2s" in stream.getvalue() and "0/1" not in stream.getvalue()


def test_a_long_run_shows_the_time_left_a_short_one_does_not():
    # Given a run half done (by the weights) after 20 s
    stream = Terminal("utf-8")
    progress = Progress(stream, quiet=False, tty=True, clock=lambda: 20.0, started=0.0, columns=200)
    progress("detect", 1, 2, "")  # read (12) + the profile (10) + half of detect (20) = 42% of the run
    # Then the estimate is the time so far scaled to what is left: 20 × 58 / 42 = 27.6 s
    assert "20.0s, about 28s left" in stream.getvalue()
    # And near the end, with less than a second to go, it says nothing rather than "about 0s left"
    ending = Terminal("utf-8")
    Progress(ending, quiet=False, tty=True, clock=lambda: 6.0, started=0.0, columns=200)(
        "investigate", 29, 30, ""
    )
    assert "left" not in ending.getvalue()
    # And on a short run (2 s in) there is none
    quick = Terminal("utf-8")
    Progress(quick, quiet=False, tty=True, clock=lambda: 2.0, started=0.0, columns=200)("detect", 1, 2, "")
    assert "left" not in quick.getvalue()


def test_the_progress_line_never_wraps_a_narrow_terminal():
    stream = Terminal("utf-8")
    progress = Progress(stream, quiet=False, tty=True, clock=lambda: 1.0, started=0.0, columns=50)
    progress("investigate", 3, 17, "a message far longer than what is left of a fifty-column line")
    line = stream.getvalue().removeprefix("\r").removesuffix("\x1b[K")
    assert len(line) <= 49


def test_a_terminal_that_cannot_print_blocks_gets_an_ascii_bar():
    stream = Terminal("ascii")
    Progress(stream, quiet=False, tty=True, clock=lambda: 0.0, columns=200)("detect", 1, 1, "")
    assert "############--------" in stream.getvalue()  # read, the profile and detect: 62% of the run


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
    monkeypatch.setenv("ITERATE_SPILL", "sometimes")
    assert main(["analyze", str(data_file), "--quiet"]) == 2
    err = capsys.readouterr().err
    # Each variable by the name it is set under, with what it should be; the values are not repeated
    assert "ITERATE_SANDBOX_TIMEOUT_S: Input should be a valid number" in err
    assert "ITERATE_SPILL: Input should be 'auto', 'always' or 'never'" in err
    assert "soon" not in err and "sometimes" not in err and err.count("\n") == 1


def test_default_out_dir_is_named_after_the_file():
    assert default_out(Path("/data/orders.csv.gz")) == Path("iterate-out/orders")
    assert default_out(Path("sales.parquet")) == Path("iterate-out/sales")


def test_each_proof_status_has_a_word():
    from iterate.cli.analyze import proof
    from iterate.contracts import CodeInvestigation

    issue = make_issue(0, "low", 5)
    ragged = issue.model_copy(update={"type": "ragged_rows"})
    failed = CodeInvestigation(code="x", success=False, error="boom", stopped="error")
    worked = CodeInvestigation(code="x", success=True, output={"affected_rows": 5})
    assert proof(issue) == "not investigated"
    assert proof(ragged) == "seen on read"
    assert proof(issue.model_copy(update={"investigation": failed})) == "proof failed"  # was "confirmed"
    assert proof(issue.model_copy(update={"investigation": worked, "status": "confirmed"})) == "proven"
    assert proof(issue.model_copy(update={"investigation": worked, "status": "unverified"})) == "unverified"


def test_a_dash_from_a_terminal_is_refused_with_how_to_pipe(tmp_path, fake_pipeline, capsys, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty())
    assert main(["analyze", "-", "--out", str(tmp_path / "o")]) == 2
    assert "pipe a file in" in capsys.readouterr().err and fake_pipeline.calls == []


def test_stdin_over_the_size_limit_is_refused_like_a_file(tmp_path):
    from iterate.cli.analyze import read_stdin
    from iterate.io import ReadLimits

    with pytest.raises(DatasetReadError) as refused:
        read_stdin(tmp_path / "stdin", ReadLimits(max_file_bytes=10), io.BytesIO(b"a,b\n" * 100))
    assert refused.value.limit is not None and refused.value.limit.setting == "ITERATE_MAX_FILE_BYTES"
