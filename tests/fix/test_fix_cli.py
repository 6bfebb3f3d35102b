"""`iterate fix` end to end: analyse the sample, answer follow-ups, fix into a new version, analyse that version
and see the fixed issues resolved; the input file's bytes never change."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from iterate.cli.main import main

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"
# The sample's quick fixes with a first choice that changes data, and the smart ones the test answers.
QUICK = {
    "units-unit_price",
    "disguised-email",
    "dates-order_date",
    "whitespace-customer_name",
    "whitespace-status",
    "duplicates-exact",
    "encoding-customer_name",
    "case-category",
}
ANSWERED = {"typos-city": "standardize", "outliers-quantity": "null"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def analysis(run: Path) -> dict:
    return json.loads((run / "analysis.json").read_text(encoding="utf-8"))


def loop(data: Path, run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict]:
    """analyze → followup (cold start) → fix --dry-run → fix (unconfirmed, then confirmed) → analyze the version."""
    assert main(["analyze", str(data), "--out", str(run), "--quiet"]) == 0
    before = sha(data)
    for issue_id, key in ANSWERED.items():  # answered without printing the question first
        assert main(["followup", str(run), issue_id, "--answer", key]) == 0
    capsys.readouterr()
    # A dry run prints the counts and a preview, and writes nothing
    assert main(["fix", str(run), "--quick", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dates-order_date: convert_dates 14 cells" in out and "preview:" in out and "dry run" in out
    assert not (run / "versions").exists()
    # Destructive fixes without confirmation: exit 4, the way to confirm named, nothing written
    assert main(["fix", str(run), "--quick", "--confirm", "drop"]) == 4
    err = capsys.readouterr().err
    assert "--confirm clear" in err and "duplicates-exact" not in err.split("would remove")[0]
    assert not (run / "versions").exists()
    assert main(["fix", str(run), "--quick", "--yes"]) == 0
    capsys.readouterr()
    version_dir = run / "versions" / "v1"
    meta = json.loads((version_dir / "version.json").read_text(encoding="utf-8"))
    assert sha(data) == before == meta["parent"]["sha256"]
    new_file = version_dir / meta["file"]
    assert meta["sha256"] == sha(new_file)
    # The applied answers are final
    assert main(["followup", str(run), "typos-city", "--answer", "keep"]) == 2
    assert "applied in" in capsys.readouterr().err
    # The version is analysed into the same run directory: compared with the run it was fixed from
    assert main(["analyze", str(new_file), "--out", str(run), "--quiet"]) == 0
    return new_file, meta


def test_the_sample_fixed_into_a_new_version_resolves_its_issues(tmp_path, capsys):
    data = tmp_path / "orders.csv"
    shutil.copyfile(SAMPLE, data)
    run = tmp_path / "run"
    new_file, meta = loop(data, run, capsys)
    applied = {i["id"] for i in meta["issuesApplied"]}
    assert QUICK | set(ANSWERED) <= applied
    assert meta["answers"] == {k: [v] for k, v in ANSWERED.items()}
    assert meta["counts"]["duplicates-exact"] == {"drop_rows": 3}
    with SAMPLE.open(newline="", encoding="utf-8") as fh:
        n_rows = sum(1 for _ in csv.reader(fh)) - 1
    assert meta["droppedRows"] == 3 and meta["rows"] == n_rows - 3
    # Same format: comma-delimited, the sample's CRLF line ends, UTF-8, the header as it was
    original, fixed = SAMPLE.read_bytes(), new_file.read_bytes()
    assert fixed.split(b"\n", 1)[0] == original.split(b"\n", 1)[0]
    assert fixed.count(b"\r\n") == fixed.count(b"\n") == n_rows - 3 + 1
    # The re-run sees every applied issue resolved
    comparison = analysis(run)["comparison"]
    assert (QUICK | set(ANSWERED)) <= set(comparison["resolved"])
    # changes.csv lists each changed cell with its issue and action, rows of the input
    with (run / "versions" / "v1" / "changes.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    dates = [r for r in rows if r["issue_id"] == "dates-order_date"]
    assert len(dates) == 14 and all(r["action"] == "convert_dates" for r in dates)
    with SAMPLE.open(newline="", encoding="utf-8") as fh:
        sample = list(csv.DictReader(fh))
    first = dates[0]
    assert sample[int(first["row"])]["order_date"] == first["old"]
    d, m, y = first["old"].split("/")
    assert first["new"] == f"{y}-{m}-{d}"


def test_a_parquet_input_stays_parquet_with_its_types(tmp_path, capsys):
    # Given the sample as Parquet, its blanks as nulls and a float column
    options = pacsv.ConvertOptions(strings_can_be_null=True, null_values=[""])
    table = pacsv.read_csv(SAMPLE, convert_options=options)
    table = table.set_column(
        table.column_names.index("discount_pct"),
        "discount_pct",
        table.column("discount_pct").cast(pa.float64()),
    )
    data = tmp_path / "orders.parquet"
    pq.write_table(table, data)
    run = tmp_path / "run"
    new_file, meta = loop(data, run, capsys)
    assert new_file.suffix == ".parquet" and meta["format"] == "parquet"
    fixed = pq.read_table(new_file)
    assert fixed.schema.field("discount_pct").type == pa.float64()
    assert fixed.column_names == table.column_names and fixed.num_rows == table.num_rows - 3
    # The placeholders are proper nulls now; the edited column's other nulls stay nulls
    dropped = set(_dropped_rows(run / "versions" / "v1"))
    kept = [r for r in range(table.num_rows) if r not in dropped]
    email_nulls = table.column("email").take(kept).null_count
    names_nulls = table.column("customer_name").take(kept).null_count
    assert fixed.column("email").null_count == email_nulls + 25
    assert fixed.column("customer_name").null_count == names_nulls
    resolved = set(analysis(run)["comparison"]["resolved"])
    assert {"dates-order_date", "units-unit_price", "typos-city", "disguised-email"} <= resolved


def _dropped_rows(version_dir: Path) -> list[int]:
    with (version_dir / "changes.csv").open(newline="", encoding="utf-8") as fh:
        return [int(r["row"]) for r in csv.DictReader(fh) if r["action"] == "drop_rows"]


def test_a_semicolon_cp1252_crlf_quoted_file_keeps_its_dialect(tmp_path, capsys):
    # Given a European export: semicolons, every field quoted, CRLF, Windows-1252
    rows = [["id", "name", "city"]]
    cities = ["Köln", "München", "Zürich", "Genève"]
    for k in range(300):
        city = cities[k % 4] + (" " if k % 50 == 7 else "")
        rows.append([str(k), f"Kunde {k:03d} Müller", city])
    text = "".join(";".join(f'"{v}"' for v in row) + "\r\n" for row in rows)
    data = tmp_path / "kunden.csv"
    data.write_bytes(text.encode("cp1252"))
    run = tmp_path / "run"
    assert main(["analyze", str(data), "--out", str(run), "--quiet"]) == 0
    issues = {i["id"]: i for i in analysis(run)["issues"]}
    ws = next(i for i, v in issues.items() if v["type"] == "stray_whitespace")
    before = sha(data)
    assert main(["fix", str(run), ws]) == 0
    capsys.readouterr()
    new_file = run / "versions" / "v1" / "kunden.csv"
    raw = new_file.read_bytes()
    assert sha(data) == before
    expected = text.replace('Köln "', 'Köln"').replace('München "', 'München"')
    expected = expected.replace('Zürich "', 'Zürich"').replace('Genève "', 'Genève"')
    assert raw == expected.encode("cp1252")


def test_changes_csv_cannot_run_as_a_formula(tmp_path):
    from iterate.fix.engine import Change
    from iterate.fix.version import write_changes

    target = tmp_path / "changes.csv"
    write_changes([Change(3, "=cmd", " =1+1", "=1+1", "@x", "trim_whitespace")], target)
    line = target.read_text(encoding="utf-8").splitlines()[1]
    assert line == "3,'=cmd, =1+1,'=1+1,'@x,trim_whitespace"


def test_bad_run_directories_say_what_to_do(tmp_path, capsys):
    assert main(["fix", str(tmp_path / "nowhere"), "--quick"]) == 2
    assert "run `iterate analyze FILE --out" in capsys.readouterr().err
    data = tmp_path / "orders.csv"
    shutil.copyfile(SAMPLE, data)
    run = tmp_path / "run"
    assert main(["analyze", str(data), "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    # A smart fix named without its answer
    assert main(["fix", str(run), "typos-city"]) == 2
    assert "iterate followup" in capsys.readouterr().err
    # The input changed since the run
    with data.open("a", encoding="utf-8") as fh:
        fh.write("\n")
    assert main(["fix", str(run), "--quick", "--yes"]) == 2
    assert "changed since the run" in capsys.readouterr().err
    assert not (run / "versions").exists()


def test_a_json_lines_input_stays_json_lines_with_its_numbers(tmp_path, capsys):
    # Given JSON Lines with numbers and a city with stray spaces in a few records
    cities = ["Köln", "München", "Zürich", "Genève"]
    records = [
        {"id": k, "amount": 10.5 + k, "city": cities[k % 4] + (" " if k % 50 == 7 else "")}
        for k in range(300)
    ]
    data = tmp_path / "orders.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    run = tmp_path / "run"
    assert main(["analyze", str(data), "--out", str(run), "--quiet"]) == 0
    ws = next(i["id"] for i in analysis(run)["issues"] if i["type"] == "stray_whitespace")
    assert main(["fix", str(run), ws]) == 0
    capsys.readouterr()
    # Then every record is there, numbers are still numbers, and only the padded cities changed
    fixed = [
        json.loads(line)
        for line in (run / "versions" / "v1" / "orders.jsonl").read_text("utf-8").splitlines()
    ]
    assert [r["id"] for r in fixed] == list(range(300)) and all(isinstance(r["amount"], float) for r in fixed)
    assert [r["city"] for r in fixed] == [cities[k % 4] for k in range(300)]
