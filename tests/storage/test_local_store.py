"""The local artifact store: files copied in whole and atomically, keys kept inside the run directory."""

from pathlib import Path

import pytest

from iterate.storage.local import LocalArtifactStore


def test_put_file_copies_and_leaves_the_source(tmp_path: Path) -> None:
    source = tmp_path / "data.parquet"
    source.write_bytes(b"x" * 100_000)
    store = LocalArtifactStore(tmp_path / "run")
    where = store.put_file("nested/data.parquet", source)
    assert Path(where).read_bytes() == source.read_bytes()
    assert source.exists()
    assert store.get_bytes("nested/data.parquet") == source.read_bytes()
    assert not [p for p in (tmp_path / "run" / "nested").iterdir() if p.name.startswith(".")]


def test_put_file_refuses_keys_outside_the_run(tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"1")
    with pytest.raises(ValueError, match="escapes"):
        LocalArtifactStore(tmp_path / "run").put_file("../f2", source)
