"""iterate delete OUT_DIR: what Iterate wrote for a run (its directory, `iterate fix`'s versions, the input's stored
proofs) goes; the input, others' files, the shared accepted-issues file and a directory holding no run stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterate.cli.main import main

pytestmark = pytest.mark.unit


def test_delete_removes_the_run_its_versions_and_its_stored_proofs_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the sample analysed into a run directory, its proofs stored in the script library, a version
    # `iterate fix` wrote, an accepted issue beside the data, and another input's proofs in the same library
    library = tmp_path / "library"
    monkeypatch.setenv("ITERATE_SCRIPT_LIBRARY", str(library))
    data = tmp_path / "data"
    data.mkdir()
    src = data / "orders.csv"
    src.write_text(
        "order_id,city\n" + "".join(f"{i},{c}\n" for i, c in enumerate(["Paris"] * 20 + ["Pariss"]))
    )
    out = tmp_path / "run"
    assert main(["analyze", str(src), "--out", str(out), "--quiet"]) in (0, 3)
    from iterate.contracts import AnalysisResult

    found = AnalysisResult.model_validate_json((out / "analysis.json").read_text(encoding="utf-8")).issues
    assert main(["accept", str(out), found[0].id, "--reason", "known", "--by", "ana"]) == 0
    (out / "versions" / "v1").mkdir(parents=True)
    (out / "versions" / "v1" / "orders.csv").write_text("order_id\n1\n")
    # (proofs Claude wrote are stored per input: offline, put one where the library keeps this input's)
    from iterate.library.local import LocalScriptLibrary

    folder = LocalScriptLibrary(library).folder("local", str(src.resolve()))
    other = LocalScriptLibrary(library).folder("local", str(tmp_path / "elsewhere" / "orders.csv"))
    for d in (folder, other):
        d.mkdir(parents=True)
        (d / "abcdef12.py").write_text("print(1)\n")
    accepted = data / ".iterate" / "accepted.json"
    input_bytes, accepted_bytes = src.read_bytes(), accepted.read_bytes()
    capsys.readouterr()

    # When the run is deleted with --dry-run, nothing goes, and what would is listed
    assert main(["delete", str(out), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert "would delete" in listed and str(folder) in listed and (out / "analysis.json").is_file()

    # When it is deleted
    assert main(["delete", str(out)]) == 0
    said = capsys.readouterr().out
    # Then the directory, its version and the input's stored proofs are gone; the input, the accepted-issues
    # file (it covers every file below data/) and the other input's proofs are as they were
    assert not out.exists() and not folder.exists()
    assert (other / "abcdef12.py").is_file()
    assert src.read_bytes() == input_bytes and accepted.read_bytes() == accepted_bytes
    assert f"kept {accepted}" in said


def test_delete_refuses_a_directory_without_a_run_and_keeps_files_not_iterates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ITERATE_SCRIPT_LIBRARY", "off")
    # Given a directory that holds no run
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    # When it is named, Then it is refused and untouched
    assert main(["delete", str(plain)]) == 2
    assert "holds no Iterate run" in capsys.readouterr().err and (plain / "notes.txt").is_file()
    assert main(["delete", str(tmp_path / "missing")]) == 2
    # Given a run directory that also holds someone's file
    out = tmp_path / "run"
    out.mkdir()
    (out / ".iterate-run.json").write_text('{"sourceFile": "orders.csv"}\n')
    (out / "report.html").write_text("<html></html>")
    (out / "mine.txt").write_text("keep me")
    # When it is deleted, Then the run's files go and that file (and so the directory) stays
    assert main(["delete", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert "mine.txt" in capsys.readouterr().out
