"""Loading only the columns an investigation names: same answers, the other columns never read."""

from __future__ import annotations

import pytest

from iterate.contracts import Evidence, Issue
from iterate.investigate.loop import needed_columns
from iterate.ports import DatasetRef

pytestmark = pytest.mark.unit


def test_a_narrowed_dataset_holds_only_the_named_columns(sandbox, dataset):
    # Given the dataset narrowed to one of its columns
    code = "result = {'columns': list(df.columns), 'rows': len(df)}"
    full = sandbox.run(code, DatasetRef(path=str(dataset)))
    narrow = sandbox.run(code, DatasetRef(path=str(dataset), columns=(full.output["columns"][1],)))
    # Then the code sees that column alone, with every row
    assert full.success and narrow.success
    assert narrow.output == {"columns": [full.output["columns"][1]], "rows": full.output["rows"]}


def test_an_issue_names_the_columns_its_template_reads():
    issue = Issue(
        id="fd-city",
        type="dependency_violation",
        severity="low",
        description="d",
        affectedColumns=["city"],
        suggestedAction="a",
        category="smart_fixes",
        evidence=Evidence(
            affectedCells=1,
            affectedRows=1,
            affectedShare=0.1,
            stats={
                "rhs": "city",
                "determinants": ["zip", "store"],
                "derivation": {"left": "a", "right": "b"},
            },
        ),
    )
    assert needed_columns(issue) == ("city", "zip", "store", "a", "b")
    dup = issue.model_copy(update={"type": "duplicate_rows"})
    assert needed_columns(dup) is None
