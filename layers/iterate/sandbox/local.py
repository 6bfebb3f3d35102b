"""LocalSandbox: the Sandbox port as a locked-down subprocess (the default on a laptop, in tests and in the Lambda)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

from iterate.contracts import CodeInvestigation, StopReason
from iterate.ports import DatasetRef
from iterate.sandbox.cage import Cage, Seen, drive, host_root, send_job
from iterate.sandbox.importview import import_view
from iterate.sandbox.model import Counters, SandboxError, SandboxLimits, SandboxOutcome, ZygoteGone
from iterate.sandbox.policy import check_policy
from iterate.sandbox.zygotes import (
    WORKER,
    DatasetZygote,
    DatasetZygotes,
    Zygote,
    ZygoteEntry,
    child_env,
    sealed_arrow,
)

EXIT_SIGNAL_BASE = 128
STOP_REASONS = frozenset(get_args(StopReason))


def _protect_caller() -> None:
    """Runs here may share this process's uid (no other uid to give them): make it non-dumpable, so that
    no process of that uid reads its memory or environment (API keys, AWS credentials on Lambda) through
    /proc, or attaches to it, whatever layer above has fallen. Core dumps of this process go with it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE


class LocalSandbox:
    """Runs investigation code in a fresh, isolated Python process; implements `iterate.ports.Sandbox`."""

    def __init__(self, limits: SandboxLimits | None = None, *, python: str | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python or sys.executable
        self._view = import_view()
        if sys.platform == "linux" and not (
            host_root() and (self.limits.namespaces is not False or self._view.readable_by_others)
        ):
            _protect_caller()
        self._zygote: Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._zygote_failed = False
        self._counters = Counters()
        self._datasets = DatasetZygotes(max(0, self.limits.preload_datasets))

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

    def _running_zygote(self) -> Zygote | None:
        if not self.limits.prefork or self._zygote_failed:
            return None
        with self._zygote_lock:
            if self._zygote is not None and not self._zygote.alive():
                self._zygote.close()
                self._zygote = None
            if self._zygote is None:
                try:
                    self._zygote = Zygote(self.python)
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
        base: Zygote,
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
        except ZygoteGone:  # it stopped before taking the job: the job runs from the base zygote
            self._datasets.discard(entry)
            return None
        finally:
            self._datasets.release(entry)
        self._counters.add("preloaded_runs")
        return outcome

    def _dataset_entry(self, base: Zygote, path: str, arrow: Any = None) -> ZygoteEntry | None:
        """The (acquired) entry of the dataset zygote holding this file's frame, started on first use.

        `arrow`: the file's content already in memory (see `prepare`), loaded from a sealed memfd instead.
        """
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            identity = _identity(path, os.fstat(data_fd))

            def start() -> DatasetZygote:
                source = None
                if arrow is not None:
                    try:
                        source = sealed_arrow(arrow)
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

    def _start_dataset(self, base: Zygote, data_fd: int) -> DatasetZygote:
        return DatasetZygote(
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
        cage: Cage,
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
        zygote: Zygote | DatasetZygote,
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
        cage = Cage(self.limits)
        data_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if path is not None else None
        stderr_path = tmp / "stderr.txt"
        stderr_fd = os.open(stderr_path, os.O_WRONLY | fresh, 0o600)
        # The order the handler expects: stderr, the dataset when the runner reads it, cgroup.procs.
        fds = [stderr_fd] + ([data_fd] if data_fd is not None else []) + cage.fds
        try:
            job = self._job(code, timeout, tmp, columns, cage, batch)
            conn = send_job(zygote.path, job, fds)
            seen = drive(
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
        cage = Cage(self.limits)
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
                    env=child_env(),
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
                seen = drive(
                    host, cage, timeout=timeout, setup_s=self.limits.setup_allowance_s, limits=self.limits
                )
            except ZygoteGone as exc:  # the process died before it said anything
                seen = Seen(lost=f"the sandbox process did not start: {exc}")
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
        self, code: str, started: float, seen: Seen, timeout: float, stderr_tail: str
    ) -> SandboxOutcome:
        """The verdict, decided here from what the supervisor and the cage saw; the code's report counts
        only where neither saw anything wrong, and then only if it is well formed."""
        supervisor = seen.supervisor
        report = supervisor.get("report") if isinstance(supervisor.get("report"), dict) else None
        refusals = [str(r) for r in supervisor.get("refusals") or []][:20]
        in_process = [str(v) for v in (report or {}).get("violations") or []][:20]
        violations = in_process + [
            r if r.startswith("read of ") else f"{r} refused by the seccomp filter" for r in refusals
        ]
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
            return failed("policy", "the OS sandbox refused: " + "; ".join(refusals[:5]))
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
