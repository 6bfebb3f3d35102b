"""The data as report.html shows it: what the dataset is, its columns' profiles, and the table at a glance."""

from __future__ import annotations

from iterate.contracts import SEVERITY_RANK, ColumnProfile
from iterate.keys import dependency_phrase
from iterate.report.charts import Bar, box_plot, clip, esc, fmt_num, fmt_share, hbar_chart
from iterate.report.pieces import Pieces, anchor
from iterate.visible import visible


class DataViews(Pieces):
    """The sections about the data itself, not about its issues."""

    def understanding(self) -> str:
        s = self.u.summary
        obs = "".join(f"<li>{self.prose(o, 1000)}</li>" for o in s.observations[:30])
        cols = self.u.columns[: self.lim.columns]
        rows = "".join(
            f"<tr><td><a href='#{anchor('col', c.name)}'>{self.name(c.name, 80)}</a>"
            f"<div class='mono small muted kind'>{self.text(c.semanticType or c.dataType, 40)}</div></td>"
            f"<td>{self.text(c.description, 600)}</td></tr>"
            for c in cols
        )
        more = ""
        if len(self.u.columns) > len(cols):
            more = f'<p class="muted small">First {len(cols)} of {len(self.u.columns)} columns shown.</p>'
        context = ""
        if self.u.suggested_context:
            context = (
                f'<p class="muted small"><b>Context:</b> {self.text(self.u.suggested_context, 1500)}</p>'
            )
        return (
            '<section id="understanding"><h2>What this dataset is</h2><div class="card">'
            f"<p>{self.text(s.description)}</p>"
            + (f'<h3>Observations</h3><ul class="obs">{obs}</ul>' if obs else "")
            + context
            + (
                '<h3 style="margin-top:14px">Columns</h3><table class="t"><tr><th>column (kind)</th>'
                f"<th>description</th></tr>{rows}</table>{more}"
                if rows
                else ""
            )
            + "</div></section>"
        )

    def profile_section(self) -> str:
        p = self.p
        d = p.duplicates
        facts = [
            f"<tr><th>Exact duplicate rows</th><td>{fmt_num(d.exactRows)}</td></tr>",
            f"<tr><th>Duplicate groups</th><td>{fmt_num(d.exactGroups)}</td></tr>",
            f"<tr><th>Near-duplicate rows</th><td>{fmt_num(d.nearRows)}</td></tr>",
            f"<tr><th>Missing-value marker</th><td>{self.val(p.nullMarker)}</td></tr>",
        ]
        keys = ", ".join(" + ".join(visible(clip(c, 60)) for c in k) for k in p.candidateKeys[:10])
        if keys:
            facts.append(f"<tr><th>Candidate keys</th><td>{esc(keys)}</td></tr>")
        by_name = {c.name: c for c in p.columns}
        fds = "".join(
            f"<tr><td>{self.name(dependency_phrase(fd, by_name), 240)}</td>"
            f"<td class='num'>{fmt_share(fd.confidence, 1.0)}</td><td class='num'>{fmt_num(fd.violatingRows)}</td></tr>"
            for fd in p.functionalDependencies[:20]
        )
        notes = "".join(f"<li>{self.text(n, 500)}</li>" for n in p.readNotes[:20])
        top = (
            '<div class="grid2"><div class="card"><h3>Dataset</h3>'
            f'<table class="t">{"".join(facts)}</table>'
            + (f'<h3 style="margin-top:12px">Reading notes</h3><ul class="obs">{notes}</ul>' if notes else "")
            + "</div>"
            + (
                '<div class="card"><h3>Dependencies between columns</h3>'
                '<p class="muted small">"Determines" is said only where the left column reads as a key (an '
                "identifier or code); the others are patterns of this data, which may be coincidence.</p>"
                '<table class="t"><tr><th>in this data</th>'
                f"<th class='num'>rows that agree</th><th class='num'>rows that differ</th></tr>{fds}</table></div>"
                if fds
                else ""
            )
            + "</div>"
        )
        described = {c.name: c.description for c in self.u.columns}
        cols = p.columns[: self.lim.columns]
        cards = "".join(self.column_card(c, described.get(c.name)) for c in cols)
        more = ""
        if len(p.columns) > len(cols):
            more = (
                f'<p class="muted">Showing the first {len(cols)} of {len(p.columns)} columns; '
                "profile.json holds every column.</p>"
            )
        return (
            f'<section id="profile"><h2>Column profiles</h2>{top}'
            f'<div class="colcards" style="margin-top:16px">{cards}</div>{more}</section>'
        )

    def column_card(self, c: ColumnProfile, description: str | None) -> str:
        its = self.by_column.get(c.name, [])
        issue_badge = ""
        if its:
            worst = min((i.severity for i in its), key=lambda s: SEVERITY_RANK.get(s, 9))
            first = its[0]
            issue_badge = (
                f'<a class="badge sev-{esc(worst)}" href="#{anchor("issue", first.id)}">'
                f"{len(its)} issue{'s' if len(its) != 1 else ''}</a>"
            )
        stats = [
            ("filled", f"{fmt_num(c.count)} ({self.share(c.count)})"),
            ("missing", f"{fmt_num(c.missing)} ({self.share(c.missing)})"),
            ("placeholders for missing", f"{fmt_num(c.disguisedMissing)} ({self.share(c.disguisedMissing)})"),
            ("distinct values", fmt_num(c.distinct)),
            ("seen once", f"{fmt_share(c.uniqueRatio, 1)} of filled"),
        ]
        if c.length is not None:
            stats.append(("length min/mean/max", f"{c.length.min} / {c.length.mean:.1f} / {c.length.max}"))
        if c.numeric is not None:
            nm = c.numeric
            stats += [
                ("mean", fmt_num(nm.mean)),
                ("std", fmt_num(nm.std)),
                ("MAD", fmt_num(nm.mad)),
            ]
        if c.dates is not None:
            stats += [("earliest", clip(c.dates.min, 40)), ("latest", clip(c.dates.max, 40))]
        if c.format:
            stats.append(("format", clip(c.format, 40)))
        stat_html = "".join(f"<div><span>{esc(k)}</span>{esc(v)}</div>" for k, v in stats)
        chart = ""
        if c.numeric is not None:
            chart = box_plot(c.numeric)
        tv = c.topValues[: self.lim.top_values]
        if tv:
            bars = [
                Bar(
                    visible(v.value) if v.value != "" else "(empty)",
                    v.count,
                    clip(f"{v.value!r}: {v.count:,}", 80),
                )
                for v in tv
            ]
            chart += (
                f'<div class="muted small" style="margin-top:6px">Top values ({len(tv)} of '
                f"{fmt_num(c.distinct)} distinct)</div>{hbar_chart(bars)}"
            )
        patterns = ""
        if c.patterns:
            shown = c.patterns[:5]
            legend = shape_legend([pt.value for pt in shown])
            patterns = (
                '<div class="muted small" style="margin-top:6px">Shapes: '
                + ", ".join(f"{self.val(pt.value)} ×{fmt_num(pt.count)}" for pt in shown)
                + (f" <span>({esc(legend)})</span>" if legend else "")
                + "</div>"
            )
        if c.dates is not None and c.dates.formats:
            bars = [
                Bar(visible(f.value), f.count, clip(f"{visible(f.value)}: {f.count:,}", 80))
                for f in c.dates.formats[:6]
            ]
            patterns += '<div class="muted small" style="margin-top:6px">Date formats</div>' + hbar_chart(
                bars
            )
        desc = f'<div class="desc">{self.text(description, 300)}</div>' if description else ""
        return (
            f'<div class="card colcard" id="{anchor("col", c.name)}">'
            f"<h3><span>{self.name(c.name, 120)}</span>"
            f'<span><span class="badge cat mono">{self.text(c.semanticType, 30)}</span> {issue_badge}</span></h3>'
            f"{desc}{chart}{patterns}<div class='stats'>{stat_html}</div></div>"
        )


SHAPE_SYMBOLS = (("9", "a run of digits"), ("a", "a run of letters"), ("A", "a run of capitals"))


def shape_legend(shapes: list[str]) -> str:
    """What the symbols of these shapes stand for, naming only the symbols they use ("9 = a run of digits")."""
    return ", ".join(f"{sym} = {meaning}" for sym, meaning in SHAPE_SYMBOLS if any(sym in s for s in shapes))
