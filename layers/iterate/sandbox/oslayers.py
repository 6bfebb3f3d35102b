"""OS layers that hold without Python's help: a seccomp filter, an unprivileged uid, run-wide limits (stdlib only)."""

# Imported by the worker (a script: `import oslayers`) and by the engine (`iterate.sandbox.oslayers`): nothing
# here may import the engine. The seccomp filter is a classic BPF program written here rather than taken from
# libseccomp: no shared library to ship in the Lambda layer, one table per architecture checked against
# libseccomp by tests/sandbox/test_oslayers.py where libseccomp is installed.

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import random
import signal
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------------------
# seccomp

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
X32_SYSCALL_BIT = 0x40000000

# Denied outright: the network, other processes' memory, namespaces, mounts, the kernel's keyrings, BPF,
# perf, userfaultfd, modules, kexec, exec, io_uring (which performs socket/connect without these syscalls),
# fds taken from other processes, signals by pidfd, new filters, file handles, clocks, host names, swap,
# SysV and POSIX IPC (objects that outlive a run: a channel to the next run or another tenant's; no template
# needs one), comparing other processes' resources (kcmp), and setting limits (they are set before the filter).
DENIED = {
    "x86_64": {
        "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "accept4": 288,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440,
        "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "execve": 59, "execveat": 322, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "pidfd_send_signal": 424, "pidfd_getfd": 438, "seccomp": 317,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "reboot": 169, "swapon": 167,
        "swapoff": 168, "syslog": 103, "acct": 163, "settimeofday": 164, "clock_settime": 227,
        "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170, "setdomainname": 171,
        "quotactl": 179, "lookup_dcookie": 212, "vhangup": 153, "fanotify_init": 300, "iopl": 172,
        "ioperm": 173,
        "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
        "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240,
        "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
        "mq_getsetattr": 245, "kcmp": 312, "setrlimit": 160,
    },
    "aarch64": {
        "socket": 198, "connect": 203, "accept": 202, "bind": 200, "listen": 201, "accept4": 242,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440,
        "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "execve": 221, "execveat": 281, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "pidfd_send_signal": 424, "pidfd_getfd": 438, "seccomp": 277,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "reboot": 142, "swapon": 224,
        "swapoff": 225, "syslog": 116, "acct": 89, "settimeofday": 170, "clock_settime": 112,
        "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161, "setdomainname": 162,
        "quotactl": 60, "lookup_dcookie": 18, "vhangup": 58, "fanotify_init": 262,
        "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193,
        "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187,
        "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
        "mq_getsetattr": 185, "kcmp": 272, "setrlimit": 164,
    },
}  # fmt: skip
# Calls that name a process by pid: allowed on the caller itself only (pid 0 or its own), so that no run
# can lower a host process's limits, re-prioritise, pin or migrate it, or hold a descriptor on it.
SELF_ONLY = {
    "x86_64": {
        "prlimit64": 302, "setpriority": 141, "getpriority": 140, "sched_setaffinity": 203,
        "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314, "ioprio_set": 251,
        "ioprio_get": 252, "migrate_pages": 256, "move_pages": 279, "get_robust_list": 274,
        "pidfd_open": 434,
    },
    "aarch64": {
        "prlimit64": 261, "setpriority": 140, "getpriority": 141, "sched_setaffinity": 122,
        "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274, "ioprio_set": 30,
        "ioprio_get": 31, "migrate_pages": 238, "move_pages": 239, "get_robust_list": 100,
        "pidfd_open": 434,
    },
}  # fmt: skip
# Where the pid is not the first argument: after a `which` argument that must name one process.
WHICH_PROCESS = {
    "setpriority": 0,
    "getpriority": 0,
    "ioprio_set": 1,
    "ioprio_get": 1,
}  # PRIO_/IOPRIO_WHO_PROCESS
# Allowed only with some arguments (checked below), and clone3, whose flags a filter cannot read.
CONDITIONAL = {
    "x86_64": {
        "socketpair": 53, "clone": 56, "clone3": 435, "fork": 57, "vfork": 58, "kill": 62,
        "rt_sigqueueinfo": 129, "tkill": 200, "tgkill": 234, "rt_tgsigqueueinfo": 297, "ioctl": 16,
    },
    "aarch64": {
        "socketpair": 199, "clone": 220, "clone3": 435, "kill": 129, "rt_sigqueueinfo": 138,
        "tkill": 130, "tgkill": 131, "rt_tgsigqueueinfo": 240, "ioctl": 29,
    },
}  # fmt: skip

AF_UNIX = 1
SOCK_STREAM = 1
SOCK_FLAGS = 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC (same on both architectures)
CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TIOCSTI = 0x5412  # push characters into a terminal's input
TIOCLINUX = 0x541C

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_ALLOW = 0x7FFF0000
SECCOMP_SET_MODE_FILTER = 1
FLAG_TSYNC = 1
FLAG_NEW_LISTENER = 8
FLAG_TSYNC_ESRCH = 16
NOTIF_RECV = 0xC0502100  # _IOWR('!', 0, struct seccomp_notif), 80 bytes
NOTIF_SEND = 0xC0182101  # _IOWR('!', 1, struct seccomp_notif_resp), 24 bytes
PR_SET_NO_NEW_PRIVS = 38

# Classic BPF opcodes.
LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35
JSET = 0x45
AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
RET = 0x06  # BPF_RET | BPF_K
OFFSET_NR, OFFSET_ARCH = 0, 4


def _arg(index: int) -> int:
    """Offset of the low 32 bits of syscall argument `index` in struct seccomp_data (little endian)."""
    return 16 + 8 * index


def machine() -> str:
    return platform.machine()


def syscall_name(arch: str, number: int) -> str:
    for table in (DENIED[arch], CONDITIONAL[arch], SELF_ONLY[arch]):
        for name, nr in table.items():
            if nr == number:
                return name
    return f"syscall {number}"


@dataclass
class _Program:
    """A tiny assembler: jumps name labels, resolved to the 8-bit forward offsets classic BPF allows."""

    code: list[tuple[int, int | str, int | str, int]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)

    def op(self, code: int, k: int = 0, jt: int | str = 0, jf: int | str = 0) -> None:
        self.code.append((code, jt, jf, k & 0xFFFFFFFF))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.code):
            offsets = []
            for target in (jt, jf):
                if isinstance(target, str):
                    target = self.labels[target] - index - 1
                if not 0 <= target <= 255:
                    raise ValueError(f"jump out of range at {index}")
                offsets.append(target)
            out += struct.pack("<HBBI", code, offsets[0], offsets[1], k)
        return bytes(out)


def build_filter(
    arch: str, *, own_pid: int, deny: int, allow_processes: bool = True, count_tasks: bool = False
) -> bytes:
    """The filter as packed `struct sock_filter`s. Any other architecture (or the x32 ABI) is killed.

    `deny`: the action for a refused call (a user notification, or killing the process). `own_pid`: the
    only process signals may name (besides 0, the caller's process group). `allow_processes`: False
    refuses new processes (threads stay allowed), for when no limit could hold their number.
    `count_tasks` (with notifications): every new process or thread is first shown to the supervisor,
    which counts them for the whole run and lets each go on, or refuses past the run's limit.
    """
    if arch not in AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp table for {arch}")
    calls = CONDITIONAL[arch]
    p = _Program()
    p.op(LD_ABS, OFFSET_ARCH)
    p.op(JEQ, AUDIT_ARCH[arch], 0, "kill")
    p.op(LD_ABS, OFFSET_NR)
    if arch == "x86_64":
        p.op(JGE, X32_SYSCALL_BIT, "kill", 0)
    for nr in sorted(set(DENIED[arch].values())):
        p.op(JEQ, nr, "deny", 0)
    p.op(JEQ, calls["clone3"], "enosys", 0)
    p.op(JEQ, calls["socketpair"], "socketpair", 0)
    p.op(JEQ, calls["clone"], "clone", 0)
    for name in ("fork", "vfork"):
        if name in calls:
            p.op(JEQ, calls[name], "count" if count_tasks else "allow" if allow_processes else "deny", 0)
    p.op(JEQ, calls["kill"], "kill_pid", 0)
    p.op(JEQ, calls["rt_sigqueueinfo"], "kill_pid", 0)
    for name in ("tkill", "tgkill", "rt_tgsigqueueinfo"):
        p.op(JEQ, calls[name], "own_pid", 0)
    p.op(JEQ, calls["ioctl"], "ioctl", 0)
    for name, nr in SELF_ONLY[arch].items():
        p.op(JEQ, nr, f"self_{name}", 0)
    p.op(RET, RET_ALLOW)
    # socketpair(AF_UNIX, SOCK_STREAM[|flags]) only: a connected pair reaches nothing outside.
    p.label("socketpair")
    p.op(LD_ABS, _arg(0))
    p.op(JEQ, AF_UNIX, 0, "deny")
    p.op(LD_ABS, _arg(1))
    p.op(AND, ~SOCK_FLAGS)
    p.op(JEQ, SOCK_STREAM, "allow", "deny")
    p.label("clone")
    p.op(LD_ABS, _arg(0))
    p.op(JSET, CLONE_NAMESPACES, "deny", 0)
    if count_tasks:
        p.op(RET, RET_USER_NOTIF)
    elif allow_processes:
        p.op(RET, RET_ALLOW)
    else:
        p.op(JSET, CLONE_THREAD, "allow", "deny")
    # kill/rt_sigqueueinfo: the process group (0) or the investigation's own process.
    p.label("kill_pid")
    p.op(LD_ABS, _arg(0))
    p.op(JEQ, 0, "allow", 0)
    p.label("own_pid")
    p.op(LD_ABS, _arg(0))
    p.op(JEQ, own_pid, "allow", "deny")
    p.label("ioctl")
    p.op(LD_ABS, _arg(1))
    p.op(JEQ, TIOCSTI, "deny", 0)
    p.op(JEQ, TIOCLINUX, "deny", "allow")
    for name in SELF_ONLY[arch]:
        p.label(f"self_{name}")
        pid_arg = 0
        if name in WHICH_PROCESS:
            p.op(LD_ABS, _arg(0))
            p.op(JEQ, WHICH_PROCESS[name], 0, "deny")
            pid_arg = 1
        p.op(LD_ABS, _arg(pid_arg))
        if name == "pidfd_open":  # pid 0 names no process here
            p.op(JEQ, own_pid, "allow", "deny")
            continue
        p.op(JEQ, 0, 1, 0)
        p.op(JEQ, own_pid, 0, "deny")
        if name != "prlimit64":
            p.op(RET, RET_ALLOW)
            continue
        # prlimit64(pid, resource, new, old): reading only; a new limit (a non-null pointer) is refused.
        p.op(LD_ABS, _arg(2))
        p.op(JEQ, 0, 0, "deny")
        p.op(LD_ABS, _arg(2) + 4)
        p.op(JEQ, 0, "allow", "deny")
    p.label("allow")
    p.op(RET, RET_ALLOW)
    p.label("count")
    p.op(RET, RET_USER_NOTIF)
    p.label("deny")
    p.op(RET, deny)
    p.label("enosys")
    p.op(RET, RET_ERRNO | errno.ENOSYS)  # glibc then falls back to clone, whose flags are checked
    p.label("kill")
    p.op(RET, RET_KILL_PROCESS)
    return p.assemble()


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def install_filter(
    *, own_pid: int, allow_processes: bool = True, notify: bool = True
) -> tuple[int | None, str]:
    """no_new_privs, then the filter on every thread of this process. Returns (listener fd or None, mode).

    With `notify`, refused calls wait for a supervisor reading the returned listener (it records them and
    answers EPERM); where the kernel cannot combine a listener with thread sync (before 5.7), a refused
    call kills the process instead. Raises OSError when no filter could be installed.
    """
    arch = machine()
    if arch not in SYS_SECCOMP:
        raise OSError(errno.ENOSYS, f"seccomp: unsupported architecture {arch}")
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs refused")
    attempts = [(RET_USER_NOTIF, FLAG_TSYNC | FLAG_NEW_LISTENER | FLAG_TSYNC_ESRCH)] if notify else []
    attempts.append((RET_KILL_PROCESS, FLAG_TSYNC))
    last = 0
    for deny, flags in attempts:
        listening = bool(flags & FLAG_NEW_LISTENER)
        program = build_filter(
            arch, own_pid=own_pid, deny=deny, allow_processes=allow_processes, count_tasks=listening
        )
        buffer = ctypes.create_string_buffer(program, len(program))
        prog = _Fprog(len(program) // 8, ctypes.addressof(buffer))
        rc = libc.syscall(
            ctypes.c_long(SYS_SECCOMP[arch]),
            ctypes.c_long(SECCOMP_SET_MODE_FILTER),
            ctypes.c_long(flags),
            ctypes.byref(prog),
        )
        if listening and rc >= 0:  # with TSYNC_ESRCH a thread that cannot sync gives -ESRCH, not its id
            return int(rc), "notify"
        if not listening and rc == 0:  # plain TSYNC returns the id of a thread it could not sync
            return None, "kill"
        last = ctypes.get_errno() if rc < 0 else errno.EBUSY
    raise OSError(last, f"seccomp filter refused: {os.strerror(last)}")


class _NotifData(ctypes.Structure):
    _fields_ = [
        ("nr", ctypes.c_int32),
        ("arch", ctypes.c_uint32),
        ("ip", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    ]


class _Notif(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("data", _NotifData),
    ]


class _NotifResp(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    ]


TASK_CALLS = ("clone", "fork", "vfork")
NOTIF_FLAG_CONTINUE = 1


@dataclass(frozen=True)
class Notification:
    id: int
    name: str  # what was tried, for the refusal's message
    new_task: bool  # a process or thread about to be created (counted, not refused by itself)


def receive_notification(listener: int) -> Notification | None:
    """One call the filter sent to the supervisor; None if it vanished (the caller died meanwhile)."""
    import fcntl

    notif = _Notif()
    try:
        fcntl.ioctl(listener, NOTIF_RECV, notif)  # type: ignore[call-overload]
    except OSError:
        return None
    name = syscall_name(machine(), notif.data.nr)
    args = [notif.data.args[i] & 0xFFFFFFFF for i in range(2)]
    if name == "socket":
        name = f"socket(family {args[0]})"
    elif name == "socketpair":
        name = f"socketpair(family {args[0]}, type {args[1]})"
    return Notification(notif.id, name, name in TASK_CALLS)


def respond(listener: int, notification: Notification, *, error: int = 0) -> None:
    """Let the call go on (error 0: only ever for counted new tasks, whose flags the filter checked) or
    fail it with `error`."""
    import fcntl

    if error:
        resp = _NotifResp(notification.id, 0, -error, 0)
    else:
        resp = _NotifResp(notification.id, 0, 0, NOTIF_FLAG_CONTINUE)
    with contextlib.suppress(OSError):
        fcntl.ioctl(listener, NOTIF_SEND, resp)  # type: ignore[call-overload]


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


def drop_to(uid: int, gid: int) -> None:
    """setgroups([]), then gid and uid (real, effective and saved): every capability goes with uid 0."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, "the uid did not change")


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
    libc = _libc()
    call = getattr(libc, IPC_KINDS[obj.kind][1])
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
