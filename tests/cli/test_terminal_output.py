"""Nothing a file or an LLM wrote reaches the terminal raw: `analyze`, `followup` and `sandbox` print names,
values, file names and issue text with their control characters made visible (iterate.visible)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from hostile_files import fifo, iterate_cli, run_capped

from iterate.cli.analyze import Progress, summary_text
from iterate.cli.main import main
from iterate.contracts import AnalysisResult, Evidence, EvidenceExample, Issue, RunMetadata
from iterate.io import DatasetReadError
from iterate.visible import json_visible, visible

pytestmark = pytest.mark.unit

# What a hostile name carries: clear screen + cursor home, a colour, BEL, DEL, an 8-bit CSI (C1), a
# right-to-left override, an isolate, a line separator, a newline and a tab.
HOSTILE = "a\x1b[2J\x1b[H\x1b[31mb\x07c\x7fd\x9b2Je\u202ef\u2066g\u2028h\ni\tj"
SHOWN = "a\\x1b[2J\\x1b[Hb\\x07c\\x7fd\\x9b2Je\\u202ef\\u2066g\\u2028h\\ni\\tj".replace("[Hb", "[H\\x1b[31mb")
ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def raw_controls(text: str, *, allowed: str = "\n") -> list[str]:
    """The control characters in `text` other than `allowed` (line breaks are the layout's own)."""
    found = ACTING.findall(text) + (["\t"] if "\t" in text and "\t" not in allowed else [])
    return [c for c in found if c not in allowed]


# ---- the helper ---------------------------------------------------------------------------------------


def test_visible_escapes_every_control_character_and_nothing_else() -> None:
    assert visible(HOSTILE) == SHOWN
    assert raw_controls(visible(HOSTILE), allowed="") == []
    for plain in ("amount", "prix (€)", "名前", "👩\u200d💻 dev", "C:\\data\\x1b", "", " padded "):
        assert visible(plain) == plain  # names without controls come back exactly as written


@pytest.mark.parametrize(
    ("ch", "shown"),
    [("\x00", "\\x00"), ("\x1b", "\\x1b"), ("\x85", "\\x85"), ("\u061c", "\\u061c"), ("\u200f", "\\u200f"),
     ("\u202a", "\\u202a"), ("\u2069", "\\u2069"), ("\u2029", "\\u2029"), ("\udcff", "\\udcff"), ("\r", "\\r")],
)  # fmt: skip
def test_each_kind_of_control_has_an_escape(ch: str, shown: str) -> None:
    assert visible(f"x{ch}y") == f"x{shown}y"


def test_keep_leaves_the_layouts_own_line_breaks() -> None:
    assert visible("one\ntwo\x1b", keep="\n") == "one\ntwo\\x1b"


def test_json_visible_is_the_same_json_value_with_nothing_raw() -> None:
    text = json.dumps({"name": HOSTILE, "é": "ok"}, ensure_ascii=False)
    shown = json_visible(text)
    assert json.loads(shown) == json.loads(text) and raw_controls(shown) == [] and "é" in shown


# ---- analyze ------------------------------------------------------------------------------------------


def hostile_result() -> AnalysisResult:
    issue = Issue(
        id="iss-1",
        type=f"missing_values{HOSTILE}",
        severity="high",
        description=f"values like {HOSTILE}",
        affectedColumns=[HOSTILE, "plain"],
        suggestedAction="fix it",
        category="smart_fixes",
        evidence=Evidence(
            affectedCells=3,
            affectedRows=3,
            affectedShare=0.003,
            examples=[EvidenceExample(row=0, column=HOSTILE, value=HOSTILE)],
        ),
    )
    return AnalysisResult(
        mode="degraded",
        issues=[issue],
        summary=HOSTILE,
        completedAt="2026-11-22T00:00:00Z",
        run=RunMetadata(
            runId="r",
            datasetName=HOSTILE,
            sourceFile=HOSTILE,
            contentHash="h",
            rowCount=1000,
            columnCount=2,
            startedAt="2026-11-22T00:00:00Z",
            durationMs=10,
            engineVersion="0.1.0",
            degradedReasons=[f"LLM said {HOSTILE}"],
        ),
    )


def test_the_summary_shows_hostile_names_escaped() -> None:
    text = summary_text(hostile_result(), Path(f"out{HOSTILE}"), width=400)
    assert raw_controls(text) == []
    assert text.splitlines()[0].startswith(SHOWN + ": 1,000 rows")  # the dataset name, one line
    assert f"report:   out{SHOWN}/report.html" in text


@pytest.mark.parametrize("tty", [True, False])
def test_progress_messages_are_escaped_and_only_the_bar_moves_the_cursor(tty: bool) -> None:
    stream = io.StringIO()
    progress = Progress(stream, quiet=False, tty=tty, clock=lambda: 0.0)
    progress("read", 1, 1, f"orders{HOSTILE}.csv")
    progress("report", 1, 1, HOSTILE)
    text = stream.getvalue()
    ours = text.replace("\r", "").replace("\x1b[K", "")  # the redraw: carriage return, erase to the end
    assert raw_controls(ours) == [] and "orders" + SHOWN[:20] in text


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch):
    """run_local replaced: returns the hostile result, or raises what the test sets."""
    state: dict[str, BaseException | None] = {"raises": None}

    def fake(path, out, **kw):  # type: ignore[no-untyped-def]
        kw["progress"]("read", 1, 1, Path(path).name)
        if state["raises"] is not None:
            raise state["raises"]
        result = hostile_result()
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "analysis.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
        return result

    monkeypatch.setattr("iterate.pipeline.run_local", fake)
    monkeypatch.delenv("ITERATE_DEBUG", raising=False)
    return state


@pytest.fixture
def hostile_file(tmp_path: Path) -> Path:
    path = tmp_path / f"orders{HOSTILE.replace('/', '')}.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    return path


def test_analyze_prints_nothing_raw(hostile_file: Path, tmp_path: Path, fake_run, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(hostile_file), "--out", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert raw_controls(captured.out) == [] and raw_controls(captured.err) == []
    assert SHOWN in captured.out


def test_json_output_escapes_what_json_leaves_raw(
    hostile_file: Path, tmp_path: Path, fake_run, capsys
) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(hostile_file), "--out", str(tmp_path / "o"), "--json", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert raw_controls(out) == []
    assert AnalysisResult.model_validate_json(out).run.datasetName == HOSTILE  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "error",
    [
        DatasetReadError(f"/data/x{HOSTILE}.csv", f"bad value {HOSTILE}", "fix it", line=3),
        RuntimeError(f"boom {HOSTILE}"),
    ],
)
def test_errors_name_the_file_escaped_on_one_line(
    hostile_file: Path, tmp_path: Path, fake_run, capsys, monkeypatch, error: BaseException
) -> None:  # type: ignore[no-untyped-def]
    fake_run["raises"] = error
    main(["analyze", str(hostile_file), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and err.count("\n") == 1 and "\\x1b[2J" in err
    monkeypatch.setenv("ITERATE_DEBUG", "1")  # the traceback too
    main(["analyze", str(hostile_file), "--out", str(tmp_path / "o"), "--quiet"])
    assert raw_controls(capsys.readouterr().err) == []


def test_a_missing_hostile_path_and_argparse_errors_are_escaped(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(tmp_path / f"gone{HOSTILE}.csv")]) == 2
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and "file not found" in err
    with pytest.raises(SystemExit):
        main([f"an{HOSTILE}"])
    assert raw_controls(capsys.readouterr().err) == []


def test_a_fifo_is_refused_before_the_pipeline_starts(tmp_path: Path, fake_run, capsys) -> None:  # type: ignore[no-untyped-def]
    path = fifo(tmp_path / f"pipe{HOSTILE.replace('/', '')}.csv")
    assert main(["analyze", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "named pipe" in err and raw_controls(err) == []


# ---- followup -----------------------------------------------------------------------------------------


@pytest.fixture
def hostile_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    issue = Issue(
        id="ws-1",
        type="stray_whitespace",
        severity="low",
        description="spaces",
        affectedColumns=[HOSTILE],
        suggestedAction="trim",
        category="smart_fixes",
        affectedRows=3,
        evidence=Evidence(
            affectedCells=3,
            affectedRows=3,
            affectedShare=0.1,
            examples=[EvidenceExample(row=0, column=HOSTILE, value=f" {HOSTILE} ")],
        ),
    )
    body = {"mode": "offline", "issues": [issue.model_dump(mode="json")], "summary": "s", "completedAt": "x"}
    run = tmp_path / f"run{HOSTILE.replace('/', '')}"
    run.mkdir()
    (run / "analysis.json").write_text(json.dumps(body), encoding="utf-8")
    # its flagged cells, the column named as flags.csv writes it (what a fix, and the follow-up, read)
    import csv

    from iterate.report.flags import neutralise

    with (run / "flags.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["row", "column", "issue_id", "score"])
        writer.writerows([[r, neutralise(visible(HOSTILE, keep="\t\n\r")), "ws-1", "1.0"] for r in range(3)])
    return run


def test_followup_questions_and_actions_show_names_escaped(hostile_run: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["followup", str(hostile_run), "ws-1"]) == 0
    out = capsys.readouterr().out
    assert raw_controls(out) == [] and SHOWN in out and "[trim]" in out
    assert main(["followup", str(hostile_run), "ws-1", "--answer", "trim"]) == 0
    out = capsys.readouterr().out
    assert raw_controls(out) == [] and out.startswith("Fix action: trim_whitespace")
    action = json.loads(out.removeprefix("Fix action: trim_whitespace "))
    assert action == {"column": HOSTILE}  # escaped for the eye, the same value for a program


def test_followup_errors_are_escaped(hostile_run: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["followup", str(hostile_run), f"nope{HOSTILE}"]) == 2
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and err.count("\n") == 1


# ---- sandbox ------------------------------------------------------------------------------------------


def test_sandbox_refuses_a_hostile_missing_path_escaped(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = tmp_path / "code.py"
    code.write_text("result = {}\n", encoding="utf-8")
    assert main(["sandbox", "run", "--data", str(tmp_path / f"x{HOSTILE}.csv"), "--code", str(code)]) == 2
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and "data file not found" in err


def test_sandbox_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    code = tmp_path / "code.py"
    code.write_text("result = {}\n", encoding="utf-8")
    data = fifo(tmp_path / "data.csv")
    done = run_capped(iterate_cli("sandbox", "run", "--data", str(data), "--code", str(code)), timeout=30)
    assert done.returncode == 2 and "named pipe" in done.stderr and done.seconds < 15


def test_sandbox_json_output_is_ascii(tmp_path: Path) -> None:
    # Given code that returns hostile text: the investigation JSON escapes it (json.dumps, ensure_ascii)
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n", encoding="utf-8")
    code = tmp_path / "code.py"
    code.write_text(f"result = {{'text': {HOSTILE!r}}}\n", encoding="utf-8")
    done = run_capped(iterate_cli("sandbox", "run", "--data", str(data), "--code", str(code)), timeout=60)
    assert done.returncode == 0, done.stderr
    assert raw_controls(done.stdout) == [] and raw_controls(done.stderr) == []
    assert json.loads(done.stdout)["output"]["text"] == HOSTILE


def test_the_cli_uses_one_helper() -> None:
    # every command module imports iterate.visible rather than carrying its own escaping
    for name in ("analyze", "followup_cmd", "sandbox_cmd", "main"):
        source = Path(sys.modules["iterate.cli.main"].__file__).with_name(f"{name}.py").read_text()  # type: ignore[arg-type]
        assert "from iterate.visible import" in source, name
