"""The per-column detectors' short cuts (shapes reused, bare numbers skipped) change no answer: each is compared
with the full computation it replaces, which a big column (more than BIG_COLUMN distinct values) still runs."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect import formats
from iterate.detect.context import ColumnFacts
from iterate.table import Column

pytestmark = pytest.mark.unit


def _facts(values: list[str]) -> ColumnFacts:
    return ColumnFacts(Column("x", 0, pa.array(values, pa.string())), "")


def _columns() -> list[list[str]]:
    rng = random.Random(3)
    out = []
    for rate in (0.0, 0.01, 0.019, 0.021, 0.05, 0.3):
        for kind in ("number", "price", "code", "word"):
            values = []
            for _ in range(400):
                if kind == "number":
                    v = f"{rng.uniform(-50, 900):.{rng.choice([0, 1, 2])}f}"
                elif kind == "price":
                    v = f"${rng.randint(1, 99)}.{rng.randint(0, 99):02d}"
                elif kind == "code":
                    v = f"AB-{rng.randint(0, 9999):04d}"
                else:
                    v = rng.choice(["red", "green", "blue", "dark red"])
                if rng.random() < rate:
                    v = rng.choice([f"{v} kg", f"{v}%", f" {v} ", f"{v}.", f"+{v}", "n/a", "", f"{v}x", "٣4"])
                values.append(v)
            out.append(values)
    return out


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (
        np.array_equal(a.rows, b.rows)
        and np.array_equal(a.cols, b.cols)
        and a.stats == b.stats
        and a.type == b.type
        and a.expected == b.expected
        and (a.llr is None) == (b.llr is None)
        and (a.llr is None or np.array_equal(a.llr, b.llr))
    )


@pytest.mark.parametrize("detector", [formats.detect_units, formats.detect_shape_violations])
def test_given_columns_of_many_kinds_when_detected_with_and_without_short_cuts_then_the_findings_are_equal(
    detector, monkeypatch
):
    columns = _columns()
    fast = [detector(_facts(v)) for v in columns]
    # A BIG_COLUMN below every column's size sends each through the full computation.
    monkeypatch.setattr(formats, "BIG_COLUMN", 0)
    monkeypatch.setattr(formats, "SAMPLE_ROWS", 10**9)  # ... on every row: the same values as the short cut
    full = [detector(_facts(v)) for v in columns]
    assert [f is not None for f in fast] == [f is not None for f in full]
    assert any(f is not None for f in fast)  # the comparison covers columns where the detector fires
    assert all(_same(a, b) for a, b in zip(fast, full, strict=True))


def test_a_second_unit_spelling_on_just_over_two_percent_of_rows_is_still_found():
    # 2.5% of rows carry ` kg` beside bare numbers: the short cut must not skip the column.
    values = [str(i % 97) for i in range(390)] + [f"{i} kg" for i in range(10)]
    found = formats.detect_units(_facts(values))
    assert found is not None and sorted(found.rows.tolist()) == list(range(390, 400))
    # Under two percent it is not a second way to write the column (the shape detector judges it).
    assert formats.detect_units(_facts(values[:-3] + [str(i) for i in range(3)])) is None


def test_a_column_built_from_two_others_is_found_among_many_that_start_or_end_alike():
    from iterate.detect.context import facts_for
    from iterate.detect.derived import find_derivations
    from iterate.table import SourceInfo, Table

    rng = random.Random(5)
    n = 300
    state = [rng.choice(["AL", "AK", "AZ"]) for _ in range(n)]
    code = [rng.choice(["M1", "M22", "M333"]) for _ in range(n)]
    columns = {"state": state, "code": code, "joined": [f"{s}_{c}" for s, c in zip(state, code, strict=True)]}
    # Distractors: longer and shorter columns starting with the same letter and ending with the same digit.
    for k in range(20):
        columns[f"d{k}"] = [f"A{'x' * rng.randint(0, 9)}{rng.choice('123')}" for _ in range(n)]
    arrow = pa.table({f"c{i}": pa.array(v, pa.string()) for i, v in enumerate(columns.values())})
    table = Table.from_arrow(
        arrow, name="t", source=SourceInfo(path="t.csv", format="csv"), names=list(columns)
    )
    found = find_derivations(facts_for(table, ""), n)
    assert [(d.target, d.left, d.sep, d.right) for d in found] == [(2, 0, "_", 1)]
    assert found[0].holds.all()


def test_columns_missing_together_are_the_pairs_a_pair_by_pair_binomial_test_finds():
    import math

    from iterate.detect.calibration import DEFAULT
    from iterate.detect.missing import _partners

    rng = np.random.default_rng(9)
    n = 500
    base = rng.random(n) < 0.1
    rows = {}
    for c in range(40):
        if c % 4 == 0:
            rows[c] = base | (rng.random(n) < 0.01)  # travels with the others of its kind
        else:
            rows[c] = rng.random(n) < rng.choice([0.005, 0.05, 0.3])
    expected: dict[int, set[int]] = {c: set() for c in rows}
    counts = {c: float(v.sum()) for c, v in rows.items()}
    for a in rows:
        for b in rows:
            if a >= b:
                continue
            together = float((rows[a] & rows[b]).sum())
            rarer, other = sorted((counts[a], counts[b]))
            if together < 2 or together < DEFAULT.comissing_share * rarer:
                continue
            p = other / n
            z = (together - rarer * p) / math.sqrt(max(rarer * p * (1 - p), 1e-9))
            if z >= DEFAULT.comissing_z:
                expected[a].add(b)
                expected[b].add(a)
    found = _partners(rows, n, DEFAULT)
    assert found == expected
    assert found[0] >= {4, 8, 12}  # the columns of one pattern are each other's partners


def test_how_well_label_columns_sort_a_columns_ranks_is_the_same_as_on_the_rows_taken_out():
    from iterate.detect.explained import Contexts, _rank_eta2_all

    rng = np.random.default_rng(4)
    n, sizes = 600, [3, 7, 2, 12]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    codes = np.stack([rng.integers(0, k, n) + s for k, s in zip(sizes, starts, strict=True)])
    contexts = Contexts([], np.arange(n), codes, starts)
    for share in (0.0, 0.01, 0.3):
        ok = rng.random(n) >= share
        values = rng.normal(size=n) + codes[1] % 7  # the second column sorts the values
        ranks = np.empty(int(ok.sum()))
        ranks[np.argsort(values[ok], kind="stable")] = np.arange(ranks.size)
        # The reference: the matrix of the rows kept, as the columns x rows computation reads it.
        flat = codes[:, ok].ravel()
        total = int(codes.max()) + 1
        group_sizes = np.bincount(flat, minlength=total).astype(np.float64)
        sums = np.bincount(flat, weights=np.tile(ranks, codes.shape[0]), minlength=total)
        contrib = np.where(group_sizes > 0, sums**2 / np.maximum(group_sizes, 1), 0.0)
        between = np.add.reduceat(contrib, starts) - ranks.size * ranks.mean() ** 2
        held = np.add.reduceat((group_sizes > 0).astype(np.float64), starts)
        chance = np.clip((held - 1) / (ranks.size - 1), 0.0, 1.0 - 1e-9)
        expected = (between / float(((ranks - ranks.mean()) ** 2).sum()) - chance) / (1.0 - chance)
        found = _rank_eta2_all(contexts, ok, ranks)
        assert found.tobytes() == expected.tobytes()  # bit for bit
        assert int(np.argmax(found)) == 1
