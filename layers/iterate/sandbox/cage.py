"""The host's watch of one run: its cgroup, its uid, its processes, its clock; the kill and the check after.

What is seen here, with what the supervisor reports, decides the verdict (LocalSandbox._outcome).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iterate.sandbox import oslayers
from iterate.sandbox.model import SandboxError, SandboxLimits, ZygoteGone


def host_root() -> bool:
    """Root in the initial user namespace: the only case where the sandbox can hand a run another uid."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    try:
        return Path("/proc/self/uid_map").read_text().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def tasks_of(uid: int) -> int:
    """Tasks (threads included) of `uid` now: RLIMIT_NPROC counts them all."""
    total = 0
    for pid in oslayers.pids_of_uid(uid):
        info = oslayers.proc_info(pid)
        total += info.threads if info is not None else 1
    return total


def send_job(path: str, job: dict[str, Any], fds: list[int]) -> socket.socket:
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
        raise ZygoteGone(f"the sandbox zygote is not serving: {exc}") from exc
    return conn


@dataclass
class Seen:
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


class Cage:
    """The run's boundary as this process sees it: a cgroup, the run's own uid, and the supervisor's tree.

    Which processes belong to the run: everything below the supervisor (it is a child subreaper: orphans,
    double-forked or not, come back under it), everything in the run's cgroup, everything of the run's uid.
    """

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self.host_root = host_root()
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
        self.caller_tasks = None if os.geteuid() == 0 or sys.platform != "linux" else tasks_of(os.getuid())
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

    def verify_empty(self, seen: Seen) -> None:
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


class HostLines:
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


def drive(conn: socket.socket, cage: Cage, *, timeout: float, setup_s: float, limits: SandboxLimits) -> Seen:
    """Follow one run from outside: its time, its memory and tasks when no cgroup holds them, the kill of
    everything it started, and the check that nothing is left. See the protocol in supervisor.py."""
    seen = Seen()
    lines = HostLines(conn)
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
                        raise ZygoteGone("the sandbox closed the connection before starting the job")
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
            raise ZygoteGone(f"the sandbox did not take the job: {exc}") from exc
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
