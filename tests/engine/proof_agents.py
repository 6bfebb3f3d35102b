"""Agents standing in for Claude on the engine path: a hypothesis of the model's own, and code of the model's
for it and for two detector issues (one claim that is the issue's predicate, one that is not)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from iterate.contracts import CodeInvestigation, Issue
from iterate.ports import Agents, AnalysisDraft
from iterate.settings import Settings

HYPOTHESIS = "llm-expensive-orders"
_RESULT = (
    "result = {'affected_rows': int(len(bad)), 'affected_cells': int(len(bad)) + EXTRA, "
    "'share': float(len(bad)) / len(df), 'examples': []}"
)
CODE = {
    # the detector's placeholder quantity: the same rows as its predicate on the sample
    "quantity": "bad = df[df['quantity'] == '-999']\nEXTRA = 0\n" + _RESULT,
    # a model's own claim: prices above 45, which no predicate of the engine counts
    HYPOTHESIS: "bad = df[pd.to_numeric(df['price'], errors='coerce') > 45]\nEXTRA = 0\n"
    + _RESULT
    + "\nresult['examples'] = [{'row': int(i), 'column': 'price', 'value': str(v)} for i, v in"
    " bad['price'].head(5).items()]",
}


class ModelAnalysis:
    """The offline analysis, plus one hypothesis of the model's (no count of its own: text is not proof)."""

    def __init__(self, offline: Any) -> None:
        self.offline = offline

    def analyze(self, candidates: list[Issue], **kwargs: Any) -> AnalysisDraft:
        draft = self.offline.analyze(candidates, **kwargs)
        hypothesis = Issue(
            id=HYPOTHESIS,
            type="suspicious_values",
            severity="low",
            description="Some orders look unusually expensive.",
            affectedColumns=["price"],
            suggestedAction="Check the prices above 45 with the sales team.",
            category="smart_fixes",
            status="hypothesis",
            source="llm",
        )
        return AnalysisDraft(issues=[*draft.issues, hypothesis], summary=draft.summary, notes=draft.notes)


class ModelInvestigation:
    """Model-written code (source "llm") for the quantity issue and the hypothesis; the engine's templates for
    every other issue. Run with one investigation worker: `source` is read right after each `write_code`."""

    def __init__(self, offline: Any) -> None:
        self.offline = offline
        self.source = "llm"

    def _key(self, issue: Issue) -> str | None:
        if issue.id == HYPOTHESIS:
            return HYPOTHESIS
        if issue.source == "detector" and issue.affectedColumns == ["quantity"]:
            return "quantity"
        return None

    def supports(self, issue: Issue) -> bool:
        return self._key(issue) is not None or bool(self.offline.supports(issue))

    def template_first(self, issue: Issue) -> bool:
        return self._key(issue) is None

    def write_code(self, issue: Issue, *, profile: Any, attempts: list[CodeInvestigation]) -> str:
        key = self._key(issue)
        if key is None:
            self.source = "template"
            return str(self.offline.write_code(issue, profile=profile, attempts=attempts))
        self.source = "llm"
        return CODE[key]


def model_agents(settings: Settings) -> Agents:
    from iterate.agents import build_agents

    agents = build_agents(settings)
    agents.analysis = ModelAnalysis(agents.analysis)
    agents.investigation = ModelInvestigation(agents.investigation)
    return agents


ROWS = 6000
BAD = list(range(97, ROWS, 200))  # 30 rows


def write_orders(path: Path, n: int = ROWS) -> int:
    """Orders with a -999 placeholder quantity in the BAD rows; the rows whose price is above 45. Every column
    has few values, so the sample is the 1,000 rows drawn and a few that hold the values the draw missed."""
    rng = np.random.default_rng(3)
    expensive = 0
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["region", "category", "quantity", "price"])
        for i in range(n):
            price = int(rng.integers(5, 51))
            expensive += price > 45
            qty = "-999" if i in BAD else str(int(rng.integers(1, 9)))
            w.writerow([["North", "South"][i % 2], ["A", "B", "C"][i % 3], qty, str(price)])
    return expensive
