"""The supervisor: the trusted parent of one run, outside every layer the runner puts on itself.

A handler forked from a zygote, or the process LocalSandbox started. It never runs investigation code. It decides nothing alone: it reports what it saw to the host
(LocalSandbox), which adds what it saw from outside (cgroup, processes, time) and gives the verdict.

  supervisor → host   {"pid", "runner"}            the runner is started
                      {"armed": true}              the runner's OS layers are on; untrusted code starts now
                      {"exited": status, ...}      the runner ended (or was killed for a refusal)
  host → supervisor   {"cleaned": true}            every other process of the run is dead
  supervisor → host   {"status", "cpu_s", "seen"}  what it saw and the runner's report; it ends

The runner reports on a pipe only the supervisor reads; its OS refusals reach the supervisor through
the seccomp listener (each refused call is answered EPERM, and the run is killed at once).
"""

import contextlib
import errno
import json
import os
import resource
import signal
import time

from .confine import seccomp
from .confine.kernel import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, c_library, exit_code
from .runner import execute


class _Lines:
    """Newline-delimited JSON from a socket, without buffering hidden from select()."""

    def __init__(self, sock) -> None:  # type: ignore[no-untyped-def]
        self.sock = sock
        self.buffer = b""

    def pop(self) -> dict | None:
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def feed(self) -> bool:
        """Read what is there; False at the end of the stream."""
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)


def supervise(job: dict, host, *, stderr_fd: int, data_fd: int | None, cgroup_fds: list[int]) -> int:  # type: ignore[no-untyped-def]
    """Start the runner, watch it, and send the host what was seen (see the protocol above).

    Should this process fail, the runner is killed and the host told why (it then gives a crash verdict
    and kills what is left of the run itself)."""
    runner: list[int] = []
    try:
        return _supervise(
            job, host, stderr_fd=stderr_fd, data_fd=data_fd, cgroup_fds=cgroup_fds, runner=runner
        )
    except BaseException as exc:
        for pid in runner:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            send_line(
                host, {"status": None, "seen": {"supervisor_error": f"{type(exc).__name__}: {exc}"[:500]}}
            )
        raise


def _supervise(  # type: ignore[no-untyped-def]
    job: dict, host, *, stderr_fd: int, data_fd: int | None, cgroup_fds: list[int], runner: list[int]
) -> int:
    import select
    import socket

    libc = c_library()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of the run can read or write this one's memory
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the run come back here, not to init
    read_end, write_end = os.pipe()
    control, control_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child_fd = control_child.detach()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            host.close()
            control.close()
            os.close(read_end)
            os.dup2(stderr_fd, 1)
            os.dup2(stderr_fd, 2)
            keep = {0, 1, 2, write_end, child_fd, *cgroup_fds} | ({data_fd} if data_fd is not None else set())
            for fd in range(3, 1024):
                if fd not in keep:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            job.update(result_fd=write_end, control_fd=child_fd, data_fd=data_fd, cgroup_fds=cgroup_fds)
            code = execute(job)
        finally:
            os._exit(code)
    runner.append(child)
    for fd in (write_end, child_fd, *cgroup_fds, *([data_fd] if data_fd is not None else [])):
        os.close(fd)
    send_line(host, {"pid": os.getpid(), "runner": child})
    # Readable when the runner ends: its end wakes the loop below at once rather than at the next tick.
    try:
        runner_fd: int | None = os.pidfd_open(child)
    except (OSError, AttributeError):
        runner_fd = None
    cap = int(job["max_output_bytes"]) * 2 + 65536
    report = bytearray()
    state: dict = {
        "overflow": False,
        "eof": False,
        "armed": None,
        "listener": None,
        "status": None,
        "tasks": 0,
        "task_limit": False,
    }
    refusals: list[str] = []
    control_lines = _Lines(control)
    host_lines = _Lines(host)
    control_open = True

    # Counted for the whole run (the count never goes down): a batch's own process per item on top.
    max_tasks = int(job["max_processes"]) + len(job.get("batch") or ())

    # The files the runner may read where Landlock is its file system layer (lockdown): the same list.
    view = [os.path.realpath(p) for p in (job.get("landlock_paths") or job.get("python_paths") or [])]

    def readable(path: str) -> bool:
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in view)

    def answer(listener: int) -> bool:
        """One notification: count a new task (refuse it past the limit), or record a refused call.
        Anything refused or over the limit ends the run at once."""
        note = seccomp.receive_notification(listener)
        if note is None:
            return False
        if note.open_at is not None:  # a read-only open without a jail: inside Landlock's view, or refused
            path = seccomp.opened_path(note.open_at)
            # Not a file (nothing there: ENOENT whatever the view; a directory: a listing, which Python's
            # import machinery tries on every folder of sys.path), or a file inside the view: it goes on.
            if path is None or not os.path.isfile(path) or readable(path):
                seccomp.respond(listener, note)
                return True
            if len(refusals) < 20:
                refusals.append(f"read of {path[:200]} (outside the read view: Landlock)")
            seccomp.respond(listener, note, error=errno.EACCES)
            kill_runner()
            return True
        if note.new_task and state["tasks"] + 1 < max_tasks:
            state["tasks"] += 1
            seccomp.respond(listener, note)
            return True
        if note.new_task:
            state["task_limit"] = True
            seccomp.respond(listener, note, error=errno.EAGAIN)
        else:
            if len(refusals) < 20:
                refusals.append(note.name)
            seccomp.respond(listener, note, error=errno.EPERM)
        kill_runner()
        return True

    def kill_runner() -> None:
        for target in (lambda: os.killpg(child, signal.SIGKILL), lambda: os.kill(child, signal.SIGKILL)):
            with contextlib.suppress(OSError):
                target()

    def step(timeout: float) -> dict | None:
        """One round: pipe, control, refusals, reaping; returns a message from the host, if any."""
        nonlocal control_open
        watched = [host] + ([read_end] if not state["eof"] else []) + ([control] if control_open else [])
        if runner_fd is not None and state["status"] is None:
            watched.append(runner_fd)
        if state["listener"] is not None:
            watched.append(state["listener"])
        ready = select.select(watched, [], [], timeout)[0]
        if read_end in ready:
            data = os.read(read_end, 65536)
            if not data:
                state["eof"] = True
            elif len(report) + len(data) > cap:
                state["overflow"] = True
                kill_runner()
            else:
                report.extend(data)
        if control_open and control in ready:
            try:
                message, fds, _, _ = socket.recv_fds(control, 65536, 1)
            except OSError:  # the runner died mid-message: nothing more comes from it
                message, fds = b"", []
            for fd in fds:
                state["listener"] = fd
            control_lines.buffer += message
            if not message:
                control_open = False
            while (line := control_lines.pop()) is not None:
                if line.get("armed") and state["armed"] is None:
                    state["armed"] = line.get("isolation") or {}
                    send_line(host, {"armed": True})
        if state["listener"] is not None and state["listener"] in ready:
            answer(state["listener"])
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                state["status"] = exit_code(status)
                runner.clear()  # reaped: its pid may be reused from now on
        if host in ready:
            if not host_lines.feed():
                raise ConnectionError("the host went away")
            return host_lines.pop()
        return host_lines.pop()

    while state["status"] is None:
        step(0.05)
    if runner_fd is not None:
        os.close(runner_fd)
    send_line(host, {"exited": state["status"], "refusals": refusals})
    while True:  # the host kills every other process of the run, then says so
        message = step(0.05)
        if message is not None and message.get("cleaned"):
            break
    end = time.monotonic() + 5
    while time.monotonic() < end:  # everything is dead: reap it, then read the pipe to its end
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
            children = True
        except ChildProcessError:
            children = False
        if not children and state["eof"]:
            break
        step(0.005)
    while state["listener"] is not None and select.select([state["listener"]], [], [], 0)[0]:
        if not answer(state["listener"]):
            break
    parsed, problem = None, None
    if state["overflow"]:
        problem = "output_size"
    elif not state["eof"]:
        problem = "the result channel was still open after the run"
    else:
        try:
            parsed = json.loads(bytes(report)) if report else None
            if parsed is not None and not isinstance(parsed, dict):
                parsed, problem = None, "the report is not a JSON object"
        except ValueError:
            problem = "the report is not valid JSON"
    seen = {
        "status": state["status"],
        "armed": state["armed"] is not None,
        "isolation": state["armed"] or {},
        "refusals": refusals,
        "tasks_started": state["tasks"],
        "task_limit": state["task_limit"],
        "report": parsed,
        "report_problem": problem,
    }
    cpu = cpu_seconds(resource.getrusage(resource.RUSAGE_CHILDREN)) + cpu_seconds(
        resource.getrusage(resource.RUSAGE_SELF)
    )
    # On the connection to the host, which no process of the run holds (no file a run could name).
    send_line(host, {"status": state["status"], "cpu_s": round(cpu, 4), "seen": seen})
    return 0


def send_line(conn, message: dict) -> None:  # type: ignore[no-untyped-def]
    conn.sendall(json.dumps(message).encode() + b"\n")


def cpu_seconds(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime
