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
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

from iterate.contracts import CodeInvestigation, StopReason
from iterate.ports import DatasetRef
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

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> SandboxLimits:
        """Limits from an `iterate.settings.Settings` (or anything with the same sandbox_* attributes)."""
        limits = cls(
            timeout_s=float(settings.sandbox_timeout_s),
            memory_mb=int(settings.sandbox_memory_mb),
            max_output_bytes=int(settings.sandbox_max_output_bytes),
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


def _package_dirs() -> list[str]:
    """Where pandas, numpy and pyarrow are installed (site-packages, or /opt/python in a Lambda layer)."""
    import numpy
    import pandas
    import pyarrow

    return sorted({str(Path(str(m.__file__)).resolve().parent.parent) for m in (pandas, numpy, pyarrow)})


def _child_env() -> dict[str, str]:
    return dict(CHILD_ENV, ITERATE_SANDBOX_PATHS=os.pathsep.join(_package_dirs()))


def _python_paths() -> list[str]:
    """Directories the interpreter needs inside the jail: its prefixes and the packages' real locations."""
    import numpy
    import pandas
    import pyarrow

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for module in (pandas, numpy, pyarrow):
        paths.add(str(Path(str(module.__file__)).resolve().parent.parent))
    resolved = {str(Path(p).resolve()) for p in paths} | paths
    return sorted(p for p in resolved if p and p != "/")


class LocalSandbox:
    """Runs investigation code in a fresh, isolated Python process; implements `iterate.ports.Sandbox`."""

    def __init__(self, limits: SandboxLimits | None = None, *, python: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self._python_paths = _python_paths()
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
        if not data.path:
            raise SandboxError("LocalSandbox needs a local dataset path (DatasetRef.path)")
        if not Path(data.path).is_file():
            raise SandboxError(f"dataset not found: {data.path}")

        tmp = Path(tempfile.mkdtemp(prefix="iterate-sandbox-"))
        try:
            zygote = self._running_zygote()
            if zygote is None:
                return self._spawn(code, data.path, timeout, tmp, started, data.columns)
            if self.limits.preload_datasets > 0:
                outcome = self._run_preloaded(zygote, code, data.path, timeout, tmp, started, data.columns)
                if outcome is not None:
                    return outcome
            return self._fork_from(zygote, code, data.path, timeout, tmp, started, data.columns)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _run_preloaded(
        self,
        base: _Zygote,
        code: str,
        path: str,
        timeout: float,
        tmp: Path,
        started: float,
        columns: tuple[str, ...] | None,
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
            outcome = self._fork_from(entry.zygote, code, None, timeout, tmp, started, columns)
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
            max_mb=self.limits.preload_max_mb,
            timeout_s=self.limits.preload_timeout_s,
            counters=self._counters,
            runners=self._runner_settings(),
        )

    def _runner_settings(self) -> dict[str, Any]:
        """What a dataset zygote must know of its runners to confine its own load without hindering them."""
        return {
            "namespaces": self.limits.namespaces is not False and sys.platform == "linux",
            "user_namespace_first": self.limits.user_namespace_first,
            "python_paths": self._python_paths,
        }

    def prepare(self, data: DatasetRef | None = None, *, arrow: Any = None) -> threading.Thread | None:
        """Start the zygote, and load `data`'s frame into a dataset zygote, in the background, now.

        A hint for the pipeline, which knows minutes ahead which dataset its investigations will run on:
        the work overlaps the detectors instead of delaying the first investigation. `arrow`: the caller's
        own copy of exactly what `data.path` holds (`iterate.io.parquet_text.text_arrow` of the table it
        wrote there): handed over in a sealed memfd, it spares the dataset zygote parsing the file (1.3 s
        of CPU on 1M rows × 20 columns; 0.1 s this way). Nothing is decided
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
        data_fd: int | None,
        result_fd: int,
        columns: tuple[str, ...] | None,
    ) -> dict[str, Any]:
        workdir = tmp / "work"
        workdir.mkdir(exist_ok=True)
        return {
            "code": code,
            "data_fd": data_fd,
            "columns": list(columns) if columns is not None else None,
            "result_fd": result_fd,
            "timeout_s": timeout,
            "memory_mb": self.limits.memory_mb,
            "max_output_bytes": self.limits.max_output_bytes,
            "max_processes": self.limits.max_processes,
            "scratch_mb": self.limits.scratch_mb,
            **self._runner_settings(),
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
    ) -> SandboxOutcome:
        """One job through a zygote; `path` None for a dataset zygote (its runners have the frame)."""
        fresh = os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if path is not None else None
        result_fd = os.open(tmp / "result.json", os.O_RDWR | fresh, 0o600)
        stderr_path = tmp / "stderr.txt"
        stderr_fd = os.open(stderr_path, os.O_WRONLY | fresh, 0o600)
        # The order the handler expects: result, stderr, then the dataset when the runner reads it.
        fds = [result_fd, stderr_fd] + ([data_fd] if data_fd is not None else [])
        try:
            job = self._job(code, timeout, tmp, data_fd, result_fd, columns)
            returncode, timed_out, cpu_s = zygote.run(job, fds, timeout + self.limits.setup_allowance_s)
            raw = os.pread(result_fd, self.limits.max_output_bytes * 2 + 65536, 0)
        finally:
            for fd in fds:
                os.close(fd)
        if cpu_s is not None:
            self._counters.add("job_cpu_s", cpu_s)
        stderr_tail = stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        outcome = self._outcome(code, started, raw, returncode, timed_out, timeout, stderr_tail)
        outcome.cpu_s = cpu_s
        return outcome

    def _spawn(
        self,
        code: str,
        path: str,
        timeout: float,
        tmp: Path,
        started: float,
        columns: tuple[str, ...] | None = None,
    ) -> SandboxOutcome:
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        result_fd = os.open(tmp / "result.json", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        stderr_path = tmp / "stderr.txt"
        job = self._job(code, timeout, tmp, data_fd, result_fd, columns)
        workdir = job["workdir"]
        timed_out = False
        try:
            with open(stderr_path, "wb") as stderr:
                proc = subprocess.Popen(
                    [self.python, "-I", "-B", str(WORKER)],
                    stdin=subprocess.PIPE,
                    stdout=stderr,
                    stderr=stderr,
                    env=_child_env(),
                    cwd=workdir,
                    pass_fds=(data_fd, result_fd),
                    start_new_session=True,
                    close_fds=True,
                )
                os.close(data_fd)
                data_fd = -1
                assert proc.stdin is not None
                try:
                    proc.stdin.write(json.dumps(job).encode())
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
                try:
                    proc.wait(timeout=timeout + self.limits.setup_allowance_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                self._kill_group(proc)
            raw = os.pread(result_fd, self.limits.max_output_bytes * 2 + 65536, 0)
        finally:
            if data_fd >= 0:
                os.close(data_fd)
            os.close(result_fd)
        stderr_tail = stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        return self._outcome(code, started, raw, proc.returncode, timed_out, timeout, stderr_tail)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        """Whatever the code started in its session dies with it (the PID namespace does the rest)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def _outcome(
        self,
        code: str,
        started: float,
        raw: bytes,
        returncode: int,
        timed_out: bool,
        timeout: float,
        stderr_tail: str,
    ) -> SandboxOutcome:
        verdict: dict[str, Any] | None = None
        if raw and not timed_out:
            try:
                verdict = json.loads(raw)
            except ValueError:
                verdict = None
        if verdict is None:
            reason, message = self._classify_exit(returncode, timed_out, timeout, stderr_tail)
            return SandboxOutcome(
                self._verdict(code, started, stopped=reason, error=message), stderr_tail=stderr_tail
            )
        output = verdict.get("output")
        success = bool(verdict.get("success"))
        stopped: Any = verdict.get("stopped") if verdict.get("stopped") in STOP_REASONS else "error"
        error: str | None = verdict.get("error")
        if success and len(json.dumps(output)) > self.limits.max_output_bytes:
            success, stopped, output = False, "output_size", None
            error = f"output over the {self.limits.max_output_bytes}-byte cap"
        investigation = self._verdict(
            code, started, stopped=None if success else (stopped or "error"), error=error, output=output
        )
        return SandboxOutcome(
            investigation,
            isolation=verdict.get("isolation") or {},
            violations=list(verdict.get("violations") or []),
            stderr_tail=stderr_tail,
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


def _run_job(
    path: str, job: dict[str, Any], fds: list[int], deadline_s: float
) -> tuple[int, bool, float | None]:
    """Send one job; wait for its exit status. Returns (status, timed_out, cpu_s); kills it at the deadline."""
    conn = _send_job(path, job, fds)
    try:
        reader = conn.makefile("rb")
        end = time.monotonic() + deadline_s
        conn.settimeout(max(0.1, end - time.monotonic()))
        try:
            hello = reader.readline()
        except ConnectionError as exc:  # it died with the job still queued
            raise _ZygoteGone(f"the sandbox zygote dropped the job: {exc}") from exc
        if not hello:  # refused or dropped before its handler said anything: not started
            raise _ZygoteGone("the sandbox zygote closed the connection before starting the job")
        pid = int(json.loads(hello)["pid"])
        try:
            conn.settimeout(max(0.1, end - time.monotonic()))
            line = reader.readline()
        except TimeoutError:
            # The handler's process group: its runner and whatever that started. Never the zygote.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return EXIT_SIGNAL_BASE + signal.SIGKILL, True, None
        if not line:  # the handler died without a word
            return EXIT_SIGNAL_BASE + signal.SIGKILL, False, None
        report = json.loads(line)
        cpu = report.get("cpu_s")
        return int(report["status"]), False, float(cpu) if isinstance(cpu, int | float) else None
    except _ZygoteGone:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise SandboxError(f"the sandbox zygote failed: {exc}") from exc
    finally:
        conn.close()


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
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        shutil.rmtree(directory, ignore_errors=True)

    def run(self, job: dict[str, Any], fds: list[int], deadline_s: float) -> tuple[int, bool, float | None]:
        """Send one job; wait for its exit status. Returns (status, timed_out, cpu_s)."""
        return _run_job(self.path, job, fds, deadline_s)


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
            # Its runners' namespace settings and paths: it confines its own load by them (worker.py).
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

    def run(self, job: dict[str, Any], fds: list[int], deadline_s: float) -> tuple[int, bool, float | None]:
        return _run_job(self.path, job, fds, deadline_s)

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
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid[0], signal.SIGKILL)  # its own session: it and nothing else
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
