"""report.html: one self-contained page (inline CSS, SVG and a little JS) that opens offline and stays small."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from typing import Any

from iterate.accepted import cell_count
from iterate.contracts import (
    SEVERITIES,
    SEVERITY_RANK,
    AnalysisResult,
    CodeInvestigation,
    DatasetProfile,
    DatasetUnderstanding,
    EvidenceExample,
    Issue,
)
from iterate.ranking import rank_columns
from iterate.report.charts import (
    Bar,
    HeatCell,
    clip,
    esc,
    fmt_num,
    fmt_share,
    hbar_chart,
    heat_strip,
    plural,
    severity_chart,
    stacked_severity_bars,
)
from iterate.report.data_views import DataViews, shape_legend
from iterate.report.facts import fact_rows, rounded, singular_counts
from iterate.report.pieces import ReportLimits, anchor, asset, cell
from iterate.visible import visible

__all__ = ["ReportLimits", "render_html", "shape_legend"]

STATUS_MEANING = {
    "confirmed": "code run in the sandbox recounted the detector's numbers",
    "unverified": "code ran, but no trusted recount exists to check its numbers: treat them with care",
    "unconfirmed": "code run in the sandbox counted differently from the detector",
    "hypothesis": "suggested, not yet proven by code",
}
CATEGORY_LABEL = {"quick_fixes": "Quick fix", "smart_fixes": "Smart fix"}


class _Renderer(DataViews):
    """The whole page: the data views, and the sections about the run and its issues."""

    def severity_counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(SEVERITIES, 0)
        for issue in self.a.issues:
            counts[issue.severity] = counts.get(issue.severity, 0) + 1
        return counts

    # ---- sections -----------------------------------------------------------------------------------
    def header(self) -> str:
        run = self.a.run
        name = (run.datasetName if run else None) or self.p.name or self.u.summary.name
        mode = self.a.mode
        meta = [
            f"<div><span>Rows × columns</span> <b>{fmt_num(self.p.rowCount)} × {fmt_num(self.p.columnCount)}</b></div>",
            f'<div><span>Missing cells</span> <a href="#missing"><b>{esc(self.missing_headline())}</b></a></div>',
            f'<div><span>Mode</span> <span class="badge mode-{esc(mode)}">{esc(mode)}</span></div>',
            f"<div><span>Completed</span> <b>{esc(clip(self.a.completedAt, 40))}</b></div>",
        ]
        if run is not None:
            meta.append(f"<div><span>Run time</span> <b>{esc(_duration(run.durationMs))}</b></div>")
            if run.model and mode != "offline":
                meta.append(f"<div><span>Model</span> <b>{self.text(run.model, 80)}</b></div>")
            total = run.usage.get("total")
            if total is not None and (total.calls or total.inputTokens or total.outputTokens):
                meta.append(
                    f"<div><span>Tokens</span> <b>{fmt_num(total.inputTokens)} in / "
                    f"{fmt_num(total.outputTokens)} out</b> <span>({total.calls} calls)</span></div>"
                )
                meta.append(f"<div><span>Cost</span> <b>${total.costUsd:,.4f}</b></div>")
        sub = self.name(run.sourceFile, 300) if run else ""
        return (
            '<header class="top"><div class="wrap">'
            f"<h1>Data-quality report · {self.name(name, 300)}</h1>"
            f'<div class="sub mono">{sub}</div>'
            f'<div class="meta">{"".join(meta)}</div>'
            "</div></header>"
        )

    def notices(self) -> str:
        out = []
        run = self.a.run
        if self.a.mode == "degraded" or (run and run.degradedReasons):
            reasons = "".join(f"<li>{self.text(r, 500)}</li>" for r in (run.degradedReasons if run else []))
            out.append(
                '<div class="notice"><b>Degraded run.</b> Some steps fell back to the offline engine; '
                "every number below is still computed by code."
                + (f'<ul class="obs">{reasons}</ul>' if reasons else "")
                + "</div>"
            )
        elif self.a.mode == "offline":
            out.append(
                '<div class="notice">Offline mode: the descriptions come from the built-in offline engine '
                "(no LLM key was configured). Findings and numbers are the same code either way.</div>"
            )
        if run and run.instructions:
            out.append(
                f'<div class="notice"><b>Instructions given:</b> {self.text(run.instructions, 2000)}</div>'
            )
        return "".join(out)

    def comparison(self) -> str:
        """Since the previous run: how many issues are new, regressed, improved, unchanged, resolved."""
        c = self.a.comparison
        if c is None:
            return ""
        parts = f"{c.new} new, {c.regressed} regressed, {c.improved} improved, {c.persisting} unchanged, "
        parts += f"{len(c.resolved)} resolved"
        resolved = ", ".join(self.text(r, 60) for r in c.resolved[:10])
        more = f" (resolved: {resolved}{'…' if len(c.resolved) > 10 else ''})" if c.resolved else ""
        return f'<p class="small"><b>Since the previous run:</b> {esc(parts)}{more}.</p>'

    def summary(self) -> str:
        counts = self.severity_counts()
        confirmed = sum(1 for i in self.a.issues if i.status == "confirmed")
        cats: defaultdict[str, int] = defaultdict(int)
        for issue in self.a.issues:
            cats[issue.category] += 1
        kpis = "".join(
            f'<div class="kpi {sev}"><div class="v">{counts[sev]}</div><div class="l">{sev} severity</div></div>'
            for sev in SEVERITIES
        )
        kpis += (
            f'<div class="kpi"><div class="v">{confirmed}/{len(self.a.issues)}</div>'
            '<div class="l">confirmed by code</div></div>'
            f'<div class="kpi"><div class="v">{cats["quick_fixes"]} · {cats["smart_fixes"]}</div>'
            '<div class="l">quick fixes · smart fixes</div></div>'
        )
        return (
            '<section id="summary"><h2>Summary</h2>'
            f'<div class="kpis">{kpis}</div>'
            '<div class="grid2">'
            f'<div class="card"><h3>What we found</h3><p>{self.prose(self.a.summary)}</p>'
            f"{self.flagged_headline()}{self.comparison()}</div>"
            f'<div class="card"><h3>Issues by severity</h3>{severity_chart(counts)}</div>'
            "</div></section>"
        )

    def flagged_headline(self) -> str:
        """How much of the table holds values flagged as wrong: the rows of flags.csv, counted by code.

        (Not "the widest issue": that is often a fact about the table, such as a constant column touching
        every row, and says nothing about how much of the data is wrong.)"""
        run = self.a.run
        if run is None or run.flaggedRows is None:
            return ""
        if run.flaggedRows == 0:
            return (
                '<p class="muted small">No value is flagged as wrong; the issues describe the table '
                "(how it writes missing values, duplicates, empty or constant columns).</p>"
            )
        cells = f" ({plural(run.flaggedCells, 'flagged cell')})" if run.flaggedCells is not None else ""
        return (
            f'<p class="muted small"><b>{fmt_num(run.flaggedRows)} of {plural(self.p.rowCount, "row")} '
            f"({self.share(run.flaggedRows)})</b> hold at least one value flagged as wrong{cells}: "
            "the rows of flags.csv.</p>"
        )

    def run_details(self) -> str:
        """For whoever runs Iterate, not for the data's owner: time per step and how the run was made."""
        run = self.a.run
        if run is None:
            return ""
        facts = [
            ("Run", self.text(run.runId, 80)),
            ("Started", self.text(run.startedAt, 40)),
            ("Completed", self.text(self.a.completedAt, 40)),
            ("Took", esc(_duration(run.durationMs))),
            ("Engine", f"iterate {self.text(run.engineVersion, 40)}"),
            ("Source file", self.name(run.sourceFile, 200)),
            ("Content hash (SHA-256)", f"<span class='mono'>{self.text(run.contentHash, 80)}</span>"),
        ]
        detection = run.detection or {}
        rate = detection.get("estimatedErrorRate")
        if isinstance(rate, int | float):
            facts.append(("Estimated share of wrong cells", esc(fmt_share(float(rate), 1.0))))
        threshold = (detection.get("calibration") or {}).get("decide_at")
        if isinstance(threshold, int | float):
            facts.append(("A cell is flagged from probability", esc(fmt_num(threshold))))
        table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
        timings = ""
        if run.timingsMs:
            timings = (
                f'<div class="card"><h3>Time per step</h3>{hbar_chart(self.step_bars(run.timingsMs))}'
                '<p class="muted small">Reading the file, the detectors and the column statistics are parts of '
                "the profile step, shown under it; the steps themselves follow one another.</p></div>"
            )
        return (
            '<section id="run"><h2>Run details</h2><div class="grid2">'
            f'<div class="card"><h3>How this run was made</h3><table class="t">{table}</table></div>'
            f"{timings}</div></section>"
        )

    @staticmethod
    def step_bars(timings: dict[str, float]) -> list[Bar]:
        """The pipeline's steps in order, each followed by its parts (indented, lighter)."""
        bars: list[Bar] = []
        seen: set[str] = set()
        for step, parts in PIPELINE_STEPS:
            if step in timings:
                bars.append(Bar(STEP_LABELS.get(step, step), timings[step], shown=_duration(timings[step])))
                seen.add(step)
            for part in parts:
                if part in timings:
                    label = "↳ " + STEP_LABELS.get(part, part)
                    bars.append(Bar(label, timings[part], colour=PART_COLOUR, shown=_duration(timings[part])))
                    seen.add(part)
        for step, ms in timings.items():  # steps this page does not know yet
            if step not in seen:
                bars.append(Bar(step, ms, shown=_duration(ms)))
        return bars[:16]

    def column_heat(self) -> str:
        cols = self.p.columns[: self.lim.columns]
        cells = []
        for c in cols:
            its = self.by_column.get(c.name, [])
            worst = min((i.severity for i in its), key=lambda s: SEVERITY_RANK.get(s, 9), default=None)
            widest = max((self._rows(i) for i in its), default=0)
            share = widest / self.p.rowCount if self.p.rowCount else 0.0
            cells.append(
                HeatCell(visible(c.name), worst, len(its), share, anchor("col", c.name), self.share(widest))
            )
        note = ""
        if len(self.p.columns) > len(cols):
            note = f'<p class="muted small">First {len(cols)} of {len(self.p.columns)} columns shown.</p>'
        all_ranked = rank_columns(self.issues, self.p.columnCount)
        ranked = all_ranked[:25]
        stacked = stacked_severity_bars([(visible(name), _count_by(its, "severity")) for name, its in ranked])
        if len(all_ranked) > len(ranked):
            stacked += f'<p class="muted small">The first {len(ranked)} of {len(all_ranked)} columns with issues.</p>'
        if self.whole_row:
            kinds = ", ".join(dict.fromkeys(i.type.replace("_", " ") for i in self.whole_row))
            stacked += (
                f'<p class="muted small">Not counted per column: {plural(len(self.whole_row), "issue")} '
                f"about whole rows ({esc(kinds)}).</p>"
            )
        return (
            '<section id="columns-heat"><h2>Issues per column</h2><div class="card">'
            '<p class="muted small">One square per column, in file order: colour = its worst issue, '
            "shade = share of rows its widest issue touches. Click a column with issues to open its profile.</p>"
            f"{heat_strip(cells)}{note}"
            + (f'<h3 style="margin-top:16px">Columns with the most issues</h3>{stacked}' if ranked else "")
            + "</div></section>"
        )

    def issues_section(self) -> str:
        shown = self.issues[: self.lim.issues]
        filters = (
            '<div class="filters">'
            + "".join(
                f'<label><input type="checkbox" checked data-filter-sev="{s}"> '
                f'<span class="badge sev-{s}">{s}</span></label>'
                for s in SEVERITIES
            )
            + '<input type="search" id="issue-search" placeholder="Filter by text, column, type…">'
            '<button type="button" id="expand-all">Expand all</button>'
            '<button type="button" id="collapse-all">Collapse all</button>'
            f'<span class="muted"><span id="issue-shown">{len(shown)}</span> of {len(self.issues)} shown</span>'
            "</div>"
        )
        note = ""
        if len(self.issues) > len(shown):
            note = (
                f'<p class="muted small">{len(self.issues) - len(shown)} lower-ranked issues are left out of '
                "this page; analysis.json lists them all.</p>"
            )
        body = f'<p class="muted small">{esc(self.numbering_note())}</p>' if shown else ""
        body += "".join(self.issue(i, n) for n, i in enumerate(shown))
        if not self.issues:
            body = '<div class="card">No data-quality issues were found.</div>'
        return f'<section id="issues"><h2>Issues</h2>{filters}{body}{note}</section>'

    def issue(self, issue: Issue, n: int) -> str:
        ev = issue.evidence
        cols_text = ", ".join(visible(clip(c, 80)) for c in issue.affectedColumns[:12])
        if len(issue.affectedColumns) > 12:
            cols_text += f" … (+{len(issue.affectedColumns) - 12})"
        search_text = " ".join(
            clip(t, 300)
            for t in [issue.id, issue.type, singular_counts(issue.description), *issue.affectedColumns[:12]]
        ).lower()
        nums = []
        if ev is not None and ev.sampleRows is not None:  # the sample's counts: never shown as every row's
            sampled = fmt_share(ev.affectedRows, ev.sampleRows)
            nums.append(
                f"{self.count(ev.affectedRows, 'row')} of a {fmt_num(ev.sampleRows)}-row sample ({sampled})"
            )
            nums.append(self.count(ev.affectedCells, "cell"))
        elif ev is not None:
            nums.append(f"{self.count(ev.affectedRows, 'row')} ({self.share(ev.affectedRows)})")
            nums.append(self.count(ev.affectedCells, "cell"))
        elif issue.affectedRows is not None:
            nums.append(f"{self.count(issue.affectedRows, 'row')} ({self.share(issue.affectedRows)})")
        badges = (
            f'<span class="badge sev-{esc(issue.severity)}">{esc(issue.severity)}</span>'
            f'<span class="badge st-{esc(issue.status)}" title="{esc(STATUS_MEANING.get(issue.status, ""))}">'
            f"{esc(issue.status)}</span>"
            f'<span class="badge cat">{esc(CATEGORY_LABEL.get(issue.category, issue.category))}</span>'
            + (f'<span class="badge cat">{esc(issue.change)} since last run</span>' if issue.change else "")
            + (self.accepted_badge(issue) if issue.accepted is not None else "")
            + f'<span class="muted small mono">{self.text(issue.type, 60)}</span>'
        )
        parts = []
        if issue.accepted is not None:
            a = issue.accepted
            grew = (
                f" It grew since: {self.count(cell_count(issue), 'cell')} now, "
                f"{self.count(a.cellsWhenAccepted, 'cell')} when accepted — look again."
                if a.grown
                else ""
            )
            parts.append(
                f"<h4>Accepted</h4><p>{self.text(a.reason)} — {self.text(a.by, 80)}, {self.text(a.at, 40)}."
                + grew
                + "</p>"
            )
        if len(issue.description) > 220:  # the summary line already shows a short description in full
            parts.append(f"<h4>Description</h4><p>{self.prose(issue.description, self.issue_text)}</p>")
        if issue.businessImpact:
            parts.append(
                f"<h4>Business impact</h4><p>{self.prose(issue.businessImpact, self.issue_text)}</p>"
            )
        parts.append(f"<h4>Suggested action</h4><p>{self.prose(issue.suggestedAction, self.issue_text)}</p>")
        if issue.temporalPattern:
            parts.append(
                f"<h4>Pattern over time</h4><p>{self.prose(issue.temporalPattern, self.issue_text)}</p>"
            )
        if ev is not None:
            parts.append(self.evidence(issue))
        if issue.investigation is not None:
            parts.append(self.investigation(issue.investigation))
        source = f"found by {esc(issue.source)}" + (
            f" · {self.text(issue.detector, 80)}" if issue.detector else ""
        )
        parts.append(
            f'<p class="muted small">id <span class="mono">{self.name(issue.id, 120)}</span> · {source}</p>'
        )
        return (
            f'<details class="issue {esc(issue.severity)}" id="{anchor("issue", issue.id)}" '
            f'data-sev="{esc(issue.severity)}" data-text="{esc(search_text)}"{" open" if n < 3 else ""}>'
            f'<summary><div><div class="badges">{badges}</div>'
            f'<div class="title">{self.prose(clip(issue.description, 220))}</div></div>'
            f'<div class="nums">{" · ".join(nums)}</div>'
            f'<div class="cols">Columns: {esc(cols_text) or "—"}</div></summary>'
            f'<div class="body">{"".join(parts)}</div></details>'
        )

    def evidence(self, issue: Issue) -> str:
        ev = issue.evidence
        assert ev is not None
        if ev.sampleRows is not None:
            counted = (
                f"<p>{plural(ev.affectedCells, 'cell')} in {plural(ev.affectedRows, 'row')} of a sample of "
                f"{plural(ev.sampleRows, 'row')} ({fmt_share(ev.affectedRows, ev.sampleRows)} of the sample), "
                f"counted on the sample only, not over all {plural(self.p.rowCount, 'row')}.</p>"
            )
        else:
            counted = (
                f"<p>{plural(ev.affectedCells, 'cell')} in {plural(ev.affectedRows, 'row')} "
                f"({self.share(ev.affectedRows)} of {plural(self.p.rowCount, 'row')}).</p>"
            )
        out = ["<h4>Evidence</h4>", counted]
        examples = ev.examples[: self.examples]
        if examples:
            out.append(self.examples_table(issue, examples))
            if len(ev.examples) > len(examples):
                out.append(
                    f'<p class="muted small">{len(examples)} of {len(ev.examples)} examples shown.</p>'
                )
        if ev.stats:
            stat_rows = "".join(
                f"<tr><th>{self.text(k, 80)}</th><td>{self.name(v, 160)}</td></tr>"
                for k, v in fact_rows(ev.stats, limit=self.lim.stats_items)
            )
            out.append(
                f'<details class="code"><summary>Statistics</summary><table class="t">{stat_rows}</table></details>'
            )
        return "".join(out)

    def place(self, e: EvidenceExample) -> int | None:
        """The example's line (or sheet row) in the file: as the reader recorded it, else from the numbering."""
        if e.line is not None:
            return e.line
        numbering = self.p.rowNumbering
        if numbering is not None and numbering.place and numbering.firstPlace is not None:
            return numbering.firstPlace + e.row
        return None

    def examples_table(self, issue: Issue, examples: list[EvidenceExample]) -> str:
        """The examples as a table: where each row is (0-based row and place in the file), the row's other
        cells that explain or identify it, the value and what was expected; constant parts said once."""
        columns = list(dict.fromkeys(e.column for e in examples))
        one_column = len(columns) == 1
        context = list(dict.fromkeys(k for e in examples for k in e.context))[:4]
        places = [self.place(e) for e in examples]
        has_place = any(p is not None for p in places)
        has_expected = any(e.expected is not None for e in examples)
        has_score = any(e.score is not None for e in examples)
        notes = {e.note for e in examples}
        shared_note = notes.pop() if len(notes) == 1 else None
        has_note = shared_note is None and any(e.note for e in examples)
        # Notes that all read "<statistic>: <number>" name the statistic once, in the header.
        note_head, note_values = "note", [e.note or "" for e in examples]
        prefixes = {n.rpartition(": ")[0] for n in note_values}
        if has_note and len(prefixes) == 1 and "" not in prefixes:
            note_head = prefixes.pop()
            note_values = [n.rpartition(": ")[2] for n in note_values]
        lead = ""
        if not context and not has_expected and len({(e.column, e.value) for e in examples}) == 1:
            # Every example holds the same value (a constant or empty column): say it once.
            e = examples[0]
            where = ", ".join(
                self.row_text(x.row, p) for x, p in list(zip(examples, places, strict=True))[:5]
            )
            column = "" if e.column == "*" else f" in {self.name(e.column, 80)}"
            end = ", …" if len(examples) > 5 else "."
            return f"<p>Every example holds {self.val(e.value)}{column}: {where}{end}</p>"
        if shared_note:
            lead = f'<p class="muted small">Every example: {self.text(shared_note, 200)}.</p>'
        unit = (self.p.rowNumbering.place if self.p.rowNumbering else None) or "line"
        # (header text, its cell class, the label a phone shows beside each cell)
        heads: list[tuple[str, str, str]] = [("row", "num", "row")]
        if has_place:
            heads.append((esc(unit), "num", unit))
        heads += [(self.name(k, 60), "", visible(clip(k, 40))) for k in context]
        if one_column and columns[0] == "*":  # a whole row, shown by its first values
            heads.append(("the row (its first values)", "", "the row"))
        elif one_column:
            heads.append((self.name(columns[0], 60), "", visible(clip(columns[0], 40))))
        else:
            heads += [("column", "", "column"), ("value", "", "value")]
        if has_expected:
            expected = "usual value in its group" if issue.type == "dependency_violation" else "expected"
            heads.append((expected, "", expected))
        if has_score:
            heads.append(("score", "num", "score"))
        if has_note:
            heads.append((self.text(note_head, 120), "", clip(note_head, 60)))
        head = "".join(cell("th", text, cls, title=HEAD_TITLES.get(label, "")) for text, cls, label in heads)
        rows = []
        for e, place, note in zip(examples, places, note_values, strict=True):
            values = [str(e.row)]
            if has_place:
                values.append("" if place is None else str(place))
            values += [self.val(e.context[k]) if k in e.context else "" for k in context]
            if not one_column:
                values.append(self.name(e.column, 80))
            values.append(self.val(e.value))
            if has_expected:
                values.append(self.val(e.expected) if e.expected is not None else "")
            if has_score:
                values.append("" if e.score is None else f"{e.score:.2f}")
            if has_note:
                values.append(self.text(note, 160))
            cells = "".join(
                cell("td", v, cls, label=label) for v, (_, cls, label) in zip(values, heads, strict=True)
            )
            rows.append(f"<tr>{cells}</tr>")
        # More than five columns do not fit a phone side by side: such tables stack there (see report.css).
        cls = "t ex stack" if len(heads) > 5 else "t ex"
        return f'{lead}<table class="{cls}"><tr>{head}</tr>{"".join(rows)}</table>'

    def numbering_note(self) -> str:
        """Once per page: what a row number means here, and how to find the row in the file."""
        n = self.p.rowNumbering
        base = "Rows are data rows counted from 0, header excluded, as in flags.csv"
        if n is None:
            return f"{base}."
        if n.place == "line" and n.firstPlace is not None:
            return (
                f"{base}: row 0 is line {n.firstPlace} of the file, so row r is on line r + {n.firstPlace}."
            )
        if n.place == "sheet row" and n.firstPlace is not None:
            return (
                f"{base}: row 0 is row {n.firstPlace} of the sheet, so row r is sheet row r + {n.firstPlace}."
            )
        if n.place == "line":
            return f"{base}; the file skips lines between rows, so each example shows its own line."
        if n.place == "sheet row":
            return f"{base}; the sheet has blank rows between rows, so each example shows its own sheet row."
        if n.format == "parquet":
            return "Rows are counted from 0 in the file's order (as pandas and pyarrow number them), as in flags.csv."
        if n.format == "jsonl":
            return "Rows are the file's records counted from 0, as in flags.csv (a JSON array has no line per record)."
        return (
            f"{base}. Some values in this file span several lines (or blank lines sit between rows), "
            "so a row number is not a line number."
        )

    def investigation(self, inv: CodeInvestigation) -> str:
        if inv.success:
            verdict = '<span class="ok">✔ code ran and returned evidence</span>'
        else:
            why = inv.stopped or "error"
            verdict = f'<span class="bad">✘ investigation failed ({esc(why)})</span>'
        meta = [f"{inv.attempts} attempt{'s' if inv.attempts != 1 else ''}", f"code by {esc(inv.source)}"]
        if inv.reused is not None:  # a proof an earlier run stored, rerun and checked again: no tokens spent
            meta.append(f"reused from the script library (stored {esc(inv.reused.storedAt[:10])})")
        if inv.execution_time_ms is not None:
            took = _duration(inv.execution_time_ms)
            if inv.batch_size:  # the time of the one process this proof shared with others
                took += f" for {inv.batch_size} proofs run together"
            meta.append(esc(took))
        out = [
            f"<h4>Investigation</h4><p>{verdict} <span class='muted small'>· {' · '.join(meta)}</span></p>"
        ]
        if inv.error:
            out.append(f'<pre class="out">{self.text(inv.error, self.output_chars)}</pre>')
        if inv.output is not None:
            out.append(self.output_summary(inv.output))
        out.append(
            '<details class="code"><summary>Show the code</summary>'
            f'<pre class="code">{self.text(inv.code, self.code_chars)}</pre></details>'
        )
        return "".join(out)

    def output_summary(self, output: Any) -> str:
        scalars = []
        if isinstance(output, dict):
            scalars = fact_rows(output, limit=self.lim.stats_items, scalars_only=True)
        table = ""
        if scalars:
            rows = "".join(
                f"<tr><th>{self.text(k, 80)}</th><td>{self.name(v, 160)}</td></tr>" for k, v in scalars
            )
            table = f'<table class="t">{rows}</table>'
        full = self.text(_pretty(rounded(output)), self.output_chars)
        return (
            f'{table}<details class="code"><summary>Full output (JSON; numbers to 4 significant digits)</summary>'
            f'<pre class="out">{full}</pre></details>'
        )

    def footer(self) -> str:
        run = self.a.run
        bits = [f"schema {esc(self.a.schemaVersion)}"]
        if run is not None:
            bits += [
                f"run {self.text(run.runId, 80)}",
                f"iterate {self.text(run.engineVersion, 40)}",
            ]
        return (
            '<footer class="wrap">Generated by Iterate · '
            + " · ".join(bits)
            + ". Every count on this page was computed by code from the data. Values longer than "
            f"{self.lim.value_chars} characters are shortened (…).</footer>"
        )

    def page(self) -> str:
        run = self.a.run
        title = (run.datasetName if run else None) or self.p.name
        script = asset("report.js")
        digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
        # Defence in depth behind the escaping: only this page's own script may run, nothing may load.
        csp = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Iterate report · {self.name(title, 120)}</title>"
            f"<style>{asset('report.css')}</style></head><body>"
            f"{self.header()}"
            '<nav class="toc"><div class="wrap" style="padding:9px 24px">'
            '<a href="#summary">Summary</a><a href="#issues">Issues</a><a href="#columns-heat">Issues per column</a>'
            '<a href="#understanding">Dataset</a><a href="#data">The data at a glance</a>'
            '<a href="#profile">Column profiles</a>'
            '<a href="#run">Run details</a></div></nav>'
            f'<main class="wrap">{self.notices()}{self.summary()}{self.issues_section()}{self.column_heat()}'
            f"{self.understanding()}{self.data_section()}{self.profile_section()}{self.run_details()}</main>"
            f"{self.footer()}<script>{script}</script></body></html>\n"
        )

    def page_without_raw_controls(self) -> str:
        """The page, with whatever control character is still raw shown escaped (LLM prose, code and
        outputs keep their line breaks and tabs, HTML whitespace): nothing that acts reaches the file."""
        return visible(self.page(), keep="\n\t")


# The pipeline's steps in order, each with the parts timed inside it (their times overlap the step's).
PIPELINE_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("profile", ("read", "detect", "profile_table")),
    ("understand", ()),
    ("analyze", ()),
    ("investigate", ()),
    ("report", ()),
)
STEP_LABELS = {
    "profile": "profile",
    "read": "read the file",
    "detect": "detectors",
    "profile_table": "column statistics",
}
PART_COLOUR = "#a9bdd3"

HEAD_TITLES = {
    "row": "data row, counted from 0, header excluded (as in flags.csv)",
    "score": "probability the value is wrong",
}


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    return f"{s:.1f} s" if s < 120 else f"{int(s // 60)} min {int(s % 60)} s"


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _count_by(issues: list[Issue], attr: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for issue in issues:
        counts[getattr(issue, attr)] += 1
    return counts


def render_html(
    analysis: AnalysisResult,
    profile: DatasetProfile,
    understanding: DatasetUnderstanding,
    *,
    limits: ReportLimits | None = None,
) -> str:
    """The whole report as one self-contained HTML page; every value from the data or an LLM is escaped.

    The page sees only the profile and the (capped) evidence, so a million-row input does not make it
    bigger than a thousand-row one; `limits` caps examples, top values, columns, issues and value length.
    """
    return _Renderer(analysis, profile, understanding, limits or ReportLimits()).page_without_raw_controls()
