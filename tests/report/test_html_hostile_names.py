"""report.html carries no raw control character: hostile names, values and LLM text are shown escaped."""

from __future__ import annotations

import re

import pytest

from iterate.report import render_html

pytestmark = pytest.mark.unit

# clear screen, a colour, BEL, DEL, an 8-bit CSI, a right-to-left override, an isolate, a line separator,
# a newline and a tab
HOSTILE = "a\x1b[2J\x1b[31mb\x07c\x7fd\x9b2Je\u202ef\u2066g\u2028h\ni\tj"
ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def test_the_page_has_no_raw_control_character(build):
    # Given an analysis whose first column name, every value and every LLM text hold control characters
    page = render_html(*build(value=HOSTILE, code=f"x = {HOSTILE!r}\nprint(x)\n"))
    # Then none is left raw (line breaks and tabs are HTML whitespace: kept in prose and code only)
    assert ACTING.findall(page) == []
    # and each is shown as an escape
    assert "a\\x1b[2J\\x1b[31mb\\x07c\\x7fd\\x9b2Je\\u202ef\\u2066g\\u2028h" in page


def test_names_show_their_line_breaks_and_tabs(build):
    page = render_html(*build(value=HOSTILE))
    # a column name in its profile card: a newline inside a name would otherwise read as a space
    card = re.search(r'<div class="card colcard"[^>]*><h3><span>([^<]*)</span>', page)
    assert card is not None and card.group(1).endswith("\\u2028h\\ni\\tj")


def test_values_show_controls_and_edge_whitespace(build):
    page = render_html(*build(value=" \x1b[2J\tx\t"))
    assert (
        '<code class="val"><span class="ws" title="whitespace">·</span>\\x1b[2J\\tx'
        '<span class="ws" title="whitespace">→</span></code>' in page
    )


def test_plain_names_and_text_are_unchanged(build):
    page = render_html(*build(value="prix (€) 名前"))
    assert "<span>prix (€) 名前</span>" in page and "\\x" not in page


def test_the_script_still_matches_its_hash(build):
    # the last pass over the page must leave the inline script byte for byte (the CSP holds its hash)
    import base64
    import hashlib

    page = render_html(*build(value=HOSTILE))
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)  # type: ignore[union-attr]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"sha256-{digest}" in page
