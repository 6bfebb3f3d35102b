"""LocalSandbox: the Sandbox port as a locked-down subprocess (the default on a laptop, in tests and in the Lambda)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

from iterate.contracts import CodeInvestigation, StopReason
from iterate.ports import DatasetRef
from iterate.sandbox import oslayers
from iterate.sandbox.policy import check_policy

WORKER = Path(__file__).with_name("worker.py")
EXIT_SIGNAL_BASE = 128
STOP_REASONS = frozenset(get_args(StopReason))
# The child starts with nothing from the caller's environment: no keys, no AWS credentials.
CHILD_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class SandboxError(Exception):
    """The sandbox itself could not be used (missing dataset, no interpreter): not a verdict on the code."""


class _ZygoteGone(SandboxError):
    """A zygote was not there to take a job, or dropped it before starting it: the job may go elsewhere."""


@dataclass(frozen=True)
class SandboxLimits:
    """What one investigation may use. `namespaces=None` tries Linux namespaces and falls back when refused."""

    timeout_s: float = 30.0
    memory_mb: int = 8192
    max_output_bytes: int = 1_000_000
    setup_allowance_s: float = 10.0
    scratch_mb: int = 16
    # Files the jail's tmpfs may hold (its own mount points and binds take a few hundred).
    scratch_inodes: int = 4096
    max_processes: int = 256
    namespaces: bool | None = None
    enforce_policy: bool = True
    # Fork each investigation from a process that imported pandas once (a zygote) instead of starting
    # Python afresh: ~0.05 s instead of ~0.4 s per run. Off where one sandbox runs one investigation (Lambda).
    prefork: bool = True
    # Try a user namespace before plain namespaces (what a non-root account gets); for tests of that path.
    user_namespace_first: bool = False
    # With prefork, each dataset's frame is loaded once by a "dataset zygote" forked from the zygote, and
    # every investigation of that dataset is forked from it (isolated the same way) instead of reading the
    # file again: a 1M-row file costs ~1.5 s of CPU to load. How many dataset zygotes stay alive (the least
    # recently used is closed first; 0 loads the frame in every investigation), the estimated in-memory
    # size above which a dataset is not preloaded, and how long its load may take (outside any job's time).
    preload_datasets: int = 2
    preload_max_mb: int = 4096
    preload_timeout_s: float = 300.0
    # The in-process layers (AST policy, restricted builtins, audit hook, import allowlist finder): early,
    # friendly refusals only. False (ITERATE_SANDBOX_INPROCESS_CHECKS=0) is for tests and red teams: the
    # OS layers must contain everything without them.
    inprocess_checks: bool = True
    # A cgroup per run (memory and tasks of the whole tree, and the kill of everything in it): None uses
    # one where it can be made (root, cgroup v1 memory+pids or a delegated v2), False never (tests of the
    # fallback: RLIMIT_NPROC on the run's uid, and this process summing the tree's memory).
    cgroup: bool | None = None

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> SandboxLimits:
        """Limits from an `iterate.settings.Settings` (or anything with the same sandbox_* attributes)."""
        checks = bool(getattr(settings, "sandbox_inprocess_checks", True))
        limits = cls(
            timeout_s=float(settings.sandbox_timeout_s),
            memory_mb=int(settings.sandbox_memory_mb),
            max_output_bytes=int(settings.sandbox_max_output_bytes),
            inprocess_checks=checks,
            enforce_policy=checks,
        )
        return replace(limits, **overrides)


@dataclass
class SandboxOutcome:
    """A run's CodeInvestigation plus how it was isolated and what the runtime guard refused."""

    investigation: CodeInvestigation
    isolation: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    # CPU seconds of the processes that ran it, when a zygote reported them (not on a timeout).
    cpu_s: float | None = None
    # What the supervisor and this process saw from outside the run (refusals, limits, leftovers).
    supervisor: dict[str, Any] = field(default_factory=dict)


# What investigation code may find: the standard library and these packages (pandas and what it and
# the runner need), nothing else that is installed.
SANDBOX_PACKAGES = ("pandas", "numpy", "pyarrow", "dateutil", "six", "pytz", "tzdata")


@dataclass(frozen=True)
class ImportView:
    """Paths of the sandbox's import view, computed once per process.

    `python_paths`: every path the runner reads (standard library, lib-dynload, allowed packages);
    `package_paths`: the allowed packages alone; `site_masks`: every other site directory, hidden in the
    jail; `landlock_paths`: what Landlock lets a runner without a jail read (site directories left out);
    `sys_path`: the runner's sys.path.
    """

    python_paths: tuple[str, ...]
    package_paths: tuple[str, ...]
    site_masks: tuple[str, ...]
    landlock_paths: tuple[str, ...]
    landlock_dirs: tuple[str, ...]
    sys_path: tuple[str, ...]
    packages: tuple[str, ...]
    readable_by_others: bool


def _expand(path: str, masks: tuple[str, ...], listed: list[str]) -> list[str]:
    """`path`, or its entries (recursively) when a masked directory lies inside it (Landlock allows trees).

    A directory split this way goes to `listed`: it may be listed (the import system needs that to find
    modules in it), while the masked directory's files stay unreadable.
    """
    inside = [m for m in masks if m.startswith(path.rstrip("/") + "/")]
    if not inside or not os.path.isdir(path):
        return [path]
    listed.append(path)
    found: list[str] = []
    for name in sorted(os.listdir(path)):
        child = os.path.join(path, name)
        if child not in masks:
            found += _expand(child, masks, listed)
    return found


_VIEW: list[ImportView] = []


def import_view() -> ImportView:
    if _VIEW:
        return _VIEW[0]
    import importlib.util
    import site
    import sysconfig

    from iterate.sandbox.confine.landlock import SYSTEM_READ_PATHS

    real = os.path.realpath
    stdlib = real(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["stdlib"])
    dynload = real(os.path.join(stdlib, "lib-dynload"))
    packages: list[str] = []
    paths: list[str] = []
    for name in SANDBOX_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or (not spec.origin and not spec.submodule_search_locations):
            continue
        packages.append(name)
        locations = list(spec.submodule_search_locations or []) or [str(spec.origin)]
        for location in locations:
            paths.append(real(location))
            libs = real(os.path.join(os.path.dirname(real(location)), f"{name}.libs"))  # vendored .so files
            if os.path.isdir(libs):
                paths.append(libs)
    paths = list(dict.fromkeys(paths))
    parents = list(dict.fromkeys(os.path.dirname(p) for p in paths))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = set(site.getsitepackages()) | {site.getusersitepackages(), *parents}
    for prefix in ("/usr", "/usr/local", sys.base_prefix, sys.prefix):
        for lib in ("lib", "lib64"):
            for name in ("site-packages", "dist-packages"):
                candidates.add(os.path.join(prefix, lib, version, name))
                candidates.add(os.path.join(prefix, lib, "python3", name))
    # Every other directory on sys.path (the engine's own, a Lambda's /var/task and /opt/python layers).
    candidates |= {p for p in sys.path if p and not p.endswith(".zip")}
    masks = tuple(
        sorted(
            {real(c) for c in candidates if c and os.path.isdir(c)} - {stdlib, dynload} - set(paths) - {"/"}
        )
    )
    # A mask holding the standard library (a sys.path entry) would hide it: only site directories are masks.
    masks = tuple(m for m in masks if not stdlib.startswith(m + "/") and m != stdlib)
    python_paths = tuple(dict.fromkeys([stdlib, dynload, *paths]))
    landlock: list[str] = []
    listed: list[str] = []
    for path in [*python_paths, *SYSTEM_READ_PATHS, os.devnull]:
        landlock += _expand(path, masks, listed) if path not in paths else [path]
    view = ImportView(
        python_paths=python_paths,
        package_paths=tuple(paths),
        site_masks=masks,
        landlock_paths=tuple(dict.fromkeys(landlock)),
        landlock_dirs=tuple(dict.fromkeys(listed)),
        sys_path=tuple(dict.fromkeys([stdlib, dynload, *parents])),
        packages=tuple(packages),
        readable_by_others=oslayers.readable_by_others(python_paths),
    )
    _VIEW.append(view)
    return view


def _child_env() -> dict[str, str]:
    parents = dict.fromkeys(os.path.dirname(p) for p in import_view().package_paths)
    return dict(CHILD_ENV, ITERATE_SANDBOX_PATHS=os.pathsep.join(parents))


def _host_root() -> bool:
    """Root in the initial user namespace: the only case where the sandbox can hand a run another uid."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    try:
        return Path("/proc/self/uid_map").read_text().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def _protect_caller() -> None:
    """Runs here may share this process's uid (no other uid to give them): make it non-dumpable, so that
    no process of that uid reads its memory or environment (API keys, AWS credentials on Lambda) through
    /proc, or attaches to it, whatever layer above has fallen. Core dumps of this process go with it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


def _tasks_of(uid: int) -> int:
    """Tasks (threads included) of `uid` now: RLIMIT_NPROC counts them all."""
    total = 0
    for pid in oslayers.pids_of_uid(uid):
        info = oslayers.proc_info(pid)
        total += info.threads if info is not None else 1
    return total


class LocalSandbox:
    """Runs investigation code in a fresh, isolated Python process; implements `iterate.ports.Sandbox`."""

    def __init__(self, limits: SandboxLimits | None = None, *, python: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self._view = import_view()
        if sys.platform == "linux" and not (
            _host_root() and (self.limits.namespaces is not False or self._view.readable_by_others)
        ):
            _protect_caller()
        self._zygote: _Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._zygote_failed = False
        self._counters = _Counters()
        self._datasets = _DatasetZygotes(max(0, self.limits.preload_datasets))

    def close(self) -> None:
        """Stop the zygotes, if any were started (also done when the sandbox is garbage-collected).

        A dataset zygote still serving a run stops as soon as that run ends.
        """
        self._datasets.close()
        with self._zygote_lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None

    def stats(self) -> dict[str, float]:
        """What this sandbox did: `preloads` (datasets loaded by a dataset zygote), `preloaded_runs`, and
        CPU seconds its processes reported (`job_cpu_s`: runners; `dataset_zygote_cpu_s`: dataset zygotes,
        counted when they stop; `preload_cpu_s`: the part of it spent loading)."""
        return self._counters.snapshot()

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _running_zygote(self) -> _Zygote | None:
        if not self.limits.prefork or self._zygote_failed:
            return None
        with self._zygote_lock:
            if self._zygote is not None and not self._zygote.alive():
                self._zygote.close()
                self._zygote = None
            if self._zygote is None:
                try:
                    self._zygote = _Zygote(self.python)
                except (OSError, TimeoutError, subprocess.SubprocessError):
                    self._zygote_failed = True  # fresh processes from now on: slower, same isolation
                    return None
            return self._zygote

    def run(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> CodeInvestigation:
        """Run `code` against the dataset; never raises for anything the code does."""
        return self.run_detailed(code, data, timeout_s=timeout_s).investigation

    def refuse(self, code: str) -> CodeInvestigation | None:
        """The static policy's verdict alone: a failed CodeInvestigation when it refuses, else None."""
        if not self.limits.enforce_policy:
            return None
        started = time.perf_counter()
        violations = check_policy(code)
        if not violations:
            return None
        reasons = "; ".join(str(v) for v in violations[:10])
        return self._verdict(
            code, started, stopped="policy", error=f"refused by the static policy: {reasons}"
        )

    def run_detailed(self, code: str, data: DatasetRef, *, timeout_s: float | None = None) -> SandboxOutcome:
        """Like `run`, with the isolation actually used and the runtime guard's refusals."""
        started = time.perf_counter()
        timeout = float(timeout_s if timeout_s is not None else self.limits.timeout_s)
        refusal = self.refuse(code)
        if refusal is not None:
            violations = [str(v) for v in check_policy(code)]
            return SandboxOutcome(refusal, isolation={"stage": "static_policy"}, violations=violations)
        return self._execute(code, data, timeout, started)

    def _execute(
        self,
        code: str,
        data: DatasetRef,
        timeout: float,
        started: float,
        batch: list[dict[str, Any]] | None = None,
    ) -> SandboxOutcome:
        """One sandbox process for `code` (or for a `batch` of {"code", "columns"}, see `run_batch`)."""
        if not data.path:
            raise SandboxError("LocalSandbox needs a local dataset path (DatasetRef.path)")
        if not Path(data.path).is_file():
            raise SandboxError(f"dataset not found: {data.path}")

        tmp = Path(tempfile.mkdtemp(prefix="iterate-sandbox-"))
        try:
            zygote = self._running_zygote()
            if zygote is None:
                return self._spawn(code, data.path, timeout, tmp, started, data.columns, batch)
            if self.limits.preload_datasets > 0:
                outcome = self._run_preloaded(
                    zygote, code, data.path, timeout, tmp, started, data.columns, batch
                )
                if outcome is not None:
                    return outcome
            return self._fork_from(zygote, code, data.path, timeout, tmp, started, data.columns, batch)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run_batch(
        self,
        codes: Sequence[str],
        data: DatasetRef,
        *,
        columns: Sequence[tuple[str, ...] | None] | None = None,
        timeout_s: float | None = None,
    ) -> list[CodeInvestigation]:
        """Several pieces of trusted code (the engine's own templates) in one sandbox process, in order.

        Each runs in its own namespace (its own `df` object, `result`, builtins and stdout) on the frame a
        single `run(code, replace(data, columns=columns[i]))` would give it (default: `data.columns` for
        all); the in-process checks apply to each, the OS layers and the limits (`timeout_s` included) to
        the process as a whole. Returns one CodeInvestigation per code, in order: an item's own verdict,
        or, when the process as a whole failed (timeout, memory, a refusal by any layer), that failure for
        every item. `execution_time_ms` is the whole process's and `batch_size` says how many shared it.
        The caller decides what to do with failures (the investigation loop runs those items alone).
        Never raises for anything the code does.
        """
        return self.run_batch_detailed(codes, data, columns=columns, timeout_s=timeout_s)[1]

    def run_batch_detailed(
        self,
        codes: Sequence[str],
        data: DatasetRef,
        *,
        columns: Sequence[tuple[str, ...] | None] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[SandboxOutcome | None, list[CodeInvestigation]]:
        """Like `run_batch`, with the batch process's own outcome (None when no process was started:
        the static policy refused every code)."""
        started = time.perf_counter()
        timeout = float(timeout_s if timeout_s is not None else self.limits.timeout_s)
        wanted = list(columns) if columns is not None else [data.columns] * len(codes)
        if len(wanted) != len(codes):
            raise ValueError("run_batch needs one columns entry per code")
        results: list[CodeInvestigation | None] = [self.refuse(code) for code in codes]
        todo = [i for i, found in enumerate(results) if found is None]
        outcome = None
        if todo:
            union: tuple[str, ...] | None = None
            if all(wanted[i] is not None for i in todo):
                union = tuple(dict.fromkeys(name for i in todo for name in wanted[i] or ()))
            batch = [
                {"code": codes[i], "columns": list(wanted[i] or ()) if wanted[i] is not None else None}
                for i in todo
            ]
            outcome = self._execute("", replace(data, columns=union), timeout, started, batch)
            items = self._batch_items(outcome, batch)
            for i, item in zip(todo, items, strict=True):
                results[i] = item.model_copy(update={"code": codes[i], "batch_size": len(todo)})
        return outcome, [r for r in results if r is not None]

    @staticmethod
    def _batch_items(outcome: SandboxOutcome, batch: list[dict[str, Any]]) -> list[CodeInvestigation]:
        """Per-item investigations from a batch process's outcome (all failed when the process failed)."""
        whole = outcome.investigation
        output = whole.output if isinstance(whole.output, dict) else {}
        raw = output.get("items")
        if not whole.success or not isinstance(raw, list) or len(raw) != len(batch):
            failure = {
                "success": False,
                "output": None,
                "stopped": whole.stopped or "crash",
                "error": f"the batch failed: {whole.error or 'no per-item report'}",
            }
            return [whole.model_copy(update=failure) for _ in batch]
        items: list[CodeInvestigation] = []
        for entry in raw:
            entry = entry if isinstance(entry, dict) else {}
            stopped: Any = entry.get("stopped") if entry.get("stopped") in STOP_REASONS else "error"
            error: str | None = entry.get("error") if isinstance(entry.get("error"), str) else None
            if entry.get("success") is True and entry.get("stopped") is None:
                if not isinstance(entry.get("output"), dict):
                    stopped, error = "invalid_output", "the report's output is not a JSON object"
                else:
                    items.append(whole.model_copy(update={"output": entry["output"], "error": None}))
                    continue
            items.append(
                whole.model_copy(
                    update={
                        "success": False,
                        "output": None,
                        "stopped": stopped,
                        "error": (error or "the investigation failed")[:4000],
                    }
                )
            )
        return items

    def _run_preloaded(
        self,
        base: _Zygote,
        code: str,
        path: str,
        timeout: float,
        tmp: Path,
        started: float,
        columns: tuple[str, ...] | None,
        batch: list[dict[str, Any]] | None = None,
    ) -> SandboxOutcome | None:
        """Run on the zygote holding this dataset's frame (started on first use); None when there is none.

        The dataset is identified by what the file is now (path, device, inode, size, times), never by
        anything the code says: a rewritten file gets a new dataset zygote, and one holding another
        dataset's frame is never used.
        """
        entry = self._dataset_entry(base, path)
        if entry is None or entry.zygote is None:
            return None
        try:
            outcome = self._fork_from(entry.zygote, code, None, timeout, tmp, started, columns, batch)
        except _ZygoteGone:  # it stopped before taking the job: the job runs from the base zygote
            self._datasets.discard(entry)
            return None
        finally:
            self._datasets.release(entry)
        self._counters.add("preloaded_runs")
        return outcome

    def _dataset_entry(self, base: _Zygote, path: str, arrow: Any = None) -> _Entry | None:
        """The (acquired) entry of the dataset zygote holding this file's frame, started on first use.

        `arrow`: the file's content already in memory (see `prepare`), loaded from a sealed memfd instead.
        """
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            identity = _identity(path, os.fstat(data_fd))

            def start() -> _DatasetZygote:
                source = None
                if arrow is not None:
                    try:
                        source = _sealed_arrow(arrow)
                    except Exception:  # no memfd here (not Linux), or the table would not serialise
                        source = None  # the file it was written to holds the same: load that instead
                try:
                    zygote = self._start_dataset(base, data_fd if source is None else source)
                finally:
                    if source is not None:
                        os.close(source)
                if _identity(path, os.fstat(data_fd)) != identity:  # written to while it loaded
                    zygote.close()
                    raise SandboxError("the dataset changed while it was being preloaded")
                return zygote

            return self._datasets.acquire(identity, start)
        finally:
            os.close(data_fd)

    def _start_dataset(self, base: _Zygote, data_fd: int) -> _DatasetZygote:
        return _DatasetZygote(
            base,
            data_fd,
            max_mb=self._preload_cap_mb(),
            timeout_s=self.limits.preload_timeout_s,
            counters=self._counters,
            runners=self._runner_settings(),
        )

    def _preload_cap_mb(self) -> int:
        """The size above which a dataset is not preloaded: the setting, or less where the memory available now
        (the system's, or an enclosing cgroup's: a container, a laptop's limit) would not hold the frame with a
        quarter of it left for the runners. Preloaded anyway, a 5M-row frame (1.9 GB) was killed by the kernel
        in a run limited to 2 GB; each runner then loaded its own columns, as it does when it is not preloaded."""
        from iterate.memory import available_memory_mb

        available = available_memory_mb()
        cap = self.limits.preload_max_mb
        return cap if available is None else min(cap, available * 3 // 4)

    def _runner_settings(self) -> dict[str, Any]:
        """What a dataset zygote must know of its runners to confine its own load without hindering them."""
        view = self._view
        return {
            "namespaces": self.limits.namespaces is not False and sys.platform == "linux",
            "user_namespace_first": self.limits.user_namespace_first,
            "python_paths": list(view.python_paths),
            "landlock_paths": list(view.landlock_paths),
            "landlock_dirs": list(view.landlock_dirs),
        }

    def prepare(self, data: DatasetRef | None = None, *, arrow: Any = None) -> threading.Thread | None:
        """Start the zygote, and load `data`'s frame into a dataset zygote, in the background, now.

        A hint for the pipeline, which knows ahead which dataset its investigations will run on: the work
        overlaps the steps before them instead of delaying the first investigation (the pipeline asks once
        the profile step has handed its memory back, so the frame is never held beside the detectors'
        arrays). `arrow`: the caller's own copy of exactly what `data.path` holds
        (`iterate.io.parquet_text.text_arrow` of the table it wrote there): handed over in a sealed memfd, it
        spares the dataset zygote parsing the file (1.3 s of CPU on 1M rows × 20 columns; 0.1 s this way);
        the pipeline no longer keeps such a copy (docs/large-files.md). Nothing is decided
        here; whatever fails is met again (and reported) by `run`. Returns the thread, for tests.
        """
        if not self.limits.prefork or self._zygote_failed:
            return None
        path = data.path if data is not None else None

        def warm() -> None:
            try:
                zygote = self._running_zygote()
                if zygote is None or not path or self.limits.preload_datasets <= 0:
                    return
                entry = self._dataset_entry(zygote, path, arrow)
                if entry is not None:
                    self._datasets.release(entry)
            except Exception:  # a hint only: run() meets the same failure and reports it
                return

        thread = threading.Thread(target=warm, name="iterate-sandbox-prepare", daemon=True)
        thread.start()
        return thread

    def _job(
        self,
        code: str,
        timeout: float,
        tmp: Path,
        columns: tuple[str, ...] | None,
        cage: _Cage,
        batch: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        workdir = tmp / "work"
        workdir.mkdir(exist_ok=True)
        view = self._view
        return {
            "code": code,
            **({"batch": batch} if batch is not None else {}),
            "columns": list(columns) if columns is not None else None,
            "timeout_s": timeout,
            "memory_mb": self.limits.memory_mb,
            "max_output_bytes": self.limits.max_output_bytes,
            "max_processes": self.limits.max_processes,
            "scratch_mb": self.limits.scratch_mb,
            "scratch_inodes": self.limits.scratch_inodes,
            "inprocess_checks": self.limits.inprocess_checks,
            **self._runner_settings(),
            "package_paths": list(view.package_paths),
            "site_masks": list(view.site_masks),
            "sys_path": list(view.sys_path),
            "packages": list(view.packages),
            "paths_readable": view.readable_by_others,
            "host_root": cage.host_root,
            "run_uid": cage.uid,
            "cgroup": cage.cgroup is not None,
            "cgroups": len(cage.fds),
            "caller_tasks": cage.caller_tasks,
            "jail_root": str(tmp / "jail"),
            "workdir": str(workdir),
        }

    def _fork_from(
        self,
        zygote: _Zygote | _DatasetZygote,
        code: str,
        path: str | None,
        timeout: float,
        tmp: Path,
        started: float,
        columns: tuple[str, ...] | None = None,
        batch: list[dict[str, Any]] | None = None,
    ) -> SandboxOutcome:
        """One job through a zygote; `path` None for a dataset zygote (its runners have the frame)."""
        fresh = os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        cage = _Cage(self.limits)
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if path is not None else None
        stderr_path = tmp / "stderr.txt"
        stderr_fd = os.open(stderr_path, os.O_WRONLY | fresh, 0o600)
        # The order the handler expects: stderr, the dataset when the runner reads it, cgroup.procs.
        fds = [stderr_fd] + ([data_fd] if data_fd is not None else []) + cage.fds
        try:
            job = self._job(code, timeout, tmp, columns, cage, batch)
            conn = _send_job(zygote.path, job, fds)
            seen = _drive(
                conn, cage, timeout=timeout, setup_s=self.limits.setup_allowance_s, limits=self.limits
            )
        finally:
            for fd in [stderr_fd] + ([data_fd] if data_fd is not None else []):
                os.close(fd)
            cage.release()
        if seen.cpu_s is not None:
            self._counters.add("job_cpu_s", seen.cpu_s)
        stderr_tail = stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        outcome = self._outcome(code, started, seen, timeout, stderr_tail)
        outcome.cpu_s = seen.cpu_s
        return outcome

    def _spawn(
        self,
        code: str,
        path: str,
        timeout: float,
        tmp: Path,
        started: float,
        columns: tuple[str, ...] | None = None,
        batch: list[dict[str, Any]] | None = None,
    ) -> SandboxOutcome:
        """One job in a fresh process (no zygote): it supervises its runner like a zygote's handler."""
        cage = _Cage(self.limits)
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        stderr_path = tmp / "stderr.txt"
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        job = self._job(code, timeout, tmp, columns, cage, batch)
        job.update(data_fd=data_fd, host_fd=child.fileno(), cgroup_fds=cage.fds)
        proc = None
        try:
            with open(stderr_path, "wb") as stderr:
                proc = subprocess.Popen(
                    [self.python, "-I", "-B", str(WORKER)],
                    stdin=subprocess.PIPE,
                    stdout=stderr,
                    stderr=stderr,
                    env=_child_env(),
                    cwd=job["workdir"],
                    pass_fds=(data_fd, child.fileno(), *cage.fds),
                    start_new_session=True,
                    close_fds=True,
                )
            child.close()
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps(job).encode())
                proc.stdin.close()
            try:
                seen = _drive(
                    host, cage, timeout=timeout, setup_s=self.limits.setup_allowance_s, limits=self.limits
                )
            except _ZygoteGone as exc:  # the process died before it said anything
                seen = _Seen(lost=f"the sandbox process did not start: {exc}")
        finally:
            host.close()
            with contextlib.suppress(OSError):
                child.close()
            if proc is not None:
                self._kill_group(proc)
            os.close(data_fd)
            cage.release()
        stderr_tail = stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        return self._outcome(code, started, seen, timeout, stderr_tail)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        """The supervisor has ended (or stopped answering): nothing of its session stays."""
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _outcome(
        self, code: str, started: float, seen: _Seen, timeout: float, stderr_tail: str
    ) -> SandboxOutcome:
        """The verdict, decided here from what the supervisor and the cage saw; the code's report counts
        only where neither saw anything wrong, and then only if it is well formed."""
        supervisor = seen.supervisor
        report = supervisor.get("report") if isinstance(supervisor.get("report"), dict) else None
        refusals = [str(r) for r in supervisor.get("refusals") or []][:20]
        in_process = [str(v) for v in (report or {}).get("violations") or []][:20]
        violations = in_process + [f"{r} refused by the seccomp filter" for r in refusals]
        status = supervisor.get("status")
        armed = bool(supervisor.get("armed"))
        if supervisor.get("task_limit"):  # counted by the supervisor through the seccomp listener
            seen.processes = True
        isolation = dict(supervisor.get("isolation") or {})
        observed = {
            "refusals": refusals,
            "timed_out": seen.timed_out,
            "memory_limit": seen.memory,
            "process_limit": seen.processes,
            "leftovers": seen.leftovers,
            "ipc_left": seen.ipc_left,
            "cleanup": seen.cleanup,
            "exit_status": status,
            "armed": armed,
        }
        if seen.cgroup_events:
            observed["cgroup_events"] = seen.cgroup_events
        isolation["supervisor"] = {k: v for k, v in observed.items() if v not in (None, [], False)}

        def failed(stopped: StopReason, error: str) -> SandboxOutcome:
            return SandboxOutcome(
                self._verdict(code, started, stopped=stopped, error=error),
                isolation=isolation,
                violations=violations,
                stderr_tail=stderr_tail,
                supervisor=observed,
            )

        # What was seen from outside decides first; the code's own words cannot undo any of it.
        if seen.leftovers:
            return failed("crash", f"processes of the run could not be removed: {seen.leftovers[:3]}")
        if seen.lost:
            return failed("crash", seen.lost)
        if refusals:
            return failed("policy", "the OS sandbox's seccomp filter refused: " + "; ".join(refusals[:5]))
        if seen.ipc_left:
            return failed(
                "policy",
                "the run left IPC objects behind (the host's sweep removed them): "
                + "; ".join(seen.ipc_left[:3]),
            )
        if seen.memory:
            return failed("memory", "the run's processes together went past the memory budget")
        if seen.processes:
            limit = self.limits.max_processes
            return failed("policy", f"the run reached its limit of {limit} processes and threads")
        if seen.timed_out:
            return failed("timeout", f"wall-clock timeout: stopped after {timeout:g} s")
        if supervisor.get("report_problem") == "output_size":
            return failed("output_size", f"the report went past {self.limits.max_output_bytes * 2} bytes")
        if not isinstance(status, int):
            return failed("crash", "the sandbox supervisor gave no verdict")
        if status != 0:
            sig = status - EXIT_SIGNAL_BASE if status > EXIT_SIGNAL_BASE else 0
            if sig == signal.SIGSYS:
                return failed("policy", "killed by the seccomp filter")
            reason, message = self._classify_exit(status, False, timeout, stderr_tail)
            return failed(reason, message)
        if report is None:
            problem = supervisor.get("report_problem") or "no report"
            return failed("crash", f"the sandbox process ended without a valid report ({problem})")
        stopped: Any = report.get("stopped") if report.get("stopped") in STOP_REASONS else "error"
        error = report.get("error") if isinstance(report.get("error"), str) else None
        if in_process:
            return failed("policy", error if stopped == "policy" and error else "; ".join(in_process[:5]))
        success = report.get("success") is True and report.get("stopped") is None and armed
        if not success:
            return failed(stopped or "error", (error or "the investigation failed")[:4000])
        output = report.get("output")
        if not isinstance(output, dict):
            return failed("invalid_output", "the report's output is not a JSON object")
        if len(json.dumps(output)) > self.limits.max_output_bytes:
            return failed("output_size", f"output over the {self.limits.max_output_bytes}-byte cap")
        printed = report.get("printed")
        if not isinstance(printed, str) or len(json.dumps(printed)) > self.limits.max_output_bytes:
            printed = None  # the code's own words: kept only when they are text within the cap
        return SandboxOutcome(
            self._verdict(code, started, stopped=None, error=None, output=output).model_copy(
                update={"printed": printed}
            ),
            isolation=isolation,
            violations=violations,
            stderr_tail=stderr_tail,
            supervisor=observed,
        )

    @staticmethod
    def _classify_exit(
        returncode: int, timed_out: bool, timeout: float, stderr: str
    ) -> tuple[StopReason, str]:
        if timed_out:
            return "timeout", f"wall-clock timeout: stopped after {timeout:g} s"
        sig = (
            -returncode
            if returncode < 0
            else returncode - EXIT_SIGNAL_BASE
            if returncode > EXIT_SIGNAL_BASE
            else 0
        )
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "MemoryError" not in stderr):
            return "timeout", f"CPU time limit reached (about {timeout:g} s)"
        if sig == signal.SIGXFSZ:
            return "output_size", "output file size limit reached"
        if "MemoryError" in stderr or "bad_alloc" in stderr:
            return "memory", "ran out of its memory budget"
        if sig:
            return "crash", f"the sandbox process died with signal {signal.Signals(sig).name}"
        return "crash", f"the sandbox process exited ({returncode}) without a result"

    @staticmethod
    def _verdict(
        code: str, started: float, *, stopped: StopReason | None, error: str | None, output: Any = None
    ) -> CodeInvestigation:
        return CodeInvestigation(
            code=code,
            success=stopped is None,
            output=output if stopped is None else None,
            error=error,
            execution_time_ms=round((time.perf_counter() - started) * 1000, 1),
            stopped=stopped,
        )


def _identity(path: str, st: os.stat_result) -> tuple[Any, ...]:
    """What a dataset zygote is keyed on: the path and the file's identity, so a rewritten file is new."""
    return (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Counters:
    """Thread-safe running totals (see `LocalSandbox.stats`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def add(self, name: str, amount: float = 1) -> None:
        with self._lock:
            self._values[name] = self._values.get(name, 0) + amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)


def _send_job(path: str, job: dict[str, Any], fds: list[int]) -> socket.socket:
    """Connect to a zygote's socket and send a length-prefixed job, the descriptors with its first chunk."""
    payload = json.dumps(job).encode()
    message = f"{len(payload):08d}".encode() + payload
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        sent = socket.send_fds(conn, [message[:32768]], fds)
        conn.sendall(message[sent:])
    except OSError as exc:  # nothing was started: the zygote is gone or went away while reading
        conn.close()
        raise _ZygoteGone(f"the sandbox zygote is not serving: {exc}") from exc
    return conn


@dataclass
class _Seen:
    """What this process saw of one run from outside it."""

    timed_out: bool = False
    memory: bool = False
    processes: bool = False
    leftovers: list[str] = field(default_factory=list)
    ipc_left: list[str] = field(default_factory=list)  # SysV objects of the run's uid, removed afterwards
    cleanup: str = ""
    cpu_s: float | None = None
    lost: str = ""
    cgroup_events: dict[str, int] = field(default_factory=dict)
    # The supervisor's account: exit status, refusals, the isolation it was told before the code ran,
    # and the runner's report as read from its pipe.
    supervisor: dict[str, Any] = field(default_factory=dict)


class _Cage:
    """The run's boundary as this process sees it: a cgroup, the run's own uid, and the supervisor's tree.

    Which processes belong to the run: everything below the supervisor (it is a child subreaper: orphans,
    double-forked or not, come back under it), everything in the run's cgroup, everything of the run's uid.
    """

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self.host_root = _host_root()
        self.uid = oslayers.pick_run_uid() if self.host_root else None
        self.cgroup: oslayers.RunCgroup | None = None
        self.fds: list[int] = []
        if limits.cgroup is not False and os.geteuid() == 0 and sys.platform == "linux":
            name = f"iterate-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            self.cgroup = oslayers.create_cgroup(
                name, memory_bytes=limits.memory_mb * 2**20, max_tasks=limits.max_processes
            )
            if self.cgroup is None and limits.cgroup:
                raise SandboxError("a cgroup was required and none could be made here")
        if self.cgroup is not None:
            self.fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in self.cgroup.procs_files]
        self.caller_tasks = None if os.geteuid() == 0 or sys.platform != "linux" else _tasks_of(os.getuid())
        self.mechanism = (
            "cgroup" if self.cgroup else "run uid and process tree" if self.uid else "process tree"
        )

    def members(self, supervisor: int | None, *, thorough: bool = False) -> list[oslayers.ProcInfo]:
        """The run's processes. With a cgroup that is its content (a runner joins it before anything else),
        unless `thorough` (a kill at a deadline, when the runner may not have joined yet)."""
        found: dict[int, oslayers.ProcInfo] = {}
        if supervisor and (thorough or self.cgroup is None):
            found.update((i.pid, i) for i in oslayers.descendants(supervisor))
        pids: set[int] = set()
        if self.cgroup is not None:
            pids |= self.cgroup.pids()
        if self.uid is not None and self.cgroup is None:
            pids |= set(oslayers.pids_of_uid(self.uid))
        for pid in pids - set(found):
            info = oslayers.proc_info(pid)
            if info is not None:
                found[pid] = info
        return list(found.values())

    def sample(self, supervisor: int | None) -> tuple[int, int]:
        """(anonymous resident bytes, tasks) of the run's processes together."""
        members = self.members(supervisor)
        return sum(i.anon_bytes for i in members), sum(max(1, i.threads) for i in members)

    def kill(self, supervisor: int | None, deadline_s: float = 5.0, *, thorough: bool = False) -> bool:
        """SIGKILL every process of the run (never the supervisor) until only zombies are left."""
        end = time.monotonic() + deadline_s
        while True:
            alive = [i for i in self.members(supervisor, thorough=thorough) if i.state not in ("Z", "X")]
            if not alive:
                return True
            if time.monotonic() > end:
                return False
            for info in alive:
                oslayers.kill_checked(info)
            time.sleep(0.001)

    def events(self) -> dict[str, int]:
        return self.cgroup.events() if self.cgroup is not None else {}

    def verify_empty(self, seen: _Seen) -> None:
        """After the supervisor ended: nothing of the run may be left, zombies included. Checked here."""
        end = time.monotonic() + 2.0
        while True:
            left: list[str] = []
            if self.cgroup is not None:
                self.cgroup.kill_all()
                if self.cgroup.pids():
                    left.append("tasks in the run's cgroup")
            if self.uid is not None and self.cgroup is None:  # with a cgroup, its removal is the proof
                for pid in oslayers.pids_of_uid(self.uid):
                    info = oslayers.proc_info(pid)
                    if info is not None:
                        oslayers.kill_checked(info)
                        left.append(f"pid {pid} ({info.state})")
            if not left or time.monotonic() > end:
                break
            time.sleep(0.005)
        seen.leftovers += left
        if self.uid is not None:  # in an IPC namespace they went with it; here, anything of the run's uid
            found = oslayers.sweep_ipc([self.uid])
            seen.ipc_left += found
            seen.leftovers += [f for f in found if f.endswith("(could not be removed)")]
        seen.cleanup = self.mechanism + (" (verified empty)" if not seen.leftovers else "")

    def release(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        if self.cgroup is not None:
            self.cgroup.kill_all()
            if not self.cgroup.remove():  # left for the kernel to hold: named so that it can be found
                import logging

                logging.getLogger(__name__).warning("sandbox cgroup not removed: %s", self.cgroup.dirs)


class _HostLines:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def pop(self) -> dict[str, Any] | None:
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        return message if isinstance(message, dict) else {}

    def feed(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)


SAMPLE_S = 0.02  # how often the tree's memory and tasks are summed where no cgroup does it


def _drive(
    conn: socket.socket, cage: _Cage, *, timeout: float, setup_s: float, limits: SandboxLimits
) -> _Seen:
    """Follow one run from outside: its time, its memory and tasks when no cgroup holds them, the kill of
    everything it started, and the check that nothing is left. See the protocol in supervisor.py."""
    seen = _Seen()
    lines = _HostLines(conn)
    start = time.monotonic()
    deadline = start + timeout + setup_s
    supervisor: int | None = None
    baseline: int | None = None
    budget = limits.memory_mb * 2**20
    sampling = cage.cgroup is None and sys.platform == "linux"
    killed = False
    hello = False
    supervisor_fd: int | None = None
    try:
        while True:
            message = lines.pop()
            if message is None:
                now = time.monotonic()
                if now >= deadline and not killed:
                    seen.timed_out = killed = True
                    cage.kill(supervisor, thorough=True)
                    deadline = now + 10.0  # the supervisor now reports the death
                elif now >= deadline:
                    seen.lost = "the sandbox supervisor stopped answering"
                    break
                elif sampling and baseline is not None and not killed:
                    memory, tasks = cage.sample(supervisor)
                    if memory - baseline > budget:
                        seen.memory = killed = True
                    if tasks >= limits.max_processes:
                        seen.processes = killed = True
                    if killed:
                        cage.kill(supervisor)
                wait = max(0.0, deadline - time.monotonic())
                if sampling and baseline is not None:
                    wait = min(wait, SAMPLE_S)
                if select.select([conn], [], [], wait)[0] and not lines.feed():
                    if not hello:
                        raise _ZygoteGone("the sandbox closed the connection before starting the job")
                    seen.lost = "the sandbox supervisor died"
                    break
                continue
            if "pid" in message and not hello:
                hello = True
                supervisor = int(message["pid"])
                with contextlib.suppress(OSError, AttributeError):
                    supervisor_fd = os.pidfd_open(supervisor)  # it is waiting for us: it is that process
            elif message.get("armed"):
                deadline = min(deadline, time.monotonic() + timeout)
                if sampling:
                    baseline = cage.sample(supervisor)[0]
            elif "exited" in message:
                if not cage.kill(supervisor):
                    seen.leftovers.append("processes of the run survived SIGKILL")
                conn.sendall(b'{"cleaned": true}\n')
            elif "status" in message:
                cpu = message.get("cpu_s")
                seen.cpu_s = float(cpu) if isinstance(cpu, int | float) else None
                account = message.get("seen")
                seen.supervisor = account if isinstance(account, dict) else {}
                if seen.supervisor.get("supervisor_error"):
                    seen.lost = f"the sandbox supervisor failed: {seen.supervisor['supervisor_error']}"
                break
    except (ConnectionError, TimeoutError, OSError, ValueError) as exc:
        if not hello:
            raise _ZygoteGone(f"the sandbox did not take the job: {exc}") from exc
        seen.lost = f"the sandbox supervisor failed: {type(exc).__name__}"
    finally:
        conn.close()
    if seen.lost and supervisor:
        if supervisor_fd is not None:  # never by pid: the supervisor may be gone and its pid reused
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(supervisor_fd, signal.SIGKILL)
        cage.kill(supervisor, thorough=True)
    if supervisor_fd is not None:
        os.close(supervisor_fd)
    seen.cgroup_events = {k: v for k, v in cage.events().items() if v}
    if seen.cgroup_events.get("oom_kill"):
        seen.memory = True
    if seen.cgroup_events.get("pids_max"):
        seen.processes = True
    cage.verify_empty(seen)
    return seen


class _Zygote:
    """A worker process that imported pandas and pyarrow once and forks one handler per investigation.

    It never runs investigation code itself; each job is a fresh fork, isolated exactly as a fresh process
    would be. Jobs arrive on a Unix socket in a private directory, with the descriptors they need. Its
    stdin is a pipe from this process: when this process dies, the zygote sees the end and exits.
    """

    def __init__(self, python: str, *, start_timeout_s: float = 60.0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="iterate-zygote-"))
        self.path = str(self.dir / "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(64)
            env = dict(_child_env(), JE_ARROW_MALLOC_CONF="background_thread:false")  # one thread can fork
            self.proc = subprocess.Popen(
                [python, "-I", "-B", str(WORKER), "--zygote", str(listener.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=self.dir,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        finally:
            listener.close()
        self._finalizer = weakref.finalize(self, _Zygote._stop, self.proc, str(self.dir))
        assert self.proc.stdout is not None
        ready = select.select([self.proc.stdout], [], [], start_timeout_s)[0]
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.close()
            raise TimeoutError("the sandbox zygote did not start")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], directory: str) -> None:
        if proc.poll() is None:  # still our unreaped child: its pid (and group) cannot name anyone else
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        shutil.rmtree(directory, ignore_errors=True)


def _sealed_arrow(table: Any) -> int:
    """An Arrow IPC file of `table` in an anonymous memory file, sealed against any change; its descriptor.

    Sealed (no write, no resize), so no process holding it, however compromised, can alter what the others
    read: the dataset zygote maps it read-only and its runners share that mapping.
    """
    import fcntl

    import pyarrow.ipc as ipc

    fd = os.memfd_create("iterate-dataset", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(fd, "wb", closefd=False) as handle, ipc.new_file(handle, table.schema) as writer:
            writer.write_table(table)
        seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _DatasetZygote:
    """A process forked from the zygote that loaded one dataset's frame once; forks a handler per job.

    Its runners inherit the frame copy-on-write and are isolated exactly like the zygote's own. It keeps
    a control connection to this process: closing our end (or this process dying) stops it, and it dies
    with the zygote. Jobs arrive on its own socket, in a private directory.
    """

    def __init__(
        self,
        base: _Zygote,
        data_fd: int,
        *,
        max_mb: int,
        timeout_s: float,
        counters: _Counters,
        runners: dict[str, Any] | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="iterate-dataset-"))
        self.path = str(self.dir / "dataset.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(64)
            # Its runners' namespace settings and paths: it confines its own load by them (loader.py).
            request = {**(runners or {}), "kind": "dataset", "max_mb": max_mb}
            self.control = _send_job(base.path, request, [data_fd, listener.fileno()])
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        finally:
            listener.close()
        self._reader = self.control.makefile("rb")
        self._pid = [0]  # filled in below; the finalizer reads it
        self._finalizer = weakref.finalize(
            self, _DatasetZygote._stop, self.control, self._reader, self._pid, str(self.dir), counters
        )
        end = time.monotonic() + timeout_s
        try:
            self.control.settimeout(timeout_s)
            hello = self._reader.readline()
            if not hello:
                raise _ZygoteGone("the sandbox zygote did not take the dataset")
            self._pid[0] = int(json.loads(hello)["pid"])
            with contextlib.suppress(OSError, AttributeError):
                self._pid.append(os.pidfd_open(self._pid[0]))  # it waits for us now: it is that process
            self.control.settimeout(max(0.1, end - time.monotonic()))
            ready = json.loads(self._reader.readline() or b"{}")
        except (OSError, ValueError, KeyError) as exc:
            self.close()
            raise SandboxError(f"the dataset zygote did not start: {exc}") from exc
        except BaseException:
            self.close()
            raise
        if not ready.get("ready"):
            self.close()
            raise SandboxError(f"the dataset was not preloaded: {ready.get('error') or 'no answer'}")
        self.control.settimeout(None)
        self.rows = int(ready.get("rows", 0))
        # How its load was confined (each preloaded run's isolation reports it too, as "loader").
        self.loader: dict[str, Any] = ready.get("loader") or {}
        counters.add("preloads")
        counters.add("preload_cpu_s", float(ready.get("cpu_s") or 0))

    @property
    def pid(self) -> int:
        return self._pid[0]

    def alive(self) -> bool:
        """It writes nothing between 'ready' and stopping: a readable control connection means it stopped."""
        try:
            return not select.select([self.control], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _stop(
        control: socket.socket, reader: Any, pid: list[int], directory: str, counters: _Counters
    ) -> None:
        """Tell it to stop (our end closes for writing), take its last report; kill it if it does not end."""
        ended = False
        try:
            control.shutdown(socket.SHUT_WR)
            control.settimeout(5.0)
            while line := reader.readline():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    report = json.loads(line)
                    if "ready" not in report:
                        counters.add("dataset_zygote_cpu_s", float(report["cpu_s"]))
            ended = True  # end of stream: its side is closed, it has exited
        except (OSError, ValueError):
            pass
        if not ended and pid[0]:
            # Through a pidfd taken while it was known alive: a pid reused since names someone else.
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pid[1], signal.SIGKILL)
        if len(pid) > 1:
            with contextlib.suppress(OSError):
                os.close(pid[1])
        with contextlib.suppress(OSError):
            reader.close()
        control.close()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(eq=False)
class _Entry:
    """One dataset's zygote in the pool: started once, by the first run that needs it."""

    key: tuple[Any, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    zygote: _DatasetZygote | None = None
    users: int = 0
    retired: bool = False


class _DatasetZygotes:
    """The live dataset zygotes by dataset identity: at most `capacity`, least recently used closed first.

    A retired zygote (evicted, found dead, or the sandbox closed) takes no new runs and stops when the
    runs using it end. A dataset whose zygote could not start is not tried again (its runs load it).
    """

    REFUSED_KEPT = 32

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._refused: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def acquire(self, key: tuple[Any, ...], start: Callable[[], _DatasetZygote]) -> _Entry | None:
        """The entry for `key` with a running zygote (one start however many threads ask), or None.

        Every entry returned must be given back with `release`.
        """
        closing: list[_DatasetZygote] = []
        with self._lock:
            if key in self._refused:
                return None
            entry = self._entries.get(key)
            if entry is not None and entry.zygote is not None and not entry.zygote.alive():
                closing += self._retire(entry)
                entry = None
            if entry is None:
                entry = self._entries[key] = _Entry(key)
                while len(self._entries) > self.capacity:
                    closing += self._retire(next(iter(self._entries.values())))
            self._entries.move_to_end(key)
            entry.users += 1
        for zygote in closing:
            zygote.close()
        with entry.lock:
            if entry.zygote is None and not entry.retired:
                try:
                    entry.zygote = start()
                except (OSError, SandboxError) as exc:
                    with self._lock:
                        if not isinstance(exc, _ZygoteGone):  # not the zygote's absence: the dataset's
                            self._refused[key] = str(exc)
                            while len(self._refused) > self.REFUSED_KEPT:
                                self._refused.popitem(last=False)
                        self._retire(entry)
        if entry.zygote is None:
            self.release(entry)
            return None
        return entry

    def release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            stop = entry.retired and entry.users == 0 and entry.zygote is not None
        if stop and entry.zygote is not None:
            entry.zygote.close()

    def discard(self, entry: _Entry) -> None:
        """Take a zygote found not serving out of the pool (the next run of its dataset starts another)."""
        with self._lock:
            closing = self._retire(entry)
        for zygote in closing:
            zygote.close()

    def close(self) -> None:
        with self._lock:
            closing = [z for entry in list(self._entries.values()) for z in self._retire(entry)]
        for zygote in closing:
            zygote.close()

    def _retire(self, entry: _Entry) -> list[_DatasetZygote]:
        """Under the lock: out of the pool; returns its zygote when nobody is using it (to close)."""
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        entry.retired = True
        return [entry.zygote] if entry.users == 0 and entry.zygote is not None else []
