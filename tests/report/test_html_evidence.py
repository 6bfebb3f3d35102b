"""Evidence a reader can use: where a row is in the file, and the row's other cells when its value says little."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from iterate.contracts import EvidenceExample, RowNumbering
from iterate.detect import Finding, detect
from iterate.io import read_table
from iterate.issues import issues_from_findings, to_issue
from iterate.profile import profile_table
from iterate.report import render_html

pytestmark = pytest.mark.unit


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


@pytest.fixture
def breweries(tmp_path):
    """400 orders of 20 breweries, 3 of them without a phone number; written as a CSV, one line per row."""
    path = tmp_path / "orders.csv"
    names = [f"Brewery {chr(65 + i)}{chr(70 + i)}" for i in range(20)]
    cities = [
        "Portland",
        "Denver",
        "Austin",
        "Boston",
        "Chicago",
        "Seattle",
        "Madison",
        "Tampa",
        "Reno",
        "Boise",
    ]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["order_id", "brewery_name", "city", "brewery_id", "phone"])
        for i in range(400):
            phone = "" if i in (12, 80, 250) else f"555-{1000 + i}"
            w.writerow([f"O-{1000 + i}", names[i % 20], cities[i % 10], 100 + i % 20, phone])
    return read_table(path)


def test_an_empty_cell_comes_with_the_values_that_identify_its_record(breweries):
    # Given a column with three empty cells
    detection = detect(breweries)
    profile = profile_table(breweries, null_marker=detection.null_marker)
    issue = next(
        i for i in issues_from_findings(detection.findings, breweries, profile) if i.type == "missing_values"
    )
    # Then each example carries its line in the file and its record's key and naming values
    first = issue.evidence.examples[0]
    assert (first.row, first.line, first.value) == (12, 14, "")
    assert first.context == {"order_id": "O-1012", "brewery_name": "Brewery MR", "city": "Austin"}


def test_a_dependency_conflict_carries_the_determining_values(breweries):
    # Given a dependency finding: brewery_id is set by brewery_name and city, and row 37's differs from its group's
    finding = Finding(
        type="dependency_violation", columns=["brewery_id"], rows=np.array([37]), cols=np.array([3]),
        title="t", description="d", suggested_action="a", category="smart_fixes", detector="dependencies",
        stats={"rhs": "brewery_id", "determinants": ["brewery_name", "city"]}, expected=["105"],
    )  # fmt: skip
    example = to_issue(finding, breweries, important=set()).evidence.examples[0]
    # Then its example holds the determining values beside the value and the group's usual one
    assert example.context == {"brewery_name": "Brewery RW", "city": "Tampa"}
    assert (example.value, example.expected, example.line) == ("117", "105", 39)


def test_a_blamed_key_carries_the_values_that_contradict_it(breweries):
    finding = Finding(
        type="dependency_violation", columns=["brewery_name"], rows=np.array([37]), cols=np.array([1]),
        title="t", description="d", suggested_action="a", category="smart_fixes", detector="dependencies",
        stats={"lhs": "brewery_name", "dependents": ["city", "brewery_id"], "rule": "determinant"},
    )  # fmt: skip
    example = to_issue(finding, breweries, important=set()).evidence.examples[0]
    assert example.context == {"city": "Tampa", "brewery_id": "117"}


def with_examples(build, examples, *, type_="missing_values", numbering=None):
    analysis, profile, understanding = build(issues=1, rows=400, columns=4)
    ev = analysis.issues[0].evidence.model_copy(update={"examples": examples})
    analysis.issues[0] = analysis.issues[0].model_copy(update={"evidence": ev, "type": type_})
    profile.rowNumbering = numbering
    return section(render_html(analysis, profile, understanding), "issues")


def test_missing_value_examples_show_the_record_not_ten_rows_of_empty(build):
    examples = [
        EvidenceExample(
            row=r, column="phone", value="", line=r + 2, context={"order_id": f"O-{r}", "city": "Reno"}
        )
        for r in range(10)
    ]
    page = with_examples(build, examples, numbering=RowNumbering(format="csv", place="line", firstPlace=2))
    head = re.search(r'<table class="t ex[^"]*"><tr>(.*?)</tr>', page).group(1)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["row", "line", "order_id", "city", "phone"]
    assert '<table class="t ex">' in page  # five columns fit a phone side by side; more stack (below)
    assert '<td class="num" data-l="row">7</td><td class="num" data-l="line">9</td>' in page
    assert '<td data-l="order_id"><code class="val">O-7</code></td>' in page
    # and the page says once what a row number is and how it maps to the file
    assert "row 0 is line 2 of the file, so row r is on line r + 2" in page


def test_a_dependency_conflict_shows_determinants_value_and_usual_value_side_by_side(build):
    examples = [
        EvidenceExample(
            row=1898, column="brewery_id", value="163", expected="371",
            context={"brewery_name": "Sly Fox Brewing Company", "city": "Phoenixville"},
            note="evidence against the cell from its entity's consensus (log-likelihood ratio): 3.144",
        ),
        EvidenceExample(
            row=314, column="brewery_id", value="414", expected="382",
            context={"brewery_name": "Blue Mountain Brewery", "city": "Arrington"},
            note="evidence against the cell from its entity's consensus (log-likelihood ratio): 3.001",
        ),
    ]  # fmt: skip
    page = with_examples(build, examples, type_="dependency_violation")
    assert '<table class="t ex stack">' in page
    head = re.search(r'<table class="t ex[^"]*"><tr>(.*?)</tr>', page).group(1)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == [
        "row", "brewery_name", "city", "brewery_id", "usual value in its group",
        "evidence against the cell from its entity&#x27;s consensus (log-likelihood ratio)",
    ]  # fmt: skip
    row = re.search(r"<tr><td[^>]*>1898</td>(.*?)</tr>", page).group(1)
    values = re.findall(r'<code class="val">([^<]*)</code>|data-l="evidence[^"]*">([^<]*)<', row)
    assert [a or b for a, b in values] == ["Sly Fox Brewing Company", "Phoenixville", "163", "371", "3.144"]


def test_without_a_known_line_rows_are_called_0_based_data_rows(build):
    examples = [EvidenceExample(row=4, column="x", value="1"), EvidenceExample(row=9, column="x", value="2")]
    page = with_examples(build, examples, numbering=RowNumbering(format="csv"))
    assert "span several lines" in page and "data rows counted from 0, header excluded" in page
    assert ">line<" not in page
    parquet = with_examples(build, examples, numbering=RowNumbering(format="parquet"))
    assert "counted from 0 in the file&#x27;s order" in parquet


def test_examples_that_all_hold_one_value_are_said_once(build):
    examples = [EvidenceExample(row=r, column="address_2", value="empty", line=r + 2) for r in range(10)]
    page = with_examples(build, examples, type_="constant_column")
    assert (
        'Every example holds <code class="val">empty</code> in address_2: row 0 (line 2), row 1 (line 3)'
        in page
    )
    assert '<table class="t ex' not in page


def test_context_names_values_and_note_headers_are_escaped(build):
    hostile = '"><script>alert(1)</script>'
    examples = [
        EvidenceExample(row=r, column=hostile, value="", context={hostile: hostile}, note=f"{hostile}: {r}")
        for r in range(3)
    ]
    page = with_examples(build, examples)
    assert "<script>alert" not in page and 'data-l=""><' not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6  # header, label, value, note header…


def test_a_whole_row_example_is_called_the_row_not_star(build):
    examples = [
        EvidenceExample(row=r, column="*", value=f"SO-{r} | 2026-02-14 | C0134", line=r + 2) for r in (7, 9)
    ]
    page = with_examples(build, examples, type_="duplicate_rows")
    head = re.search(r'<table class="t ex[^"]*"><tr>(.*?)</tr>', page).group(1)
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["row", "line", "the row (its first values)"]
