"""The report of a whole run: its numbers are the run's files' numbers (flags.csv, analysis.json)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from iterate.pipeline import run_local
from iterate.settings import Settings

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


def test_the_flagged_rows_headline_is_the_distinct_rows_of_flags_csv(tmp_path):
    # Given the sample analysed offline
    result = run_local(SAMPLE, tmp_path, settings=Settings())
    # Then the run records the rows and lines of flags.csv
    with (tmp_path / "flags.csv").open(newline="") as fh:
        lines = list(csv.DictReader(fh))
    rows = {int(line["row"]) for line in lines}
    assert result.run is not None
    assert (result.run.flaggedRows, result.run.flaggedCells) == (len(rows), len(lines))
    # And the page's headline says the same numbers
    page = (tmp_path / "report.html").read_text()
    summary = re.search(r'<section id="summary">(.*?)</section>', page, re.S).group(1)
    assert f"<b>{len(rows):,} of 1,503 rows" in summary and f"({len(lines):,} flagged cells)" in summary
    # And every example in it says its line of the file (one header line: row r is line r + 2)
    assert "row 0 is line 2 of the file" in page
    missing = next(i for i in result.issues if i.id == "missing-notes")
    assert all(e.line == e.row + 2 and "order_id" in e.context for e in missing.evidence.examples)
