"""Gaps: flagged where the column is otherwise filled, a fact where emptiness is becoming its convention."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from iterate.detect import detect
from iterate.detect.calibration import DEFAULT
from iterate.detect.missing import gap_llr
from iterate.io import read_table
from iterate.table import SourceInfo, Table


def make_table(columns: dict[str, list[str]]) -> Table:
    import pyarrow as pa

    arrow = pa.table({name: pa.array(v, pa.string()) for name, v in columns.items()})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))


def test_the_evidence_of_a_gap_falls_as_the_column_empties() -> None:
    shares = [0.005, 0.02, 0.1, 0.2, 0.3, 0.42, DEFAULT.missing_convention_share - 1e-9]
    evidence = [gap_llr(m) for m in shares]
    assert evidence == sorted(evidence, reverse=True)
    assert gap_llr(0.01) > 8.0  # a slip in a filled column: strong
    assert gap_llr(0.42) < 1.0  # an optional field: the share alone speaks, and barely


def _table(n: int, blank_share: float, seed: int = 5) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    sizes = [str(rng.choice([12, 16, 20, 24, 32])) for _ in range(n)]
    blanks = set(rng.sample(range(n), int(blank_share * n)))
    note = ["" if i in blanks else str(rng.randint(5, 120)) for i in range(n)]
    # Slips among the filled values as well (a tenfold value, a stray letter): the column's error rate is
    # not small, which alone must not turn its optional emptiness into errors.
    filled = [i for i in range(n) if i not in blanks]
    for i in rng.sample(filled, len(filled) // 20):
        note[i] = str(int(note[i]) * 100) if rng.random() < 0.5 else note[i] + "x"
    return sizes, note


def test_an_optional_column_four_in_ten_empty_is_not_flagged_cell_by_cell() -> None:
    sizes, ibu = _table(1000, 0.42)
    detection = detect(make_table({"ounces": sizes, "ibu": ibu}))
    flagged = [f for f in detection.findings if f.flag and f.n_cells and "ibu" in f.columns]
    assert not [f for f in flagged if f.type == "missing_values"]


def test_gaps_in_a_nearly_filled_column_are_flagged() -> None:
    sizes, ibu = _table(1000, 0.01)
    detection = detect(make_table({"ounces": sizes, "ibu": ibu}))
    gaps = [f for f in detection.findings if f.flag and f.type == "missing_values" and f.columns == ["ibu"]]
    assert gaps and gaps[0].n_cells == 10


def test_a_number_with_an_absurd_exponent_does_not_break_detection(tmp_path: Path) -> None:
    # Given a numeric column whose gaps meet zeros, and one value a typo turned into 1.5e9999
    from iterate.detect.context import facts_for
    from iterate.detect.undefined import _resolution

    path = tmp_path / "t.csv"
    path.write_text("x,y\n" + "".join(f"{v},a\n" for v in ["1.5e9999", "0", "", "2.25", "3e-4"] * 10))
    table = read_table(path)
    f = facts_for(table, "")[0]
    # When the resolution of its values is worked out
    half = _resolution(f, np.arange(table.n_rows))
    # Then the absurd one has none (NaN) and the others half a unit of their last digit
    assert np.isnan(half[0])
    assert half[3] == pytest.approx(0.005) and half[4] == pytest.approx(0.00005)
