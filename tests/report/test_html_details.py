"""report.html details: one script only (pinned by CSP), order, caps, size independent of row count."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser

import pytest

from iterate.report import render_html

pytestmark = pytest.mark.unit


def section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


@pytest.mark.parametrize("value", ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'])
def test_hostile_values_are_shown_escaped_and_only_the_pages_own_script_exists(build, value):
    # Given hostile text in cell values, column names, LLM prose and investigation code
    analysis, profile, understanding = build(value=value, code=f"print({value!r})")
    # When rendered
    page = render_html(analysis, profile, understanding)
    # Then it is visible as text (escaped), and the page holds exactly one script element and no <img>
    assert (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") in page
    )
    tags = Tags()
    tags.feed(page)
    assert tags.names.count("script") == 1 and "img" not in tags.names
    assert not tags.handlers  # no event-handler attribute on any element


class Tags(HTMLParser):
    """Every element and every on* attribute, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.names.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def test_the_content_security_policy_pins_the_inline_script_by_hash(build):
    page = render_html(*build())
    script = re.search(r"<script>(.*?)</script>", page, flags=re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert f"script-src &#x27;sha256-{digest}&#x27;" in csp and "default-src &#x27;none&#x27;" in csp


def test_issues_are_listed_worst_severity_first(build):
    analysis, profile, understanding = build(issues=9)
    page = section(render_html(analysis, profile, understanding), "issues")
    severities = re.findall(r'<details class="issue (high|medium|low)"', page)
    assert len(severities) == 9
    assert severities == sorted(severities, key=["high", "medium", "low"].index)


def test_a_million_rows_do_not_make_the_report_bigger(build):
    # Given the same analysis over 1,000 and over 1,000,000 rows
    small = render_html(*build(rows=1000, issues=20, columns=30))
    big = render_html(*build(rows=1_000_000, issues=20, columns=30))
    # Then only the printed numbers differ in length
    assert abs(len(big) - len(small)) < 0.02 * len(small)


def test_long_values_are_cut_with_an_ellipsis(build):
    analysis, profile, understanding = build(value="y" * 5000, code="print(1)")
    page = render_html(analysis, profile, understanding)
    runs = [len(m) for m in re.findall("y+", page)]
    # cell values stop at 120 characters; prose, errors and outputs at 2,000 at most
    cells = re.findall(r'<code class="val">(y+…?)</code>', page)
    assert max(runs) <= 2000 and cells and all(len(c) <= 120 and c.endswith("…") for c in cells)


def test_edge_whitespace_and_empty_values_are_made_visible(build):
    analysis, profile, understanding = build(value=" Widget\t")
    analysis.issues[0].evidence.examples[0].value = ""
    page = render_html(analysis, profile, understanding)
    assert (
        '<span class="ws" title="whitespace">·</span>Widget<span class="ws" title="whitespace">→</span>'
        in page
    )
    assert '<span class="empty">(empty)</span>' in page


def test_degraded_runs_show_their_reasons_and_llm_runs_their_cost(build):
    page = render_html(*build(mode="degraded", value="Widget"))
    assert "Degraded run." in page and "LLM timed out near Widget" in page
    assert "$0.0871" in page and "12,000 in / 3,400 out" in page


def test_too_many_columns_are_cut_with_a_note(build):
    page = render_html(*build(columns=260, issues=3))
    cards = section(page, "profile")
    assert cards.count('class="card colcard"') == 200
    assert "first 200 of 260 columns" in cards


def test_examples_are_capped_and_the_cap_is_said(build):
    analysis, profile, understanding = build(issues=1, examples=50)
    page = section(render_html(analysis, profile, understanding), "issues")
    table = re.search(r'<table class="t">(.*?)</table>', page, flags=re.S).group(1)
    assert 0 < table.count("<tr>") - 1 <= 20
    assert "of 50 examples shown" in page


def test_five_hundred_issues_with_long_code_stay_under_3_mb(build):
    # Given the widest, noisiest analysis: 500 columns, 500 issues, long values and long investigation code
    analysis, profile, understanding = build(
        columns=500, issues=500, examples=60, value="z" * 400, top_values=40, code="x = 1\n" * 3000
    )
    # When rendered
    page = render_html(analysis, profile, understanding)
    # Then it stays small, and says which issues it left to analysis.json
    assert len(page.encode()) < 3_000_000
    assert "350 lower-ranked issues are left out of this page" in page


def test_date_columns_chart_their_formats(build):
    from iterate.contracts import DateStats, ValueCount

    analysis, profile, understanding = build(columns=3)
    profile.columns[2].dates = DateStats(
        count=900, min="2024-01-01", max="2025-12-31",
        formats=[ValueCount(value="%Y-%m-%d", count=880), ValueCount(value="%d/%m/%Y", count=20)],
    )  # fmt: skip
    card = section(render_html(analysis, profile, understanding), "profile")
    assert "Date formats" in card and "%d/%m/%Y: 20" in card and "2025-12-31" in card


def test_a_batched_proof_says_its_time_was_shared(build):
    # Given one issue whose proof ran with 100 others in one sandbox process, and one that ran alone
    analysis, profile, understanding = build(issues=2)
    first, second = analysis.issues
    shared = first.investigation.model_copy(update={"batch_size": 100, "execution_time_ms": 412.0})  # type: ignore[union-attr]
    analysis = analysis.model_copy(
        update={"issues": [first.model_copy(update={"investigation": shared}), second]}
    )
    # When rendered
    page = section(render_html(analysis, profile, understanding), "issues")
    # Then the shared time is said to be the batch's, the other is plain
    assert "412 ms for 100 proofs run together" in page
    assert page.count("proofs run together") == 1
