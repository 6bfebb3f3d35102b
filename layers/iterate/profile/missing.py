"""Missing-value tokens: which distinct values stand for "no value", and the dataset's own null marker."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.profile._bytes import lengths_and_first_bytes
from iterate.profile.shapes import MISSING_TOKENS

# A token is at most this long once stripped ("undefined" is 9); longer values are never missing-like.
_MAX_TOKEN_BYTES = 24
# Every token starts with one of these bytes after optional whitespace, which lets us skip most values unread.
_TOKEN_FIRST = np.zeros(256, dtype=bool)
for _tok in MISSING_TOKENS:
    if _tok:
        _TOKEN_FIRST[ord(_tok[0])] = True
        _TOKEN_FIRST[ord(_tok[0].upper())] = True
_TOKEN_FIRST[[0, ord(" "), ord("\t"), ord("\n"), ord("\r")]] = True
_TOKEN_SET = pa.array(sorted(MISSING_TOKENS), pa.string())


def missing_like(dictionary: pa.Array) -> np.ndarray:
    """Boolean per distinct value: blank, whitespace, or a missing token such as `N/A`, `null`, `-` (case-free)."""
    n = len(dictionary)
    out = np.zeros(n, dtype=bool)
    if n == 0:
        return out
    lengths, first = lengths_and_first_bytes(dictionary)
    maybe = np.flatnonzero((lengths <= _MAX_TOKEN_BYTES) & np.take(_TOKEN_FIRST, first))
    if len(maybe) == 0:
        return out
    subset = dictionary if len(maybe) == n else pc.take(dictionary, pa.array(maybe))
    folded = pc.utf8_lower(pc.utf8_trim_whitespace(subset))
    out[maybe] = np.asarray(pc.is_in(folded, value_set=_TOKEN_SET).to_numpy(zero_copy_only=False), dtype=bool)
    return out


def token_counts(
    dictionary: pa.Array, counts: np.ndarray, missing: np.ndarray | None = None
) -> dict[str, int]:
    """Rows per missing-like token as written (stripped; blank is `""`); `missing` from `missing_like`."""
    idx = np.flatnonzero(missing_like(dictionary) if missing is None else missing)
    out: dict[str, int] = {}
    if len(idx) == 0:
        return out
    for value, count in zip(
        pc.take(dictionary, pa.array(idx)).to_pylist(), counts[idx].tolist(), strict=True
    ):
        key = value.strip()
        out[key] = out.get(key, 0) + int(count)
    return out


def choose_null_marker(per_column: Iterable[dict[str, int]]) -> str:
    """The most frequent missing-like token across all columns; blank when there is none (or blank wins)."""
    total: dict[str, int] = {}
    for counts in per_column:
        for tok, c in counts.items():
            total[tok] = total.get(tok, 0) + c
    if not total:
        return ""
    # Ties go to blank, then to the alphabetically first token, so the answer never depends on column order.
    return min(total.items(), key=lambda kv: (-kv[1], kv[0] != "", kv[0]))[0]


def null_marker_mask(dictionary: pa.Array, null_marker: str, missing: np.ndarray) -> np.ndarray:
    """Distinct values that are the dataset's own way of writing missing: blank, or the null marker (stripped)."""
    out = np.zeros(len(dictionary), dtype=bool)
    idx = np.flatnonzero(missing)
    if len(idx) == 0:
        return out
    stripped = pc.utf8_trim_whitespace(pc.take(dictionary, pa.array(idx)))
    hit = pc.or_(pc.equal(stripped, ""), pc.equal(stripped, null_marker.strip()))
    out[idx] = np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
    return out
