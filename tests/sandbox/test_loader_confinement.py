"""The dataset zygote parses data.parquet outside any jail: it is confined first, and its runners are not the worse for it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from host_listener import Listener

from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.sandbox.model import Counters
from iterate.sandbox.zygotes import WORKER, DatasetZygote

pytestmark = pytest.mark.unit

BASE = {"timeout_s": 10.0, "memory_mb": 512, "max_output_bytes": 100_000}
# Every mode the sandbox suites exercise with a dataset zygote.
MODES = {
    "root_namespaces": {},
    "user_namespace_first": {"user_namespace_first": True},
    "namespaces_off": {"namespaces": False},
}
NAMESPACE_MODES = ("root_namespaces", "user_namespace_first")


def limits(mode: str, **overrides: Any) -> SandboxLimits:
    return SandboxLimits(**{**BASE, **MODES[mode], **overrides})


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def probed(sandbox: LocalSandbox, dataset: Path, probe: dict[str, Any]) -> DatasetZygote:
    """A dataset zygote started as `run` starts one, which also tries `probe` once confined, before loading."""
    base = sandbox._running_zygote()
    assert base is not None
    data_fd = os.open(dataset, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return DatasetZygote(
            base,
            data_fd,
            max_mb=sandbox.limits.preload_max_mb,
            timeout_s=60,
            counters=Counters(),
            runners={**sandbox._runner_settings(), "probe": probe},
        )
    finally:
        os.close(data_fd)


def interfaces(pid: int) -> list[str]:
    """The network interfaces of the namespace `pid` is in (/proc/<pid>/net/dev is per namespace)."""
    lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)


def comparable(isolation: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in isolation.items() if k not in ("frame", "loader")}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_loader_cannot_reach_the_network(
    mode: str, dataset: Path, listener: Listener, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the interpreter's paths")
    with LocalSandbox(limits(mode)) as sandbox:
        zygote = probed(sandbox, dataset, {"tcp": ["127.0.0.1", listener.port], "read": str(secret)})
        try:
            loader = zygote.loader
            refused = loader["network"].startswith("host (namespaces refused")
            if mode in NAMESPACE_MODES and refused and os.geteuid() != 0:
                pytest.skip(f"namespaces refused here: {loader['network']}")
            if mode not in NAMESPACE_MODES and "no TCP" not in loader["landlock"]:
                pytest.skip(f"Landlock with network rules unavailable: {loader['landlock']}")
            # Tried from inside the loader, confined, where the Parquet reader then runs.
            assert loader["probe"]["tcp"].startswith("refused")
            assert listener.accepted == 0
            assert loader["no_new_privs"] is True
            assert loader["limits_while_loading"]["file_size"] == 0
            if mode in NAMESPACE_MODES:
                assert loader["network"] == "namespace"
                assert loader["namespaces"] == ("user" if mode == "user_namespace_first" else "root")
                # Seen from outside: its network namespace is not ours and holds a loopback only (down).
                assert os.stat(f"/proc/{zygote.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
                assert interfaces(zygote.pid) == ["lo"]
            else:
                # No namespaces wanted: Landlock alone keeps TCP and the rest of the filesystem out.
                assert loader["network"] == "host (namespaces off)"
                assert loader["probe"]["read"].startswith("refused")
        finally:
            zygote.close()


def test_the_probe_would_see_an_unconfined_loader(listener: Listener, tmp_path: Path) -> None:
    """The check above is not vacuous: from the host, the same probe connects and reads."""
    spec = importlib.util.spec_from_file_location("iterate_sandbox_worker_probe", WORKER)
    assert spec and spec.loader
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    loader = importlib.import_module(worker._package() + ".loader")
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    found = loader._probe({"tcp": ["127.0.0.1", listener.port], "read": str(secret)})
    assert found == {"tcp": "connected", "read": "read"}


@pytest.mark.parametrize("mode", list(MODES))
def test_runners_of_a_confined_loader_are_isolated_as_before(mode: str, dataset: Path) -> None:
    code = "result = {'n': len(df), 'cities': sorted(set(df['city']))}"
    ref = DatasetRef(path=str(dataset))
    with LocalSandbox(limits(mode)) as preloading, LocalSandbox(limits(mode, preload_datasets=0)) as loading:
        preloaded = preloading.run_detailed(code, ref)
        loaded = loading.run_detailed(code, ref)
    assert preloaded.investigation.success and loaded.investigation.success
    assert preloaded.investigation.output == loaded.investigation.output
    assert preloaded.isolation["frame"] == "preloaded" and loaded.isolation["frame"] == "loaded"
    assert comparable(preloaded.isolation) == comparable(loaded.isolation)
    assert preloaded.isolation["loader"]["no_new_privs"] is True
    if os.geteuid() == 0 and mode in NAMESPACE_MODES:
        assert preloaded.isolation["filesystem"] == "jail"
        assert preloaded.isolation["capabilities"] == "dropped"
        assert preloaded.isolation["network"] == "namespace"
        assert preloaded.isolation["namespaces"] == ("user" if mode == "user_namespace_first" else "root")
        assert preloaded.isolation["loader"]["network"] == "namespace"


def test_runners_under_the_loaders_landlock_keep_their_limits(dataset: Path) -> None:
    """Namespaces off: the loader's Landlock hides /proc from the runners, which size memory from it."""
    ref = DatasetRef(path=str(dataset))
    with LocalSandbox(limits("namespaces_off", timeout_s=5)) as sandbox:
        bomb = sandbox.run_detailed("x = bytearray(2 * 1024 ** 3)\nresult = {'n': len(x)}", ref)
        printed = sandbox.run_detailed("print('{\"n\": %d}' % len(df))", ref)
        after = sandbox.run_detailed("result = {'n': len(df)}", ref)
    assert bomb.isolation["frame"] == "preloaded"
    assert bomb.investigation.stopped == "memory"
    # Nothing the loader lowered while loading (file size, open files) is left lowered for the runners.
    assert printed.investigation.success and printed.investigation.output == {"n": 8}
    assert after.investigation.success and after.investigation.output == {"n": 8}
