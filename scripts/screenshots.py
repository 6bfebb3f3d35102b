"""Render report.html in headless Chromium at desktop and phone widths into PNGs, and check its layout: `make screenshots`.

    python scripts/screenshots.py out/demo/report.html [more.html ...] [--out out/screenshots] [--widths 1400 390]

For each page and width it writes `<out>/<name>-<width>-<k>.png`, the whole page in tiles of at most 2,000 CSS
pixels (every issue opened, so the evidence tables are in the picture), and prints what the layout check found:
text cut off by its box or by the edge of its chart, text drawn smaller than 10 px, a word broken across two
lines although it fits its box whole, and a page wider than the screen. The exit code is 1 when anything was
found, so the check can gate a change.

Only the Python standard library: Chromium is driven over its DevTools protocol on a pipe
(`--remote-debugging-pipe`), so neither a WebSocket client nor Selenium/Playwright is needed. Chromium comes
from the system (`apt-get install -y chromium`); it runs with a fresh profile, no network services and no GPU.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "out" / "screenshots"
WIDTHS = (1400, 390)
TILE = 2000  # CSS pixels per PNG: taller images are scaled down by viewers until text cannot be read
MIN_FONT_PX = 10.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)

# Runs in the page: every visible piece of text that is cut off, too small, or off the screen.
LAYOUT_CHECK = r"""
(() => {
  const problems = [];
  const W = document.documentElement.clientWidth;
  const say = (kind, el, detail) => {
    const text = (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
    const cls = el.getAttribute && el.getAttribute("class");
    problems.push({kind, tag: el.tagName.toLowerCase() + (cls ? "." + cls.split(" ")[0] : ""), text, detail});
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && el.getClientRects().length > 0;
  };
  if (document.documentElement.scrollWidth > W + 1) {
    problems.push({kind: "page wider than the screen", tag: "html", text: "",
                   detail: document.documentElement.scrollWidth + " > " + W});
  }
  for (const el of document.querySelectorAll("body *")) {
    if (!visible(el) || el.closest("svg")) continue;
    const st = getComputedStyle(el);
    const ownText = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
    if (ownText && parseFloat(st.fontSize) < MIN_FONT) say("text under " + MIN_FONT + " px", el, st.fontSize);
    const clipsX = ["hidden", "clip"].includes(st.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const clipsY = ["hidden", "clip"].includes(st.overflowY) && el.scrollHeight > el.clientHeight + 1;
    if ((clipsX || clipsY) && el.textContent.trim()) say("text cut off by its box", el,
      el.scrollWidth + "x" + el.scrollHeight + " in " + el.clientWidth + "x" + el.clientHeight);
    const scrolls = ["auto", "scroll"].includes(st.overflowX) && el.scrollWidth > el.clientWidth + 1;
    if (scrolls && el.tagName !== "PRE") say("box scrolls sideways", el, el.scrollWidth + " > " + el.clientWidth);
    const r = el.getBoundingClientRect();
    if (ownText && (r.right > W + 1 || r.left < -1) && !el.closest("pre")) say("text beyond the screen", el,
      Math.round(r.left) + ".." + Math.round(r.right) + " of " + W);
  }
  // A word split across two lines although it fits its block whole: a break between words was possible
  // (or the box could grow). Words longer than their block may break: that is the last resort.
  const blockOf = (el) => {
    for (let b = el; b; b = b.parentElement) if (getComputedStyle(b).display !== "inline") return b;
    return document.body;
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest("pre, svg, script, style, title") || !visible(el)) continue;
    const text = node.textContent;
    const lines = (a, b) => {
      const range = document.createRange();
      range.setStart(node, a);
      range.setEnd(node, b);
      const rects = Array.from(range.getClientRects()).filter((r) => r.width > 0);
      return [new Set(rects.map((r) => Math.round(r.top))).size, rects.reduce((sum, r) => sum + r.width, 0)];
    };
    const tokens = /\S{2,}/g;
    for (let m = tokens.exec(text); m; m = tokens.exec(text)) {
      const [n, wide] = lines(m.index, m.index + m[0].length);
      if (n < 2) continue;
      const block = blockOf(el);
      const pad = parseFloat(getComputedStyle(block).paddingLeft) + parseFloat(getComputedStyle(block).paddingRight);
      const room = block.clientWidth - pad;
      if (wide > room - 1) continue;  // longer than its box: breaking it is the last resort
      // Breaking after punctuation (a hyphen, a slash, an @ or a dot) is a break between parts; between two
      // letters or digits it splits a word.
      const parts = /[\p{L}\p{N}]+[^\p{L}\p{N}]*/gu;
      for (let q = parts.exec(m[0]); q; q = parts.exec(m[0])) {
        if (q[0].length > 1 && lines(m.index + q.index, m.index + q.index + q[0].length)[0] > 1) {
          say("word broken inside", el, JSON.stringify(m[0].slice(0, 40)) + " " + Math.round(wide) + " px in " + Math.round(room));
          break;
        }
      }
    }
  }
  for (const svg of document.querySelectorAll("svg")) {
    if (!visible(svg)) continue;
    const box = svg.getBoundingClientRect();
    const vb = svg.viewBox && svg.viewBox.baseVal;
    const scale = vb && vb.width ? box.width / vb.width : 1;
    for (const t of svg.querySelectorAll("text")) {
      const r = t.getBoundingClientRect();
      if (!r.width) continue;
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      if (px < MIN_FONT) say("chart text under " + MIN_FONT + " px", t, px.toFixed(1) + " px");
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        say("chart text cut off by its chart", t,
            Math.round(r.left - box.left) + ".." + Math.round(r.right - box.left) + " of " + Math.round(box.width));
    }
  }
  return problems;
})()
""".replace("MIN_FONT", repr(MIN_FONT_PX))


def find_chromium() -> str | None:
    """The system's Chromium (or Chrome), or None when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium driven over the DevTools protocol on a pipe (fd 3: commands in, fd 4: replies out)."""

    def __init__(self, binary: str, profile_dir: Path, timeout_s: float = 60.0) -> None:
        to_chrome_r, self._to_chrome = _high_fds(*os.pipe())
        self._from_chrome, from_chrome_w = _high_fds(*os.pipe())
        # Chromium reads commands on fd 3 and writes replies on fd 4: a shell puts the pipes there (subprocess
        # cannot map a descriptor to a chosen number) and closes its own copies before it becomes Chromium.
        remap = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
        self.proc = subprocess.Popen(
            ["bash", "-c", remap, binary, *FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_chrome_r, from_chrome_w),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.timeout_s = timeout_s
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.session: str | None = None

    def close(self) -> None:
        """Ask Chromium to quit (it then ends its renderers and writes nothing more), and make sure it did."""
        if self.proc.poll() is None:
            with suppress(OSError, RuntimeError, TimeoutError):
                self.timeout_s = 5.0
                self.send("Browser.close", browser=True)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        for fd in (self._to_chrome, self._from_chrome):
            with suppress(OSError):
                os.close(fd)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (did it start?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> Any:
        """Send one command (to the page's session unless `browser`) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            for k, event in enumerate(self._events):
                if event["method"] == method:
                    del self._events[k]
                    return event
            self._events.append(self._read_message(deadline))

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self.session = self.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, browser=True
        )["sessionId"]
        self.send("Page.enable")

    def load(self, url: str, width: int, height: int = 1000) -> None:
        """Load `url` in a viewport `width` CSS pixels wide (a phone's when narrow: the viewport meta applies)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700},
        )
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, y: int, width: int, height: int) -> bytes:
        clip = {"x": 0, "y": y, "width": width, "height": height, "scale": 1}
        shot = self.send(
            "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
        )
        return base64.b64decode(shot["data"])


def _high_fds(*fds: int) -> tuple[int, ...]:
    """The same pipe ends moved to descriptors above 9, so that putting them on 3 and 4 cannot overwrite them."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds)
    for fd in fds:
        os.close(fd)
    return moved


@contextmanager
def browser(binary: str | None = None) -> Iterator[Browser]:
    """A started headless Chromium with a fresh profile, closed (and its profile removed) afterwards."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found: apt-get install -y chromium")
    # (ignore_cleanup_errors: a crash-reporter thread may still be closing a file as the directory goes)
    with tempfile.TemporaryDirectory(prefix="iterate-chromium-", ignore_cleanup_errors=True) as profile:
        b = Browser(binary, Path(profile))
        try:
            b.open_page()
            yield b
        finally:
            b.close()


def check_layout(b: Browser, url: str, width: int, *, expand: bool = True) -> list[dict[str, str]]:
    """Load `url` at `width` and return every layout problem the page shows (empty when none)."""
    b.load(url, width)
    if expand:
        b.evaluate("document.querySelectorAll('details.issue').forEach((d) => { d.open = true; })")
    problems: list[dict[str, str]] = b.evaluate(LAYOUT_CHECK)
    return problems


def capture(b: Browser, width: int, dest: Path, stem: str) -> list[Path]:
    """The loaded page, whole, as PNG tiles of at most TILE CSS pixels: `<dest>/<stem>-<k>.png`."""
    height = int(b.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
    paths = []
    for k, top in enumerate(range(0, height, TILE), start=1):
        path = dest / f"{stem}-{k}.png"
        path.write_bytes(b.screenshot(top, width, min(TILE, height - top)))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "pages", nargs="*", type=Path, help="report.html files (default: out/demo/report.html)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    parser.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    args = parser.parse_args(argv)
    pages = args.pages or [REPO / "out" / "demo" / "report.html"]
    missing = [p for p in pages if not p.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(map(str, missing))} (run `make demo` first)")
    args.out.mkdir(parents=True, exist_ok=True)
    found = 0
    with browser(args.chromium) as b:
        for page in pages:
            name = page.parent.name if page.name == "report.html" else page.stem
            for width in args.widths:
                problems = check_layout(b, page.resolve().as_uri(), width)
                shots = capture(b, width, args.out, f"{name}-{width}")
                print(
                    f"{page} at {width} px: {len(shots)} PNG(s) in {args.out}, {len(problems)} layout problem(s)"
                )
                for p in problems[:40]:
                    print(f"  {p['kind']}: <{p['tag']}> {p['text']!r} ({p['detail']})")
                found += len(problems)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
