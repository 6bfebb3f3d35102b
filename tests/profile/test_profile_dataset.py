"""Dataset-level profile on small crafted tables: duplicates, near duplicates, keys, dependencies."""

import numpy as np
import pandas as pd
import pytest

from iterate.profile import duplicate_rows, group_majority, profile_table, profile_table_full
from iterate.profile.dataset import NEAR_DUP_FULL_UNIQUES

pytestmark = pytest.mark.unit


def test_given_repeated_rows_when_profiled_then_exact_duplicates_match_pandas(make_table):
    # Given rows where some repeat earlier ones exactly
    rng = np.random.default_rng(2)
    base = {"a": [str(x) for x in rng.integers(0, 4, 400)], "b": [str(x) for x in rng.integers(0, 3, 400)]}
    table = make_table(base)
    # When
    dups = duplicate_rows(table)
    # Then the marks are those of pandas' duplicated(keep="first")
    frame = pd.DataFrame(base)
    assert np.array_equal(dups.exact, frame.duplicated(keep="first").to_numpy())
    stats = profile_table(table).duplicates
    assert stats.exactRows == int(frame.duplicated().sum())
    assert stats.exactGroups == int(frame[frame.duplicated(keep=False)].drop_duplicates().shape[0])


def test_given_rows_differing_in_case_space_and_punctuation_then_near_duplicates(make_table):
    table = make_table(
        {
            "name": ["ACME, Inc.", "acme inc", "Acme Inc", "Beta", "beta", "Gamma"],
            "city": ["Paris", "paris ", "PARIS", "Rome", "Rome", "Rome"],
        }
    )
    dups = duplicate_rows(table)
    assert dups.exact.tolist() == [False] * 6
    assert dups.near.tolist() == [False, True, True, False, True, False]
    assert profile_table(table).duplicates.nearRows == 3


def test_given_large_columns_when_near_duplicates_then_two_stage_search_finds_them(make_table):
    # Given a column with more distinct values than the full-normalisation limit and a near-duplicate pair
    n = NEAR_DUP_FULL_UNIQUES + 500
    ids = [f"Row-{i}" for i in range(n)]
    ids[-1] = "ROW 7"  # normalises like "Row-7"
    ids[-2] = "row7"  # also like "Row-7", but its other column differs: not a near duplicate
    tag = ["x"] * n
    tag[-2] = "y"
    dups = duplicate_rows(make_table({"id": ids, "tag": tag}))
    assert np.flatnonzero(dups.near).tolist() == [n - 1]
    assert not dups.exact.any()


def test_given_unique_column_when_profiled_then_it_is_a_candidate_key_despite_exact_duplicates(make_table):
    table = make_table(
        {
            "order": ["o1", "o2", "o3", "o3", "o4"],
            "item": ["x", "y", "x", "x", "z"],
            "price": ["1.5", "2.5", "3.5", "3.5", "4.5"],
        }
    )
    profile = profile_table(table)
    assert profile.duplicates.exactRows == 1
    assert profile.candidateKeys == [["order"]]


def test_given_no_single_key_when_profiled_then_a_pair_is_proposed(make_table):
    table = make_table(
        {
            "store": [s for s in "ABCD" for _ in range(5)],
            "day": [f"d{d}" for _ in range(4) for d in range(5)],
            "sales": ["1"] * 20,
        }
    )
    assert profile_table(table).candidateKeys == [["store", "day"]]


def test_group_majority_marks_rows_disagreeing_with_their_group():
    lhs = np.array([0, 0, 0, 1, 1, 1, 1, 2, -1])
    rhs = np.array([5, 5, 6, 2, 2, 2, 3, 0, 1])
    gm = group_majority(lhs, rhs)
    assert gm.agrees.tolist() == [True, True, False, True, True, True, False, True, True]
    assert gm.majority.tolist() == [5, 2, 0]
    assert gm.group_size.tolist() == [3, 4, 1]
    conf, rows = gm.confidence(2)
    assert (conf, rows) == (pytest.approx(5 / 7), 7)


def test_group_majority_sparse_path_equals_dense_path(monkeypatch):
    rng = np.random.default_rng(4)
    lhs = rng.integers(0, 50, 2000)
    rhs = (lhs * 3 + (rng.random(2000) < 0.1) * rng.integers(0, 40, 2000)) % 40
    dense = group_majority(lhs, rhs, 50, 40)
    import iterate.profile.fd as fd

    monkeypatch.setattr(fd, "DENSE_LIMIT", 0)
    sparse = group_majority(lhs, rhs, 50, 40)
    assert np.array_equal(dense.agrees, sparse.agrees)
    assert np.array_equal(dense.majority, sparse.majority)


def test_given_zip_determines_city_with_violations_when_profiled_then_dependency_reported(make_table):
    # Given zip → city for 4,000 rows, with 40 rows breaking it, and an unrelated column
    rng = np.random.default_rng(8)
    n = 4000
    z = rng.integers(0, 60, n)
    city = z % 25
    broken = rng.choice(n, 40, replace=False)
    city[broken] = (city[broken] + 1) % 25
    table = make_table(
        {
            "zip": [f"{10000 + x}" for x in z],
            "city": [f"City{c}" for c in city],
            "noise": [str(x) for x in rng.integers(0, 20, n)],
        }
    )
    # When
    result = profile_table_full(table)
    deps = {(d.lhs[0], d.rhs): d for d in result.profile.functionalDependencies}
    # Then zip → city is found with exactly the broken rows as violations; noise depends on nothing
    assert ("zip", "city") in deps
    gm = group_majority(table.column("zip").codes, table.column("city").codes)
    assert deps[("zip", "city")].violatingRows == int((~gm.agrees).sum())
    assert set(np.flatnonzero(~gm.agrees)) <= set(broken.tolist())
    assert deps[("zip", "city")].violatingRows >= 35
    assert not any(rhs == "noise" or lhs == "noise" for lhs, rhs in deps)


def test_given_a_skewed_column_when_profiled_then_no_dependency_by_chance(make_table):
    # Given a rhs that is 97% one value: any lhs "predicts" it, so only a real gain counts
    rng = np.random.default_rng(9)
    n = 3000
    table = make_table(
        {
            "group": [str(x) for x in rng.integers(0, 30, n)],
            "flag": ["no" if r < 0.97 else "yes" for r in rng.random(n)],
        }
    )
    assert profile_table(table).functionalDependencies == []


def test_given_two_workers_when_profiled_then_same_profile_as_one(make_table):
    rng = np.random.default_rng(12)
    n = 2000
    table = make_table(
        {
            "k": [f"K{i}" for i in range(n)],
            "v": [f"{x:.1f}" for x in rng.normal(50, 10, n)],
            "c": [str(x) for x in rng.choice(["a", "b", "", "N/A"], n)],
        }
    )
    assert profile_table(table, workers=1) == profile_table(table, workers=2)
