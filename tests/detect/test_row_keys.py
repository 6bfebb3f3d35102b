"""Row ids of the duplicate-row detector: each row's id is the first row it equals, found without np.unique."""

from __future__ import annotations

import numpy as np
import pytest

from iterate.detect.rows import _later_copies, _later_rows, _row_keys


def _first_equal(columns: list[np.ndarray]) -> np.ndarray:
    seen: dict[tuple[int, ...], int] = {}
    return np.array(
        [seen.setdefault(row, r) for r, row in enumerate(zip(*(c.tolist() for c in columns), strict=True))]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_row_is_keyed_by_the_first_row_it_equals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000
    # Few values a column, so that rows repeat by chance as well as by copying
    columns = [rng.integers(0, k, n).astype(np.int32) for k in (3, 5, 7, 4)]
    copied = rng.choice(n, 500)
    for c in columns:
        c[copied[1:]] = c[copied[:-1]]
    keys = _row_keys(columns, n)
    assert np.array_equal(keys, _first_equal(columns))
    # And the later copies read from the ids are those a sort of the ids finds
    assert np.array_equal(_later_rows(keys), _later_copies(keys))


def test_all_distinct_rows_are_their_own_ids() -> None:
    n = 5000
    keys = _row_keys([np.arange(n, dtype=np.int32), np.zeros(n, dtype=np.int32)], n)
    assert np.array_equal(keys, np.arange(n)) and _later_rows(keys).size == 0


def test_codes_given_per_value_are_read_as_their_rows() -> None:
    per_value = np.array([0, 0, 1])  # codes 0 and 1 mean the same: normalised alike
    codes = np.array([0, 1, 2, 0, 1], dtype=np.int32)
    keys = _row_keys([(per_value, codes)], 5)
    assert keys.tolist() == [0, 0, 2, 0, 0] and _later_rows(keys).tolist() == [1, 3, 4]


def test_rows_that_share_a_hash_but_differ_keep_ids_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import iterate.detect.rows as rows

    class Weak:
        """Multipliers of 1: a row's hash is the xor of its codes, so (1, 2) and (2, 1) collide."""

        def __init__(self, seed: int) -> None:
            pass

        def integers(self, low: int, high: int) -> int:
            return 0

    monkeypatch.setattr(rows.np.random, "default_rng", Weak)
    a = np.array([1, 2, 1, 2, 3], dtype=np.int32)
    b = np.array([2, 1, 2, 1, 0], dtype=np.int32)  # rows 0 and 2 are equal, 1 and 3 are equal: all hash to 3
    keys = _row_keys([a, b], 5)
    # Row 2 is row 0's copy; 1, 3 and 4 differ from row 0, whose hash they share: each keeps an id of its own
    # (so that 3 repeats 1 goes unseen: the price of a 64-bit collision, about 2**-64 a pair of rows)
    assert keys.tolist() == [0, -2, 0, -4, -5]
    assert _later_rows(keys).tolist() == [2] and _later_copies(keys).tolist() == [2]
