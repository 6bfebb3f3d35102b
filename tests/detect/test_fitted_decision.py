"""The fitted decision (issue 32): the model file, the decision reading it, and the fit that writes it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from iterate.detect import detect
from iterate.detect.decide import decide
from iterate.detect.findings import Finding
from iterate.detect.model import FEATURES, FITTED, UNFITTED, Model, load, model_from_dict
from iterate.io import read_table

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import calibrate  # noqa: E402

pytestmark = [pytest.mark.unit, pytest.mark.fitted]


def _finding(detector: str, rows: list[int], llr: float, col: int = 0) -> Finding:
    return Finding(
        type="inconsistent_category",
        columns=["a"],
        rows=np.array(rows),
        cols=np.full(len(rows), col),
        title="t",
        description="d",
        suggested_action="s",
        category="smart_fixes",
        detector=detector,
        llr=np.full(len(rows), llr),
        value_level=False,
    )


def test_the_fitted_file_names_only_features_the_code_computes() -> None:
    # Given the committed fit (make calibrate writes it)
    assert FITTED.exists(), "layers/iterate/detect/fitted.json is missing: run `make calibrate`"
    record = json.loads(FITTED.read_text())
    # Then it loads, its weights name computed features, and it says how it was fitted and scored
    model = model_from_dict(record["decision"])
    assert set(model.weights) <= set(FEATURES)
    assert {"leave_one_group_out", "in_fit", "tables", "groups"} <= set(record["fit"])
    assert load() == model


def test_a_model_naming_an_unknown_feature_is_refused() -> None:
    with pytest.raises(ValueError, match="does not compute"):
        model_from_dict({"weights": {"llr:nonsense": 1.0}, "bias": 0.0, "threshold": 0.5})


def test_an_unreadable_fitted_file_says_which_file_and_how_to_rebuild_it(tmp_path: Path) -> None:
    # Given a fitted.json cut short (a bad merge, a partial copy)
    broken = tmp_path / "fitted.json"
    broken.write_text('{"decision": {"weights": {"base": 1.0}', encoding="utf-8")
    # Then reading it names the file and the way back, instead of a bare JSON error
    with pytest.raises(ValueError, match="make calibrate") as err:
        load(broken)
    assert str(broken) in str(err.value)


def test_the_unfitted_decision_is_the_evidences_own_reading() -> None:
    # Given strong evidence on one cell and weak on another, in a 1,000-row column
    strong, weak = _finding("typos", [3], 9.0), _finding("typos", [7], 0.5)
    # When the unfitted decision judges them
    decision = decide([strong, weak], 1000, ["a"], model=UNFITTED)
    # Then the strong one is flagged and the weak one is not
    flagged = {int(r) for f in decision.findings for r in f.rows}
    assert flagged == {3}


def test_the_decision_reads_the_fitted_weights() -> None:
    # Given weak evidence from one detector that a fit trusts (a weight on its presence)
    trusted = Model(weights={"base": 1.0, "has:typos": 20.0}, bias=0.0, threshold=0.5)
    distrusted = Model(weights={"base": 1.0, "has:typos": -20.0}, bias=0.0, threshold=0.5)
    # Then the fit decides: flagged under the one, not under the other
    assert decide([_finding("typos", [7], 0.5)], 1000, ["a"], model=trusted).findings
    assert not decide([_finding("typos", [3], 9.0)], 1000, ["a"], model=distrusted).findings


def test_a_fitted_only_detector_adds_nothing_until_a_fit_weighs_it(tmp_path: Path) -> None:
    # Given evidence only from co-occurrence (a detector read through its own fitted features)
    only = _finding("cooccur", [5], 9.0)
    assert not decide([only], 1000, ["a"], model=UNFITTED).findings
    weighed = Model(weights={"base": 1.0, "llr:cooccur": 2.0}, bias=-1.0, threshold=0.5)
    assert decide([_finding("cooccur", [5], 9.0)], 1000, ["a"], model=weighed).findings


def _table(name: str, rows: list[tuple[float, bool]], kind: str = "injected") -> calibrate.TableEvidence:
    n = len(rows)
    X = np.zeros((n, len(FEATURES)), dtype=np.float32)
    X[:, FEATURES.index("base")] = -3.0  # the evidence's own reading flags nothing
    X[:, FEATURES.index("llr:cooccur")] = [v for v, _ in rows]
    X[:, FEATURES.index("has:cooccur")] = 1.0
    y = np.array([t for _, t in rows])
    return calibrate.TableEvidence(
        name, name, kind, X, y, np.ones(n, dtype=bool), int(y.sum()), 100 * n, np.zeros((n, 2)), {}
    )


def test_the_fit_raises_the_mean_f1_where_a_detector_separates_right_from_wrong() -> None:
    # Given tables where co-occurrence evidence above 4 marks the wrong cells, which the unfitted reading misses
    rng = np.random.default_rng(0)
    tables = [_table(f"t{k}", [(float(v), bool(v > 4)) for v in rng.uniform(0, 8, 60)]) for k in range(6)]
    unfitted = calibrate.unfitted_weights(len(FEATURES))
    before = np.mean([calibrate.table_score(calibrate.flagged_by(unfitted, t), t)[0] for t in tables])
    # When the decision is fitted on them
    weights = calibrate.fit(tables, penalty=0.001)
    after = np.mean([calibrate.table_score(calibrate.flagged_by(weights, t), t)[0] for t in tables])
    # Then it flags what the evidence separates
    assert before == 0.0
    assert after > 0.9


def test_detection_reports_the_decision_it_used(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("city,state\n" + "Boston,MA\n" * 30 + "Bostn,MA\n")
    detection = detect(read_table(path))
    assert detection.decision is not None
    assert detection.decision.summary()["decision"]["weights"] == load().as_dict()["weights"]
