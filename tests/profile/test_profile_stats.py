"""Column statistics against pandas, missing and disguised-missing counts, and merge == whole."""

import itertools

import numpy as np
import pandas as pd
import pytest

from iterate.profile import ColumnSketch, choose_null_marker, finalize_all, profile_table
from iterate.profile.sketch import SketchMergeError, weighted_quantiles

pytestmark = pytest.mark.unit


def test_given_numbers_when_profiled_then_robust_stats_match_pandas(make_table):
    # Given a numeric column with repeats, a few blanks and an outlier
    rng = np.random.default_rng(3)
    nums = np.round(rng.lognormal(2, 0.7, 3000), 2)
    nums[:5] = 10_000.0
    values = [f"{x:.2f}" for x in nums] + [""] * 40
    table = make_table({"amount": values})
    # When
    col = profile_table(table).columns[0]
    # Then every statistic agrees with pandas on the same numbers
    s = pd.Series(nums)
    stats = col.numeric
    assert stats is not None
    assert stats.count == 3000
    assert stats.mean == pytest.approx(s.mean())
    assert stats.std == pytest.approx(s.std())
    assert stats.median == pytest.approx(s.median())
    assert stats.q1 == pytest.approx(s.quantile(0.25))
    assert stats.q3 == pytest.approx(s.quantile(0.75))
    assert stats.mad == pytest.approx((s - s.median()).abs().median())
    assert (stats.min, stats.max) == (s.min(), s.max())
    assert col.missing == 40
    hist = stats.histogram
    assert hist is not None and sum(hist.counts) + hist.below + hist.above == 3000


def test_weighted_quantiles_equal_numpy_on_repeated_values():
    rng = np.random.default_rng(5)
    values = rng.normal(size=50)
    weights = rng.integers(1, 20, size=50)
    expanded = np.repeat(values, weights)
    qs = [0.0, 0.1, 0.25, 0.5, 0.9, 1.0]
    assert weighted_quantiles(values, weights, qs) == pytest.approx(list(np.quantile(expanded, qs)))


def test_given_text_when_profiled_then_counts_lengths_top_values_and_patterns(make_table):
    values = ["apple"] * 5 + ["fig"] * 3 + ["kiwi", "Pear 2"] + ["", "N/A"]
    col = profile_table(make_table({"fruit": values})).columns[0]
    s = pd.Series([v for v in values if v not in ("", "N/A")])
    assert col.count == 11  # non-missing cells: N/A is a disguised missing here, blank is the marker
    assert col.missing == 1
    assert col.disguisedMissing == 1
    assert col.distinct == s.nunique()
    assert col.uniqueRatio == pytest.approx((s.value_counts() == 1).sum() / len(s))
    assert col.distinctRatio == pytest.approx(s.nunique() / len(s))
    assert [(v.value, v.count) for v in col.topValues[:2]] == [("apple", 5), ("fig", 3)]
    assert col.length is not None
    assert (col.length.min, col.length.max) == (3, 6)
    assert col.length.mean == pytest.approx(s.str.len().mean())
    assert {p.value: p.count for p in col.patterns} == {"a": 9, "a 9": 1}


def test_given_na_more_common_than_blank_when_profiled_then_na_is_the_null_marker(make_table):
    # Given a dataset that writes missing as N/A (and once as a blank)
    table = make_table({"a": ["1", "N/A", "3", "N/A", ""], "b": ["x", "N/A", "y", "z", "w"]})
    # When / Then N/A is the marker, so N/A and blank count as missing and nothing is disguised
    profile = profile_table(table)
    assert profile.nullMarker == "N/A"
    assert [(c.missing, c.disguisedMissing) for c in profile.columns] == [(3, 0), (1, 0)]
    assert choose_null_marker([{"": 3, "null": 3}]) == ""


def test_given_sentinel_numbers_when_profiled_then_they_are_disguised_missing(make_table):
    # Given quantities 1..20 with a spike of 9999 and of -1 standing in for "unknown"
    values = [str(1 + i % 20) for i in range(2000)] + ["9999"] * 30 + ["-1"] * 10 + ["0"] * 1
    col = profile_table(make_table({"qty": values})).columns[0]
    # Then both are disguised missing and left out of the statistics; a single 0 is not
    assert col.disguisedMissing == 40
    assert col.numeric is not None and (col.numeric.min, col.numeric.max) == (0.0, 20.0)


def test_given_a_real_large_value_when_profiled_then_it_is_not_a_sentinel(make_table):
    values = [str(1000 + i) for i in range(20_000)] + ["9999"] * 3
    assert profile_table(make_table({"n": values})).columns[0].disguisedMissing == 0


def test_given_sentinel_dates_when_profiled_then_disguised_missing(make_table):
    values = [f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(3000)] + ["1900-01-01"] * 20
    col = profile_table(make_table({"d": values})).columns[0]
    assert col.disguisedMissing == 20
    assert col.dates is not None and col.dates.min == "2023-01-01"


def test_given_a_table_in_chunks_when_sketches_merge_then_profile_equals_the_whole(make_table):
    # Given a mixed table cut into uneven chunks
    rng = np.random.default_rng(11)
    n = 3000
    data = {
        "id": [f"ID{i:05d}" for i in range(n)],
        "amount": [f"{x:.2f}" if x > 1 else "" for x in rng.lognormal(3, 1, n)],
        "when": [f"2021-{1 + i % 12:02d}-{1 + (i * 7) % 28:02d}" for i in range(n)],
        "cat": [str(c) for c in rng.choice(["a", "b", "c", "N/A"], n)],
        "qty": [str(q) for q in rng.integers(0, 30, n)],
    }
    whole = make_table(data)
    cuts = [0, 1, 500, 1700, 2999, n]
    for col in whole.columns:
        sketches = [
            ColumnSketch.from_values(col.name, col.index, data[col.name][a:b])
            for a, b in itertools.pairwise(cuts)
        ]
        merged = sketches[0]
        for s in sketches[1:]:
            merged = merged.merge(s)
        # When finalized / Then identical to the whole column's profile
        expected = ColumnSketch.from_column(col).finalize("")
        assert merged.finalize("") == expected
        # and merging is associative (pieces combined as a tree, in order)
        tree = sketches[0].merge(sketches[1]).merge(sketches[2].merge(sketches[3].merge(sketches[4])))
        assert tree.finalize("") == expected


def test_merging_different_columns_is_refused():
    a = ColumnSketch.from_values("a", 0, ["1"])
    b = ColumnSketch.from_values("b", 1, ["1"])
    with pytest.raises(SketchMergeError):
        a.merge(b)


def test_given_minus_one_inside_the_range_when_profiled_then_it_is_a_real_value(make_table):
    # Given temperatures from -20 to 30 where -1 is common: a real reading, not a placeholder
    values = [str(t) for t in range(-20, 31)] * 40 + ["-1"] * 200
    assert profile_table(make_table({"temp": values})).columns[0].disguisedMissing == 0


def test_kth_largest_matches_sorting_for_small_and_huge_counts():
    from iterate.profile.types import kth_largest

    rng = np.random.default_rng(1)
    for _ in range(200):
        high = int(rng.choice([5, 300, 10**7]))  # 10**7: too spread for a histogram, partition path
        c = rng.integers(1, high, size=int(rng.integers(10, 200)))
        k = int(rng.integers(1, 10))
        assert kth_largest(c, k) == np.sort(c)[::-1][k - 1]


def test_given_a_spike_of_zeros_when_profiled_then_zero_is_a_real_value(make_table):
    values = [f"{n} patients" for n in range(1, 300)] + ["0 patients"] * 100
    assert profile_table(make_table({"sample": values})).columns[0].disguisedMissing == 0


def test_given_pieces_of_a_dataset_when_merged_then_columns_and_null_marker_equal_the_whole(make_table):
    # Given a dataset whose null marker (N/A) only wins once its pieces are added up
    data = {
        "a": ["1", "N/A", "", "4", "N/A", "6", "N/A", "8"],
        "b": ["x", "", "y", "", "z", "N/A", "w", "v"],
    }
    whole = profile_table(make_table(data))
    pieces = [(0, 3), (3, 8)]
    merged = []
    for i, name in enumerate(data):
        sketches = [ColumnSketch.from_values(name, i, data[name][a:b]) for a, b in pieces]
        merged.append(sketches[0].merge(sketches[1]))
    # When the merged sketches are finalized together
    marker, columns = finalize_all(merged)
    # Then the marker and every column profile match the whole dataset's
    assert marker == whole.nullMarker == "N/A"
    assert columns == whole.columns


def test_given_huge_and_overflowing_numbers_when_profiled_then_stats_are_finite_and_json_round_trips(
    make_table,
):
    from iterate.contracts import DatasetProfile

    values = ["1e300", "-1e300", "2e300", "1e309", "5"] * 10
    profile = profile_table(make_table({"big": values}))
    stats = profile.columns[0].numeric
    assert stats is not None and stats.count == 40  # 1e309 overflows: not a number
    assert np.isfinite([stats.mean, stats.std, stats.min, stats.max]).all()
    assert stats.mean == pytest.approx(np.mean([1e300, -1e300, 2e300, 5]))
    assert DatasetProfile.model_validate_json(profile.model_dump_json()) == profile


def test_given_dates_when_profiled_then_quartiles_match_pandas(make_table):
    rng = np.random.default_rng(6)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, 1001), unit="D")
    values = [d.strftime("%Y-%m-%d") for d in days]
    dates = profile_table(make_table({"d": values})).columns[0].dates
    s = pd.Series(days)
    assert dates is not None
    assert (dates.min, dates.max) == (str(s.min().date()), str(s.max().date()))
    assert dates.median == str(s.median().floor("D").date())
    assert dates.q1 == str(s.quantile(0.25).floor("D").date())
    assert dates.q3 == str(s.quantile(0.75).floor("D").date())
