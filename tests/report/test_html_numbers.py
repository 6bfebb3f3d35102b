"""report.html numbers: every share from one formula and one format, counts with their noun in the right number."""

from __future__ import annotations

import re

import pytest

from iterate.report import render_html
from iterate.report.charts import fmt_share, plural

pytestmark = pytest.mark.unit


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


def card(page: str, column: str) -> str:
    """The profile card of one column: from its heading to the next card."""
    cards = page.split('<div class="card colcard"')[1:]
    found = [c for c in cards if f"<h3><span>{column}</span>" in c]
    assert len(found) == 1, column
    return found[0]


@pytest.mark.parametrize(
    ("part", "whole", "text"),
    [
        (1471, 1503, "97.9%"),
        (0, 1503, "0%"),
        (1503, 1503, "100%"),
        (1, 336_776, "<0.1%"),
        (336_775, 336_776, ">99.9%"),
        (40, 1503, "2.7%"),
        (5, 0, "n/a"),
    ],
)
def test_a_share_is_written_one_way(part, whole, text):
    assert fmt_share(part, whole) == text


def test_counts_take_the_number_of_their_noun():
    assert (plural(1, "row"), plural(2, "row"), plural(1503, "value")) == ("1 row", "2 rows", "1,503 values")


def test_a_column_card_divides_missing_by_the_rows_of_the_table(build):
    # Given a mostly empty column: 32 values filled, 1,471 missing, in 1,503 rows
    analysis, profile, understanding = build(rows=1503, columns=3)
    profile.columns[1] = profile.columns[1].model_copy(
        update={"count": 32, "missing": 1471, "disguisedMissing": 0}
    )
    # When rendered
    text = card(render_html(analysis, profile, understanding), "col_1")
    # Then its missing share is of all rows (1,471 / 1,503), never of the filled values (1,471 / 32)
    assert "1,471 (97.9%)" in text and "32 (2.1%)" in text
    assert "4596" not in text


def test_a_single_missing_value_in_a_large_table_is_not_rounded_to_nothing(build):
    analysis, profile, understanding = build(rows=336_776, columns=3)
    profile.columns[1] = profile.columns[1].model_copy(
        update={"count": 336_775, "missing": 1, "disguisedMissing": 0}
    )
    text = card(render_html(analysis, profile, understanding), "col_1")
    assert "1 (&lt;0.1%)" in text and ">99.9%" in text.replace("&gt;", ">")


def test_an_issue_shows_the_same_share_in_its_header_and_its_evidence(build):
    # Given an issue over 40 of 1,503 rows
    analysis, profile, understanding = build(rows=1503, issues=1)
    ev = analysis.issues[0].evidence.model_copy(
        update={"affectedRows": 40, "affectedCells": 1, "affectedShare": 0.026613}
    )
    analysis.issues[0] = analysis.issues[0].model_copy(update={"evidence": ev})
    page = section(render_html(analysis, profile, understanding), "issues")
    # Then both say 2.7%, with the nouns in the right number
    assert "<b>40</b> rows (2.7%)" in page and "<b>1</b> cell" in page and "<b>1</b> cells" not in page
    assert "1 cell in 40 rows (2.7% of 1,503 rows)" in page
    assert "2.66%" not in page
