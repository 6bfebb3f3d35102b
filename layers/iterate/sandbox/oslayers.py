"""The host's side of the OS layers: a run's own uid, its processes and cgroup seen from outside, and the IPC
objects it left (stdlib only).

What a run's own processes put on themselves (namespaces, Landlock, seccomp, limits) is in confine/.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import random
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

# --------------------------------------------------------------------------------------------------------
# An unprivileged uid per run

# Far above the ranges distributions and container engines hand out (systemd stops at 0x6FFFFFFF), so
# no file or process on the host belongs to one; a fresh one per run, so that one run's uid owns nothing
# of another's and RLIMIT_NPROC counts exactly one run's tasks.
RUN_UID_BASE = 0x7A000000
RUN_UID_SPAN = 1 << 24


def pick_run_uid() -> int:
    """A uid in the sandbox's range that no process uses now."""
    for _ in range(32):
        uid = RUN_UID_BASE + random.randrange(1, RUN_UID_SPAN)
        if not any(True for _ in pids_of_uid(uid)):
            return uid
    raise OSError(errno.EAGAIN, "no free sandbox uid")


def is_run_uid(uid: int) -> bool:
    return RUN_UID_BASE < uid < RUN_UID_BASE + RUN_UID_SPAN


def readable_by_others(paths: Iterable[str]) -> bool:
    """Whether another uid could reach and read these paths (every parent searchable by 'other')."""
    for path in paths:
        current = os.path.realpath(path)
        while True:
            try:
                mode = os.stat(current).st_mode
            except OSError:
                return False
            if not mode & 0o001 and os.path.isdir(current):
                return False
            if not os.path.isdir(current) and not mode & 0o004:
                return False
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    return True


# --------------------------------------------------------------------------------------------------------
# SysV IPC objects a run left (the filter refuses creating them; this is the sweep behind it)

IPC_KINDS = {"shm": ("shmid", "shmctl"), "msg": ("msqid", "msgctl"), "sem": ("semid", "semctl")}
IPC_RMID = 0


@dataclass(frozen=True)
class IpcObject:
    kind: str  # shm, msg or sem
    id: int
    uid: int
    cuid: int
    cpid: int = -1  # the creator's pid (shared memory only)

    def describe(self) -> str:
        name = {"shm": "shared memory segment", "msg": "message queue", "sem": "semaphore set"}[self.kind]
        return f"SysV {name} {self.id} (uid {self.uid})"


def ipc_objects(root: str = "/proc/sysvipc") -> list[IpcObject]:
    """Every SysV IPC object of this IPC namespace, from the kernel's tables (readable by anyone)."""
    found = []
    for kind, (id_field, _) in IPC_KINDS.items():
        try:
            with open(f"{root}/{kind}", encoding="ascii") as handle:
                header, *rows = handle.read().splitlines()
        except OSError:
            continue
        names = header.split()
        for row in rows:
            values = dict(zip(names, row.split(), strict=False))
            with contextlib.suppress(KeyError, ValueError):
                cpid = int(values.get("cpid", -1))
                found.append(
                    IpcObject(kind, int(values[id_field]), int(values["uid"]), int(values["cuid"]), cpid)
                )
    return found


def remove_ipc(obj: IpcObject) -> bool:
    """IPC_RMID on the object (a segment still attached goes when its last user detaches); False if
    refused or already gone."""
    call = getattr(ctypes.CDLL(None, use_errno=True), IPC_KINDS[obj.kind][1])
    if obj.kind == "sem":
        return int(call(obj.id, 0, IPC_RMID)) == 0
    return int(call(obj.id, IPC_RMID, None)) == 0


def sweep_ipc(uids: Iterable[int]) -> list[str]:
    """Remove every SysV IPC object owned or created by one of `uids`; what was found (removed or not)."""
    wanted = set(uids)
    found = []
    for obj in ipc_objects():
        if obj.uid in wanted or obj.cuid in wanted:
            removed = remove_ipc(obj)
            found.append(obj.describe() + ("" if removed else " (could not be removed)"))
    return found


# --------------------------------------------------------------------------------------------------------
# Processes seen from outside (/proc): the host's view of a run


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def uids_of(pid: int) -> list[int]:
    """The real, effective, saved and file-system uids of `pid` ([] if it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            text = handle.read()
    except OSError:
        return []
    start = text.find(b"\nUid:")
    if start < 0:
        return []
    return [int(u) for u in text[start + 5 : text.find(b"\n", start + 5)].split()]


def pids_of_uid(uid: int) -> Iterable[int]:
    """Processes of which any of the real, effective, saved or file-system uids is `uid`."""
    for pid in all_pids():
        if uid in uids_of(pid):
            yield pid


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str
    threads: int
    anon_bytes: int
    start: int


def proc_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
        with open(f"/proc/{pid}/statm", "rb") as handle:
            statm = handle.read().split()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    page = os.sysconf("SC_PAGE_SIZE")
    resident, shared = int(statm[1]), int(statm[2])
    return ProcInfo(
        pid=pid,
        ppid=int(rest[1]),
        state=rest[0],
        threads=int(rest[17]),
        anon_bytes=max(0, resident - shared) * page,
        start=int(rest[19]),
    )


def descendants(root: int) -> list[ProcInfo]:
    """Every process below `root` (not `root` itself), from one pass over /proc."""
    infos = [info for pid in all_pids() if (info := proc_info(pid)) is not None]
    children: dict[int, list[ProcInfo]] = {}
    for info in infos:
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcInfo] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child.pid)
    return found


def kill_checked(info: ProcInfo) -> None:
    """SIGKILL `info` through a pidfd, after checking the pid still names the same process (no reuse race)."""
    try:
        fd = os.pidfd_open(info.pid)
    except OSError as exc:
        if exc.errno == errno.ENOSYS:  # a kernel before 5.3: no pidfd, only the plain (racier) kill
            again = proc_info(info.pid)
            if again is not None and again.start == info.start:
                with contextlib.suppress(OSError):
                    os.kill(info.pid, signal.SIGKILL)
        return
    try:
        again = proc_info(info.pid)
        if again is not None and again.start == info.start:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------------------
# cgroups: one per run, memory and processes for the whole tree


@dataclass
class RunCgroup:
    """The run's cgroup directories (v1: one per controller; v2: one) and what they recorded."""

    dirs: dict[str, str]
    version: int

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError), open(path) as handle:
                found.update(int(line) for line in handle if line.strip())
        return found

    def _read(self, controller: str, name: str) -> str:
        try:
            with open(os.path.join(self.dirs[controller], name)) as handle:
                return handle.read()
        except (OSError, KeyError):
            return ""

    def events(self) -> dict[str, int]:
        """oom_kill (processes the kernel killed for memory) and pids_max (forks refused at the limit)."""

        def counter(text: str, key: str) -> int:
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1])
            return 0

        memory = self._read("memory", "memory.oom_control" if self.version == 1 else "memory.events")
        pids = self._read("pids", "pids.events")
        return {"oom_kill": counter(memory, "oom_kill"), "pids_max": counter(pids, "max")}

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL everything in the cgroup until it is empty; True when it is (zombies count as there)."""
        if self.version == 2:
            with (
                contextlib.suppress(OSError),
                open(os.path.join(self.dirs["memory"], "cgroup.kill"), "w") as h,
            ):
                h.write("1")
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                info = proc_info(pid)
                if info is not None:
                    kill_checked(info)
            time.sleep(0.002)
        return not self.pids()

    def remove(self, deadline_s: float = 2.0) -> bool:
        """rmdir every directory: the kernel refuses while a task is inside, so success proves it empty.

        A killed task not yet reaped still counts (EBUSY) for a moment: tried again until `deadline_s`.
        """
        end = time.monotonic() + deadline_s
        pending = list(dict.fromkeys(self.dirs.values()))
        while True:
            for path in list(pending):
                try:
                    os.rmdir(path)
                    pending.remove(path)
                except FileNotFoundError:
                    pending.remove(path)
                except OSError:
                    pass
            if not pending or time.monotonic() > end:
                return not pending
            time.sleep(0.005)


def own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) → this process's cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


def create_cgroup(name: str, *, memory_bytes: int, max_tasks: int) -> RunCgroup | None:
    """A fresh cgroup below this process's own, limiting memory and tasks; None where none can be made."""
    try:
        own = own_cgroups()
    except OSError:
        return None
    root = "/sys/fs/cgroup"
    v1 = {c: os.path.join(root, c) for c in ("memory", "pids")}
    if all(os.path.exists(os.path.join(v1[c], "cgroup.procs")) and c in own for c in v1):
        dirs = {c: os.path.join(v1[c], own[c].lstrip("/"), name) for c in v1}
        settings = {"memory": {"memory.limit_in_bytes": str(memory_bytes), "memory.swappiness": "0"},
                    "pids": {"pids.max": str(max_tasks)}}  # fmt: skip
        version = 1
    elif "" in own and os.path.exists(os.path.join(root, "cgroup.controllers")):
        parent = os.path.join(root, own[""].lstrip("/"))
        try:
            with open(os.path.join(parent, "cgroup.subtree_control")) as handle:
                delegated = handle.read().split()
        except OSError:
            return None
        if "memory" not in delegated or "pids" not in delegated:
            return None
        path = os.path.join(parent, name)
        dirs = {"memory": path, "pids": path}
        settings = {"memory": {"memory.max": str(memory_bytes), "memory.swap.max": "0"},
                    "pids": {"pids.max": str(max_tasks)}}  # fmt: skip
        version = 2
    else:
        return None
    cgroup = RunCgroup(dirs=dirs, version=version)
    try:
        for controller, path in dirs.items():
            os.makedirs(path, exist_ok=True)
            for key, value in settings[controller].items():
                try:
                    with open(os.path.join(path, key), "w") as handle:
                        handle.write(value)
                except OSError:
                    if key.endswith("swappiness") or key.endswith("swap.max"):
                        continue  # no swap accounting here: nothing to turn off
                    raise
    except OSError:
        cgroup.remove()
        return None
    return cgroup
