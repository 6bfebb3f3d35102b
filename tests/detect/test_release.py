"""The columns' per-value caches are not held past the detectors, and read again they are the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iterate.detect import detect
from iterate.detect.context import ColumnFacts, facts_for
from iterate.io import read_table

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


def test_the_detection_keeps_no_per_value_cache_of_any_column() -> None:
    table = read_table(SAMPLE)
    detection = detect(table)
    assert detection.findings
    for f in detection.facts:
        assert not set(ColumnFacts.HEAVY_CACHES) & set(vars(f)), f.name


def test_a_released_cache_read_again_is_computed_again_the_same() -> None:
    table = read_table(SAMPLE)
    facts = facts_for(table, "")
    before = [(f.meaning.key_of.copy(), f.folded.to_pylist(), f.numeric.numbers.copy()) for f in facts]
    for f in facts:
        f.release()
        assert "meaning" not in vars(f) and "numeric" not in vars(f)
    for f, (keys, folded, values) in zip(facts, before, strict=True):
        assert np.array_equal(f.meaning.key_of, keys) and f.folded.to_pylist() == folded
        assert np.array_equal(f.numeric.numbers, values, equal_nan=True)


def test_values_folding_leaves_alone_share_the_dictionary() -> None:
    import pyarrow as pa

    from iterate.table import SourceInfo, Table

    arrow = pa.table({"when": ["2023-01-02 10:17", "2023-01-03 11:00"], "who": ["Ann", "bob"]})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))
    when, who = facts_for(table, "")
    # A column folding changes nowhere keeps its dictionary as its folded values; another gets its own
    assert when.folded is when.column.dictionary
    assert who.folded.to_pylist() == ["ann", "bob"] and who.folded is not who.column.dictionary


def test_a_numeric_model_weighs_its_values_by_their_rows_without_copying_a_gapless_column() -> None:
    import pyarrow as pa

    from iterate.table import SourceInfo, Table

    arrow = pa.table({"id": ["a1", "b2", "c3", "a1"], "qty": ["1", "", "3", "1"]})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))
    ids_col, qty = facts_for(table, "")
    # Every value present: the weights are the column's counts, shared and read-only
    assert np.array_equal(ids_col.numeric.weights, ids_col.counts[ids_col.numeric.ids])
    assert np.shares_memory(ids_col.numeric.weights, ids_col.counts)
    assert not ids_col.numeric.weights.flags.writeable
    # A gap: only the present values are weighed, in a copy of their own
    assert np.array_equal(qty.numeric.weights, qty.counts[qty.numeric.ids]) and qty.numeric.ids.size == 2
    assert not np.shares_memory(qty.numeric.weights, qty.counts)


def test_missing_and_placeholder_tests_keep_no_folded_copy_and_match_the_folded_values() -> None:
    import pyarrow as pa

    from iterate.detect.context import PLACEHOLDERS
    from iterate.profile.shapes import MISSING_TOKENS
    from iterate.table import SourceInfo, Table

    values = ["  N/A", "Ann", "", "UNKNOWN ", "9999", " -1 ", "bob", "NA"]
    arrow = pa.table({"who": values})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))
    (who,) = facts_for(table, "unknown")
    # When the tests on trimmed, lower-cased values are asked
    blank, token, marker, placeholder = (
        who.is_blank,
        who.is_token,
        who.is_null_marker,
        who.is_placeholder_text,
    )
    # Then no folded copy of the dictionary is kept for them (only `meanings` keeps one, for short columns)
    assert "folded" not in vars(who)
    # And each agrees with the folded values, value by value
    folded = [v.strip().lower() for v in who.column.uniques]
    assert blank.tolist() == [v == "" for v in folded]
    assert token.tolist() == [v in MISSING_TOKENS | {"unknown"} for v in folded]
    assert marker.tolist() == [v in ("", "unknown") for v in folded]
    assert placeholder.tolist() == [v in set(PLACEHOLDERS.to_pylist()) for v in folded]
