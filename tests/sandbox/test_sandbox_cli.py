"""`iterate sandbox run`: prints the CodeInvestigation JSON, exit 0 on success and 3 when stopped."""

import json
from pathlib import Path

import pytest

from iterate.cli.main import main

pytestmark = pytest.mark.unit


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "orders.csv"
    path.write_text("id,city\n1,Paris\n2,\n3,Lyon\n4,N/A\n", encoding="utf-8")
    return path


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["sandbox", "run", *args])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else {}, out.err


def test_a_script_on_a_csv_prints_its_result(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a CSV and a script counting blank cities
    script = tmp_path / "blank.py"
    script.write_text(
        "result = {'affected_rows': int((df['city'].str.strip() == '').sum())}\n", encoding="utf-8"
    )
    # When it is run by hand
    code, result, _ = run_cli(["--data", str(csv_file), "--code", str(script), "--timeout", "10"], capsys)
    # Then it exits 0 and prints the CodeInvestigation with the number computed from the data
    assert code == 0
    assert result["success"] is True and result["output"] == {"affected_rows": 1}
    assert result["code"].startswith("result =")


def test_a_stopped_script_exits_3_with_the_reason(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "loop.py"
    script.write_text("x = 0\nwhile True:\n    x += 1\n", encoding="utf-8")
    code, result, _ = run_cli(
        ["--data", str(csv_file), "--code", str(script), "--timeout", "1", "--memory-mb", "256", "--verbose"],
        capsys,
    )
    assert code == 3
    assert result["success"] is False and result["stopped"] == "timeout"


def test_refused_code_exits_3_and_bad_paths_exit_2(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import os\nos.system('id')\n", encoding="utf-8")
    code, result, _ = run_cli(["--data", str(csv_file), "--code", str(script)], capsys)
    assert code == 3 and result["stopped"] == "policy"
    code, _, err = run_cli(["--data", str(tmp_path / "missing.csv"), "--code", str(script)], capsys)
    assert code == 2 and "not found" in err


def test_what_the_script_prints_beside_result_is_kept_and_the_code_is_the_users(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a script that prints while it works and sets `result`
    script = tmp_path / "mine.py"
    script.write_text("print('checking', len(df), 'rows')\nresult = {'rows': len(df)}\n", encoding="utf-8")
    # When it is run by hand
    code, result, _ = run_cli(["--data", str(csv_file), "--code", str(script)], capsys)
    # Then the result is the output, the printed text comes back beside it, and the code is labelled the user's
    assert code == 0 and result["output"] == {"rows": 4}
    assert result["printed"] == "checking 4 rows\n"
    assert result["source"] == "user"


def test_a_script_that_only_prints_json_has_it_as_output_and_nothing_printed(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "printer.py"
    script.write_text("print(json.dumps({'rows': len(df)}))\n", encoding="utf-8")
    code, result, _ = run_cli(["--data", str(csv_file), "--code", str(script)], capsys)
    assert code == 0 and result["output"] == {"rows": 4} and result["printed"] is None


@pytest.mark.parametrize("flag", [["--timeout", "0"], ["--timeout", "-1"], ["--memory-mb", "0"]])
def test_a_budget_of_zero_or_less_is_refused_before_running(
    csv_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    script = tmp_path / "mine.py"
    script.write_text("result = {}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main(["sandbox", "run", "--data", str(csv_file), "--code", str(script), *flag])
    assert stop.value.code == 2 and "must be above zero" in capsys.readouterr().err
