"""The dataset zygote: a dataset's frame loaded once per run, each investigation forked from it, isolated as ever."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iterate.io import write_parquet_text
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.sandbox.zygotes import WORKER
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

SHOW = "result = {'columns': list(df.columns), 'rows': df.values.tolist(), 'dtypes': [str(t) for t in df.dtypes]}"


def limits(**overrides: object) -> SandboxLimits:
    base = {"timeout_s": 10.0, "memory_mb": 512, "max_output_bytes": 100_000}
    return SandboxLimits(**{**base, **overrides})  # type: ignore[arg-type]


def write_dataset(path: Path, rows: dict[str, list[str]]) -> Path:
    table = Table.from_arrow(pa.table(rows), name="t", source=SourceInfo(path=str(path), format="csv"))
    return write_parquet_text(table, path)


def tagged(path: Path, tag: str, rows: int = 5) -> Path:
    """A dataset whose every cell names it: code that sees another dataset's cell gives it away."""
    return write_dataset(path, {"a": [f"{tag}-{i}" for i in range(rows)], "b": [tag] * rows})


def with_names(path: Path, names: list[str], columns: list[list[str]]) -> Path:
    arrow = pa.table({f"c{i}": values for i, values in enumerate(columns)})
    table = Table.from_arrow(arrow, name="t", source=SourceInfo(path=str(path), format="csv"), names=names)
    return write_parquet_text(table, path)


def dataset_pids(sandbox: LocalSandbox) -> list[int]:
    return [e.zygote.pid for e in sandbox._datasets._entries.values() if e.zygote is not None]


def gone(pid: int, wait_s: float = 10.0) -> bool:
    """The process has exited (a zombie waiting for a reaper counts as exited)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def processes_in(directory: str) -> list[int]:
    """Live processes whose working directory is under `directory` (zygotes and their forks start there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(directory) and not gone(int(entry.name), wait_s=0):
            found.append(int(entry.name))
    return found


def test_every_run_takes_the_preloaded_frame_and_reports_it(dataset: Path) -> None:
    with LocalSandbox(limits()) as sandbox:
        outcomes = [
            sandbox.run_detailed("result = {'n': len(df)}", DatasetRef(path=str(dataset))) for _ in range(3)
        ]
        stats = sandbox.stats()
    assert all(o.investigation.output == {"n": 8} for o in outcomes)
    assert {o.isolation["frame"] for o in outcomes} == {"preloaded"}
    assert stats["preloads"] == 1 and stats["preloaded_runs"] == 3
    # Each run still went through the whole isolation
    if os.geteuid() == 0:
        assert outcomes[-1].isolation["filesystem"] == "jail"
        assert outcomes[-1].isolation["capabilities"] == "dropped"


def test_without_prefork_or_preloading_each_run_loads_its_frame(dataset: Path) -> None:
    for config in (limits(prefork=False), limits(preload_datasets=0)):
        with LocalSandbox(config) as sandbox:
            outcome = sandbox.run_detailed("result = {'n': len(df)}", DatasetRef(path=str(dataset)))
            assert outcome.investigation.output == {"n": 8}
            assert outcome.isolation["frame"] == "loaded"
            assert "preloads" not in sandbox.stats()


def test_concurrent_runs_on_one_dataset_share_one_load(dataset: Path) -> None:
    # Given one sandbox shared by four threads, all on the same dataset
    with LocalSandbox(limits(timeout_s=20)) as sandbox:

        def ask(i: int) -> tuple[object, str]:
            outcome = sandbox.run_detailed(
                f"result = {{'i': {i}, 'n': len(df) * {i}}}", DatasetRef(path=str(dataset))
            )
            return outcome.investigation.output, outcome.isolation.get("frame", "")

        # When they run at the same time, from the first run on
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, range(12)))
        stats = sandbox.stats()
    # Then each got its own answer, every one from the frame loaded once
    assert answers == [({"i": i, "n": 8 * i}, "preloaded") for i in range(12)]
    assert stats["preloads"] == 1


def test_two_datasets_never_see_each_others_data(tmp_path: Path) -> None:
    a = tagged(tmp_path / "a.parquet", "alpha")
    b = tagged(tmp_path / "b.parquet", "bravo", rows=7)
    code = "result = {'tags': sorted(set(df['b'])), 'cells': sorted(set(df.values.ravel().tolist()))}"
    order = (a, b, a, b, b, a)
    # Given one sandbox asked about both datasets at the same time, then one with room for one dataset
    # zygote only asked about them in turn (so each is closed and started again)
    for capacity, threads in ((2, 2), (1, 1)):
        with LocalSandbox(limits(preload_datasets=capacity)) as sandbox:
            refs = [DatasetRef(path=str(p)) for p in order]
            with ThreadPoolExecutor(threads) as pool:
                outcomes = list(pool.map(lambda ref: sandbox.run_detailed(code, ref), refs))
            # Then code looking at `df` sees only the dataset it was run for
            for ref, outcome in zip(refs, outcomes, strict=True):
                tag = "alpha" if ref.path == str(a) else "bravo"
                assert outcome.investigation.output is not None, outcome.investigation.error
                assert outcome.investigation.output["tags"] == [tag]
                assert all(cell.startswith(tag) for cell in outcome.investigation.output["cells"])
                assert outcome.isolation["frame"] == "preloaded"
            assert len(dataset_pids(sandbox)) <= capacity
            assert sandbox.stats()["preloads"] == (2 if capacity == 2 else 5)


def test_a_rewritten_file_is_loaded_again(tmp_path: Path) -> None:
    path = tagged(tmp_path / "data.parquet", "old")
    code = "result = {'tags': sorted(set(df['b'])), 'n': len(df)}"
    with LocalSandbox(limits()) as sandbox:
        assert sandbox.run(code, DatasetRef(path=str(path))).output == {"tags": ["old"], "n": 5}
        first = dataset_pids(sandbox)
        # When the file at the same path is written again (in place, and then replaced)
        tagged(path, "new", rows=6)
        assert sandbox.run(code, DatasetRef(path=str(path))).output == {"tags": ["new"], "n": 6}
        replacement = tagged(tmp_path / "other.parquet", "newer", rows=3)
        os.replace(replacement, path)
        assert sandbox.run(code, DatasetRef(path=str(path))).output == {"tags": ["newer"], "n": 3}
        assert sandbox.stats()["preloads"] == 3
        # And a zygote holding stale data is not kept for long (at most the pool's size)
        assert len(dataset_pids(sandbox)) <= 2 and first[0] not in dataset_pids(sandbox)


def test_a_timeout_kills_the_run_only_and_the_next_run_is_served(dataset: Path) -> None:
    # Given a sandbox whose static policy is off, so blocking code reaches the runner
    config = limits(timeout_s=1, setup_allowance_s=1.5, enforce_policy=False)
    ref = DatasetRef(path=str(dataset))
    with LocalSandbox(config) as sandbox:
        assert sandbox.run("result = {'ok': 0}", ref).success
        (pid,) = dataset_pids(sandbox)
        # When one run burns CPU and another sleeps past the wall-clock limit
        spin = sandbox.run("while True:\n    pass", ref)
        sleep = sandbox.run("import re\nre.enum.sys.modules['time'].sleep(60)", ref)
        # Then both stop on their limit, and the same dataset zygote serves the next run
        assert spin.stopped == "timeout" and sleep.stopped == "timeout", (spin.error, sleep.error)
        assert dataset_pids(sandbox) == [pid]
        assert sandbox.run("result = {'ok': 1}", ref).output == {"ok": 1}
        assert sandbox.stats()["preloads"] == 1


def test_a_hostile_run_leaves_the_dataset_zygote_serving(dataset: Path) -> None:
    config = limits(timeout_s=2, memory_mb=256, enforce_policy=False)
    ref = DatasetRef(path=str(dataset))
    with LocalSandbox(config) as sandbox:
        assert sandbox.run("result = {'ok': 1}", ref).success
        (pid,) = dataset_pids(sandbox)
        # When the code tries to kill its group and its parents, and to exhaust memory
        hostile = "o = pd.io.common.os\no.kill(0, 9)\no.kill(o.getppid(), 9)\no.killpg(o.getpgid(0), 9)"
        assert not sandbox.run(hostile, ref).success
        assert not sandbox.run("x = 'a' * 10 ** 10", ref).success
        changed = sandbox.run("df['a'] = 'overwritten'\ndel df['id']\nresult = {'n': len(df.columns)}", ref)
        assert changed.output == {"n": 5}
        # Then the dataset zygote is alive, and what one run did to `df` is not seen by the next
        assert dataset_pids(sandbox) == [pid]
        after = sandbox.run("result = {'columns': list(df.columns)}", ref)
        assert after.output == {"columns": ["id", "city", "amount", "when", "note"]}


@pytest.mark.parametrize(
    "columns",
    [None, ("id",), ("note", "id"), ("city",), ("missing",), ("note", "missing"), ("id", "city", "note")],
)
def test_narrowed_columns_match_a_frame_loaded_by_the_runner(tmp_path: Path, columns: object) -> None:
    # Given a dataset whose header repeats a name
    path = with_names(
        tmp_path / "dup.parquet",
        ["id", "city", "id", "note"],
        [["1", "2", ""], ["Paris", "Lyon", "Nice"], ["a", "b", "c"], ["x", "", "z"]],
    )
    ref = DatasetRef(path=str(path), columns=columns)  # type: ignore[arg-type]
    # When the same code runs on the preloaded frame and on a frame the runner loads
    with LocalSandbox(limits()) as preloading, LocalSandbox(limits(preload_datasets=0)) as loading:
        preloaded = preloading.run_detailed(SHOW, ref)
        loaded = loading.run_detailed(SHOW, ref)
    # Then it sees the same columns (repeats included), order, values and types
    assert preloaded.isolation["frame"] == "preloaded" and loaded.isolation["frame"] == "loaded"
    assert preloaded.investigation.success, preloaded.investigation.error
    assert preloaded.investigation.output == loaded.investigation.output
    if columns == ("id",):
        assert preloaded.investigation.output["columns"] == ["id", "id"]


def _worker() -> ModuleType:
    """frames.py as the sandbox's processes load it: through worker.py's package, without the engine."""
    spec = importlib.util.spec_from_file_location("iterate_sandbox_worker_under_test", WORKER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return importlib.import_module(module._package() + ".frames")


def test_select_columns_equals_load_frame_for_every_file_shape(tmp_path: Path) -> None:
    worker = _worker()
    plain = tmp_path / "plain.parquet"  # no names metadata: the stored names are used
    pq.write_table(pa.table({"x": ["1", None], "y": [1, 2], "z": ["a", "b"]}), plain)
    odd = tmp_path / "odd.parquet"  # names metadata that does not match the columns: never narrowed
    pq.write_table(
        pa.table({"x": ["1", "2"], "y": ["3", "4"]}).replace_schema_metadata(
            {b"iterate.names": json.dumps(["only"]).encode()}
        ),
        odd,
    )
    dup = with_names(tmp_path / "dup.parquet", ["k", "v", "k"], [["1", "2"], ["a", None], ["3", "4"]])  # type: ignore[list-item]
    wanted_lists = [None, [], ["x"], ["z", "x"], ["y"], ["only"], ["k"], ["v", "k"], ["nope"]]
    for path in (plain, odd, dup):
        frame, narrowable = worker.preload_frame(os.open(path, os.O_RDONLY), 1024)
        for wanted in wanted_lists:
            expected = worker.load_frame(os.open(path, os.O_RDONLY), wanted)
            got = worker.select_columns(frame, narrowable, wanted)
            pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_a_dataset_that_cannot_be_loaded_fails_as_before(tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not a parquet file PAR1")
    ref = DatasetRef(path=str(broken))
    with LocalSandbox(limits()) as preloading, LocalSandbox(limits(preload_datasets=0)) as loading:
        first = preloading.run("result = {'n': len(df)}", ref)
        again = preloading.run("result = {'n': len(df)}", ref)
        before = loading.run("result = {'n': len(df)}", ref)
        assert "preloads" not in preloading.stats()
    for result in (first, again, before):
        assert result.success is False and result.stopped == "crash"
        assert (result.error or "").startswith("sandbox setup failed: ")
    assert first.error == before.error


def test_a_dataset_over_the_preload_cap_is_loaded_by_each_run(dataset: Path) -> None:
    with LocalSandbox(limits(preload_max_mb=0)) as sandbox:
        outcome = sandbox.run_detailed(
            "result = {'n': len(df)}", DatasetRef(path=str(dataset), columns=("city",))
        )
        assert outcome.investigation.output == {"n": 8}
        assert outcome.isolation["frame"] == "loaded"


def test_close_leaves_no_process(tmp_path: Path) -> None:
    a, b = tagged(tmp_path / "a.parquet", "a"), tagged(tmp_path / "b.parquet", "b")
    sandbox = LocalSandbox(limits())
    for path in (a, b):
        assert sandbox.run("result = {'n': len(df)}", DatasetRef(path=str(path))).success
    assert sandbox._zygote is not None
    home, pids = str(sandbox._zygote.dir), [sandbox._zygote.proc.pid, *dataset_pids(sandbox)]
    assert len(pids) == 3 and processes_in(home)
    sandbox.close()
    assert all(gone(pid) for pid in pids)
    assert processes_in(home) == []
    assert sandbox.stats()["dataset_zygote_cpu_s"] > 0  # each reported its CPU as it stopped


def test_a_collected_sandbox_leaves_no_process(dataset: Path) -> None:
    sandbox = LocalSandbox(limits())
    assert sandbox.run("result = {'n': len(df)}", DatasetRef(path=str(dataset))).success
    assert sandbox._zygote is not None
    pids = [sandbox._zygote.proc.pid, *dataset_pids(sandbox)]
    del sandbox
    gc.collect()
    assert all(gone(pid) for pid in pids)


def test_no_zygote_outlives_a_killed_caller(dataset: Path) -> None:
    # Given a caller that started a zygote and a dataset zygote, then dies without closing anything
    script = (
        "import json, os, sys\n"
        "from iterate.ports import DatasetRef\n"
        "from iterate.sandbox import LocalSandbox, SandboxLimits\n"
        "s = LocalSandbox(SandboxLimits(timeout_s=10))\n"
        "assert s.run('result = {\"n\": len(df)}', DatasetRef(path=sys.argv[1])).success\n"
        "pids = [s._zygote.proc.pid] + [e.zygote.pid for e in s._datasets._entries.values()]\n"
        "print(json.dumps(pids), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(dataset)], capture_output=True, text=True, timeout=120
    )
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(pids) == 2
    # Then both stop by themselves
    assert all(gone(pid) for pid in pids)


def test_a_dataset_zygote_that_died_is_replaced(dataset: Path) -> None:
    ref = DatasetRef(path=str(dataset))
    with LocalSandbox(limits()) as sandbox:
        assert sandbox.run("result = {'n': len(df)}", ref).success
        (pid,) = dataset_pids(sandbox)
        # When it is killed from outside (as the OOM killer would)
        os.kill(pid, 9)
        assert gone(pid)
        # Then the next runs still succeed, on a new dataset zygote
        outcomes = [sandbox.run_detailed("result = {'n': len(df)}", ref) for _ in range(2)]
        assert [o.investigation.output for o in outcomes] == [{"n": 8}, {"n": 8}]
        assert outcomes[-1].isolation["frame"] == "preloaded"
        assert sandbox.stats()["preloads"] == 2 and pid not in dataset_pids(sandbox)


def _whole_table_frame(worker: ModuleType, path: Path, wanted: list[str] | None = None) -> pd.DataFrame:
    """The frame as the worker built it before it read column by column: the whole table at once."""
    table = pq.ParquetFile(path).read()
    if wanted is not None:
        written = worker.written_names(table.schema)
        picked = [i for i, name in enumerate(written) if name in set(wanted)]
        table = table.select(picked).replace_schema_metadata(
            {b"iterate.names": json.dumps([written[i] for i in picked]).encode()}
        )
    return worker._text_frame(table)


def test_a_frame_read_column_by_column_equals_the_whole_table_read_at_once(tmp_path: Path) -> None:
    # Given files of every shape: several row groups, nulls, a non-text column, text over many chunks,
    # names as written that repeat, no names metadata, and stored names that repeat
    worker = _worker()
    groups = tmp_path / "groups.parquet"
    rows = 10_000
    pq.write_table(
        pa.table(
            {
                "s": [None if i % 7 == 0 else f"v{i % 13}" for i in range(rows)],
                "n": list(range(rows)),
                "e": [""] * rows,
                "u": ["ü" * (i % 5) for i in range(rows)],
            }
        ),
        groups,
        row_group_size=999,
    )
    dup = with_names(tmp_path / "dup.parquet", ["k", "v", "k"], [["1", "2"], ["a", None], ["3", "4"]])  # type: ignore[list-item]
    stored_twice = tmp_path / "stored-twice.parquet"
    pq.write_table(
        pa.Table.from_arrays([pa.array(["1", None]), pa.array(["a", "b"])], names=["x", "x"]), stored_twice
    )
    empty = write_dataset(tmp_path / "empty.parquet", {"a": [], "b": []})
    for path in (groups, dup, stored_twice, empty):
        # When the worker loads it (whole, narrowed, or preloaded by a dataset zygote)
        for wanted in (None, ["s", "u"], ["k"], ["x"], ["b"]):
            got = worker.load_frame(os.open(path, os.O_RDONLY), wanted)
            narrowed = (
                wanted is not None and worker.load_frame_narrowed(os.open(path, os.O_RDONLY), wanted)[1]
            )
            expected = _whole_table_frame(worker, path, wanted if narrowed else None)
            # Then it holds the same names, order, values and dtypes as the whole table read at once
            pd.testing.assert_frame_equal(got, expected, check_exact=True)
        preloaded, _ = worker.preload_frame(os.open(path, os.O_RDONLY), 1024)
        pd.testing.assert_frame_equal(preloaded, _whole_table_frame(worker, path), check_exact=True)
        # And each column is one chunk of large_string (text and offsets in one buffer each)
        for i in range(preloaded.shape[1]):
            chunks = preloaded.iloc[:, i].array._pa_array
            assert chunks.type == pa.large_string() and chunks.num_chunks == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_runners_of_a_dataset_zygote_allocate_with_malloc_and_the_frame_stays_readable(
    tmp_path: Path,
) -> None:
    # Given a frame preloaded by the worker's own code, in a process of its own (the pool is per process)
    path = tagged(tmp_path / "d.parquet", "z", rows=1000)
    code = f"""
import importlib, importlib.util, json, os
spec = importlib.util.spec_from_file_location("w", {str(WORKER)!r})
w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
frames = importlib.import_module(w._package() + ".frames")
zygote = importlib.import_module(w._package() + ".zygote")
import pyarrow as pa
frame, _ = frames.preload_frame(os.open({str(path)!r}, os.O_RDONLY), 1024)
before = pa.default_memory_pool().backend_name
zygote._runners_allocate_plainly()
after = pa.default_memory_pool().backend_name
upper = frame["a"].str.upper()
print(json.dumps([before, after, upper.iloc[999], frame["a"].iloc[999]]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, after, upper, kept = json.loads(out.strip().splitlines()[-1])
    # Then what the runners allocate comes from malloc, and the frame made before is read as ever
    assert before != "system" and after == "system"
    assert (upper, kept) == ("Z-999", "z-999")


def test_a_dataset_over_the_memory_available_is_loaded_by_each_run(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iterate.memory

    # Given a machine (or a cgroup) with almost no memory left, and the default preload cap
    monkeypatch.setattr(iterate.memory, "available_memory_mb", lambda: 0)
    with LocalSandbox(limits()) as sandbox:
        outcome = sandbox.run_detailed(
            "result = {'n': len(df)}", DatasetRef(path=str(dataset), columns=("city",))
        )
    # Then the frame is not preloaded: the run loads its own columns and succeeds
    assert outcome.investigation.output == {"n": 8}
    assert outcome.isolation["frame"] == "loaded"


def test_the_preload_cap_follows_the_memory_available(monkeypatch: pytest.MonkeyPatch) -> None:
    import iterate.memory

    with LocalSandbox(limits(preload_max_mb=4096)) as sandbox:
        monkeypatch.setattr(iterate.memory, "available_memory_mb", lambda: 2000)
        assert sandbox._preload_cap_mb() == 1500
        monkeypatch.setattr(iterate.memory, "available_memory_mb", lambda: 100_000)
        assert sandbox._preload_cap_mb() == 4096
        monkeypatch.setattr(iterate.memory, "available_memory_mb", lambda: None)
        assert sandbox._preload_cap_mb() == 4096
