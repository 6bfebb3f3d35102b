"""DuckDB, embedded: the relation `t` over a delimited file read in place, and the statements run on it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterate.engine.statements import RELATION, ROW, Statement, literal, quoted

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

SOURCE_RELATION = "source_text"
DATA_TABLE = "data"


class DuckSource:
    """A delimited text file as the relation `t` (every column as text, a blank cell as '', and `__row`, the
    0-based data row).

    The file is parsed once, into a DuckDB table in a database file under `directory` (compressed by DuckDB, on
    disk: its pages are read back as the statements need them, so memory stays within `memory_mb` whatever the
    file's size); every statement then scans that table. Parsing the CSV is most of a scan's cost (1M rows x
    20 columns: about 2 s for a statement reading every column of the file against 0.2-1 s of the table), and
    the engine path runs six of them. Rows keep the file's order (`preserve_insertion_order`), so a row's
    `rowid` is its data row. Without `directory` the table is held in memory (tests, small files)."""

    def __init__(
        self,
        path: str | Path,
        *,
        memory_mb: int = 2048,
        threads: int | None = None,
        directory: str | Path | None = None,
        delimiter: str | None = None,
    ) -> None:
        import duckdb

        self.path = Path(path)
        database = str(Path(directory) / "engine.duckdb") if directory is not None else ":memory:"
        self.con: duckdb.DuckDBPyConnection = duckdb.connect(database)
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

    def rows(self, statement: Statement | str) -> list[tuple[Any, ...]]:
        sql = statement.sql("duckdb") if isinstance(statement, Statement) else statement
        return self.con.execute(sql).fetchall()

    def one(self, statement: Statement | str) -> dict[str, Any]:
        sql = statement.sql("duckdb") if isinstance(statement, Statement) else statement
        cursor = self.con.execute(sql)
        names = [d[0] for d in cursor.description or []]
        rows = cursor.fetchall()
        return dict(zip(names, rows[0] if rows else (), strict=False))

    def arrow(self, statement: Statement | str) -> pa.Table:
        sql = statement.sql("duckdb") if isinstance(statement, Statement) else statement
        return self.con.sql(sql).to_arrow_table()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> DuckSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
