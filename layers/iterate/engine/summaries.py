"""What the engine computes over every row, read back into the shapes detection and the profile use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from iterate.engine import statements as sql
from iterate.table import SourceInfo, Table

# A column with at most this many distinct values (the engine's estimate) has every value counted exactly,
# and every value the random sample missed gets one row of its own in the sample (`Summaries.table`).
VALUE_COUNT_LIMIT = 20_000
# A column counts as numeric for the engine's statistics when this share of its sampled values are numbers.
NUMERIC_SHARE = 0.5
SEED = 7
# The most frequent sets of columns missing together that the profile keeps.
MISSING_PATTERNS = 20


class Source(Protocol):
    """What the summaries need of an engine: the relation's columns, statements run, tables registered
    (`con.register`/`unregister`), and its dialect. DuckDB locally (iterate.engine.duck.DuckSource), Athena on
    AWS (iterate.aws.large.AthenaSource)."""

    columns: list[str]
    dialect: sql.Dialect

    @property
    def con(self) -> Any: ...

    def one(self, statement: sql.Statement) -> dict[str, Any]: ...

    def arrow(self, statement: sql.Statement) -> pa.Table: ...


@dataclass
class Summaries:
    """The engine's summaries of one input: its row count, the sample rows (with their file rows), per
    column statistics, exact value counts of the low-cardinality columns, duplicates and missing patterns."""

    n_rows: int
    columns: list[str]
    sample: pa.Table  # text columns, file order
    sample_rows: np.ndarray  # the file's 0-based data row of each sample row
    random_rows: int  # how many sample rows were drawn at random (the rest: rows added for rare values)
    stats: dict[str, Any]
    value_counts: dict[int, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    missing_patterns: list[tuple[int, int]] = field(default_factory=list)

    def table(self, name: str, source: SourceInfo) -> Table:
        """The sample as a Table the detectors read (rows in file order)."""
        return Table.from_arrow(self.sample, name=name, source=source, names=self.columns)

    def counts_by_value(self) -> dict[str, dict[str, int]]:
        """The exact value counts, by column name: value -> rows holding it."""
        return {
            self.columns[i]: dict(zip(values, counts.tolist(), strict=True))
            for i, (values, counts) in self.value_counts.items()
        }

    def column_stat(self, index: int, key: str) -> Any:
        return self.stats.get(f"c{index}_{key}")


def _numeric_columns(sample: pa.Table, columns: list[str]) -> list[str]:
    """Columns whose sampled non-blank values mostly read as numbers (as TRY_CAST(x AS DOUBLE) reads them)."""
    import pyarrow.compute as pc

    out = []
    for name in columns:
        values = pc.unique(sample.column(name)).to_pylist()[:2000]
        present = [v for v in values if v]
        if not present:
            continue
        numbers = 0
        for v in present:
            try:
                float(v)
                numbers += 1
            except ValueError:
                pass
        if numbers >= NUMERIC_SHARE * len(present):
            out.append(name)
    return out


def _fetch(source: Source, rows: np.ndarray) -> pa.Table:
    """The rows at these 0-based places (`rows_at`, joined to a registered list), in file order."""
    source.con.register("wanted_rows", pa.table({"row": pa.array(rows, pa.int64())}))
    try:
        return source.arrow(sql.rows_at("wanted_rows"))
    finally:
        source.con.unregister("wanted_rows")


def summarize(source: Source, *, sample_rows: int, missing: tuple[str, ...] = ("",)) -> Summaries:
    """Every engine pass over `source`: the bounded sample, column statistics, value counts, duplicates and
    missing patterns; the sample completed with one row for each value of a low-cardinality column that the
    random draw missed, so the value detectors see every such value."""
    columns = list(source.columns)
    total = int(source.one(sql.row_count())["n"])
    if total <= sample_rows:
        drawn = source.arrow(sql.sample(sample_rows, n_rows=total))
    else:
        # Row numbers drawn here (seeded, uniform without replacement) and fetched by a join: DuckDB's
        # reservoir (`sample`, what Athena's Bernoulli draw stands for) copies rows as it replaces them, 4x
        # slower on 1M rows x 20 columns (10.0 s against 2.6 s).
        picked = np.sort(np.random.default_rng(SEED).choice(total, size=sample_rows, replace=False))
        drawn = _fetch(source, picked)
    numeric = _numeric_columns(drawn, columns)
    # Which columns have every value counted (a distinct estimate of at most VALUE_COUNT_LIMIT), then the
    # statistics of the others only: a counted column's profile is built from its values (`value_counts`).
    stats = dict(source.one(sql.column_distinct(columns)))
    n_rows = int(stats["n_rows"])
    counted = [i for i in range(len(columns)) if int(stats[f"c{i}_distinct"] or 0) <= VALUE_COUNT_LIMIT]
    if len(counted) < len(columns):
        names = [columns[i] for i in counted]
        rest = source.one(
            sql.column_stats(columns, numeric=numeric, missing=missing, distinct=False, skip=names)
        )
        stats.update({k: v for k, v in rest.items() if k != "n_rows"})
    value_counts: dict[int, tuple[list[str], np.ndarray]] = {}
    firsts: set[int] = set()
    if counted:
        got = source.arrow(sql.value_counts([columns[i] for i in counted])).to_pydict()
        per: dict[int, list[tuple[str, int, int]]] = {}
        for col, value, n, first in zip(got["col"], got["value"], got["n"], got["first_row"], strict=True):
            per.setdefault(counted[int(col)], []).append((value, int(n), int(first)))
        for i, items in per.items():
            items.sort(key=lambda x: x[2])  # first-seen order, as the single pass's dictionary
            value_counts[i] = ([v for v, _, _ in items], np.array([n for _, n, _ in items], dtype=np.int64))
            firsts.update(f for _, _, f in items)
    have = set(drawn.column(sql.ROW).to_numpy().tolist())
    extra = sorted(firsts - have)
    sample = drawn
    if extra:
        added = _fetch(source, np.asarray(extra, dtype=np.int64))
        sample = pa.concat_tables([drawn, added]).sort_by(sql.ROW)
    rows = sample.column(sql.ROW).to_numpy().astype(np.int64)
    groups = source.arrow(sql.row_groups(columns, missing=missing, dialect=source.dialect)).to_pydict()
    repeats = [int(n) for g, n in zip(groups["g"], groups["n"], strict=True) if g == 1]
    dup = {"groups": len(repeats), "repeats": sum(repeats) - len(repeats), "largest": max(repeats, default=0)}
    patterns = sorted(
        ((int(p), int(n)) for g, p, n in zip(groups["g"], groups["p"], groups["n"], strict=True) if g == 2),
        key=lambda pn: (-pn[1], pn[0]),
    )[:MISSING_PATTERNS]
    return Summaries(
        n_rows=n_rows,
        columns=columns,
        sample=sample.drop_columns([sql.ROW]),
        sample_rows=rows,
        random_rows=drawn.num_rows,
        stats=stats,
        value_counts=value_counts,
        duplicates={k: int(v or 0) for k, v in dup.items()},
        missing_patterns=patterns,
    )


def source_info(path: Path, content_hash: str) -> SourceInfo:
    """The input as the sample's Table names it: rows are called by their 0-based data row only (the file's
    lines are not counted by the engine, so a quoted line break cannot shift them)."""
    fmt = "tsv" if path.suffix.lower() in {".tsv", ".tab"} else "csv"
    return SourceInfo(path=str(path), format=fmt, size_bytes=path.stat().st_size, content_hash=content_hash)
