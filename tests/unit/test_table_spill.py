"""Table.spill: a large table's columns moved to files and mapped back read the same, detect the same and
profile the same; the memory really is the files'; nothing is left on disk; a full disk loses nothing."""

from __future__ import annotations

import errno
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import iterate.table as table_module
from iterate.io import read_table
from iterate.memory import in_memory_fs
from iterate.settings import Settings
from iterate.table import Table

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gen_bench  # noqa: E402
from detect_signatures import signature  # noqa: E402

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


def _mapping_of(address: int) -> str | None:
    """The file behind the memory at `address` (from /proc/self/maps), "" for anonymous memory."""
    with open("/proc/self/maps", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split(maxsplit=5)
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return fields[5].strip() if len(fields) > 5 else ""
    return None


def _snapshot(table: Table) -> list[tuple[np.ndarray, np.ndarray, list[str | None]]]:
    return [(c.codes.copy(), c.counts.copy(), c.dictionary.to_pylist()) for c in table.columns]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_a_spilled_table_holds_the_same_values_in_files_it_leaves_nowhere(tmp_path):
    table = read_table(SAMPLE)
    before, nbytes = _snapshot(table), table.nbytes
    moved = table.spill(tmp_path)
    assert moved == nbytes > 0
    for column, (codes, counts, dictionary) in zip(table.columns, before, strict=True):
        assert column.codes.dtype == codes.dtype and np.array_equal(column.codes, codes)
        assert np.array_equal(column.counts, counts) and column.dictionary.to_pylist() == dictionary
        assert not column.codes.flags.writeable  # read-only: no detector may change the table
        # The memory is a map of a spill file (unlinked: "(deleted)"), not the process's own
        for address in (
            column.codes.ctypes.data,
            column.counts.ctypes.data,
            column.dictionary.buffers()[2].address,
        ):
            where = _mapping_of(address)
            assert where is not None and "iterate-spill-" in where and where.endswith("(deleted)"), where
    assert list(tmp_path.iterdir()) == []  # the files went as soon as they were mapped
    assert table.column("order_id").value(0) == read_table(SAMPLE).column("order_id").value(0)


def test_detection_on_a_spilled_table_finds_exactly_the_same(tmp_path):
    source = tmp_path / "bench.csv"
    gen_bench.write(source, n_rows=30_000, seed=3)
    for path in (str(SAMPLE), str(source)):
        assert signature(path, spill=True) == signature(path)


def test_a_full_disk_leaves_the_columns_it_could_not_write_in_memory(tmp_path, monkeypatch):
    table = read_table(SAMPLE)
    before = _snapshot(table)
    save, calls = np.save, []

    def filling_up(path, array, **kwargs):
        calls.append(path)
        if len(calls) > 2:  # the first column's codes and counts fit; then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        save(path, array, **kwargs)

    monkeypatch.setattr(table_module.np, "save", filling_up)
    first = table.columns[0]
    expected = first.codes.nbytes + first.counts.nbytes + first.dictionary.nbytes
    assert table.spill(tmp_path) == expected
    assert not table.columns[0].codes.flags.writeable
    assert all(c.codes.flags.writeable for c in table.columns[1:])  # still the arrays in memory
    for column, (codes, counts, dictionary) in zip(table.columns, before, strict=True):
        assert np.array_equal(column.codes, codes) and np.array_equal(column.counts, counts)
        assert column.dictionary.to_pylist() == dictionary
    assert list(tmp_path.iterdir()) == []


def test_spill_table_only_moves_a_table_at_the_setting_and_not_into_memory(monkeypatch):
    from iterate import pipeline

    table = read_table(SAMPLE)
    size = table.nbytes
    always = {"spill": "always"}
    assert pipeline.spill_table(table, Settings(spill_bytes=0, **always)) == 0  # switched off
    assert pipeline.spill_table(table, Settings(spill_bytes=size, spill="never")) == 0
    assert pipeline.spill_table(table, Settings(spill_bytes=size + 1, **always)) == 0  # below the setting
    assert table.columns[0].codes.flags.writeable
    monkeypatch.setattr("iterate.memory.in_memory_fs", lambda path: True)  # TMPDIR on tmpfs
    assert pipeline.spill_table(table, Settings(spill_bytes=size, **always)) == 0
    monkeypatch.undo()
    timings: dict[str, float] = {}
    assert pipeline.spill_table(table, Settings(spill_bytes=size, **always), timings) == size
    assert not table.columns[0].codes.flags.writeable and timings["spill"] >= 0


@pytest.mark.parametrize(
    ("room_mb", "spilled"),
    [
        (None, True),  # the memory left cannot be read: spilled, as memory may be short
        (0, True),
        (2.9, True),  # less than ROOM_FACTOR (3) times the table
        (3, False),  # at least 3 times: kept in memory, where the files would only cost time
        (10**6, False),
    ],
)
def test_by_default_a_table_is_spilled_only_where_memory_is_short(monkeypatch, room_mb, spilled):
    from iterate import memory, pipeline

    table = read_table(SAMPLE)
    size = table.nbytes
    assert memory.ROOM_FACTOR == 3
    # The room, in units of the table's bytes: the test speaks of multiples of the table, whatever its size
    monkeypatch.setattr(
        memory, "available_memory_mb", lambda: None if room_mb is None else room_mb * size / 2**20
    )
    assert Settings().spill == "auto"
    moved = pipeline.spill_table(table, Settings(spill_bytes=size))
    assert moved == (size if spilled else 0)
    assert table.columns[0].codes.flags.writeable is not spilled


def test_the_spill_mode_is_a_setting_with_a_clear_refusal_of_other_values():
    assert Settings.from_env({"ITERATE_SPILL": "always"}).spill == "always"
    assert Settings.from_env({"ITERATE_SPILL": "never"}).spill == "never"
    with pytest.raises(ValueError, match=r"auto.*always.*never"):
        Settings.from_env({"ITERATE_SPILL": "sometimes"})


MOUNTINFO = """\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:21 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
26 25 254:2 / /tmp/disk rw,relatime shared:6 - ext4 /dev/vdb rw
27 22 0:22 / /dev/shm rw,nosuid shared:7 - tmpfs tmpfs rw
28 22 0:23 / /srv/my\\040data rw shared:8 - ramfs ramfs rw
"""


def test_in_memory_fs_names_the_filesystem_of_the_deepest_mount_holding_the_path():
    assert in_memory_fs("/tmp/x", MOUNTINFO)
    assert in_memory_fs("/tmp", MOUNTINFO)
    assert in_memory_fs("/dev/shm/a/b", MOUNTINFO)
    assert in_memory_fs("/srv/my data/x", MOUNTINFO)  # an escaped space in the mount point
    assert not in_memory_fs("/tmp/disk/y", MOUNTINFO)  # a disk mounted inside the tmpfs
    assert not in_memory_fs("/tmpfoo/x", MOUNTINFO)  # a name that only starts like the mount point
    assert not in_memory_fs("/home/me", MOUNTINFO)
    assert not in_memory_fs("/home/me", "")  # nothing known: treated as a disk


def test_the_profile_step_writes_the_same_artifacts_with_the_table_spilled(tmp_path):
    from iterate import pipeline
    from iterate.agents import build_agents
    from iterate.storage.local import LocalArtifactStore

    source = tmp_path / "bench.csv"
    gen_bench.write(source, n_rows=20_000, seed=11)
    spill_dirs = set(Path(tempfile.gettempdir()).glob("iterate-spill-*"))
    outputs = {}
    for spill in (0, 1):  # never, and whatever the size and the memory left
        settings = Settings(spill_bytes=spill, spill="always")
        ctx = pipeline.RunContext(
            run_id=f"spill-{spill}",
            store=LocalArtifactStore(tmp_path / f"spill-{spill}"),
            agents=build_agents(settings),
            sandbox=None,  # type: ignore[arg-type]
            settings=settings,
        )
        summary = pipeline.profile_step(ctx, source)
        assert ("spill" in ctx.timings_ms) == bool(spill)
        outputs[spill] = (
            summary,
            {
                name: (tmp_path / f"spill-{spill}" / name).read_bytes()
                for name in ("profile.json", "candidates.json", "flags.csv", "data.parquet")
            },
        )
    assert outputs[0] == outputs[1]
    assert outputs[1][0].flaggedCells > 0
    assert set(Path(tempfile.gettempdir()).glob("iterate-spill-*")) == spill_dirs  # nothing left behind


def test_nothing_is_spilled_where_the_disk_would_keep_less_than_the_reserve(tmp_path, monkeypatch):
    import shutil

    from iterate.io.chunked import keep_range

    table = read_table(SAMPLE)
    before = _snapshot(table)
    usage = shutil.disk_usage(tmp_path)
    # Given a disk whose free space is the reserve and a little more than one column
    first = table.columns[0]
    room = first.codes.nbytes + 1
    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: usage._replace(free=table_module.SPILL_RESERVE_BYTES + room)
    )
    # Then nothing moves: the first column's codes would fit beside the reserve, its counts not, and a column
    # moves whole or not at all (nor do the ones after it)
    assert table.spill(tmp_path) == 0
    assert all(c.codes.flags.writeable for c in table.columns)
    for column, (codes, counts, dictionary) in zip(table.columns, before, strict=True):
        assert np.array_equal(column.codes, codes) and np.array_equal(column.counts, counts)
        assert column.dictionary.to_pylist() == dictionary
    # And a range's columns stay in memory as they are
    columns = [c.values.dictionary_encode() for c in table.columns]
    assert keep_range(columns, tmp_path, 0) is columns
    assert list(tmp_path.iterdir()) == []
