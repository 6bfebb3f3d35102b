"""The data as report.html shows it: what the dataset is, its columns' profiles, and the table at a glance."""

from __future__ import annotations

import re

from iterate.contracts import SEVERITY_RANK, ColumnProfile
from iterate.keys import dependency_phrase
from iterate.report.charts import (
    Bar,
    band_strip,
    box_plot,
    breakable,
    clip,
    esc,
    fmt_num,
    fmt_share,
    hbar_chart,
    histogram,
    plural,
)
from iterate.report.pieces import Pieces, anchor, cell
from iterate.visible import visible

MISSING_BARS = 20  # columns in the missing-values chart, most missing first
MEASURES = {"spearman": "Spearman's ρ", "cramers_v": "Cramér's V"}
DECIMAL_SHAPE = re.compile(r"9\.9")  # a shape with digits after a decimal point ("9.9", "-9.9")


class DataViews(Pieces):
    """The sections about the data itself, not about its issues."""

    def understanding(self) -> str:
        s = self.u.summary
        obs = "".join(f"<li>{self.prose(o, 1000)}</li>" for o in s.observations[:30])
        cols = self.u.columns[: self.lim.columns]
        rows = "".join(
            f"<tr><td><a href='#{anchor('col', c.name)}'>{self.name(c.name, 80)}</a>"
            f"<div class='mono small muted kind'>{self.text(self.kind_of(c.name, c.semanticType or c.dataType), 40)}"
            "</div></td>"
            f"<td>{breakable(self.text(c.description, 600))}</td></tr>"
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

    def kind(self, c: ColumnProfile) -> tuple[str, str]:
        """The column's kind as the page writes it, and why when it is not the profile's own word: a column
        typed integer whose shapes show decimals is written "decimal", never "integer" above them."""
        with_decimals = sum(pt.count for pt in c.patterns if DECIMAL_SHAPE.search(pt.value))
        if c.semanticType == "integer" and with_decimals:
            why = (
                f"profiled as integer ({fmt_share(c.conformity or 0.0, 1)} of values whole), but "
                f"{plural(with_decimals, 'value')} are written with decimals"
            )
            return "decimal", why
        return c.semanticType, ""

    def kind_of(self, name: str, fallback: str) -> str:
        """The kind of the profile's column of that name as its card writes it; `fallback` when none."""
        column = self.profile_columns.get(name)
        return self.kind(column)[0] if column is not None else fallback

    def missing_of(self, c: ColumnProfile) -> int:
        """Missing cells of a column, one count everywhere on the page: blank or the table's marker for missing,
        and placeholders standing in for it (`N/A`, -999)."""
        return c.missing + c.disguisedMissing

    def missing_cells(self) -> int:
        return sum(self.missing_of(c) for c in self.p.columns)

    def missing_headline(self) -> str:
        """The share of the table's cells that are missing, as the header and the missing-values card say it."""
        cells = self.p.rowCount * self.p.columnCount
        missing = self.missing_cells()
        return f"{fmt_share(missing, cells)} ({fmt_num(missing)} of {plural(cells, 'cell')})"

    def data_section(self) -> str:
        """The table at a glance: where values are missing, strong associations, and a few rows."""
        parts = [self.missing_card(), self.associations_card()]
        grid = "".join(x for x in parts if x)
        return (
            '<section id="data"><h2>The data at a glance</h2>'
            + (f'<div class="grid2">{grid}</div>' if grid else "")
            + self.sample_card()
            + "</section>"
        )

    def missing_card(self) -> str:
        """Which columns miss values, where in the file, and which go missing together."""
        p = self.p
        missing = self.missing_cells()
        head = f"<h3>Missing values</h3><p><b>{esc(self.missing_headline())}</b> are missing"
        o = p.missingOverview
        if o is not None and o.rows:
            head += f", in {fmt_num(o.rows)} of {plural(p.rowCount, 'row')} ({self.share(o.rows)})"
        head += (
            '.</p><p class="muted small">Missing means blank, the table\'s marker for missing, or a placeholder '
            "standing in for it (such as <code>N/A</code> or -999), counted the same way in every column card.</p>"
        )
        if missing == 0:
            cells = plural(p.rowCount * p.columnCount, "cell")
            return f'<div class="card" id="missing"><h3>Missing values</h3><p>No missing value in {cells}.</p></div>'
        with_gaps = sorted(
            (c for c in p.columns if self.missing_of(c)), key=lambda c: (-self.missing_of(c), c.index)
        )
        shown = with_gaps[:MISSING_BARS]
        bars = hbar_chart(
            [
                Bar(
                    visible(c.name),
                    self.missing_of(c),
                    shown=f"{fmt_num(self.missing_of(c))} ({self.share(self.missing_of(c))})",
                )
                for c in shown
            ]
        )
        out = [head, bars]
        rest = len(p.columns) - len(with_gaps)
        note = f"{plural(rest, 'column')} with no missing value" if rest else ""
        if len(with_gaps) > len(shown):
            note = f"The {len(shown)} columns with most; {len(with_gaps) - len(shown)} more with some" + (
                f", {note}" if note else ""
            )
        if note:
            out.append(f'<p class="muted small">{esc(note)}.</p>')
        if o is not None and o.bands:
            out.append(self.missing_bands())
        if o is not None and o.patterns:
            out.append(self.missing_patterns())
        return f'<div class="card" id="missing">{"".join(out)}</div>'

    def missing_bands(self) -> str:
        o = self.p.missingOverview
        assert o is not None
        by_index = {c.index: c for c in self.p.columns}
        rows = "".join(
            f'<span class="mm-l">{esc(clip(visible(by_index[i].name), 40))}</span>{band_strip(b, o.bandRows)}'
            for i, b in zip(o.bandColumns, o.bands, strict=True)
            if i in by_index
        )
        last = max(self.p.rowCount - 1, 0)
        return (
            f'<h3 style="margin-top:12px">Where in the file</h3><p class="muted small">Each strip is a column, '
            f"from row 0 at the left to row {fmt_num(last)} at the right, cut in {len(o.bandRows)} bands of "
            f"about {plural(round(self.p.rowCount / max(len(o.bandRows), 1)), 'row')}: the darker a band, the "
            f'more of its rows miss a value; blank bands have none.</p><div class="mm">{rows}</div>'
        )

    def missing_patterns(self) -> str:
        o = self.p.missingOverview
        assert o is not None
        by_index = {c.index: c for c in self.p.columns}
        body = []
        for pt in o.patterns:
            names = [visible(clip(by_index[i].name, 60)) for i in pt.columns[:6] if i in by_index]
            more = f" + {len(pt.columns) - 6} more" if len(pt.columns) > 6 else ""
            body.append(
                f"<tr><td>{esc(', '.join(names) + more)}</td><td class='num'>{fmt_num(pt.rows)}</td>"
                f"<td class='num'>{self.share(pt.rows)}</td></tr>"
            )
        more = ""
        if o.patternCount > len(o.patterns):
            more = f'<p class="muted small">The {len(o.patterns)} most frequent of {fmt_num(o.patternCount)} combinations.</p>'
        return (
            '<h3 style="margin-top:12px">Missing together</h3><table class="t"><tr><th>columns missing in the '
            f"same rows (and no other)</th><th class='num'>rows</th><th class='num'>share</th></tr>{''.join(body)}</table>{more}"
        )

    def associations_card(self) -> str:
        """Strong associations between columns, computed by the profile (a different thing from the
        dependency table: how strongly values go together, not whether one decides the other)."""
        p = self.p
        if p.associationsNote is None:
            return ""
        note = f'<p class="muted small">{self.text(p.associationsNote, 600)}</p>'
        if not p.associations:
            return f'<div class="card"><h3>Associations</h3><p>No strong association between columns.</p>{note}</div>'
        rows = []
        for a in p.associations:
            pair = " ↔ ".join(visible(clip(c, 60)) for c in a.columns)
            strength = f"{a.value:+.2f}" if a.measure == "spearman" else f"{a.value:.2f}"
            width = f"{100 * min(abs(a.value), 1.0):.0f}%"
            rows.append(
                f"<tr><td>{esc(pair)}</td><td>{esc(MEASURES.get(a.measure, a.measure))}</td>"
                f'<td class="num">{strength} <span class="bar"><i style="width:{width}"></i></span></td>'
                f'<td class="num">{fmt_num(a.rows)}</td></tr>'
            )
        return (
            '<div class="card" id="associations"><h3>Associations</h3><p class="muted small">Pairs of columns whose '
            "values go together. Spearman's ρ (a rank correlation) near +1 or −1: one rises, or falls, as the other "
            "rises. Cramér's V near 1: the categories of one nearly tell those of the other.</p>"
            '<table class="t"><tr><th>columns</th><th>measure</th><th class="num">strength</th>'
            f'<th class="num">rows</th></tr>{"".join(rows)}</table>{note}</div>'
        )

    def sample_card(self) -> str:
        """The first rows of the file, one line per column (a wide table fits a phone that way)."""
        sample = self.p.sample
        if sample is None or not sample.rows:
            return ""
        by_index = {c.index: c for c in self.p.columns}
        heads = [("column", "", "column")] + [(f"row {r}", "", f"row {r}") for r in sample.rows]
        head = "".join(cell("th", text, cls) for text, cls, _ in heads)
        body = []
        for k, index in enumerate(sample.columns):
            column = by_index.get(index)
            name = self.name(column.name, 80) if column is not None else str(index)
            cells = [cell("td", f"<b>{name}</b>", label="column")]
            cells += [
                cell("td", self.val(values[k]), label=f"row {r}")
                for r, values in zip(sample.rows, sample.values, strict=True)
            ]
            body.append(f"<tr>{''.join(cells)}</tr>")
        more = ""
        if self.p.columnCount > len(sample.columns):
            more = (
                f'<p class="muted small">The first {len(sample.columns)} of {self.p.columnCount} columns.</p>'
            )
        return (
            '<div class="card" id="sample" style="margin-top:16px"><h3>The first rows</h3>'
            f'<p class="muted small">{esc(self.sample_note(sample.rows))}</p>'
            f'<table class="t ex stack sample"><tr>{head}</tr>{"".join(body)}</table>{more}</div>'
        )

    def sample_note(self, rows: list[int]) -> str:
        place = self.place_of(rows[0])
        unit = (self.p.rowNumbering.place if self.p.rowNumbering else None) or "line"
        where = f" (row 0 is {unit} {place} of the file)" if place is not None else ""
        return f"Rows {rows[0]} to {rows[-1]} as the file holds them{where}, values longer than 120 characters shortened."

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
            f'<table class="t">{"".join(facts)}</table>{self.duplicates_note()}'
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

    def duplicates_note(self) -> str:
        """The duplicate rows the card counts, explained: how many, in how many groups, one example, and the
        issue raised about them (or why none was)."""
        d = self.p.duplicates
        if d.exactRows == 0:
            return ""
        text = (
            f"{plural(d.exactRows, 'row')} repeat an earlier row exactly, in every column: "
            f"{plural(d.exactGroups, 'distinct row')} appear more than once"
            + (f", the most repeated {fmt_num(d.largestGroup)} times" if d.largestGroup > 2 else "")
            + "."
        )
        if len(d.example) == 2:
            later, earlier = d.example
            text += f" For example {self.row_text(later, self.place_of(later))} repeats {self.row_text(earlier, self.place_of(earlier))}."
        raised = [i for i in self.issues if i.type == "duplicate_rows"]
        if raised:
            i = raised[0]
            text += f' Raised as an issue: <a href="#{anchor("issue", i.id)}">{self.prose(clip(i.description, 160))}</a>'
        else:
            text += (
                " No issue was raised about them: Iterate calls identical rows copies only where some column "
                "tells records apart (an identifier, a name, a timestamp) and the rows sharing it are mostly "
                "copies. That does not hold here, so these rows may repeat by nature; remove them if each row "
                "should be a record of its own."
            )
        return f'<p class="small" id="duplicates">{text}</p>'

    def place_of(self, row: int) -> int | None:
        """A row's place in the file (line or sheet row) when every row r sits at firstPlace + r."""
        n = self.p.rowNumbering
        if n is not None and n.place and n.firstPlace is not None:
            return n.firstPlace + row
        return None

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
        missing = self.missing_of(c)
        stats = [
            (
                "filled",
                f"{fmt_num(c.count - c.disguisedMissing)} ({self.share(c.count - c.disguisedMissing)})",
            ),
            ("missing", f"{fmt_num(missing)} ({self.share(missing)})"),
        ]
        if c.disguisedMissing:
            stats.append(("of them placeholders", fmt_num(c.disguisedMissing)))
        stats += [
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
        chart = box_plot(c.numeric) if c.numeric is not None else ""
        tv = c.topValues[: self.lim.top_values]
        spread = self.distribution(c)
        if spread:
            chart += spread
        elif tv:
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
        desc = f'<div class="desc">{breakable(self.text(description, 300))}</div>' if description else ""
        kind, why = self.kind(c)
        title = f' title="{esc(why)}"' if why else ""
        return (
            f'<div class="card colcard" id="{anchor("col", c.name)}">'
            f"<h3><span>{self.name(c.name, 120)}</span>"
            f'<span><span class="badge cat mono"{title}>{self.text(kind, 30)}</span> {issue_badge}</span></h3>'
            f"{desc}{chart}{patterns}<div class='stats'>{stat_html}</div></div>"
        )

    def distribution(self, c: ColumnProfile) -> str:
        """A histogram for a numeric or date column whose values are too many to list one by one (a top-10
        list of a continuous column says nothing of its shape); empty for the others."""
        if c.distinct <= min(self.lim.top_values, len(c.topValues)):
            return ""  # every value is listed: the value bars are exact
        if c.numeric is not None and c.numeric.histogram is not None:
            h = c.numeric.histogram
            lo, hi, n = fmt_num(h.edges[0]), fmt_num(h.edges[-1]), c.numeric.count
        elif c.dates is not None and c.dates.histogram is not None:
            h2 = c.dates.histogram
            return self._histogram(
                h2.counts, h2.below, h2.above, clip(h2.edges[0], 40), clip(h2.edges[-1], 40), c.dates.count
            )
        else:
            return ""
        return self._histogram(h.counts, h.below, h.above, lo, hi, n)

    def _histogram(self, counts: list[int], below: int, above: int, lo: str, hi: str, n: int) -> str:
        tails = []
        if below:
            tails.append(f"{fmt_num(below)} below {lo}")
        if above:
            tails.append(f"{fmt_num(above)} above {hi}")
        caption = f"Distribution of {plural(n, 'value')} in {len(counts)} equal bins" + (
            f" ({' and '.join(tails)}: grey, apart)" if tails else ""
        )
        return f'<div class="muted small" style="margin-top:6px">{esc(caption)}</div>' + histogram(
            counts, left=esc(lo), right=esc(hi), below=below, above=above
        )


SHAPE_SYMBOLS = (("9", "a run of digits"), ("a", "a run of letters"), ("A", "a run of capitals"))


def shape_legend(shapes: list[str]) -> str:
    """What the symbols of these shapes stand for, naming only the symbols they use ("9 = a run of digits")."""
    return ", ".join(f"{sym} = {meaning}" for sym, meaning in SHAPE_SYMBOLS if any(sym in s for s in shapes))
