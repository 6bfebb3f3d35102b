"""iterate.grouping.unique gives exactly np.unique's arrays; decide's strongest-per-family mask is the lexsort's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iterate.detect.decide import _strongest_by_lexsort, _strongest_per_family
from iterate.grouping import unique


def _keys() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    found = []
    for n, distinct, dtype in itertools.product(
        (10, 5000, 200_000), (1, 40, 3000, 150_000, 2**40), (np.int64, np.int32, np.uint64)
    ):
        top = min(distinct, 2**30) if dtype == np.int32 else distinct
        keys = rng.integers(0, top, n)
        if dtype != np.uint64:
            keys = keys - top // 3  # negative keys too
        if distinct > 10**6:
            keys = keys * 7  # spread out: hashed, not counted
        found.append(keys.astype(dtype))
    return found


@pytest.mark.parametrize("keys", _keys(), ids=lambda k: f"{k.dtype}-{k.size}-{np.unique(k).size}")
def test_unique_matches_numpy(keys: np.ndarray) -> None:
    # Given integer keys of every size, spread and type; When unique() is asked for any of np.unique's
    # arrays; Then they are np.unique's, dtype and order included.
    for index, inverse, counts in itertools.product((False, True), repeat=3):
        want = np.unique(keys, return_index=index, return_inverse=inverse, return_counts=counts)
        got = unique(keys, return_index=index, return_inverse=inverse, return_counts=counts)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for a, b in zip(want, got, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a, b)


def test_strongest_per_family_matches_lexsort() -> None:
    # Given evidence on cells with ties (0.0 and -0.0 among them); Then the mask is the lexicographic sort's.
    rng = np.random.default_rng(5)
    for n, cells in ((0, 1), (7, 3), (50_000, 4000), (200_000, 150_000)):
        cell = rng.integers(0, cells, n)
        fam = rng.integers(0, 6, n)
        llr = np.round(rng.normal(size=n), 1)
        llr[::7] = -0.0
        llr[::11] = 0.0
        assert np.array_equal(_strongest_per_family(cell, fam, llr), _strongest_by_lexsort(cell, fam, llr))
    llr[3] = np.nan  # NaN: the lexicographic sort decides
    assert np.array_equal(_strongest_per_family(cell, fam, llr), _strongest_by_lexsort(cell, fam, llr))
