"""Fixtures for profiler tests: build an in-memory Table from plain Python columns."""

from collections.abc import Callable

import pyarrow as pa
import pytest

from iterate.table import SourceInfo, Table

TableFactory = Callable[..., Table]


def build_table(columns: dict[str, list[str]], name: str = "t") -> Table:
    arrow = pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})
    return Table.from_arrow(arrow, name=name, source=SourceInfo(path=f"{name}.csv", format="csv"))


@pytest.fixture
def make_table() -> TableFactory:
    return build_table
