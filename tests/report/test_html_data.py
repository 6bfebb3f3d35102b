"""report.html shows the data: histograms, where values are missing, a few rows, associations, the duplicate
rows explained, and one count for one fact wherever it appears."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from iterate.contracts import DateStats, ValueCount
from iterate.contracts.profile import (
    Association,
    DateHistogram,
    Histogram,
    MissingOverview,
    MissingPattern,
    SampleRows,
)
from iterate.profile import profile_table
from iterate.report import render_html
from iterate.report.charts import breakable
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

HOSTILE = '<script>alert(1)</script>\x1b[2J"\u202e'


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


def card(page: str, column: str) -> str:
    cards = page.split('<div class="card colcard"')[1:]
    found = [c for c in cards if f"<h3><span>{column}</span>" in c]
    assert len(found) == 1, column
    return found[0]


def table_of(columns: dict[str, list[str]]) -> Table:
    arrow = pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))


def test_the_missing_share_is_one_number_in_the_header_the_chart_and_the_cards(build):
    # Given a profile computed from data: blanks in one column, N/A placeholders in another
    n = 400
    table = table_of(
        {
            "id": [str(k) for k in range(n)],
            "note": ["" if k % 3 else "x" for k in range(n)],
            "email": ["N/A" if k % 50 == 0 else f"p{k}@example.com" for k in range(n)],
        }
    )
    profile = profile_table(table)
    analysis, _, understanding = build(rows=n, columns=3, issues=0)
    page = render_html(analysis, profile, understanding)
    missing = sum(c.missing + c.disguisedMissing for c in profile.columns)
    assert missing == profile.missingOverview.cells == 266 + 8
    # Then the header and the missing-values card say the same share of the same cells
    headline = f"22.8% ({missing} of 1,200 cells)"
    header = re.search(r'<header class="top">(.*?)</header>', page, flags=re.S).group(1)
    assert headline in header and headline in section(page, "data")
    # And the e-mail column's placeholders are its missing values, one count on its card and in the chart
    email = card(page, "email")
    assert "<span>missing</span>8 (2.0%)" in email and "missing</span>0 " not in email
    assert ">8 (2.0%)</span>" in section(page, "data")


def test_continuous_columns_get_a_histogram_and_listed_values_keep_their_bars(build):
    analysis, profile, understanding = build(columns=4, top_values=5)
    numeric = profile.columns[1]
    numeric.distinct = 900  # too many values to list
    numeric.numeric.histogram = Histogram(
        edges=[float(k) for k in range(6)], counts=[3, 9, 27, 9, 3], below=2
    )
    listed = profile.columns[3]
    listed.distinct = len(listed.topValues)  # every value listed: exact bars, no histogram
    listed.numeric.histogram = Histogram(edges=[0.0, 1.0], counts=[5])
    page = render_html(analysis, profile, understanding)
    hist = card(page, "col_1")
    assert 'class="hist"' in hist and "Top values" not in hist
    assert "Distribution of 1,000 values in 5 equal bins (2 below 0: grey, apart)" in hist
    assert 'class="hist"' not in card(page, "col_3") and "Top values (5 of 5 distinct)" in card(page, "col_3")


def test_a_date_column_gets_a_histogram_with_its_first_and_last_edge(build):
    analysis, profile, understanding = build(columns=3)
    c = profile.columns[2]
    c.distinct = 300
    c.dates = DateStats(
        count=1000,
        min="2024-01-01",
        max="2024-03-30",
        formats=[ValueCount(value="%Y-%m-%d", count=1000)],
        histogram=DateHistogram(edges=["2024-01-01", "2024-02-15", "2024-04-01"], counts=[500, 500]),
    )
    text = card(render_html(analysis, profile, understanding), "col_2")
    assert 'class="hist"' in text and "<span>2024-01-01</span><span>2024-04-01</span>" in text


def test_integer_is_not_written_above_shapes_with_decimals(build):
    analysis, profile, understanding = build(columns=3)
    c = profile.columns[1]
    c.semanticType, c.conformity = "integer", 0.92
    c.patterns = [ValueCount(value="9", count=880), ValueCount(value="9.9", count=74)]
    page = render_html(analysis, profile, understanding)
    text = card(page, "col_1")
    assert (
        '<span class="badge cat mono" title="profiled as integer (92.0% of values whole), but 74 values are '
        in text
    )
    assert ">integer<" not in text and ">decimal<" in text
    # And the dataset's table of columns uses the same word
    assert ">decimal</div>" in section(page, "understanding")


def test_duplicate_rows_are_explained_and_linked_to_their_issue(build):
    analysis, profile, understanding = build(columns=3, issues=1)
    profile.duplicates = profile.duplicates.model_copy(
        update={"exactRows": 146, "exactGroups": 120, "largestGroup": 4, "example": [57, 12]}
    )
    page = render_html(analysis, profile, understanding)
    note = re.search(r'<p class="small" id="duplicates">(.*?)</p>', page, flags=re.S).group(1)
    assert (
        "146 rows repeat an earlier row exactly" in note and "120 distinct rows appear more than once" in note
    )
    assert "the most repeated 4 times" in note and "row 57 repeats row 12" in note
    assert "No issue was raised" in note
    # When an issue about them exists, the card links to it instead
    analysis.issues[0] = analysis.issues[0].model_copy(update={"type": "duplicate_rows", "id": "dup-1"})
    page = render_html(analysis, profile, understanding)
    note = re.search(r'<p class="small" id="duplicates">(.*?)</p>', page, flags=re.S).group(1)
    anchor = re.search(r'<details class="issue [a-z]+" id="([^"]+)"', page).group(1)
    assert f'Raised as an issue: <a href="#{anchor}">' in note and "No issue was raised" not in note


def test_sample_rows_show_hostile_values_and_names_escaped(build):
    analysis, profile, understanding = build(columns=3, value=HOSTILE)
    profile.sample = SampleRows(rows=[0, 1], columns=[0, 1], values=[[HOSTILE, "1.5"], ["", "x"]])
    page = render_html(analysis, profile, understanding)
    sample = re.search(r'<div class="card" id="sample"(.*?)</table>', page, flags=re.S).group(1)
    assert "<script>" not in sample and "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J&quot;\\u202e" in sample
    assert '<span class="empty">(empty)</span>' in sample and 'data-l="row 1"' in sample
    assert "\x1b" not in page and "\u202e" not in page


def test_missing_patterns_and_bands_name_their_columns(build):
    analysis, profile, understanding = build(columns=3, rows=100)
    for c in profile.columns:
        c.missing, c.disguisedMissing = 0, 0
    profile.columns[1].missing, profile.columns[2].missing = 30, 10
    profile.missingOverview = MissingOverview(
        cells=40,
        rows=32,
        patterns=[MissingPattern(columns=[1], rows=22), MissingPattern(columns=[1, 2], rows=8)],
        patternCount=3,
        bandRows=[50, 50],
        bandColumns=[1, 2],
        bands=[[30, 0], [2, 8]],
    )
    data = section(render_html(analysis, profile, understanding), "data")
    assert "<td>col_1, col_2</td><td class='num'>8</td><td class='num'>8.0%</td>" in data
    assert "The 2 most frequent of 3 combinations." in data
    assert data.count('class="strip"') == 2 and "in 32 of 100 rows (32.0%)" in data


def test_associations_are_listed_with_their_measure_and_what_was_compared(build):
    analysis, profile, understanding = build(columns=3)
    profile.associations = [
        Association(columns=[HOSTILE, "b"], measure="spearman", value=-0.8123, rows=990),
        Association(columns=["c", "d"], measure="cramers_v", value=0.61, rows=1000),
    ]
    profile.associationsNote = "Compared: 2 numeric columns"
    text = re.search(
        r'<div class="card" id="associations">(.*?)</table>',
        render_html(analysis, profile, understanding),
        flags=re.S,
    ).group(1)
    assert (
        "−" not in "-0.81" and "-0.81" in text and "0.61" in text and "Spearman" in text and "Cramér" in text
    )
    assert "<script>" not in text
    # With nothing strong, the card says so and what was compared
    profile.associations = []
    page = render_html(analysis, profile, understanding)
    assert "No strong association between columns." in page and "Compared: 2 numeric columns" in page


def test_a_wide_table_keeps_its_data_views_small(build):
    # Given 500 columns, each with missing values, a histogram and sample values of 120 characters
    analysis, profile, understanding = build(columns=500, issues=0)
    for c in profile.columns:
        if c.numeric is not None:
            c.distinct = 900
            c.numeric.histogram = Histogram(
                edges=[float(k) for k in range(21)], counts=list(range(20)), above=3
            )
    profile.sample = SampleRows(rows=list(range(5)), columns=list(range(40)), values=[["v" * 120] * 40] * 5)
    profile.missingOverview = MissingOverview(
        cells=500 * 4, rows=900, patterns=[MissingPattern(columns=list(range(500)), rows=9)] * 8, patternCount=80,
        bandRows=[25] * 40, bandColumns=list(range(40)), bands=[[k % 7 for k in range(40)]] * 40,
    )  # fmt: skip
    page = render_html(analysis, profile, understanding)
    # Then the section with the sample, the missing values and associations stays under 100 KB
    assert len(section(page, "data").encode()) < 100_000
    # and each numeric card with too many values to list draws its histogram
    assert page.count('class="hist"') == 100


def test_long_tokens_break_between_their_parts_never_inside_an_entity():
    assert breakable("noah.nguyen130@example.com") == "noah<wbr>.nguyen130<wbr>@example<wbr>.com"
    assert breakable("a short one.") == "a short one."
    escaped = "&lt;tag&gt;&amp;x.y_zzzzzzzzzz"
    assert breakable(escaped) == "&lt;tag&gt;&amp;x<wbr>.y<wbr>_zzzzzzzzzz"
