"""Inline SVG charts drawn in Python: no JS library, no external asset, every label HTML-escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from iterate.contracts import SEVERITIES, NumericStats
from iterate.wording import fmt_num, fmt_share, plural

__all__ = [
    "Bar",
    "HeatCell",
    "box_plot",
    "breakable",
    "clip",
    "esc",
    "fmt_num",
    "fmt_share",
    "hbar_chart",
    "heat_strip",
    "plural",
]

SEVERITY_COLOURS = {"high": "#d64545", "medium": "#e8912d", "low": "#4a7bd0"}
BAR_COLOUR = "#5b7fa6"


def esc(value: object) -> str:
    """HTML-escape anything, quotes included (safe in text, attributes and SVG)."""
    return escape(str(value), quote=True)


_LONG_TOKEN = re.compile(r"[^\s<>]{16,}")
_SOFT_BREAK = re.compile(r"(?<=\w)([@._])(?=\w)")


def breakable(escaped: str) -> str:
    """Escaped text with a soft break (`<wbr>`) before each `@`, `.` and `_` inside a long token, so that an
    e-mail address or a dotted name that must wrap does so between its parts, not inside one. (Escaping
    never writes `@`, `.` or `_`, so no break lands inside an entity.)"""
    return _LONG_TOKEN.sub(lambda m: _SOFT_BREAK.sub(r"<wbr>\1", m.group()), escaped)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis, so one long value cannot bloat the report."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    title: str = ""
    colour: str = BAR_COLOUR
    shown: str = ""  # the value as printed at the bar's end (default: the number)


def _width(value: float, top: float) -> str:
    """A bar's length as a share of the track; a non-zero value always shows a sliver."""
    if value <= 0 or top <= 0:
        return "0%"
    return f"max({100 * min(value / top, 1.0):.2f}%, 2px)"


def hbar_chart(bars: Sequence[Bar], *, label_chars: int = 40) -> str:
    """Horizontal bars, one per label, value printed at the bar's end.

    HTML, not SVG: labels are text in the page's own size that wraps when long, so a narrow screen neither
    clips them nor shrinks them with the drawing; long labels are cut at `label_chars` (the tooltip has all).
    """
    if not bars:
        return ""
    top = max((b.value for b in bars), default=0) or 1
    rows = []
    for b in bars:
        tip = esc(clip(b.title or f"{b.label}: {fmt_num(b.value)}", 240))
        rows.append(
            f'<span class="hb-l" title="{tip}">{breakable(esc(clip(b.label, label_chars)))}</span>'
            f'<span class="hb-t" title="{tip}"><i style="width:{_width(b.value, top)};background:{b.colour}">'
            f'</i></span><span class="hb-v">{esc(b.shown or fmt_num(b.value))}</span>'
        )
    return f'<div class="hbars">{"".join(rows)}</div>'


def severity_chart(counts: dict[str, int]) -> str:
    """Issues by severity as three coloured bars (high, medium, low)."""
    bars = [Bar(sev.capitalize(), counts.get(sev, 0), colour=SEVERITY_COLOURS[sev]) for sev in SEVERITIES]
    return hbar_chart(bars)


def stacked_severity_bars(rows: Sequence[tuple[str, dict[str, int]]], *, label_chars: int = 40) -> str:
    """One stacked bar per column: how many issues of each severity touch it (HTML, like hbar_chart)."""
    if not rows:
        return ""
    top = max(sum(c.values()) for _, c in rows) or 1
    out = []
    for name, counts in rows:
        total = sum(counts.values())
        tip = esc(f"{clip(name, 200)}: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in SEVERITIES))
        segments = "".join(
            f'<i style="width:{100 * counts[s] / top:.2f}%;background:{SEVERITY_COLOURS[s]}"></i>'
            for s in SEVERITIES
            if counts.get(s)
        )
        out.append(
            f'<span class="hb-l" title="{tip}">{breakable(esc(clip(name, label_chars)))}</span>'
            f'<span class="hb-t stack" title="{tip}">{segments}</span><span class="hb-v">{total}</span>'
        )
    return f'<div class="hbars">{"".join(out)}</div>'


@dataclass(frozen=True)
class HeatCell:
    name: str
    severity: str | None  # highest severity among the column's issues; None when it has none
    issues: int
    share: float  # largest affected-row share among those issues, 0..1
    anchor: str
    share_text: str = ""  # that share as the page writes it


NAMED_CELLS = 80  # up to this many columns the strip names each one; wider tables get bare squares


def _rgba(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.2f})"


def heat_strip(cells: Sequence[HeatCell]) -> str:
    """One square per column, in file order, coloured by its worst issue and shaded by how many rows that
    issue touches; named beside the square when the table is narrow enough to list every name.

    HTML boxes that wrap onto as many lines as the screen needs: nothing is scaled down to fit.
    """
    if not cells:
        return ""
    named = len(cells) <= NAMED_CELLS
    out = []
    for c in cells:
        if c.severity:
            alpha = 0.35 + 0.65 * min(max(c.share, 0.0), 1.0) ** 0.5
            colour = _rgba(SEVERITY_COLOURS.get(c.severity, BAR_COLOUR), alpha)
        else:
            colour = "#e4e7eb"
        tip = esc(
            f"{clip(c.name, 200)}: "
            + (
                f"{c.issues} issue{'s' if c.issues != 1 else ''}, worst {c.severity}, "
                f"up to {c.share_text or fmt_share(c.share, 1)} of rows"
                if c.issues
                else "no issue"
            )
        )
        label = f"<span>{breakable(esc(clip(c.name, 28)))}</span>" if named else ""
        inner = f'<i style="background:{colour}"></i>{label}'
        cls = "hc" if named else "hc bare"
        if c.issues:
            out.append(f'<a class="{cls}" href="#{esc(c.anchor)}" title="{tip}">{inner}</a>')
        else:
            out.append(f'<span class="{cls} none" title="{tip}">{inner}</span>')
    legend = "".join(f'<span><i style="background:{SEVERITY_COLOURS[s]}"></i>{s}</span>' for s in SEVERITIES)
    legend += '<span><i style="background:#e4e7eb"></i>no issue</span>'
    return f'<div class="heat">{"".join(out)}</div><div class="legend">{legend}</div>'


def box_plot(stats: NumericStats, *, width: int = 340, height: int = 56) -> str:
    """A box plot from profile statistics: whiskers at the Tukey fences, min/max and mean marked.

    The drawing holds shapes only and may shrink with the screen; its numbers are page text under it.
    """
    lo, hi = stats.min, stats.max
    iqr = stats.q3 - stats.q1
    fence_lo = max(lo, stats.q1 - 1.5 * iqr)
    fence_hi = min(hi, stats.q3 + 1.5 * iqr)
    # With far outliers a linear min..max axis squashes the box to a line: zoom on the fences instead
    # and draw the extremes as arrows at the edges.
    zoom = iqr > 0 and (hi - lo) > 12 * iqr
    a, b = (fence_lo, fence_hi) if zoom else (lo, hi)
    if b <= a:
        a, b = a - 1, b + 1
    pad = 14
    plot_w = width - 2 * pad

    def x(v: float) -> float:
        return pad + plot_w * (min(max(v, a), b) - a) / (b - a)

    mid = height / 2
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
            out.append(f'<path d="M2 {mid} L10 {mid - 5} L10 {mid + 5} Z" fill="#d64545"/>')
        if hi > fence_hi:
            out.append(
                f'<path d="M{width - 2} {mid} L{width - 10} {mid - 5} L{width - 10} {mid + 5} Z" fill="#d64545"/>'
            )
    out.append("</svg>")
    middle = "median " + fmt_num(stats.median) + (" · axis zoomed to the whiskers" if zoom else "")
    axis = (
        f'<div class="axis"><span>min {esc(fmt_num(lo))}</span><span>{esc(middle)}</span>'
        f"<span>max {esc(fmt_num(hi))}</span></div>"
    )
    return f'<div class="boxplot">{"".join(out)}{axis}</div>'


TAIL_COLOUR = "#b8c2cc"


def histogram(
    counts: Sequence[int],
    *,
    left: str,
    right: str,
    below: int = 0,
    above: int = 0,
    width: int = 340,
    height: int = 60,
) -> str:
    """Rows per bin as bars in one SVG path (a few hundred bytes whatever the bins); the tails under the first
    and over the last edge as grey bars apart at the ends. The drawing holds shapes only; `left` and `right`
    (already escaped) are page text under it, so they keep their size on a phone."""
    slots = [(c, BAR_COLOUR) for c in counts]
    if below:
        slots.insert(0, (below, TAIL_COLOUR))
    if above:
        slots.append((above, TAIL_COLOUR))
    if not slots:
        return ""
    top = max(c for c, _ in slots) or 1
    step = width / len(slots)
    paths: dict[str, list[str]] = {BAR_COLOUR: [], TAIL_COLOUR: []}
    for k, (c, colour) in enumerate(slots):
        if c <= 0:
            continue
        h = max(1.0, (height - 1) * c / top)
        paths[colour].append(f"M{k * step + 0.5:.1f} {height}v-{h:.1f}h{max(step - 1.5, 0.8):.1f}v{h:.1f}z")
    body = "".join(f'<path d="{"".join(d)}" fill="{colour}"/>' for colour, d in paths.items() if d)
    return (
        f'<div class="hist"><svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" preserveAspectRatio="none">{body}</svg>'
        f'<div class="axis"><span>{left}</span><span>{right}</span></div></div>'
    )


def band_strip(per_band: Sequence[int], band_rows: Sequence[int], colour: str = "#d64545") -> str:
    """One column's missing cells along the file, band by band, as one CSS gradient: no mark where a band
    has none, and four shades by the share of its rows (any missing cell shows)."""
    stops = []
    total = sum(band_rows) or 1
    start = 0.0
    runs: list[tuple[int, float, float]] = []  # (shade, from %, to %)
    for missing, rows in zip(per_band, band_rows, strict=True):
        end = start + 100 * rows / total
        shade = 0 if missing <= 0 or rows <= 0 else min(4, int(-(-4 * missing // rows)))
        if runs and runs[-1][0] == shade:
            runs[-1] = (shade, runs[-1][1], end)
        else:
            runs.append((shade, start, end))
        start = end
    for shade, a, b in runs:
        paint = _rgba(colour, 0.2 * shade + 0.2) if shade else "#eef1f4"
        stops.append(f"{paint} {a:.1f}% {b:.1f}%")
    return f'<span class="strip" style="background:linear-gradient(90deg,{",".join(stops)})"></span>'
