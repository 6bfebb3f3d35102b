"""Row and column level findings: duplicate rows, constant and all-unique columns, merged columns."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts
from iterate.detect.findings import Finding, cells
from iterate.table import Table

# A column's per-row codes: an array, or (per_value, codes) standing for per_value[codes] (see _row_keys).
Codes = np.ndarray | tuple[np.ndarray, np.ndarray]


def _codes_at(column: Codes, at: np.ndarray | None = None) -> np.ndarray:
    """The column's codes on the rows `at` (every row when None)."""
    if isinstance(column, tuple):
        per_value, codes = column
        return per_value[codes if at is None else codes[at]]
    return column if at is None else column[at]


def _row_keys(code_columns: list[Codes], n_rows: int) -> np.ndarray:
    """One int64 id per distinct row, from per-column codes.

    Rows are hashed (a 64-bit multiply-xor over the codes, one vectorised pass per column), then rows that
    share a hash are compared code by code, so two different rows never share an id even on a collision.
    A column given as (per_value, codes) has its per-row codes made for its pass and dropped after it: the
    near-duplicate search's normalised codes of 3M rows were 24 MB a column, all held at once.
    """
    if not code_columns:
        return np.zeros(n_rows, dtype=np.int64)
    rng = np.random.default_rng(0x17E7A7E)
    h = np.zeros(n_rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in code_columns:
            mult = np.uint64(rng.integers(1, 2**63) | 1)
            h = (h ^ _codes_at(column).astype(np.uint64)) * mult
            h ^= h >> np.uint64(29)
    # id = the first row with the same hash. Rows are sorted by hash (stably: equal hashes keep row order) and
    # only the runs of an equal hash are numbered; every other row is its own id. (np.unique with index and
    # inverse held five row-long arrays besides the hashes: 570 MB on 10M rows, at the detection's peak.)
    order = np.argsort(h, kind="stable")
    in_order = h[order]
    del h
    repeat = in_order[1:] == in_order[:-1]  # the row at sorted position i + 1 has the hash of the one at i
    del in_order
    keys = np.arange(n_rows, dtype=np.int64)
    candidates = np.zeros(0, dtype=np.int64)
    if repeat.any():
        after = np.zeros(n_rows, dtype=bool)  # sorted positions whose hash the position before has
        after[1:] = repeat
        in_run = after.copy()
        in_run[:-1] |= repeat
        del repeat
        positions = np.flatnonzero(in_run)
        starts = ~after[positions]
        del after, in_run
        firsts = order[positions[starts]]
        keys[order[positions]] = firsts[np.cumsum(starts) - 1]
        candidates = np.sort(order[positions[~starts]])  # rows whose id is an earlier row
    del order
    if candidates.size:
        stacked = np.stack([_codes_at(c, candidates) for c in code_columns], axis=1)
        reference = np.stack([_codes_at(c, keys[candidates]) for c in code_columns], axis=1)
        collided = candidates[(stacked != reference).any(axis=1)]
        keys[collided] = -1 - collided  # a true collision: the row keeps an id of its own
    return keys


def _later_rows(keys: np.ndarray) -> np.ndarray:
    """`_later_copies` of `_row_keys`' ids, without sorting them: a row's id is the first row it equals (a row
    that is the first of its kind is its own id, a true collision a negative id of its own)."""
    return np.flatnonzero((keys >= 0) & (keys != np.arange(keys.size)))


def _later_copies(keys: np.ndarray) -> np.ndarray:
    """Rows that repeat an earlier row with the same key."""
    _, first = np.unique(keys, return_index=True)
    is_first = np.zeros(keys.size, dtype=bool)
    is_first[first] = True
    return np.flatnonzero(~is_first)


def detect_duplicates(table: Table, facts: list[ColumnFacts]) -> list[Finding]:
    n = table.n_rows
    if n < 2:
        return []
    out: list[Finding] = []
    exact_keys = _row_keys([c.codes for c in table.columns], n)
    exact = _later_rows(exact_keys)
    all_cols = table.column_names
    # Identical rows are the same record twice only where some column could tell records apart (an id, a
    # name, a timestamp: most of its values different). Answers to a few coded questions, or person-years
    # of a panel without an id, repeat by nature.
    identifying = max((f.column.n_unique for f in facts), default=0) >= 0.5 * n
    if exact.size and identifying:
        # ... and where that column tells records apart: rows sharing its value are mostly copies of one
        # another. A district's covariates are unique per district, not per legislator: when most rows that
        # share them differ elsewhere, a few that agree on the remaining yes/no columns agree by chance.
        best = max(facts, key=lambda f: f.column.n_unique)
        shared = _later_copies(best.column.codes.astype(np.int64)).size
        identifying = 2 * exact.size >= shared
    if exact.size and identifying:
        groups = int(np.unique(exact_keys[exact]).size)
        out.append(
            Finding(
                type="duplicate_rows",
                columns=all_cols,
                rows=exact,
                cols=np.full(exact.size, -1),
                title="Exact duplicate rows",
                description=f"{exact.size:,} rows repeat an earlier row exactly ({groups:,} distinct rows repeated).",
                suggested_action="Remove the repeated rows, unless the source really records the same event twice.",
                category="quick_fixes",
                detector="duplicates",
                stats={"columns": all_cols, "groups": groups},
                flag=False,
                row_level=True,
                key="duplicates:exact",
                damage="wrong",  # a row counted twice is wrong in every sum over the table
            )
        )

    # Near duplicates: equal on every column once case, spacing and punctuation are normalised
    # (every value different): the same record entered twice under two ids is the near duplicate that matters.
    def normalise(values: pa.Array) -> pa.Array:
        lowered = pc.utf8_lower(values)
        return pc.utf8_trim_whitespace(
            pc.replace_substring_regex(lowered, pattern=r"[^\w]+", replacement=" ")
        )

    def codes_of(normal: pa.Array) -> np.ndarray:
        return pc.dictionary_encode(normal).indices.to_numpy(zero_copy_only=False).astype(np.int64)

    # Every column counts, identifiers too: two rows that differ in their id are two records (two planes of
    # one model, two days of the same weather), however alike the rest.
    content = list(facts)
    if len(content) < 2:
        return out
    # Rows can only be called the same record if the columns compared could tell records apart: with a few
    # small categories, equal rows are a coincidence. Require a column that nearly identifies rows on its
    # own (a name, an address), or room for a thousand times more combinations than rows.
    identifying = max(f.column.n_unique for f in content) >= 0.5 * n
    roomy = sum(np.log2(max(f.column.n_unique, 1)) for f in content) >= np.log2(max(n, 2)) + 10
    if not (identifying or roomy):
        return out
    # Normalising a column costs in proportion to its distinct values: small columns are normalised whole and
    # narrow the search to rows that repeat on them; big columns are then normalised on those rows only.
    small = [f for f in content if f.column.n_unique <= 0.2 * n]
    big = [f for f in content if f.column.n_unique > 0.2 * n]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:  # pyarrow releases the GIL
        small_codes: list[Codes] = list(
            pool.map(lambda f: (codes_of(normalise(f.column.dictionary)), f.column.codes), small)
        )
    small_keys = _row_keys(small_codes, n)
    repeats = np.bincount(small_keys - small_keys.min())[small_keys - small_keys.min()] > 1
    candidates = np.flatnonzero(repeats)
    if big and candidates.size:
        big_codes = [codes_of(normalise(f.column.values_at(candidates))) for f in big]
        keys_c = _row_keys([small_keys[candidates], *big_codes], candidates.size)
        # Rows that are not candidates repeat no row; candidates ascend, so a candidate's id (an earlier
        # candidate) is an earlier row: the copies are read off the candidates' ids, no row-long array sorted.
        copies = candidates[_later_rows(keys_c)]
    else:
        copies = _later_rows(small_keys)
    near = np.setdiff1d(copies, exact, assume_unique=True)
    if near.size:
        out.append(
            Finding(
                type="near_duplicate_rows",
                columns=all_cols,
                rows=near,
                cols=np.full(near.size, -1),
                title="Rows that duplicate others except for case, spacing, punctuation or their id",
                description=f"{near.size:,} rows equal an earlier row once case, spacing and punctuation are "
                "ignored, and identifier columns (where every value is different) are left out.",
                suggested_action="Review and merge these rows; standardise the text fields that differ.",
                category="smart_fixes",
                detector="duplicates",
                stats={"columns": [f.name for f in content]},
                flag=False,
                row_level=True,
                key="duplicates:near",
            )
        )
    return out


def detect_column_shape(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    """Constant and entirely-missing columns. (A column whose every value is different is the table's key, not a
    problem: it is not reported.)"""
    out: list[Finding] = []
    if n_rows < 2:
        return out
    for f in facts:
        used = f.counts > 0
        if int(used.sum()) == 1:
            value = f.column.texts(np.flatnonzero(used)[:1])[0]
            empty = bool(f.is_missing[used].all())
            out.append(
                Finding(
                    type="constant_column",
                    columns=[f.name],
                    rows=np.arange(n_rows),
                    cols=np.full(n_rows, f.index),
                    title=f"{f.name} is {'always empty' if empty else 'constant'}",
                    description=(
                        f"Every row of '{f.name}' holds "
                        + ("no value" if empty else f"the same value '{value}'")
                        + ": the column carries no information."
                    ),
                    suggested_action="Drop the column, or fill it from the source if it should hold data.",
                    category="quick_fixes",
                    detector="columns",
                    stats={"column": f.name},
                    flag=False,
                    key=f"constant:{f.name}",
                )
            )
    return out


def detect_merged_columns(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    """A value of column B glued onto column A in rows where B is empty (`Gary IN` in city, state blank).

    Each column's last words are read once, on its distinct values, and looked up among the frequent values
    of every column that has gaps: the cost follows cells, not pairs of columns.
    """
    missing_rows: dict[int, np.ndarray] = {}
    owners: dict[str, list[int]] = {}  # a frequent value of a column with gaps -> those columns
    for fb in facts:
        b_missing_rows = fb.is_missing[fb.column.codes]
        n_missing = int(b_missing_rows.sum())
        if n_missing == 0 or n_missing > 0.5 * n_rows or not fb.pairwise_ok:
            continue
        frequent_b = [fb.column.uniques[i].strip() for i in np.flatnonzero((fb.counts >= 2) & fb.present)]
        frequent_b = [v for v in frequent_b if v]
        if not frequent_b or max(len(v) for v in frequent_b) > 40:
            continue
        missing_rows[fb.index] = b_missing_rows
        for v in set(frequent_b):
            owners.setdefault(v, []).append(fb.index)
    if not owners:
        return []
    tokens = sorted(owners)
    by_pair: dict[tuple[int, int], list[np.ndarray]] = {}
    token_set = pa.array(tokens, pa.string())
    for fa in facts:
        if not fa.pairwise_ok:
            continue
        d = fa.column.dictionary
        has_space = np.asarray(pc.match_substring_regex(d, pattern=r"\S\s+\S").to_numpy(zero_copy_only=False))
        if not has_space.any():
            continue
        tail = pc.utf8_trim_whitespace(pc.replace_substring_regex(d, pattern=r"^.*\s", replacement=""))
        which = pc.index_in(tail, value_set=token_set)
        token_of = np.asarray(pc.fill_null(which, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        token_of[~has_space] = -1
        rows = np.flatnonzero(token_of[fa.column.codes] >= 0)
        if rows.size == 0:
            continue
        row_tokens = token_of[fa.column.codes[rows]]
        for t in np.unique(row_tokens).tolist():
            for b in owners[tokens[t]]:
                if b == fa.index:
                    continue
                candidates = rows[(row_tokens == t) & missing_rows[b][rows]]
                if candidates.size:
                    by_pair.setdefault((fa.index, b), []).append(candidates)
    # Keep the pairs where most of B's gaps are glued onto A.
    findings: list[Finding] = []
    for (a, b), parts in sorted(by_pair.items()):
        hit_rows = np.sort(np.concatenate(parts))
        if hit_rows.size < max(3, 0.5 * int(missing_rows[b].sum())):
            continue
        findings.append(_merged_finding(facts[a], facts[b], hit_rows))
    return findings


def _merged_finding(fa: ColumnFacts, fb: ColumnFacts, hit_rows: np.ndarray) -> Finding:
    texts = [fa.column.value(int(r)) for r in hit_rows]
    heads = [t.rstrip().rsplit(None, 1)[0].strip() for t in texts]
    tails = [t.rstrip().rsplit(None, 1)[1].strip() for t in texts]
    a_rows, a_cols = cells(hit_rows, fa.index)
    b_rows, b_cols = cells(hit_rows, fb.index)
    return Finding(
        type="merged_columns",
        columns=[fa.name, fb.name],
        rows=np.concatenate([a_rows, b_rows]),
        cols=np.concatenate([a_cols, b_cols]),
        title=f"{fb.name} written inside {fa.name}",
        description="",
        describe=lambda fd: (
            f"In {fd.n_rows:,} rows '{fb.name}' is empty and its value is glued to the end of "
            f"'{fa.name}' instead (e.g. '{fa.column.value(int(fd.rows[0]))}')."
        ),
        suggested_action=f"Split the trailing value off '{fa.name}' and move it into '{fb.name}'.",
        category="quick_fixes",
        detector="merged",
        stats={"column": fa.name, "other": fb.name},
        expected=heads + tails,
        key=f"merged:{fa.name}:{fb.name}",
        value_level=False,
    )
