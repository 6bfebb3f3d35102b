"""The runner: the process that loads the frame, locks itself down and runs the investigation's code.

It reports on a pipe only its supervisor reads; the report is only what this process says (the supervisor
and the host decide from what they saw themselves).
"""

import contextlib
import errno
import json
import os
import signal
import sys
import time

from .batch import prepare_item, run_batch
from .confine.kernel import EXIT_SIGNAL_BASE, PR_SET_PDEATHSIG, c_library
from .confine.landlock import SYSTEM_READ_PATHS
from .confine.lockdown import lock_init, lockdown
from .confine.namespaces import build_jail, enter_namespaces, reap_as_init
from .frames import PRELOADED, ColumnReader, load_frame_narrowed, reads_on_demand, select_columns
from .inprocess import (
    ALLOWED_IMPORTS,
    CODE_NAME,
    SandboxViolation,
    disable_library_io,
    make_audit_hook,
    make_refuse,
    restricted_builtins,
)
from .runcode import CappedWriter, OutputTooLarge, collect, user_traceback


def run_investigation(job: dict, isolation: dict, result_fd: int) -> int:
    """Load, lock down, run the code and write its report. Returns the process exit code.

    A job with a `batch` (a list of {"code", "columns"}) runs each code in turn, each in its own namespace
    on the frame a single run with its columns would see, and reports a list of per-item verdicts (see
    `run_batch`). The report is only what this process says: the supervisor outside decides from what it
    saw itself.
    """
    started = time.perf_counter()
    violations: list[str] = []
    verdict: dict = {"success": False, "output": None, "error": None, "stopped": None}
    checks = job.get("inprocess_checks", True)
    batch = job.get("batch")
    try:
        import numpy as np
        import pandas as pd

        for name in ALLOWED_IMPORTS:
            __import__(name)
        if PRELOADED:
            isolation["frame"] = "preloaded"
            isolation["loader"] = PRELOADED.get("loader")
            base, narrowed, narrowable = PRELOADED["frame"], False, PRELOADED["narrowable"]
        elif (
            batch is None
            and job.get("columns") is None
            and reads_on_demand(job["code"])
            and (reader := ColumnReader.open(job["data_fd"])) is not None
        ):
            isolation["frame"] = "read on demand"
            base, narrowed, narrowable = reader, True, False
        else:
            isolation["frame"] = "loaded"
            base, narrowed, narrowable = load_frame_narrowed(job["data_fd"], job.get("columns"))
        if batch is None:
            frame = select_columns(base, narrowable, job.get("columns")) if not narrowed else base
            code = compile(job["code"], CODE_NAME, "exec")
        else:
            union = job.get("columns")
            if not narrowed and narrowable and union is not None:
                # The batch's columns picked once (from a preloaded whole table): each item's pick from
                # them is the same as from the whole, and far cheaper on a wide table.
                picked = select_columns(base, True, union)
                base, narrowed = picked, picked is not base
            prepared = [prepare_item(item, base, narrowed, narrowable) for item in batch]
    except SyntaxError as exc:
        verdict.update(error=f"SyntaxError: {exc.msg} (line {exc.lineno})", stopped="error")
        return _finish(result_fd, verdict, violations, started)
    except Exception as exc:  # the dataset or the interpreter failed before any untrusted code ran
        verdict.update(error=f"sandbox setup failed: {type(exc).__name__}: {exc}", stopped="crash")
        return _finish(result_fd, verdict, violations, started)

    hook = arm = None
    if checks:
        read_prefixes = tuple(os.path.realpath(p) for p in [*job["python_paths"], *SYSTEM_READ_PATHS])
        hook, arm = make_audit_hook(read_prefixes, violations)
        disable_library_io(pd, np, make_refuse(violations))

    def namespace(df):  # type: ignore[no-untyped-def]
        user_globals: dict = {"__name__": "__investigation__", "df": df, "pd": pd, "np": np, "json": json}
        user_globals["result"] = None
        if checks:
            user_globals["__builtins__"] = restricted_builtins(violations)
        else:
            # Tests and red teams only (ITERATE_SANDBOX_INPROCESS_CHECKS=0): the OS layers alone must hold.
            import builtins

            user_globals["__builtins__"] = builtins
        return user_globals

    if batch is None:
        user_globals = namespace(frame)
    else:
        # Every namespace made now, before the lockdown; a shallow copy of the frame each: with pandas'
        # copy-on-write, what one item does to its `df` no other item sees.
        prepared = [e if isinstance(e, dict) else (e[0], namespace(e[1].copy(deep=False))) for e in prepared]
    os.environ.clear()
    job["preloaded_vm_bytes"] = PRELOADED.get("vm_bytes")  # the address-space limit's base without /proc
    try:
        lockdown(job, isolation, guard_imports=checks)
    except Exception as exc:  # an OS layer could not be applied: nothing untrusted runs without it
        verdict.update(error=f"sandbox setup failed: {type(exc).__name__}: {exc}", stopped="crash")
        return _finish(result_fd, verdict, violations, started)
    if hook is not None and arm is not None:
        sys.addaudithook(hook)
    if batch is not None:
        apart = isolation.get("processes") != "no new processes"
        verdict.update(run_batch(prepared, violations, job["max_output_bytes"], arm=arm, apart=apart))
    else:
        # Inline, not through run_code: the code's caller is this frame, as it always was for one run.
        captured = CappedWriter(job["max_output_bytes"])
        sys.stdout = captured  # type: ignore[assignment]
        if arm is not None:
            arm()
        try:
            exec(code, user_globals)
            verdict.update(collect(user_globals.get("result"), captured.getvalue(), job["max_output_bytes"]))
        except OutputTooLarge as exc:
            verdict.update(error=str(exc), stopped="output_size")
        except MemoryError:
            verdict.update(error="MemoryError: the code ran out of its memory budget", stopped="memory")
        except OSError as exc:
            if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE: writing straight to a descriptor past the cap
                verdict.update(error="output exceeded the file size limit", stopped="output_size")
            else:
                verdict.update(error=user_traceback(exc), stopped="error")
        except SandboxViolation as exc:
            verdict.update(error=str(exc), stopped="policy")
        except BaseException as exc:
            verdict.update(error=user_traceback(exc), stopped="error")
        finally:
            sys.stdout = sys.__stdout__
    if violations and verdict.get("stopped") != "policy":
        # The code caught the refusal and carried on: still a policy stop.
        verdict.update(success=False, stopped="policy", error="; ".join(violations[:5]))
    return _finish(result_fd, verdict, violations, started)


def _finish(result_fd: int, verdict: dict, violations: list[str], started: float) -> int:
    """Write the report to the supervisor's pipe. In-process refusals ride along: they can only fail a run."""
    verdict["violations"] = violations[:20]
    verdict["elapsed_ms"] = (time.perf_counter() - started) * 1000
    data = json.dumps(verdict).encode()
    view = memoryview(data)
    while view:
        written = os.write(result_fd, view)
        view = view[written:]
    return 0


def execute(job: dict) -> int:
    """One investigation in this (forked) process: join the run's cgroup, isolate, run; return the status."""
    for fd in job.get("cgroup_fds") or []:
        # Descriptors the host opened on the run's cgroup.procs: every process from here on is counted.
        os.write(fd, b"0")
        os.close(fd)
    with contextlib.suppress(OSError):
        os.setsid()  # its own process group: `kill(0, …)` reaches the run only
    result_fd = job["result_fd"]
    isolation: dict = {"network": "seccomp", "filesystem": "landlock", "pid_namespace": False}
    if job.get("namespaces"):
        libc = c_library()
        mode, refused = enter_namespaces(libc, user_first=bool(job.get("user_namespace_first")))
        if mode is not None:
            init = os.fork()
            if init:
                # Outside the namespaces: wait for its pid 1 and pass its status on.
                _, status = os.waitpid(init, 0)
                return (
                    EXIT_SIGNAL_BASE + os.WTERMSIG(status)
                    if os.WIFSIGNALED(status)
                    else os.WEXITSTATUS(status)
                )
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            try:
                build_jail(libc, job, owner=job.get("run_uid") if mode == "root" else None)
                isolation = {"network": "namespace", "filesystem": "jail", "pid_namespace": True}
            except OSError as exc:
                isolation = {
                    "network": "namespace",
                    "filesystem": f"landlock (jail refused: {exc})",
                    "pid_namespace": True,
                }
            isolation["namespaces"] = mode
            child = os.fork()
            if child:
                lock_init(libc, job if mode == "root" else {})
                os._exit(reap_as_init(child))
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os._exit(run_investigation(job, isolation, result_fd))
        isolation["namespaces_refused"] = refused
    if job.get("workdir"):
        os.chdir(job["workdir"])
    return run_investigation(job, isolation, result_fd)
