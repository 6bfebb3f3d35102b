"""Narrow dictionary codes (issue 14: memory of long files) and the places that combine codes into wider keys.

A column's codes take the narrowest signed type its dictionary fits (int8 up to 127 values, int16 up to 32,767,
then int32): on 10M rows x 20 columns the table fell from 1,698 to 1,398 MB. The detection must find exactly
what it finds with int32 codes: arithmetic on codes widens them first."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect.discovery import group_majority as detect_group_majority
from iterate.profile.dataset import _unique_pairs
from iterate.profile.fd import group_majority as profile_group_majority
from iterate.table import Column, code_dtype, wide

pytestmark = pytest.mark.unit

# Two codes whose pair keys x * 70,000 + y collide once wrapped to 32 bits: 61,357 x 70,000 = 2**32 + 22,704.
N_Y = 70_000
A = (0, 22_704)
B = (61_357, 0)


def test_column_codes_are_narrow_and_rebuild_the_same_text():
    values = pa.array(["b", "a", "", "b", "c", "a"] * 5)
    column = Column("x", 0, values)
    assert column.codes.dtype == np.int8
    assert column.values.to_pylist() == values.to_pylist()
    assert column.values_at(np.array([4, 1, 2])).to_pylist() == ["c", "a", ""]
    assert column.counts.tolist() == [10, 10, 5, 5]


def test_code_type_is_the_narrowest_that_holds_every_code_and_minus_one():
    assert code_dtype(0) is np.int8 and code_dtype(127) is np.int8
    assert code_dtype(128) is np.int16 and code_dtype(32_767) is np.int16
    assert code_dtype(32_768) is np.int32
    assert code_dtype(2**31 - 1) is np.int32
    assert code_dtype(2**31) is np.int64
    narrow = np.array([1, -1], dtype=np.int32)
    assert wide(narrow).dtype == np.int64 and wide(narrow).tolist() == [1, -1]
    already = np.array([3], dtype=np.int64)
    assert wide(already) is already


def test_wrapped_pair_keys_would_collide():
    # The premise of the two tests below: int32 arithmetic wraps these two pairs onto one key.
    x, y = np.array([A[0], B[0]], dtype=np.int32), np.array([A[1], B[1]], dtype=np.int32)
    with np.errstate(over="ignore"):
        wrapped = x * N_Y + y
    assert wrapped[0] == wrapped[1]


def test_unique_pairs_of_int32_codes_past_two_to_the_31():
    a = np.array([A[0], B[0]], dtype=np.int32)
    b = np.array([A[1], B[1]], dtype=np.int32)
    assert _unique_pairs(a, b, N_Y)
    assert not _unique_pairs(np.array([5, 5], dtype=np.int32), np.array([7, 7], dtype=np.int32), N_Y)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_detector_group_majority_of_big_dictionaries_is_exact(dtype):
    # Two groups of X (0 and 61,357), each with one Y: the sparse path keys them x * n_y + y.
    x = np.array([A[0], A[0], B[0], B[0], B[0], -1], dtype=dtype)
    y = np.array([A[1], A[1], B[1], B[1], 5, 9], dtype=dtype)
    gm = detect_group_majority(x, y, B[0] + 1, N_Y)
    assert gm.size[A[0]] == 2 and gm.size[B[0]] == 3
    assert gm.major[A[0]] == A[1] and gm.major[B[0]] == B[1]
    assert gm.major_count[B[0]] == 2 and gm.second_count[B[0]] == 1
    assert gm.size.sum() == 5


def test_profile_group_majority_takes_int32_codes():
    x = np.array([A[0], A[0], B[0], B[0], B[0]], dtype=np.int32)
    y = np.array([A[1], A[1], B[1], B[1], 5], dtype=np.int32)
    gm = profile_group_majority(x, y, B[0] + 1, N_Y)
    assert gm.agrees.tolist() == [True, True, True, True, False]
