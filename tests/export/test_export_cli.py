"""`iterate export` on the command line: help, README, errors, stdout and --out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iterate.cli.main import build_parser, main

ROOT = Path(__file__).parent.parent.parent


def _export_help() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["export"].format_help()  # type: ignore[attr-defined]


def test_help_names_the_formats_and_every_flag_is_in_the_reference() -> None:
    text = _export_help()
    for word in ("gx", "soda", "dqdl", "--format", "--out", "--table", "RUN_DIR"):
        assert word in text
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "iterate export" in reference
    for flag in set(re.findall(r"--[a-z][a-z-]+", text)) - {"--help"}:
        assert flag in reference, flag


def test_a_missing_run_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "nope"), "--format", "gx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "iterate analyze" in err


def test_a_damaged_run_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "profile.json").write_text("{}", encoding="utf-8")
    (tmp_path / "analysis.json").write_text("{}", encoding="utf-8")
    assert main(["export", str(tmp_path), "--format", "soda"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_rules_go_to_stdout_or_to_the_file(
    orders_run: tuple[Path, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, work = orders_run[0], orders_run[3]
    assert main(["export", str(run_dir), "--format", "dqdl"]) == 0
    assert capsys.readouterr().out.startswith("Rules = [")
    out = work / "cli" / "checks.yml"
    assert main(["export", str(run_dir), "--format", "soda", "--table", "my orders", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "encode confirmed issues" in captured.err
    assert "checks for my_orders:" in out.read_text(encoding="utf-8")
