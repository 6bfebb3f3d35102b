"""The profiler: mergeable column statistics, semantic types, duplicates, keys and dependencies of a Table."""

from iterate.profile.dataset import (
    DuplicateRows,
    ProfileResult,
    candidate_keys,
    duplicate_rows,
    profile_table,
    profile_table_full,
)
from iterate.profile.fd import GroupMajority, group_majority
from iterate.profile.missing import choose_null_marker, missing_like
from iterate.profile.parse import NumberInfo, guess_date_format, parse_dates, parse_numbers
from iterate.profile.sketch import ColumnSketch, finalize_all
from iterate.profile.types import TypeInference, infer_semantic_type

__all__ = [
    "ColumnSketch",
    "DuplicateRows",
    "GroupMajority",
    "NumberInfo",
    "ProfileResult",
    "TypeInference",
    "candidate_keys",
    "choose_null_marker",
    "duplicate_rows",
    "finalize_all",
    "group_majority",
    "guess_date_format",
    "infer_semantic_type",
    "missing_like",
    "parse_dates",
    "parse_numbers",
    "profile_table",
    "profile_table_full",
]
