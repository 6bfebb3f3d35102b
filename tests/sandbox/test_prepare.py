"""LocalSandbox.prepare: the pipeline's hint to start the sandbox and load a dataset before investigations need it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from iterate.io import write_parquet_text
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def dataset(path: Path) -> Path:
    arrow = pa.table({"a": ["x", "y", "x"], "b": ["1", "2", "3"]})
    return write_parquet_text(Table.from_arrow(arrow, name="t", source=SourceInfo(str(path), "csv")), path)


def limits(**overrides: object) -> SandboxLimits:
    return SandboxLimits(**{"timeout_s": 10.0, "memory_mb": 512, **overrides})  # type: ignore[arg-type]


def test_prepared_dataset_is_loaded_once_and_used_by_the_runs(tmp_path: Path) -> None:
    path = dataset(tmp_path / "data.parquet")
    with LocalSandbox(limits()) as sandbox:
        thread = sandbox.prepare(DatasetRef(path=str(path)))
        assert thread is not None
        thread.join(60)
        assert sandbox.stats().get("preloads") == 1
        for _ in range(2):
            out = sandbox.run(
                "result = {'affected_rows': int((df['a'] == 'x').sum())}", DatasetRef(path=str(path))
            )
            assert out.success and out.output == {"affected_rows": 2}
        stats = sandbox.stats()
        assert stats.get("preloads") == 1
        assert stats.get("preloaded_runs") == 2


def test_prepare_is_only_a_hint(tmp_path: Path) -> None:
    # No prefork (the Lambda): nothing to start. A missing or corrupt file: run() reports it, not prepare().
    assert LocalSandbox(limits(prefork=False)).prepare(DatasetRef(path=str(tmp_path / "x"))) is None
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with LocalSandbox(limits()) as sandbox:
        thread = sandbox.prepare(DatasetRef(path=str(tmp_path / "missing.parquet")))
        assert thread is not None
        thread.join(60)
        thread = sandbox.prepare(DatasetRef(path=str(broken)))
        assert thread is not None
        thread.join(60)
        out = sandbox.run("result = {'affected_rows': len(df)}", DatasetRef(path=str(broken)))
        assert not out.success and "sandbox setup failed" in (out.error or "")
