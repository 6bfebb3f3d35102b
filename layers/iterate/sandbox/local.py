"""LocalSandbox: the Sandbox port as a locked-down subprocess (the default on a laptop, in tests and in the Lambda)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
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
            return self._spawn(code, data.path, timeout, tmp, started)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _spawn(self, code: str, path: str, timeout: float, tmp: Path, started: float) -> SandboxOutcome:
        workdir = tmp / "work"
        workdir.mkdir()
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        result_fd = os.open(tmp / "result.json", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        stderr_path = tmp / "stderr.txt"
        job = {
            "code": code,
            "data_fd": data_fd,
            "result_fd": result_fd,
            "timeout_s": timeout,
            "memory_mb": self.limits.memory_mb,
            "max_output_bytes": self.limits.max_output_bytes,
            "max_processes": self.limits.max_processes,
            "scratch_mb": self.limits.scratch_mb,
            "namespaces": self.limits.namespaces is not False and sys.platform == "linux",
            "jail_root": str(tmp / "jail"),
            "workdir": str(workdir),
            "python_paths": self._python_paths,
        }
        timed_out = False
        try:
            with open(stderr_path, "wb") as stderr:
                proc = subprocess.Popen(
                    [self.python, "-I", "-B", str(WORKER)],
                    stdin=subprocess.PIPE,
                    stdout=stderr,
                    stderr=stderr,
                    env=dict(CHILD_ENV),
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
