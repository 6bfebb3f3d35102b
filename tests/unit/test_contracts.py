"""Contracts: exported JSON Schemas are current, field names of the original design are kept, steps chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterate.contracts import AnalysisResult, DatasetUnderstanding, Issue, SmartFixFollowup
from iterate.contracts.export import schemas

pytestmark = pytest.mark.unit

SCHEMAS = Path(__file__).resolve().parents[2] / "layers" / "iterate" / "schemas"


def test_exported_schemas_are_up_to_date():
    for name, schema in schemas().items():
        on_disk = json.loads((SCHEMAS / name).read_text())
        assert on_disk == json.loads(json.dumps(schema)), f"{name} is stale: run `make schemas`"


def test_the_original_field_names_are_kept():
    assert {"summary", "columns", "suggested_context"} <= set(DatasetUnderstanding.model_fields)
    issue_fields = {"id", "type", "severity", "description", "affectedColumns", "suggestedAction", "category"}
    assert issue_fields | {"affectedRows", "temporalPattern", "evidence", "investigation"} <= set(
        Issue.model_fields
    )
    assert {"issues", "summary", "completedAt", "mode"} <= set(AnalysisResult.model_fields)
    assert {"prompt", "options", "examples", "onResponse"} <= set(SmartFixFollowup.model_fields)


def test_mode_is_the_first_field_of_an_analysis():
    assert next(iter(AnalysisResult.model_fields)) == "mode"


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError):
        SmartFixFollowup.model_validate(
            {"prompt": "?", "options": [{"key": "a", "label": "A"}, {"key": "b", "label": "B"}], "extra": 1}
        )
