"""The small pieces every part of report.html is written with: escaping, names, values, counts and shares."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from iterate.contracts import SEVERITY_RANK, AnalysisResult, DatasetProfile, DatasetUnderstanding, Issue
from iterate.ranking import is_whole_row, issues_by_column
from iterate.report.charts import breakable, clip, esc, fmt_num, fmt_share
from iterate.report.facts import singular_counts
from iterate.visible import visible

STATUS_ORDER = {"confirmed": 0, "unverified": 1, "unconfirmed": 2, "hypothesis": 3}
_EDGE_WS = re.compile(r"^(\s+)|(\s+)$")
_EDGE_SYMBOLS = str.maketrans({" ": "·", "\t": "→", "\n": "↵", "\r": "␍"})


@dataclass(frozen=True)
class ReportLimits:
    """Caps that keep the page small whatever the data: the report sees the profile and capped evidence only."""

    examples_per_issue: int = 10
    top_values: int = 12
    columns: int = 200
    issues: int = 150
    value_chars: int = 120
    text_chars: int = 1000
    code_chars: int = 6000
    output_chars: int = 2000
    # With many issues the code and outputs share this budget, so 500 issues do not mean 500 full scripts.
    investigation_budget_chars: int = 500_000
    stats_items: int = 20


def asset(name: str) -> str:
    return resources.files("iterate.report").joinpath(name).read_text(encoding="utf-8")


def anchor(prefix: str, name: str) -> str:
    """A stable, attribute-safe id for a column or issue (names may hold any character)."""
    return prefix + "-" + hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]


class Pieces:
    """What every section reads (the run, profile, understanding and caps) and the pieces it writes with."""

    def __init__(
        self,
        analysis: AnalysisResult,
        profile: DatasetProfile,
        understanding: DatasetUnderstanding,
        limits: ReportLimits,
    ) -> None:
        self.a, self.p, self.u, self.lim = analysis, profile, understanding, limits
        n_inv = max(sum(1 for i in analysis.issues[: limits.issues] if i.investigation is not None), 1)
        share = limits.investigation_budget_chars // n_inv
        self.code_chars = max(min(limits.code_chars, share * 2 // 3), 800)
        self.output_chars = max(min(limits.output_chars, share // 3), 400)
        # The same idea for examples and prose: a few hundred issues each get less room, the page stays small.
        n_shown = max(min(len(analysis.issues), limits.issues), 1)
        self.examples = max(min(limits.examples_per_issue, 1500 // n_shown), 3)
        self.issue_text = max(min(limits.text_chars, 150_000 // n_shown), 240)
        self.issues = sorted(
            analysis.issues,
            key=lambda i: (
                SEVERITY_RANK.get(i.severity, 9),
                STATUS_ORDER.get(i.status, 9),
                -self._rows(i),
                i.id,
            ),
        )
        # Whole-row issues (duplicates) touch every column alike: they are not counted against any one.
        self.by_column = issues_by_column(self.issues, profile.columnCount)
        self.whole_row = [i for i in self.issues if is_whole_row(i, profile.columnCount)]
        self.profile_columns = {c.name: c for c in profile.columns}

    # ---- small pieces -------------------------------------------------------------------------------
    def text(self, value: object, limit: int | None = None) -> str:
        """Escaped prose (descriptions, LLM text, code), clipped; line breaks and tabs stay (the page's
        last pass shows every other control character escaped)."""
        return esc(clip(str(value), limit or self.lim.text_chars))

    def prose(self, value: object, limit: int | None = None) -> str:
        """Sentences from detectors or an LLM (descriptions, impact, actions): `text`, with "1 values" read
        as "1 value" (they are written for counts)."""
        return self.text(singular_counts(str(value)), limit)

    def name(self, value: object, limit: int) -> str:
        """A column, dataset or file name: clipped, escaped, every control character shown (`\\n`, `\\x1b`)
        so that two names differing only by one never look alike."""
        return esc(visible(clip(str(value), limit)))

    def val(self, value: object) -> str:
        """A data value: clipped, escaped, with edge whitespace and control characters made visible."""
        s = str(value)
        if s == "":
            return '<span class="empty">(empty)</span>'
        s = clip(s, self.lim.value_chars)
        parts = []
        pos = 0
        for m in _EDGE_WS.finditer(s):
            parts.append(esc(visible(s[pos : m.start()])))
            ws = visible(m.group().translate(_EDGE_SYMBOLS))
            parts.append(f'<span class="ws" title="whitespace">{esc(ws)}</span>')
            pos = m.end()
        parts.append(esc(visible(s[pos:])))
        return f'<code class="val">{breakable("".join(parts))}</code>'

    @staticmethod
    def _rows(issue: Issue) -> int:
        if issue.evidence is not None:
            return issue.evidence.affectedRows
        return issue.affectedRows or 0

    def share(self, rows: int) -> str:
        """`rows` as a share of the table's rows: every share on the page comes from here (or fmt_share)."""
        return fmt_share(rows, self.p.rowCount)

    @staticmethod
    def accepted_badge(issue: Issue) -> str:
        a = issue.accepted
        grew = " (grew since accepted)" if a is not None and a.grown else ""
        return f'<span class="badge cat" title="still shown; never fails --fail-on">accepted{grew}</span>'

    @staticmethod
    def count(n: int, word: str) -> str:
        """A bold count with its noun in the right number: "<b>1</b> row", "<b>40</b> cells"."""
        return f"<b>{fmt_num(n)}</b> {word if n == 1 else word + 's'}"

    def row_text(self, row: int, place: int | None) -> str:
        """A row as a sentence names it: "row 24 (line 26)", or "row 24" when its place is not known."""
        if place is None:
            return f"row {row}"
        unit = (self.p.rowNumbering.place if self.p.rowNumbering else None) or "line"
        return f"row {row} ({esc(unit)} {place})"


def cell(tag: str, content: str, cls: str = "", *, title: str = "", label: str = "") -> str:
    """One table cell around already-escaped `content`; `label` names it on a phone, where rows stack."""
    attrs = f' class="{cls}"' if cls else ""
    attrs += f' title="{esc(title)}"' if title else ""
    attrs += f' data-l="{esc(label)}"' if label else ""
    return f"<{tag}{attrs}>{content}</{tag}>"
