"""The engine path for large inputs: SQL statements (DuckDB, Trino) and detection on their summaries."""
