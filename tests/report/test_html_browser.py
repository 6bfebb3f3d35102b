"""report.html in a real headless browser: the page's own script runs under its CSP, a changed one does not,
and no text is clipped, off screen or drawn too small to read, on a desktop (1400 px) or a phone (390 px).

Skipped where no Chromium is installed (CI has none); `make screenshots` runs the same layout check and
writes the pictures.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iterate.contracts import DateStats, EvidenceExample, RowNumbering, ValueCount
from iterate.contracts.profile import (
    Association,
    DateHistogram,
    Histogram,
    MissingOverview,
    MissingPattern,
    SampleRows,
)
from iterate.report import render_html

REPO = Path(__file__).resolve().parents[2]
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed")]


def screenshots_module():
    spec = importlib.util.spec_from_file_location("screenshots", REPO / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dom_after_scripts(page: str, tmp_path: Path) -> str:
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    return done.stdout


def shown(dom: str) -> int:
    return int(re.search(r'id="issue-shown">(\d+)<', dom).group(1))


def test_the_filter_script_runs_and_a_tampered_script_is_blocked(build, tmp_path):
    # Given a report whose search box starts with text no issue matches
    analysis, profile, understanding = build(issues=6, value="<script>alert(1)</script>")
    page = render_html(analysis, profile, understanding).replace(
        'id="issue-search"', 'id="issue-search" value="no-such-issue"'
    )
    # When the browser loads it, the page's own script filters every issue out
    assert shown(dom_after_scripts(page, tmp_path)) == 0
    # And when the script is altered, the Content-Security-Policy hash refuses to run it
    tampered = page.replace('"use strict";', '"use strict"; /* changed */', 1)
    assert shown(dom_after_scripts(tampered, tmp_path)) == 6


def crowded_report(build) -> str:
    """A report with what used to be clipped or shrunk: state codes and date formats as bar labels, long
    column names, 60 columns in the heat strip, example tables with context columns and long values."""
    analysis, profile, understanding = build(
        columns=60, issues=12, rows=336_776, value="Widget", top_values=8
    )
    for i, c in enumerate(profile.columns):
        if i % 3 == 0:
            c.topValues = [
                ValueCount(value=v, count=900 - k) for k, v in enumerate(["CA", "MA", "WA", "CO", "NY"])
            ]
        if i % 5 == 1:
            c.name = f"a rather long column name number {i} (mm)"
    profile.columns[2].dates = DateStats(
        count=900, min="2024-01-01", max="2025-12-31",
        formats=[ValueCount(value="%Y-%m-%d", count=880), ValueCount(value="%d/%m/%Y", count=20)],
    )  # fmt: skip
    profile.rowNumbering = RowNumbering(format="csv", place="line", firstPlace=2)
    context = {"order_id": "SO-100004", "customer_name": "Sly Fox Brewing Company", "city": "Phoenixville"}
    analysis.issues[0].evidence.examples = [
        EvidenceExample(row=r, column="notes", value="", line=r + 2, context=context) for r in range(10)
    ]
    analysis.issues[1].evidence.examples = [
        EvidenceExample(row=r, column="ounces", value="12.0 oz. Alumi-Tek" + "x" * 90, expected="12.0")
        for r in range(5)
    ]
    understanding.columns[
        1
    ].description = "E-mail addresses such as noah.nguyen130@example.com, farid.walsh1@example.com"
    analysis.run = analysis.run.model_copy(update={"contentHash": "661e9121d939c21d565c64cda385803f" * 2})
    add_data_views(profile)
    return render_html(analysis, profile, understanding)


def add_data_views(profile) -> None:
    """The views of the data at their fullest: histograms on every numeric card and a dated one, e-mail
    addresses in top values and sample rows, long names in the missing-values strips and patterns, and
    associations between long-named columns."""
    for c in profile.columns:
        if c.numeric is not None:
            c.distinct = 5000
            c.numeric.histogram = Histogram(
                edges=[1000.5 * k for k in range(21)], counts=[k * k for k in range(20)], below=4, above=7
            )
    profile.columns[2].distinct = 700
    profile.columns[2].dates.histogram = DateHistogram(
        edges=[f"2024-{m:02d}-01" for m in range(1, 13)], counts=[5, 80, 90, 100, 90, 80, 5, 3, 2, 1, 0]
    )
    emails = [
        f"{n}.{s}{k}@example.com" for k, (n, s) in enumerate([("noah", "nguyen"), ("farid", "walsh")] * 3)
    ]
    profile.columns[3].topValues = [ValueCount(value=e, count=30 - k) for k, e in enumerate(emails)]
    names = [c.name for c in profile.columns]
    profile.sample = SampleRows(
        rows=[0, 1, 2, 3, 4],
        columns=list(range(12)),
        values=[[emails[r], "Sly Fox Brewing Company", "x" * 119 + "…", "12.5"] * 3 for r in range(5)],
    )
    profile.missingOverview = MissingOverview(
        cells=5000, rows=4000, patterns=[MissingPattern(columns=list(range(k, k + 9)), rows=900 - k) for k in range(8)],
        patternCount=40, bandRows=[8419] * 40, bandColumns=list(range(1, 60, 3)),
        bands=[[(k * j) % 900 for k in range(40)] for j in range(20)],
    )  # fmt: skip
    for c in profile.columns[1:60:3]:
        c.missing = 1000
    profile.associations = [
        Association(columns=[names[k], names[k + 5]], measure="spearman", value=0.9 - k / 50, rows=300_000)
        for k in range(1, 12)
    ] + [Association(columns=[names[0], names[11]], measure="cramers_v", value=0.71, rows=336_000)]
    profile.associationsNote = "Compared: 30 numeric columns by Spearman's rank correlation, on 50,000 rows"


@pytest.mark.parametrize("width", [1400, 390])
def test_no_text_is_clipped_or_unreadable(build, tmp_path, width):
    # Given a crowded report, When a browser lays it out at a desktop's and a phone's width
    path = tmp_path / "report.html"
    path.write_text(crowded_report(build), encoding="utf-8")
    shots = screenshots_module()
    with shots.browser(BROWSER) as b:
        problems = shots.check_layout(b, path.as_uri(), width)
    # Then nothing is cut off, beyond the screen, smaller than 10 px, or broken inside a word that fits
    assert problems == []


@pytest.mark.parametrize("width", [1400, 390])
def test_the_data_views_are_laid_out_on_screen(build, tmp_path, width):
    # Given the crowded report with every view of the data
    path = tmp_path / "report.html"
    path.write_text(crowded_report(build), encoding="utf-8")
    shots = screenshots_module()
    with shots.browser(BROWSER) as b:
        b.load(path.as_uri(), width)
        # When laid out, each view is drawn, within the screen, and the histograms are not squashed
        boxes = b.evaluate(
            "Array.from(document.querySelectorAll('#missing .strip, .hist svg, #sample td, #associations td'))"
            ".map((e) => { const r = e.getBoundingClientRect(); return [e.tagName, r.left, r.right, r.height]; })"
        )
    assert {tag for tag, *_ in boxes} >= {"SPAN", "svg", "TD"}
    assert all(left >= 0 and right <= width + 0.5 and height > 0 for _, left, right, height in boxes)
    assert all(height >= 40 for tag, _, _, height in boxes if tag == "svg")


def test_the_layout_check_finds_clipped_and_tiny_text(tmp_path):
    # (the check itself can fail: an SVG label past its left edge, and a chart scaled down to a phone)
    page = (
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"></head><body>'
        '<svg viewBox="0 0 1000 40" width="1000" style="max-width:100%;height:auto">'
        '<text x="5" y="20" font-size="11" text-anchor="end">CA</text></svg>'
        '<div style="width:60px;overflow:hidden;white-space:nowrap">a label far too long for its box</div>'
        '<p style="width:160px;word-break:break-all">the quick brownfox jumped over lazydogs again and again</p>'
        "</body></html>"
    )
    path = tmp_path / "bad.html"
    path.write_text(page, encoding="utf-8")
    shots = screenshots_module()
    with shots.browser(BROWSER) as b:
        kinds = {p["kind"] for p in shots.check_layout(b, path.as_uri(), 390)}
    assert {
        "chart text cut off by its chart",
        "chart text under 10 px",
        "text cut off by its box",
        "word broken inside",
    } <= kinds
