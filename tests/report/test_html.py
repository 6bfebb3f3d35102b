"""report.html: self-contained, every value escaped, small whatever the width of the data."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from iterate.report import render_html

pytestmark = pytest.mark.unit

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</style><script>alert(2)</script>",
    "javascript:alert(3)",
]


def handler_attributes(page: str) -> list[str]:
    """Every on* attribute of every element, as a browser's parser reads the page."""
    found: list[str] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(name for name, _ in attrs if name.startswith("on"))

    Parser().feed(page)
    return found


@pytest.mark.parametrize("value", HOSTILE)
def test_values_from_the_data_are_escaped_everywhere(build, value):
    # Given an analysis where cell values, column names, LLM text and code all carry markup
    analysis, profile, understanding = build(value=value, code=f"print({value!r})")
    # When it is rendered
    page = render_html(analysis, profile, understanding)
    # Then the markup never appears as markup
    assert value not in page or value == "javascript:alert(3)"
    assert "<script>alert" not in page
    assert not handler_attributes(page)  # as text (escaped, or inside an attribute's value) it is inert
    assert "<img" not in page


def test_the_page_is_self_contained(build):
    analysis, profile, understanding = build()
    page = render_html(analysis, profile, understanding)
    assert page.lstrip().lower().startswith("<!doctype html>")
    # no external resources: nothing fetched from the network when the file is opened
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, flags=re.I)
    assert "@import" not in page and "url(http" not in page


def test_it_shows_the_numbers_of_the_contracts(build):
    analysis, profile, understanding = build(issues=4)
    page = render_html(analysis, profile, understanding)
    for issue in analysis.issues:
        assert issue.id in page
        rows = issue.evidence.affectedRows
        assert f"{rows:,}" in page or str(rows) in page
    assert "llm" in page.lower()


def test_a_wide_analysis_stays_small(build):
    # 500 columns, 100 issues with many examples and long values
    analysis, profile, understanding = build(
        columns=500, issues=100, examples=60, value="x" * 300, top_values=40
    )
    page = render_html(analysis, profile, understanding)
    assert len(page.encode()) < 3_000_000
    assert "x" * 1001 not in page  # long text is cut (cell values at 120 characters, prose at 1,000)
