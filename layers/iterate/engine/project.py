"""A decision taken on the sample, turned into SQL predicates the engine flags every row by.

Each decided finding flags cells of some columns. For a value-level finding (its cells share their value's
evidence: formats, typos, placeholders, rare values, outliers by value) the predicate is "the column holds one
of these values"; for any other (a dependency's violating pairs, values wrong in their row's context) it is
"the row's values over the finding's columns are one of these combinations". A value (or combination) enters
the predicate when the decision flagged at least half of the sample's cells holding it: where the decision
weighed other evidence of the row, the predicate is the majority's verdict (the measured loss is printed by
scripts/engine_equivalence.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from iterate.detect.findings import Finding
from iterate.engine import statements as sql
from iterate.engine.duck import DuckSource
from iterate.issues import issue_id
from iterate.table import Table

# The share of a value's sample cells the decision must have flagged for the predicate to flag it everywhere.
MAJORITY = 0.5


@dataclass
class Projection:
    """One decided finding's predicate over one of its columns: the key columns, the keys and their scores."""

    issue_id: str
    column: str
    key_columns: list[str]
    keys: list[str]
    scores: list[float]
    flag: bool
    # The sample rows (0-based places in the sample) the predicate holds for: what it counts where the proofs ran.
    sample_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class Counted:
    """What the engine counted over every row for each issue, and the flags it wrote."""

    rows: dict[str, int] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    flags: pa.Table | None = None


def _key_ids(table: Table, columns: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per sample row, the id of its key over `columns` (ids index the distinct keys), and each distinct key's
    codes (one row per key, one column per key column)."""
    from iterate.table import wide

    if len(columns) == 1:
        codes = wide(table.columns[columns[0]].codes)
        return codes, np.arange(table.columns[columns[0]].n_unique, dtype=np.int64)[:, None]
    stacked = np.stack([wide(table.columns[c].codes) for c in columns], axis=1)
    distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return inverse.reshape(-1), distinct


def _key_texts(table: Table, columns: list[int], codes: np.ndarray) -> list[str]:
    parts = [table.columns[c].texts(codes[:, j]) for j, c in enumerate(columns)]
    return [sql.row_key(vals) for vals in zip(*parts, strict=True)]


# Where a finding names the other columns its verdict on a cell depends on (a dependency's determinants, a key's
# dependents): the row's values there belong to its key.
_CONTEXT_STATS = ("lhs", "rhs", "determinants", "dependents")


def _named(f: Finding) -> set[str]:
    names = set(f.columns)
    for key in _CONTEXT_STATS:
        value = f.stats.get(key)
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                names.add(v)
            elif isinstance(v, list | tuple):
                stack.extend(v)
    return names


def projections(findings: list[Finding], table: Table) -> list[Projection]:
    """The predicates of every finding that names cells (whole-row findings are counted apart)."""
    names = table.column_names
    out: list[Projection] = []
    for f in findings:
        if not f.n_cells:
            continue
        fid = issue_id(f)
        for c in np.unique(f.cols[f.cols >= 0]).tolist():
            on = f.cols == c
            rows = f.rows[on]
            if f.value_level:
                key_cols = [int(c)]
            else:
                key_cols = sorted({names.index(n) for n in _named(f) if n in names} | {int(c)})
            ids, key_codes = _key_ids(table, key_cols)
            scores = f.score[on] if f.score is not None else np.ones(rows.size)
            flagged_ids = ids[rows]
            n_keys = key_codes.shape[0]
            flagged = np.bincount(flagged_ids, minlength=n_keys)
            score_sum = np.bincount(flagged_ids, weights=scores, minlength=n_keys)
            held = np.bincount(ids, minlength=n_keys)  # how many sample rows hold each key at all
            chosen = np.flatnonzero((flagged > 0) & (flagged >= MAJORITY * held))
            texts = _key_texts(table, key_cols, key_codes[chosen])
            order = (
                np.argsort(np.array(texts, dtype=object), kind="stable") if texts else np.array([], dtype=int)
            )
            out.append(
                Projection(
                    issue_id=fid,
                    column=names[c],
                    key_columns=[names[i] for i in key_cols],
                    keys=[texts[i] for i in order.tolist()],
                    scores=[float(score_sum[chosen[i]] / flagged[chosen[i]]) for i in order.tolist()],
                    flag=f.flag,
                    sample_rows=np.flatnonzero(np.isin(ids, chosen)),
                )
            )
    return out


def sample_counts(projected: list[Projection]) -> tuple[dict[str, int], dict[str, int]]:
    """Per issue, the rows and cells its predicate counts on the sample (the rows the proofs ran on): a
    proof's claim on the sample that matches these is the predicate's, which the engine counts over every row."""
    rows: dict[str, set[int]] = {}
    cells: dict[str, int] = {}
    for p in projected:
        rows.setdefault(p.issue_id, set()).update(p.sample_rows.tolist() if p.keys else [])
        cells[p.issue_id] = cells.get(p.issue_id, 0) + (int(p.sample_rows.size) if p.keys else 0)
    return {k: len(v) for k, v in rows.items()}, cells


def count_and_flag(
    source: DuckSource, projected: list[Projection], value_counts: dict[str, dict[str, int]] | None = None
) -> Counted:
    """Each issue's cells over every row, joined out of the relation by its keys (`flags_by_keys`: a scan of
    the key columns and a hash join). The cells of issues that flag are kept (all such issues in one statement)
    for flags.csv and counted; those of facts (a column's ordinary blanks: 37.5M cells of the 50M-row bench
    file) are only counted, never held. A fact on one column whose every value the engine counted
    (`value_counts`: column -> value -> rows) is the sum of its keys' counts, without a scan."""
    live = [p for p in projected if p.keys]
    counted = Counted()
    if not live:
        return counted
    known = value_counts or {}
    by_issue: dict[str, list[Projection]] = {}
    for p in live:
        by_issue.setdefault(p.issue_id, []).append(p)
    for fid, ps in by_issue.items():
        (p, *more) = ps
        if not more and not p.flag and len(p.key_columns) == 1 and p.key_columns[0] in known:
            values = known[p.key_columns[0]]
            counted.cells[fid] = counted.rows[fid] = sum(values.get(k, 0) for k in p.keys)
    live = [p for p in live if p.issue_id not in counted.rows]
    if not live:
        return counted
    con = source.con
    joins: dict[str, list[str]] = {}
    flagging: list[str] = []
    for i, p in enumerate(live):
        keys = pa.table({"k": pa.array(p.keys, pa.string()), "score": pa.array(p.scores, pa.float64())})
        con.register(f"keys_{i}", keys)
        joined = sql.flags_by_keys(p.key_columns, f"keys_{i}", p.column, p.issue_id).sql("duckdb")
        joins.setdefault(p.issue_id, []).append(joined)
        if p.flag:
            flagging.append(joined)
    try:
        if flagging:
            source.rows(f"CREATE OR REPLACE TEMP TABLE flagged AS {' UNION ALL '.join(flagging)}")
            for fid, cells, rows in con.execute(
                "SELECT issue_id, COUNT(*), COUNT(DISTINCT row) FROM flagged GROUP BY issue_id"
            ).fetchall():
                counted.cells[fid], counted.rows[fid] = int(cells), int(rows)
            counted.flags = con.sql(
                'SELECT row, col AS "column", issue_id, score FROM flagged'
            ).to_arrow_table()
            con.execute("DROP TABLE flagged")
        facts = [fid for fid in joins if fid not in counted.rows]
        for fid in facts:
            union = " UNION ALL ".join(joins[fid])
            # One column: a row holds one cell of it (its rows are its cells); several: distinct rows counted.
            rows_sql = "COUNT(*)" if len(joins[fid]) == 1 else "COUNT(DISTINCT row)"
            cells, rows = source.rows(f"SELECT COUNT(*), {rows_sql} FROM ({union}) AS u")[0]
            counted.cells[fid], counted.rows[fid] = int(cells), int(rows)
    finally:
        for i in range(len(live)):
            con.unregister(f"keys_{i}")
    return counted
