"""Detector tests read the evidence's own reading (the unfitted decision): they test what each detector sees and
how strongly, which a detector's logic decides. The fitted decision, which `make calibrate` refits on the
corpus, is tested by the modules marked `fitted` (its file, its fit, null data) and measured by `make score`
and `make calibrate`'s leave-one-out table, not by examples written for one version of its weights."""

from __future__ import annotations

import importlib

import pytest

from iterate.detect.model import UNFITTED

# The module, not the function of the same name that iterate.detect exports.
decide_module = importlib.import_module("iterate.detect.decide")


@pytest.fixture(autouse=True)
def _evidence_reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("fitted") is None:
        monkeypatch.setattr(decide_module, "load_model", lambda: UNFITTED)
