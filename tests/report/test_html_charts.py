"""report.html charts: labels are page text (never clipped by a drawing, never scaled down with it)."""

from __future__ import annotations

import re

import pytest

from iterate.contracts import DateStats, ValueCount
from iterate.report import render_html
from iterate.report.charts import Bar, HeatCell, hbar_chart, heat_strip

pytestmark = pytest.mark.unit


def test_no_text_is_drawn_inside_an_svg(build):
    # Given a report with bar charts, a heat strip, box plots and date formats
    analysis, profile, understanding = build(columns=6)
    profile.columns[2].dates = DateStats(
        count=900, min="2024-01-01", max="2025-12-31",
        formats=[ValueCount(value="%Y-%m-%d", count=880), ValueCount(value="%d/%m/%Y", count=20)],
    )  # fmt: skip
    page = render_html(analysis, profile, understanding)
    # Then no chart holds <text>: an SVG scales its text with it, which made labels unreadable on a phone
    assert "<svg" in page  # (the box plots are still drawings)
    assert "<text" not in page
    # and the labels that used to be clipped on the left are whole, in HTML
    assert '<span class="hb-l" title="%Y-%m-%d: 880">%Y-%m-%d</span>' in page
    assert '<span class="hb-l" title="%d/%m/%Y: 20">%d/%m/%Y</span>' in page


def test_short_labels_are_whole_and_long_ones_cut_with_the_full_text_in_the_tooltip():
    chart = hbar_chart([Bar("CA", 40), Bar("x" * 60, 2)])
    assert ">CA</span>" in chart
    assert f">{'x' * 39}…</span>" in chart and f'title="{"x" * 60}: 2"' in chart


def test_bars_are_as_long_as_their_values():
    chart = hbar_chart([Bar("a", 40), Bar("b", 10), Bar("c", 0)])
    widths = re.findall(r'<i style="width:([^;]+);', chart)
    assert widths == ["max(100.00%, 2px)", "max(25.00%, 2px)", "0%"]
    assert re.findall(r'<span class="hb-v">([^<]*)</span>', chart) == ["40", "10", "0"]


def test_the_heat_strip_names_its_columns_until_there_are_too_many():
    cells = [HeatCell(f"c{i}", "low" if i % 2 else None, i % 2, 0.3, f"col-{i}") for i in range(10)]
    strip = heat_strip(cells)
    assert strip.count('class="hc"') == 5 and strip.count('class="hc none"') == 5
    assert "<span>c3</span>" in strip and 'href="#col-3"' in strip and 'href="#col-2"' not in strip
    wide = heat_strip([HeatCell(f"c{i}", None, 0, 0.0, f"col-{i}") for i in range(200)])
    assert wide.count('class="hc bare none"') == 200 and "<span>c1</span>" not in wide
    assert 'title="c199: no issue"' in wide


def test_box_plot_numbers_are_page_text(build):
    analysis, profile, understanding = build(columns=2)
    page = render_html(analysis, profile, understanding)
    assert '<div class="axis"><span>min -5</span><span>median 48 · axis zoomed to the whiskers</span>' in page
    assert "<span>max 10,000</span>" in page


def test_a_narrow_screen_gets_its_own_layout():
    from iterate.report.pieces import asset as _asset

    css = _asset("report.css")
    # the column cards may be narrower than 360 px, and an issue's numbers go under its title
    assert "minmax(min(360px, 100%), 1fr)" in css
    assert re.search(
        r"@media \(max-width: 640px\) \{[^@]*details\.issue > summary \{ grid-template-columns: 1fr", css
    )
