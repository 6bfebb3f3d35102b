"""`np.unique` of long integer keys without sorting every row: the same arrays, from a count or a hash.

`np.unique` sorts all n keys (with `return_inverse` or `return_index`, an indirect stable sort). The detectors
call it on per-row keys (a million rows) that mostly hold far fewer distinct values. Here the distinct values
are found by counting (keys within a small range) or by pyarrow's hash table (which runs without the GIL, so
the detectors' threads overlap), and only those distinct values are sorted. The outputs are exactly
`np.unique`'s: the sorted distinct values, the first row of each, each row's position among them, the counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Below this many keys np.unique's sort is as quick; from it on the keys are counted or hashed.
MIN_KEYS = 4096
# Hashing pays while the distinct values are few next to the keys (sorting them is the hash's extra cost):
# measured on a million int64 keys, 2-4x quicker up to a fifth distinct, slower from half on.
MAX_DISTINCT_SHARE = 0.25
SAMPLE = 4096
# np.unique itself, where sorting is as quick (its overloads want literal flags; these are passed through).
_SORTED: Any = np.unique


def _dense_span(keys: np.ndarray) -> tuple[int, int] | None:
    """(lowest key, span) when the keys fit a count array no longer than about twice the keys, else None."""
    lo, hi = int(keys.min()), int(keys.max())
    span = hi - lo + 1
    return (lo, span) if span <= 2 * keys.size + 65536 else None


def _few_distinct(keys: np.ndarray) -> bool:
    """Whether the keys likely hold at most MAX_DISTINCT_SHARE distinct values, estimated from how often
    evenly spread keys repeat one another (m keys of U equally common values hold about m^2 / 2U equal pairs;
    values of unequal frequency repeat more, and are counted as fewer)."""
    sample = keys[:: max(keys.size // SAMPLE, 1)]
    _, counts = np.unique(sample, return_counts=True)
    pairs = float((counts * (counts - 1)).sum()) / 2
    if pairs == 0:
        return False
    estimate = sample.size * (sample.size - 1) / 2 / pairs
    return estimate <= MAX_DISTINCT_SHARE * keys.size


def first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's id (distinct values numbered in the order they first appear), the first row of each id,
    and each id's value: (ids, first, values)."""
    encoded = pc.dictionary_encode(pa.array(keys))
    ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    values = encoded.dictionary.to_numpy(zero_copy_only=False)
    # Ids are handed out in first-seen order: a row is the first of its id where the id is a new maximum.
    top = np.maximum.accumulate(ids)
    new = np.empty(ids.size, dtype=bool)
    new[:1] = True
    np.not_equal(top[1:], top[:-1], out=new[1:])
    return ids, np.flatnonzero(new), values


def unique(
    keys: np.ndarray,
    *,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> Any:
    """`np.unique(keys, return_index=..., return_inverse=..., return_counts=...)` for a 1-D integer array:
    the same arrays (values, dtypes and order), found without sorting every key."""
    keys = np.asarray(keys)
    if keys.ndim != 1 or keys.size < MIN_KEYS or keys.dtype.kind not in "iu":
        return _SORTED(
            keys, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts
        )
    dense = None if return_index else _dense_span(keys)
    if dense is not None:
        lo, span = dense
        shifted = keys.astype(np.int64, copy=False) - lo if lo else keys
        counts_all = np.bincount(shifted, minlength=span)
        present = counts_all > 0
        uniq = (np.flatnonzero(present) + lo).astype(keys.dtype, copy=False)
        out: list[np.ndarray] = [uniq]
        if return_inverse:
            rank = np.cumsum(present, dtype=np.intp) - 1
            out.append(rank[shifted])
        if return_counts:
            out.append(counts_all[present].astype(np.intp, copy=False))
        return tuple(out) if len(out) > 1 else uniq
    if not _few_distinct(keys):
        return _SORTED(
            keys, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts
        )
    ids, first, values = first_seen(keys)
    order = np.argsort(values, kind="stable")
    out = [values[order].astype(keys.dtype, copy=False)]
    if return_index:
        out.append(first[order].astype(np.intp, copy=False))
    if return_inverse:
        rank = np.empty(order.size, dtype=np.intp)
        rank[order] = np.arange(order.size, dtype=np.intp)
        out.append(rank[ids])
    if return_counts:
        out.append(np.bincount(ids, minlength=values.size)[order].astype(np.intp, copy=False))
    return tuple(out) if len(out) > 1 else out[0]
