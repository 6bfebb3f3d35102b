"""Re-analysing a dataset compares the run with the previous one: new, regressed, improved, resolved issues."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from iterate.pipeline import run_local
from iterate.settings import Settings

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


def test_a_rerun_after_fixes_reports_what_changed(tmp_path):
    # Given a first run of the sample
    out = tmp_path / "run"
    first = run_local(SAMPLE, out, settings=Settings())
    assert first.comparison is None and all(i.change is None for i in first.issues)
    # And the same file with its placeholder e-mails fixed and more bad dates
    rows = list(csv.reader(SAMPLE.open()))
    header = rows[0]
    email, date = header.index("email"), header.index("order_date")
    for k, row in enumerate(rows[1:]):
        if row[email] == "N/A":
            row[email] = f"fixed{k}@example.com"
        if k % 97 == 0 and "-" in row[date]:
            y, m, d = row[date].split("-")
            row[date] = f"{d}/{m}/{y}"
    fixed = tmp_path / "orders.csv"
    with fixed.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    # When it is analysed again into the same directory
    second = run_local(fixed, out, settings=Settings())
    # Then the placeholder issue is resolved, the date issue regressed, and every issue says how it changed
    assert second.comparison is not None
    assert "disguised-email" in second.comparison.resolved
    dates = next(i for i in second.issues if i.id == "dates-order_date")
    assert dates.change == "regressed"
    assert all(i.change in {"new", "persisting", "regressed", "improved"} for i in second.issues)
    assert "Since the previous run" in (out / "report.html").read_text()
