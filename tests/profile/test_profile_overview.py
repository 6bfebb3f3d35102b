"""The profile's view of the whole table: missing cells and their patterns, sample rows, associations,
date histograms and an example of duplicate rows, each checked against pandas or scipy."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from iterate.profile import profile_table
from iterate.profile.overview import ASSOC_MIN, SAMPLE_VALUE_CHARS

pytestmark = pytest.mark.unit


def test_missing_cells_patterns_and_bands_agree_with_each_column_and_with_pandas(make_table):
    # Given three columns missing in different ways: blanks, a token (N/A), a placeholder number (-999)
    rng = np.random.default_rng(4)
    n = 600
    a = [("" if rng.random() < 0.2 else str(k)) for k in range(n)]
    b = [("N/A" if rng.random() < 0.1 else f"x{k % 7}") for k in range(n)]
    c = [str(v) for v in rng.normal(50, 5, n).round(1)]
    for k in range(0, n, 37):
        c[k] = "-999"
    table = make_table({"a": a, "b": b, "c": c, "d": [str(k % 5) for k in range(n)]})
    # When profiled
    p = profile_table(table)
    o = p.missingOverview
    # Then the table's missing cells are each column's missing + placeholders, summed
    per_column = {col.name: col.missing + col.disguisedMissing for col in p.columns}
    assert o.cells == sum(per_column.values()) and per_column["c"] == len(range(0, n, 37))
    # And the sets of columns missing together are those pandas counts, most rows first
    frame = pd.DataFrame(
        {"a": [v == "" for v in a], "b": [v == "N/A" for v in b], "c": [v == "-999" for v in c]}
    )
    combos = frame[frame.any(axis=1)].value_counts()
    assert o.rows == int(frame.any(axis=1).sum()) and o.patternCount == len(combos)
    names = {col.index: col.name for col in p.columns}
    got = {tuple(sorted(names[i] for i in pt.columns)): pt.rows for pt in o.patterns}
    want = {
        tuple(k for k, on in zip(frame.columns, key, strict=True) if on): int(v) for key, v in combos.items()
    }
    assert got == want and [pt.rows for pt in o.patterns] == sorted(got.values(), reverse=True)
    # And the bands cover every row once, and per column add up to its missing cells
    assert sum(o.bandRows) == n
    for index, bands in zip(o.bandColumns, o.bands, strict=True):
        assert sum(bands) == per_column[names[index]]


def test_a_table_without_missing_values_has_an_empty_overview(make_table):
    o = profile_table(make_table({"a": ["1", "2", "3"], "b": ["x", "y", "z"]})).missingOverview
    assert (o.cells, o.rows, o.patterns, o.bands) == (0, 0, [], [])


def test_sample_rows_are_the_first_rows_with_long_values_clipped(make_table):
    long = "é" * (SAMPLE_VALUE_CHARS + 50)
    p = profile_table(make_table({"a": [long, "b", "c", "d", "e", "f", "g"], "b": list("1234567")}))
    assert p.sample.rows == [0, 1, 2, 3, 4] and p.sample.columns == [0, 1]
    first = p.sample.values[0]
    assert len(first[0]) == SAMPLE_VALUE_CHARS and first[0].endswith("…") and first[1] == "1"


def test_strong_associations_match_scipy_and_weak_ones_are_left_out(make_table):
    # Given y tracking x (with noise), z independent of both, and two categories where one decides the other
    rng = np.random.default_rng(8)
    n = 800
    x = rng.normal(0, 1, n)
    y = x * 2 + rng.normal(0, 0.7, n)
    z = rng.normal(0, 1, n)
    city = rng.choice(["Paris", "Lyon", "Berlin", "Munich"], n)
    country = np.where(np.isin(city, ["Paris", "Lyon"]), "FR", "DE")
    noise = rng.choice(["a", "b", "c"], n)
    table = make_table(
        {
            "x": [f"{v:.3f}" for v in x],
            "y": [f"{v:.3f}" for v in y],
            "z": [f"{v:.3f}" for v in z],
            "city": list(city),
            "country": list(country),
            "noise": list(noise),
        }
    )
    # When profiled
    found = {tuple(a.columns): a for a in profile_table(table).associations}
    # Then x and y are found with scipy's Spearman rho, and city and country with V = 1
    rho = stats.spearmanr([float(f"{v:.3f}") for v in x], [float(f"{v:.3f}") for v in y]).statistic
    assert found[("x", "y")].measure == "spearman" and found[("x", "y")].value == pytest.approx(rho, abs=1e-3)
    assert found[("city", "country")].measure == "cramers_v" and found[("city", "country")].value > 0.99
    # And nothing weak is listed
    assert set(found) == {("x", "y"), ("city", "country")}
    assert all(abs(a.value) >= ASSOC_MIN and a.rows == n for a in found.values())


def test_a_date_histogram_counts_every_date_once_with_distinct_day_edges(make_table):
    days = pd.date_range("2024-01-01", periods=9, freq="D").strftime("%Y-%m-%d").tolist()
    values = [days[k % 9] for k in range(300)] + ["2031-05-05"]  # one far-off date, in the tail
    dates = profile_table(make_table({"d": values})).columns[0].dates
    h = dates.histogram
    assert sum(h.counts) + h.below + h.above == dates.count == 301
    assert len(set(h.edges)) == len(h.edges) and h.edges[0] == "2024-01-01"


def test_duplicate_rows_give_the_largest_group_and_a_first_example(make_table):
    table = make_table({"a": ["1", "2", "1", "3", "1", "2"], "b": ["x", "y", "x", "z", "x", "y"]})
    d = profile_table(table).duplicates
    assert (d.exactRows, d.exactGroups, d.largestGroup, d.example) == (3, 2, 3, [2, 0])
