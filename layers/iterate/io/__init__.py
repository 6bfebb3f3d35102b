"""Readers: real-world files in (CSV/TSV, compressed, Parquet, JSON Lines, .xlsx), a text Table out."""

from iterate.io.errors import DatasetReadError, LimitExceeded
from iterate.io.limits import ReadLimits
from iterate.io.parquet_text import read_parquet_text, write_parquet_text
from iterate.io.reader import check_source, read_table

__all__ = [
    "DatasetReadError",
    "LimitExceeded",
    "ReadLimits",
    "check_source",
    "read_parquet_text",
    "read_table",
    "write_parquet_text",
]
