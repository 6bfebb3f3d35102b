"""Inline SVG charts drawn in Python: no JS library, no external asset, every label HTML-escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from iterate.contracts import NumericStats

SEVERITY_COLOURS = {"high": "#d64545", "medium": "#e8912d", "low": "#4a7bd0"}
BAR_COLOUR = "#5b7fa6"


def esc(value: object) -> str:
    """HTML-escape anything, quotes included (safe in text, attributes and SVG)."""
    return escape(str(value), quote=True)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis, so one long value cannot bloat the report."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def fmt_num(x: float) -> str:
    """A compact, readable number: thousands separators, at most 4 significant decimals."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.1f}"


def fmt_share(part: float, whole: float) -> str:
    """`part` as a share of `whole`, the one way every share on the page is written.

    One decimal; never "0.0%" for something that happened nor "100.0%" for less than all (a single row in
    a million is "<0.1%", all but one is ">99.9%"); "n/a" when there is nothing to divide by.
    """
    if not whole or whole < 0:
        return "n/a"
    share = part / whole
    if part <= 0:
        return "0%"
    if part >= whole:
        return "100%"
    if share < 0.001:
        return "<0.1%"
    if share > 0.999:
        return ">99.9%"
    return f"{share:.1%}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and the word in the number it takes: "1 row", "2 rows", "1,503 rows"."""
    return f"{fmt_num(n)} {word if n == 1 else (many or word + 's')}"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    title: str = ""
    colour: str = BAR_COLOUR


def hbar_chart(bars: Sequence[Bar], *, width: int = 360, label_chars: int = 22, row_h: int = 18) -> str:
    """Horizontal bars, one per label, value printed at the bar's end; tooltips hold the longer text."""
    if not bars:
        return ""
    label_w = min(max(len(b.label) for b in bars), label_chars) * 6.6 + 8
    value_w = 58
    plot_w = max(width - label_w - value_w, 40)
    top = max((b.value for b in bars), default=0) or 1
    height = row_h * len(bars) + 4
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, b in enumerate(bars):
        y = 2 + i * row_h
        w = max(plot_w * (b.value / top), 1.5 if b.value else 0)
        tip = esc(clip(b.title or f"{b.label}: {fmt_num(b.value)}", 240))
        out.append(
            f"<g><title>{tip}</title>"
            f'<text x="{label_w - 6:.1f}" y="{y + row_h * 0.68:.1f}" font-size="11" text-anchor="end" '
            f'fill="#3e4c59">{esc(clip(b.label, label_chars))}</text>'
            f'<rect x="{label_w:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" rx="2" fill="{b.colour}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + row_h * 0.68:.1f}" font-size="11" '
            f'fill="#616e7c">{esc(fmt_num(b.value))}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def severity_chart(counts: dict[str, int], *, width: int = 360) -> str:
    """Issues by severity as three coloured bars (high, medium, low)."""
    bars = [
        Bar(sev.capitalize(), counts.get(sev, 0), colour=SEVERITY_COLOURS[sev])
        for sev in ("high", "medium", "low")
    ]
    return hbar_chart(bars, width=width, label_chars=8, row_h=26)


def stacked_severity_bars(rows: Sequence[tuple[str, dict[str, int]]], *, width: int = 520) -> str:
    """One stacked bar per column: how many issues of each severity touch it."""
    if not rows:
        return ""
    label_chars = 26
    label_w = min(max(len(name) for name, _ in rows), label_chars) * 6.6 + 8
    plot_w = width - label_w - 40
    top = max(sum(c.values()) for _, c in rows) or 1
    row_h = 18
    height = row_h * len(rows) + 4
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (name, counts) in enumerate(rows):
        y = 2 + i * row_h
        total = sum(counts.values())
        tip = esc(
            f"{clip(name, 200)}: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("high", "medium", "low"))
        )
        out.append(
            f"<g><title>{tip}</title>"
            f'<text x="{label_w - 6:.1f}" y="{y + 12.5}" font-size="11" text-anchor="end" fill="#3e4c59">'
            f"{esc(clip(name, label_chars))}</text>"
        )
        x = label_w
        for sev in ("high", "medium", "low"):
            n = counts.get(sev, 0)
            if n:
                w = plot_w * n / top
                out.append(
                    f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                    f'fill="{SEVERITY_COLOURS[sev]}"/>'
                )
                x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 12.5}" font-size="11" fill="#616e7c">{total}</text></g>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class HeatCell:
    name: str
    severity: str | None  # highest severity among the column's issues; None when it has none
    issues: int
    share: float  # largest affected-row share among those issues, 0..1
    anchor: str


def heat_strip(cells: Sequence[HeatCell], *, width: int = 1140) -> str:
    """One square per column, coloured by its worst issue and shaded by how many rows that issue touches."""
    if not cells:
        return ""
    per_row = max(min(len(cells), 50), 1)
    size = min(max((width - 10) / per_row, 8), 40)
    gap = 2
    n_rows = math.ceil(len(cells) / per_row)
    # one row of squares has room for slanted names under it; wider tables rely on the tooltips
    label_h = 86 if n_rows == 1 else 0
    height = n_rows * (size + gap) + 2 + label_h
    w = per_row * (size + gap) + 2 + label_h
    out = [
        f'<svg viewBox="0 0 {w:.0f} {height:.0f}" width="{w:.0f}" height="{height:.0f}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, c in enumerate(cells):
        x = 1 + (i % per_row) * (size + gap)
        y = 1 + (i // per_row) * (size + gap)
        if c.severity:
            colour = SEVERITY_COLOURS.get(c.severity, BAR_COLOUR)
            opacity = 0.35 + 0.65 * min(max(c.share, 0.0), 1.0) ** 0.5
        else:
            colour, opacity = "#e4e7eb", 1.0
        tip = esc(
            f"{clip(c.name, 200)}: {c.issues} issue(s)"
            + (f", worst {c.severity}, up to {c.share:.1%} of rows" if c.issues else "")
        )
        rect = (
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{size:.1f}" height="{size:.1f}" rx="2" fill="{colour}" '
            f'fill-opacity="{opacity:.2f}"><title>{tip}</title></rect>'
        )
        out.append(f'<a href="#{esc(c.anchor)}">{rect}</a>' if c.issues else rect)
        if label_h:
            lx, ly = x + size / 2 - 3, y + size + 8
            out.append(
                f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="10.5" fill="#3e4c59" '
                f'transform="rotate(45 {lx:.1f} {ly:.1f})">{esc(clip(c.name, 16))}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def box_plot(stats: NumericStats, *, width: int = 340, height: int = 74) -> str:
    """A box plot from profile statistics: whiskers at the Tukey fences, min/max and mean marked."""
    lo, hi = stats.min, stats.max
    iqr = stats.q3 - stats.q1
    fence_lo = max(lo, stats.q1 - 1.5 * iqr)
    fence_hi = min(hi, stats.q3 + 1.5 * iqr)
    # With far outliers a linear min..max axis squashes the box to a line: zoom on the fences instead
    # and draw the extremes as labelled arrows at the edges.
    zoom = iqr > 0 and (hi - lo) > 12 * iqr
    a, b = (fence_lo, fence_hi) if zoom else (lo, hi)
    if b <= a:
        a, b = a - 1, b + 1
    pad = 14
    plot_w = width - 2 * pad

    def x(v: float) -> float:
        return pad + plot_w * (min(max(v, a), b) - a) / (b - a)

    mid = 30
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{x(fence_lo):.1f}" y1="{mid}" x2="{x(fence_hi):.1f}" y2="{mid}" stroke="#9aa5b1"/>',
        f'<line x1="{x(fence_lo):.1f}" y1="{mid - 8}" x2="{x(fence_lo):.1f}" y2="{mid + 8}" stroke="#9aa5b1"/>',
        f'<line x1="{x(fence_hi):.1f}" y1="{mid - 8}" x2="{x(fence_hi):.1f}" y2="{mid + 8}" stroke="#9aa5b1"/>',
        f'<rect x="{x(stats.q1):.1f}" y="{mid - 13}" width="{max(x(stats.q3) - x(stats.q1), 1.5):.1f}" '
        f'height="26" fill="#c9d8ea" stroke="#5b7fa6" rx="2"><title>{esc("Q1 " + fmt_num(stats.q1))}, '
        f"{esc('Q3 ' + fmt_num(stats.q3))}</title></rect>",
        f'<line x1="{x(stats.median):.1f}" y1="{mid - 13}" x2="{x(stats.median):.1f}" y2="{mid + 13}" '
        f'stroke="#243b53" stroke-width="2"><title>{esc("median " + fmt_num(stats.median))}</title></line>',
        f'<circle cx="{x(stats.mean):.1f}" cy="{mid}" r="3" fill="#d64545"><title>'
        f"{esc('mean ' + fmt_num(stats.mean))}</title></circle>",
    ]
    if zoom:
        if lo < fence_lo:
            out.append(f'<text x="2" y="{mid + 4}" font-size="11" fill="#d64545">◀</text>')
        if hi > fence_hi:
            out.append(f'<text x="{width - 11}" y="{mid + 4}" font-size="11" fill="#d64545">▶</text>')
    out.append(
        f'<text x="{pad}" y="{height - 6}" font-size="10.5" fill="#616e7c">{esc(fmt_num(lo))}</text>'
        f'<text x="{width - pad}" y="{height - 6}" font-size="10.5" fill="#616e7c" text-anchor="end">'
        f"{esc(fmt_num(hi))}</text>"
        f'<text x="{width / 2}" y="{height - 6}" font-size="10.5" fill="#616e7c" text-anchor="middle">'
        f"{esc('median ' + fmt_num(stats.median))}{' · axis zoomed to the whiskers' if zoom else ''}</text>"
    )
    out.append("</svg>")
    return "".join(out)
