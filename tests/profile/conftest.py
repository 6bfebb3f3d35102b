"""Fixtures for profiler tests: build an in-memory Table from plain Python columns; a run context for the
profile step over a local store."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def step_context(store: Path, name: str, sandbox: Any = None, progress: Any = None) -> Any:
    """A RunContext for `pipeline.profile_step` writing into `store`, offline agents, default settings."""
    from iterate import pipeline
    from iterate.agents import build_agents
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    settings = Settings()
    extra = {} if progress is None else {"progress": progress}
    return pipeline.RunContext(
        run_id=name,
        store=LocalArtifactStore(store),
        agents=build_agents(settings),
        sandbox=sandbox,
        settings=settings,
        **extra,
    )


@pytest.fixture
def profile_context() -> Callable[..., Any]:
    return step_context
