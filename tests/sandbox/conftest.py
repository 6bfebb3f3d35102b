"""Sandbox test fixtures: a small all-text dataset written the way the engine writes it, and sandboxes."""

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from iterate.io import write_parquet_text
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.table import SourceInfo, Table

ROWS = {
    "id": ["1", "2", "3", "4", "4", "6", "7", "8"],
    "city": ["Paris", "paris ", "N/A", "Lyon", "Lyon", "Nice", "", "Lyon"],
    "amount": ["10", "12.5", "9999", "11", "11", "$1,000", "abc", "7"],
    "when": [
        "2024-01-03",
        "2024-02-10",
        "03/01/2024",
        "2024-03-15",
        "2024-03-15",
        "",
        "2024-05-01",
        "2024-06-30",
    ],
    "note": ["café", "naïve", "ok", "x", "x", "résumé", "ok", "fine"],
}


def write_dataset(path: Path, rows: dict[str, list[str]] = ROWS) -> Path:
    table = Table.from_arrow(pa.table(rows), name="t", source=SourceInfo(path=str(path), format="csv"))
    return write_parquet_text(table, path)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data") / "data.parquet")


@pytest.fixture(scope="session")
def sandbox() -> LocalSandbox:
    return LocalSandbox(SandboxLimits(timeout_s=5, memory_mb=512, max_output_bytes=100_000))


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[dict[str, LocalSandbox]]:
    """Sandboxes a module makes per mode (see the red-team suites' sandbox_for), closed when it ends."""
    made: dict[str, LocalSandbox] = {}
    yield made
    for made_sandbox in made.values():
        made_sandbox.close()
