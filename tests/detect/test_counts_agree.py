"""Every count an issue shows is the count of its evidence: the headline, the description, the flagged cells."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from iterate.detect import detect
from iterate.issues import flags_of, issues_from_findings
from iterate.table import SourceInfo, Table

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def planted() -> Table:
    sys.path.insert(0, str(REPO / "scripts"))
    import gen_bench

    arrow, _ = gen_bench.generate(n_rows=4000, seed=11)
    return Table.from_arrow(arrow, name="bench", source=SourceInfo(path="bench.csv", format="csv"))


def test_descriptions_flags_and_evidence_report_one_count(planted: Table) -> None:
    # Given the issues found on a table with every kind of planted error
    detection = detect(planted)
    issues = issues_from_findings(detection.findings, planted, None)
    flags = flags_of(detection.findings, planted)
    per_issue = Counter(flags.issue_ids.tolist())
    assert len(issues) >= 10
    for issue in issues:
        ev = issue.evidence
        assert ev is not None
        # Then a flagged issue's cells in flags.csv are its affected cells
        if ev.stats.get("flagged"):
            assert per_issue[issue.id] == ev.affectedCells, issue.id
        # And every "N values / rows / cells" its description states is one of its own counts
        for stated in re.findall(
            r"(?<![\d,])(?<!of )(\d[\d,]*) (?:values|rows|cells|numbers)\b", issue.description
        ):
            assert int(stated.replace(",", "")) in {ev.affectedCells, ev.affectedRows}, (
                issue.id,
                issue.description,
            )


def test_every_flagged_cell_has_a_score_and_the_examples_come_most_certain_first(planted: Table) -> None:
    detection = detect(planted)
    flags = flags_of(detection.findings, planted)
    scores = np.asarray(flags.scores, dtype=float)
    assert scores.size and ((scores >= 0.5) & (scores <= 1.0)).all()
    for issue in issues_from_findings(detection.findings, planted, None):
        shown = [e.score for e in issue.evidence.examples if e.score is not None] if issue.evidence else []
        assert shown == sorted(shown, reverse=True), issue.id
