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


SHOW = "result = {'affected_rows': 0, 'columns': list(df.columns), 'rows': df.values.tolist()}"


def named(path: Path) -> tuple[Path, pa.Table]:
    """A dataset with a repeated column name, and the in-memory copy a caller can hand to prepare()."""
    from iterate.io.parquet_text import text_arrow

    arrow = pa.table({"c0": ["x", "", "z"], "c1": ["1", "2", "3"], "c2": ["a", "b", "c"]})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(str(path), "csv"), names=["id", "v", "id"])
    return write_parquet_text(table, path), text_arrow(table)


@pytest.mark.parametrize("namespaces", [None, False])
def test_a_table_handed_over_in_memory_gives_the_frame_the_file_gives(
    tmp_path: Path, namespaces: object
) -> None:
    path, arrow = named(tmp_path / "data.parquet")
    ref = DatasetRef(path=str(path))
    with LocalSandbox(limits(preload_datasets=0, namespaces=namespaces)) as plain:
        expected = [
            plain.run(code, ref).output for code in (SHOW, SHOW.replace("df.values", "df[['v']].values"))
        ]
    with LocalSandbox(limits(namespaces=namespaces)) as sandbox:
        thread = sandbox.prepare(ref, arrow=arrow)
        assert thread is not None
        thread.join(60)
        assert sandbox.stats().get("preloads") == 1
        got = [
            sandbox.run(code, ref).output for code in (SHOW, SHOW.replace("df.values", "df[['v']].values"))
        ]
        narrowed = sandbox.run(SHOW, DatasetRef(path=str(path), columns=("v",)))
        assert sandbox.stats().get("preloaded_runs") == 3
    assert got == expected
    assert expected[0]["columns"] == ["id", "v", "id"] and expected[0]["rows"][1] == ["", "2", "b"]
    assert narrowed.output is not None and narrowed.output["columns"] == ["v"]


def test_a_run_cannot_change_what_the_next_run_sees(tmp_path: Path) -> None:
    path, arrow = named(tmp_path / "data.parquet")
    ref = DatasetRef(path=str(path))
    with LocalSandbox(limits()) as sandbox:
        thread = sandbox.prepare(ref, arrow=arrow)
        assert thread is not None
        thread.join(60)
        sandbox.run("df.iloc[0, 0] = 'changed'\nresult = {'affected_rows': 0}", ref)
        after = sandbox.run(SHOW, ref)
    assert after.output is not None and after.output["rows"][0] == ["x", "1", "a"]


def test_the_memory_file_is_sealed_against_writes(tmp_path: Path) -> None:
    import fcntl
    import os

    from iterate.sandbox.zygotes import sealed_arrow

    _, arrow = named(tmp_path / "data.parquet")
    fd = sealed_arrow(arrow)
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_SEAL
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        assert os.pread(fd, 6, 0) == b"ARROW1"
    finally:
        os.close(fd)


def test_without_a_memory_file_the_dataset_is_loaded_from_its_file(tmp_path: Path, monkeypatch) -> None:
    import iterate.sandbox.local as local

    def unavailable(table: object) -> int:
        raise AttributeError("module 'os' has no attribute 'memfd_create'")

    monkeypatch.setattr(local, "sealed_arrow", unavailable)
    path, arrow = named(tmp_path / "data.parquet")
    ref = DatasetRef(path=str(path))
    with LocalSandbox(limits()) as sandbox:
        thread = sandbox.prepare(ref, arrow=arrow)
        assert thread is not None
        thread.join(60)
        out = sandbox.run(SHOW, ref)
        assert sandbox.stats().get("preloads") == 1 and sandbox.stats().get("preloaded_runs") == 1
    assert out.output is not None and out.output["rows"][2] == ["z", "3", "c"]
