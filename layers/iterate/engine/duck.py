"""DuckDB, embedded: the relation `t` over a delimited file read in place, and the statements run on it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterate.engine.statements import RELATION, ROW, Dialect, Statement, literal, quoted

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

SOURCE_RELATION = "source_text"
DATA_TABLE = "data"


class DuckSource:
    """A delimited text file as the relation `t` (every column as text, a blank cell as '', and `__row`, the
    0-based data row).

    The file is parsed once, into a DuckDB table (compressed by DuckDB; past `memory_mb` its blocks go to
    files under `directory` and are read back as statements need them, so memory stays within the cap whatever
    the file's size); every statement then scans that table. Parsing the CSV is most of a scan's cost (1M rows
    x 20 columns, side by side: a statement reading every column 3.6 s from the file, 1.4 s from the table;
    loading the table 4.7 s, 1.3 times DuckDB's SUMMARIZE of the file; a database file on disk instead 6.4 s),
    and the engine path runs seven statements. DuckDB's own compression (a database file, or an in-memory one
    checkpointed) or a Parquet copy would hold 10M rows in 0.7 GB instead of 2.8 GB, but writing either costs
    as much CPU again as the load (2M rows: 3.6 s more; Parquet 5.1-5.9 s against 3.5 s). Rows keep the
    file's order (`preserve_insertion_order`), so a row's `rowid` is its data row."""

    dialect: Dialect = "duckdb"

    def __init__(
        self,
        path: str | Path,
        *,
        memory_mb: int = 2048,
        threads: int | None = None,
        directory: str | Path | None = None,
        delimiter: str | None = None,
    ) -> None:
        import time

        import duckdb

        self.path = Path(path)
        # Seconds per statement run, by name (the load is "load"), wall and CPU (the process's: DuckDB's
        # threads and any other): the step's record keeps them.
        self.timings: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        started, cpu = time.perf_counter(), time.process_time()
        self.con: duckdb.DuckDBPyConnection = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = '{int(memory_mb)}MB'")
        self.con.execute(f"SET threads = {int(threads or os.cpu_count() or 2)}")
        self.con.execute("SET preserve_insertion_order = true")
        if directory is not None:
            self.con.execute(f"SET temp_directory = {literal(str(Path(directory) / 'spill'))}")
        options = ["header = true", "all_varchar = true", "null_padding = true"]
        if delimiter is not None:
            options.append(f"delim = {literal(delimiter)}")
        read = f"read_csv({literal(str(self.path))}, {', '.join(options)})"
        self.con.execute(f"CREATE VIEW {SOURCE_RELATION} AS SELECT * FROM {read}")
        self.columns: list[str] = [r[0] for r in self.con.execute(f"DESCRIBE {SOURCE_RELATION}").fetchall()]
        texts = ", ".join(f"COALESCE({quoted(c)}, '') AS {quoted(c)}" for c in self.columns)
        self.con.execute(f"CREATE TABLE {DATA_TABLE} AS SELECT {texts} FROM {SOURCE_RELATION}")
        self.con.execute(f"CREATE VIEW {RELATION} AS SELECT rowid AS {ROW}, * FROM {DATA_TABLE}")
        self.timings["load"] = round(time.perf_counter() - started, 2)
        self.cpu["load"] = round(time.process_time() - cpu, 2)

    def _timed(self, statement: Statement | str, run: Any) -> Any:
        import time

        started, cpu = time.perf_counter(), time.process_time()
        sql = statement.sql("duckdb") if isinstance(statement, Statement) else statement
        out = run(sql)
        name = statement.name if isinstance(statement, Statement) else "sql"
        self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - started, 2)
        self.cpu[name] = round(self.cpu.get(name, 0.0) + time.process_time() - cpu, 2)
        return out

    def rows(self, statement: Statement | str) -> list[tuple[Any, ...]]:
        return self._timed(statement, lambda sql: self.con.execute(sql).fetchall())  # type: ignore[no-any-return]

    def one(self, statement: Statement | str) -> dict[str, Any]:
        def run(sql: str) -> dict[str, Any]:
            cursor = self.con.execute(sql)
            names = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall()
            return dict(zip(names, rows[0] if rows else (), strict=False))

        return self._timed(statement, run)  # type: ignore[no-any-return]

    def arrow(self, statement: Statement | str) -> pa.Table:
        return self._timed(statement, lambda sql: self.con.sql(sql).to_arrow_table())

    def limit_memory(self, memory_mb: int) -> None:
        """DuckDB's cap from now on: lowered, it writes what it holds past the cap to its spill files first."""
        self.con.execute(f"SET memory_limit = '{int(memory_mb)}MB'")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> DuckSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
