"""Numbers written unlike their column (issue 32's first product decision), the tail-spacing statistic that
tells a smooth heavy tail from a value cut off from it, and the typo statistics the fitted decision weighs."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from iterate.agents.offline.followup import OfflineFollowupAgent
from iterate.detect.context import facts_for
from iterate.detect.conventions import detect_float_written_integers, detect_thousands_separators
from iterate.detect.numeric import _tail_spacing, numeric_model, robust_scale
from iterate.detect.typos import detect_typos
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def table(columns: dict[str, list[str]]) -> Table:
    names = list(columns)
    arrow = pa.table({f"c{i}": pa.array(v, pa.string()) for i, v in enumerate(columns.values())})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"), names=names)


def facts(values: list[str]):
    (f,) = facts_for(table({"amount": values}), "")
    return f, numeric_model(f)


def amounts(n: int = 300, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [str(rng.randrange(1000, 90_000)) for _ in range(n)]


def test_a_thousands_separator_among_plain_numbers_is_rewritten_the_columns_way() -> None:
    values = amounts()
    values[3], values[9] = "12,500", "7,001"
    f, m = facts(values)
    found = detect_thousands_separators(f, m)
    assert found is not None
    assert sorted(found.rows.tolist()) == [3, 9]
    assert found.stats["canonical"] == {"12,500": "12500", "7,001": "7001"}
    assert found.stats["separated"] is True
    assert found.detector == "convention" and found.damage == "format"


def test_a_plain_number_among_separated_ones_gets_the_separator() -> None:
    values = [f"{int(v):,}" for v in amounts()]
    values[5] = "45000.5"
    f, m = facts(values)
    found = detect_thousands_separators(f, m)
    assert found is not None and found.rows.tolist() == [5]
    assert found.stats["canonical"] == {"45000.5": "45,000.5"}


def test_small_numbers_and_a_column_split_evenly_are_no_convention_to_break() -> None:
    rng = random.Random(2)
    small = [str(rng.randrange(1, 999)) for _ in range(300)]
    assert detect_thousands_separators(*facts(small)) is None
    even = amounts(200) + [f"{int(v):,}" for v in amounts(200, seed=3)]
    assert detect_thousands_separators(*facts(even)) is None


def test_whole_numbers_written_as_decimals_however_often_they_repeat() -> None:
    rng = random.Random(4)
    values = [str(rng.randrange(1, 50)) for _ in range(300)]
    for r in range(0, 30, 3):
        values[r] = "7.0"  # ten rows: repeated, still unlike the column
    f, m = facts(values)
    found = detect_float_written_integers(f, m)
    assert found is not None and len(found.rows) == 10
    assert found.stats["canonical"] == {"7.0": "7"}
    assert found.features["share"].min() > 2.0  # log-odds of the share written as integers


def test_followup_offers_to_rewrite_a_convention_break_not_to_clear_it() -> None:
    from iterate.contracts import Issue

    values = amounts()
    values[3] = "12,500"
    f, m = facts(values)
    found = detect_thousands_separators(f, m)
    assert found is not None
    issue = Issue.model_validate(
        {
            "id": "thousands-amount",
            "type": "format_violation",
            "severity": "low",
            "description": "d",
            "affectedColumns": ["amount"],
            "affectedRows": 1,
            "category": "quick_fixes",
            "suggestedAction": found.suggested_action,
            "evidence": {
                "affectedRows": 1,
                "affectedCells": 1,
                "affectedShare": 1 / 300,
                "stats": found.stats,
            },
        }
    )
    step = OfflineFollowupAgent().next_question(issue, [])
    assert step.options[0].key == "rewrite"
    action = step.onResponse["rewrite"]
    assert action.action == "standardize_values" and action.parameters["mapping"] == {"12,500": "12500"}


def spacing_of(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u, counts = np.unique(x, return_counts=True)
    w = counts.astype(np.float64)
    scale = robust_scale(u, w)
    assert scale is not None
    return u, _tail_spacing(scale, u, w)


def test_a_smooth_heavy_tail_is_not_cut_off_but_a_value_ten_times_too_big_is() -> None:
    rng = np.random.default_rng(5)
    heavy = rng.standard_t(2, 4000)  # real heavy tail: ratings on a handful of minutes played
    _, smooth = spacing_of(heavy)
    noisy = rng.normal(50, 10, 3000)
    noisy[:4] *= 10
    u, cut = spacing_of(noisy)
    assert cut[u > 300].min() > 4 * smooth.max()
    assert cut[u < 100].max() < cut[u > 300].min()


def test_typo_evidence_says_how_many_rows_write_the_variant_and_its_reference() -> None:
    rng = random.Random(6)
    values = [rng.choice(["Stratovolcano", "Shield volcano", "Caldera"]) for _ in range(400)]
    for r in range(10):
        values[r] = "Stratovolcanoe"
    (f,) = facts_for(table({"type": values}), "")
    found = [x for x in detect_typos(f) if x.detector == "typos"]
    assert found, "the variant is one edit from a far more frequent value"
    rows = np.exp(found[0].features["rows"])
    assert np.allclose(rows, 10)
    reference = sum(v == "Stratovolcano" for v in values)
    assert np.allclose(np.exp(found[0].features["ratio"]), reference / 10)
