"""Readers: real-world files in (CSV/TSV, compressed, Parquet, JSON Lines, .xlsx), a text Table out."""

from iterate.io.errors import DatasetReadError
from iterate.io.parquet_text import read_parquet_text, write_parquet_text
from iterate.io.reader import read_table

__all__ = ["DatasetReadError", "read_parquet_text", "read_table", "write_parquet_text"]
