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

    def close(self) -> None:
        """Stop the zygote, if one was started (also done when the sandbox is garbage-collected)."""
        with self._zygote_lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None

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
            if zygote is not None:
                return self._fork_from(zygote, code, data.path, timeout, tmp, started, data.columns)
            return self._spawn(code, data.path, timeout, tmp, started, data.columns)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _job(
        self,
        code: str,
        timeout: float,
        tmp: Path,
        data_fd: int,
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
            "namespaces": self.limits.namespaces is not False and sys.platform == "linux",
            "user_namespace_first": self.limits.user_namespace_first,
            "jail_root": str(tmp / "jail"),
            "workdir": str(workdir),
            "python_paths": self._python_paths,
        }

    def _fork_from(
        self,
        zygote: _Zygote,
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
        stderr_fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            job = self._job(code, timeout, tmp, data_fd, result_fd, columns)
            returncode, timed_out = zygote.run(
                job, [data_fd, result_fd, stderr_fd], timeout + self.limits.setup_allowance_s
            )
            raw = os.pread(result_fd, self.limits.max_output_bytes * 2 + 65536, 0)
        finally:
            for fd in (data_fd, result_fd, stderr_fd):
                os.close(fd)
        stderr_tail = stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        return self._outcome(code, started, raw, returncode, timed_out, timeout, stderr_tail)

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


class _Zygote:
    """A worker process that imported pandas and pyarrow once and forks one handler per investigation.

    It never runs investigation code itself; each job is a fresh fork, isolated exactly as a fresh process
    would be. Jobs arrive on a Unix socket in a private directory, with the descriptors they need.
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
                stdin=subprocess.DEVNULL,
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
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(directory, ignore_errors=True)

    def run(self, job: dict[str, Any], fds: list[int], deadline_s: float) -> tuple[int, bool]:
        """Send one job; wait for its exit status. Returns (status, timed_out); kills it at the deadline."""
        payload = json.dumps(job).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            message = f"{len(payload):08d}".encode() + payload
            sent = socket.send_fds(conn, [message[:32768]], fds)
            conn.sendall(message[sent:])
            reader = conn.makefile("rb")
            end = time.monotonic() + deadline_s
            conn.settimeout(max(0.1, end - time.monotonic()))
            pid = int(json.loads(reader.readline())["pid"])
            try:
                conn.settimeout(max(0.1, end - time.monotonic()))
                line = reader.readline()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                return EXIT_SIGNAL_BASE + signal.SIGKILL, True
            if not line:  # the handler died without a word
                return EXIT_SIGNAL_BASE + signal.SIGKILL, False
            return int(json.loads(line)["status"]), False
        except (OSError, ValueError, KeyError) as exc:
            raise SandboxError(f"the sandbox zygote failed: {exc}") from exc
        finally:
            conn.close()
