"""Dataset-level profile: duplicate and near-duplicate rows, candidate keys, dependencies; `profile_table`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.contracts.profile import (
    ColumnProfile,
    DatasetProfile,
    DuplicateStats,
    FunctionalDependency,
    RowNumbering,
)
from iterate.profile._bytes import normalized_hashes
from iterate.profile.fd import CodedColumn, find_dependencies
from iterate.profile.missing import choose_null_marker
from iterate.profile.overview import associations, missing_overview, sample_rows
from iterate.profile.sketch import ColumnSketch
from iterate.profile.types import TypeInference
from iterate.table import Table, wide

# Columns with more distinct values than this get their near-duplicate hashes only for candidate rows.
NEAR_DUP_FULL_UNIQUES = 50_000
# Continuous measures and free text are unique by accident, not by design: never proposed as keys.
NOT_KEY_TYPES = frozenset({"decimal", "quantity", "currency", "percent", "datetime", "text", "empty"})
NOT_FD_TYPES = frozenset({"text", "datetime", "empty"})
KEY_PAIR_COLUMNS = 6
MAX_READ_NOTES = 50
T = TypeVar("T")


def _random_odd(n: int, seed: int) -> np.ndarray:
    draws = np.random.default_rng(seed).integers(1, 2**62, size=n, dtype=np.uint64)
    return draws * np.uint64(2) + np.uint64(1)


def _u64(v: np.ndarray) -> np.ndarray:
    return v.view(np.uint64) if v.dtype == np.int64 else v.astype(np.uint64)


def linear_row_hash(per_column: list[np.ndarray], mult: np.ndarray) -> np.ndarray:
    """One 64-bit value per row from per-column integer codes: Σ code_i × odd_i mod 2^64.

    Two different rows collide with probability about 2^-63 (a random odd multiplier per column), so with
    a million rows a collision is astronomically unlikely; it costs two vector operations per column, and
    being linear, one column's contribution can later be swapped for another without rehashing the row.
    """
    n = len(per_column[0]) if per_column else 0
    h = np.zeros(n, dtype=np.uint64)
    tmp = np.empty(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for m, v in zip(mult, per_column, strict=True):
            np.multiply(_u64(v), m, out=tmp)
            h += tmp
    return h


_BITS = 20


def _repeated_rows(h: np.ndarray) -> tuple[np.ndarray, int]:
    """(rows whose hash occurs 2+ times, in row order; number of such hash values) — sorting values, not rows."""
    s = np.sort(h)
    eq = s[1:] == s[:-1]
    if not eq.any():
        return np.zeros(0, dtype=np.int64), 0
    repeated = np.unique(s[1:][eq])
    # A bitmap on the low bits finds the few candidate rows in one pass; an exact check confirms them.
    mask = np.uint64((1 << _BITS) - 1)
    bitmap = np.zeros(1 << _BITS, dtype=bool)
    bitmap[(repeated & mask).astype(np.int64)] = True
    cand = np.flatnonzero(np.take(bitmap, (h & mask).astype(np.int64)))
    cand = cand[np.isin(h[cand], repeated)]
    return cand, len(repeated)


def repeats_earlier(h: np.ndarray) -> tuple[np.ndarray, int]:
    """(per row: True when an earlier row has the same hash, number of hash values held by 2+ rows)."""
    out = np.zeros(len(h), dtype=bool)
    rows, groups = _repeated_rows(h)
    if len(rows):
        hc = h[rows]
        order = np.argsort(hc, kind="stable")
        sorted_h = hc[order]
        out[rows[order]] = np.r_[False, sorted_h[1:] == sorted_h[:-1]]
    return out, groups


@dataclass
class DuplicateRows:
    """Per-row duplicate marks: `exact` repeats an earlier row; `near` repeats one only after normalising."""

    exact: np.ndarray
    near: np.ndarray
    exact_groups: int
    largest_group: int = 0
    example: tuple[int, int] | None = None  # the first repeating row, and the earlier row it repeats

    @property
    def stats(self) -> DuplicateStats:
        return DuplicateStats(
            exactRows=int(self.exact.sum()),
            exactGroups=self.exact_groups,
            nearRows=int(self.near.sum()),
            largestGroup=self.largest_group,
            example=list(self.example) if self.example is not None else [],
        )


def _largest_and_example(h: np.ndarray, exact: np.ndarray) -> tuple[int, tuple[int, int] | None]:
    """Rows in the largest group of identical rows, and the first repeating row with the row it repeats."""
    if not exact.any():
        return 0, None
    first = int(np.argmax(exact))
    earlier = int(np.argmax(h[:first] == h[first]))
    _, counts = np.unique(h[exact], return_counts=True)
    return int(counts.max()) + 1, (first, earlier)  # (+1: a group's first row does not repeat another)


def _canonical_codes(dictionary: pa.Array) -> np.ndarray | None:
    """Per distinct value, the first distinct value with the same normalised text; None when all differ."""
    nh = normalized_hashes(dictionary)
    _, first, inverse = np.unique(nh, return_index=True, return_inverse=True)
    if len(first) == len(nh):
        return None
    return first[inverse].astype(np.int64)


def duplicate_rows(table: Table) -> DuplicateRows:
    """Exact duplicates (same text in every column) and near duplicates (same after casefolding and dropping
    spaces and punctuation in every column), each marked on the rows that repeat an earlier row."""
    n = table.n_rows
    if n == 0 or not table.columns:
        return DuplicateRows(np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), 0)
    mult = _random_odd(len(table.columns), seed=1)
    h_exact = linear_row_hash([c.codes for c in table.columns], mult)
    exact, groups = repeats_earlier(h_exact)
    largest, example = _largest_and_example(h_exact, exact)
    # Near duplicates. The hash is linear, so a column whose normalisation merges some values is switched to
    # canonical codes by adding m × (canonical - code). Columns with very many values are first taken out:
    # rows that do not collide without them cannot be near duplicates, and only those rows need them.
    h_small = h_exact.copy()
    large = []
    with np.errstate(over="ignore"):
        for m, c in zip(mult, table.columns, strict=True):
            if c.n_unique > NEAR_DUP_FULL_UNIQUES:
                h_small -= _u64(c.codes) * m
                large.append(c)
                continue
            canon = _canonical_codes(c.dictionary)
            if canon is not None:
                h_small += _u64(np.take(canon, c.codes) - c.codes) * m
    if not large:
        near, _ = repeats_earlier(h_small)
        return DuplicateRows(exact, near & ~exact, groups, largest, example)
    cand, _ = _repeated_rows(h_small)
    near = np.zeros(n, dtype=bool)
    if len(cand):
        parts = [h_small[cand]]
        for c in large:
            used, inverse = np.unique(c.codes[cand], return_inverse=True)
            parts.append(np.take(normalized_hashes(pc.take(c.dictionary, pa.array(used))), inverse))
        h_cand = linear_row_hash(parts, _random_odd(len(parts), seed=3))
        near[cand], _ = repeats_earlier(h_cand)
    return DuplicateRows(exact, near & ~exact, groups, largest, example)


def candidate_keys(
    table: Table, inferences: list[TypeInference], duplicates: DuplicateRows, *, seed: int = 0
) -> list[list[str]]:
    """Columns (or pairs when no single column works) whose values are all present and unique, once exact
    and near duplicate rows are set aside (those are reported as duplicates, not as broken keys)."""
    keep = ~(duplicates.exact | duplicates.near)
    n_keep = int(keep.sum())
    if n_keep < 2:
        return []
    eligible = [
        (c, inf)
        for c, inf in zip(table.columns, inferences, strict=True)
        if inf.semantic_type not in NOT_KEY_TYPES and c.n_unique >= 2
    ]
    singles: list[list[str]] = []
    for c, inf in eligible:
        if c.n_unique < n_keep:
            continue
        codes = c.codes[keep]
        if inf.missing[codes].any():
            continue
        if np.bincount(codes, minlength=c.n_unique).max() <= 1:
            singles.append([c.name])
    if singles:
        return singles
    # Pairs among the most distinct columns: a sample rules most out, the survivors are checked on all rows.
    top = sorted(eligible, key=lambda ci: -ci[0].n_unique)[:KEY_PAIR_COLUMNS]
    rows = np.flatnonzero(keep)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(rows, size=min(len(rows), 50_000), replace=False))
    # A key column may hold no missing value on the kept rows.
    complete = [
        (c, np.take(c.codes, rows)) for c, inf in top if not np.take(inf.missing, c.codes[rows]).any()
    ]
    pairs: list[list[str]] = []
    for i, (a, a_rows) in enumerate(complete):
        for b, b_rows in complete[i + 1 :]:
            if a.n_unique * b.n_unique < n_keep:
                continue
            if not _unique_pairs(a.codes[sample], b.codes[sample], b.n_unique):
                continue
            if _unique_pairs(a_rows, b_rows, b.n_unique):
                pairs.append([x.name for x in sorted((a, b), key=lambda col: col.index)])
    return pairs


def _unique_pairs(a: np.ndarray, b: np.ndarray, nb: int) -> bool:
    combined = np.sort(wide(a) * nb + b)  # int64: int32 codes times nb would wrap past 2**31
    return not bool((combined[1:] == combined[:-1]).any())


def coded_columns(table: Table, inferences: list[TypeInference]) -> list[CodedColumn]:
    """Each column's per-row codes with missing values as -1, and whether it may take part in dependencies."""
    out = []
    for c, inf in zip(table.columns, inferences, strict=True):
        n_distinct = int((~inf.missing).sum())
        codes = c.codes
        if inf.missing.any():
            remap = np.where(inf.missing, -1, np.arange(c.n_unique))
            codes = remap[codes]
        ok = inf.semantic_type not in NOT_FD_TYPES
        out.append(CodedColumn(c.name, codes, c.n_unique, n_distinct, ok, ok))
    return out


class _Inline:
    """A stand-in for a thread pool that runs everything in the caller's thread (workers=1)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        future.set_result(fn(*args))
        return future

    def map(self, fn: Callable[[Any], T], items: Iterable[Any]) -> Iterator[T]:
        return map(fn, items)


@dataclass
class ProfileResult:
    """The profile plus what it was computed from, for detectors that reuse it (no recomputation)."""

    profile: DatasetProfile
    inferences: list[TypeInference]
    duplicates: DuplicateRows
    sketches: list[ColumnSketch]


def _column(sketch: ColumnSketch, null_marker: str) -> tuple[TypeInference, ColumnProfile]:
    inference = sketch.infer()
    return inference, sketch.finalize(null_marker, inference=inference)


def profile_table_full(
    table: Table, *, null_marker: str | None = None, workers: int | None = None
) -> ProfileResult:
    """`profile_table`, also returning the per-column type inferences and per-row duplicate marks.

    `workers` threads (default: up to 2) share the columns, largest first, beside the duplicate search;
    pyarrow and numpy release the GIL in their heavy kernels, so the threads can overlap. The result does
    not depend on the number of workers.
    """
    sketches = [ColumnSketch.from_column(c) for c in table.columns]
    workers = max(1, workers if workers is not None else min(2, os.cpu_count() or 1))
    largest_first = sorted(range(len(sketches)), key=lambda i: -len(sketches[i].dictionary))
    with ThreadPoolExecutor(workers) if workers > 1 else _Inline() as pool:
        dup_future = pool.submit(duplicate_rows, table)
        if null_marker is None:
            tokens = list(pool.map(lambda i: sketches[i].missing_tokens(), largest_first))
            null_marker = choose_null_marker(tokens)
        marker = null_marker
        done = dict(
            zip(largest_first, pool.map(lambda i: _column(sketches[i], marker), largest_first), strict=True)
        )
        inferences = [done[i][0] for i in range(len(sketches))]
        columns: list[ColumnProfile] = [done[i][1] for i in range(len(sketches))]
        deps = find_dependencies(coded_columns(table, inferences), table.n_rows, mapper=pool.map)
        dups = dup_future.result()
    keys = candidate_keys(table, inferences, dups)
    found, compared = associations(table, inferences)
    notes = [
        f"{p.kind}" + (f" at line {p.line}" if p.line is not None else "") + (f" ({p.column})" if p.column else "")
        + f": {p.detail}"
        for p in table.problems[:MAX_READ_NOTES]
    ]  # fmt: skip
    if len(table.problems) > MAX_READ_NOTES:
        notes.append(f"... and {len(table.problems) - MAX_READ_NOTES} more read problems")
    profile = DatasetProfile(
        name=table.name,
        rowCount=table.n_rows,
        columnCount=len(table.columns),
        contentHash=table.source.content_hash,
        nullMarker=null_marker,
        columns=columns,
        duplicates=dups.stats,
        candidateKeys=keys,
        functionalDependencies=[
            FunctionalDependency(
                lhs=[d.lhs], rhs=d.rhs, confidence=round(d.confidence, 6), violatingRows=d.violating_rows
            )
            for d in deps
        ],
        readNotes=notes,
        rowNumbering=row_numbering(table),
        missingOverview=missing_overview(table, inferences),
        sample=sample_rows(table),
        associations=found,
        associationsNote=compared,
    )
    return ProfileResult(profile, inferences, dups, sketches)


def row_numbering(table: Table) -> RowNumbering:
    """How the table's 0-based data rows map to the file: its format, and where row 0 is when rows follow
    each other (a CSV whose every row is one line, a sheet without blank rows)."""
    src = table.source
    return RowNumbering(
        format=src.format,
        place="line" if src.row_place == "line" else "sheet row" if src.row_place == "sheet row" else None,
        firstPlace=src.first_place,
    )


def profile_table(
    table: Table, *, null_marker: str | None = None, workers: int | None = None
) -> DatasetProfile:
    """Profile every column and the dataset; `null_marker` overrides the one computed from the table."""
    return profile_table_full(table, null_marker=null_marker, workers=workers).profile
