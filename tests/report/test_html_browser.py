"""report.html in a real headless browser: the page's own script runs under its CSP, a changed one does not."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iterate.report import render_html

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(BROWSER is None, reason="no headless Chromium installed")]


def dom_after_scripts(page: str, tmp_path: Path) -> str:
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--dump-dom", path.as_uri()],
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
