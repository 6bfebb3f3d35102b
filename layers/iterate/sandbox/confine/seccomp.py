"""The seccomp filter: every syscall a run may not make, refused in one place (stdlib only).

A classic BPF program written here rather than taken from libseccomp: no shared library to ship in the
Lambda layer, one table per architecture, checked against libseccomp by tests/sandbox/test_oslayers.py
where libseccomp is installed. A refused call goes to the supervisor as a user notification (it records
the call, answers EPERM and ends the run) or, where the kernel cannot notify, kills the process: a
refusal always ends the run and is never a proof. Loaded standalone by tests (no relative imports).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass, field

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
# Without a jail, Landlock's view is read-only: every call that writes the file system is one Landlock
# refuses, so the filter refuses it first (and the supervisor sees it). Opens are read by their flags; a
# read-only open is shown to the supervisor, which checks its path against the same view (watch_files).
FILE_WRITES = {
    "x86_64": {
        "creat": 85, "mkdir": 83, "mkdirat": 258, "rmdir": 84, "unlink": 87, "unlinkat": 263, "rename": 82,
        "renameat": 264, "renameat2": 316, "link": 86, "linkat": 265, "symlink": 88, "symlinkat": 266,
        "mknod": 133, "mknodat": 259, "truncate": 76, "openat2": 437,
    },
    "aarch64": {
        "mkdirat": 34, "unlinkat": 35, "renameat": 38, "renameat2": 276, "linkat": 37, "symlinkat": 36,
        "mknodat": 33, "truncate": 45, "openat2": 437,
    },
}  # fmt: skip
OPENS = {"x86_64": {"open": (2, 1), "openat": (257, 2)}, "aarch64": {"openat": (56, 2)}}  # nr, flags argument
O_WRITING = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000  # O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND
AT_FDCWD = -100
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
    opens = {name: nr for name, (nr, _) in OPENS[arch].items()}
    for table in (DENIED[arch], CONDITIONAL[arch], SELF_ONLY[arch], FILE_WRITES[arch], opens):
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
    arch: str,
    *,
    own_pid: int,
    deny: int,
    allow_processes: bool = True,
    count_tasks: bool = False,
    watch_files: bool = False,
) -> bytes:
    """The filter as packed `struct sock_filter`s. Any other architecture (or the x32 ABI) is killed.

    `deny`: the action for a refused call (a user notification, or killing the process). `own_pid`: the
    only process signals may name (besides 0, the caller's process group). `allow_processes`: False
    refuses new processes (threads stay allowed), for when no limit could hold their number.
    `count_tasks` (with notifications): every new process or thread is first shown to the supervisor,
    which counts them for the whole run and lets each go on, or refuses past the run's limit.
    `watch_files` (a read-only Landlock view, no jail): every call that writes the file system is refused,
    and, with notifications, every read-only open is shown to the supervisor (it checks the path).
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
    if watch_files:
        for nr in sorted(set(FILE_WRITES[arch].values())):
            p.op(JEQ, nr, "deny", 0)
        for name, (nr, _) in OPENS[arch].items():
            p.op(JEQ, nr, f"open_{name}", 0)
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
    for name, (_, flags_arg) in OPENS[arch].items() if watch_files else ():
        p.label(f"open_{name}")
        p.op(LD_ABS, _arg(flags_arg))
        p.op(JSET, O_WRITING, "deny", 0)
        p.op(RET, RET_USER_NOTIF if count_tasks else RET_ALLOW)  # a read: the supervisor checks its path
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
    *, own_pid: int, allow_processes: bool = True, notify: bool = True, watch_files: bool = False
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
            arch,
            own_pid=own_pid,
            deny=deny,
            allow_processes=allow_processes,
            count_tasks=listening,
            watch_files=watch_files,
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
    # A read-only open under watch_files: (the caller's pid, the directory fd, the path's address), for the
    # supervisor to check the path against the read view (`opened_path`).
    open_at: tuple[int, int, int] | None = None


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
    elif name in SELF_ONLY[machine()]:
        pid = args[1] if name in WHICH_PROCESS else args[0]
        what = "setting a limit of" if name == "prlimit64" and notif.data.args[2] else "on"
        target = ctypes.c_int32(pid).value
        name = f"{name} {what} {f'pid {target}' if target else 'itself'}"
    opens = OPENS[machine()]
    if name in opens:
        dirfd = ctypes.c_int32(notif.data.args[0] & 0xFFFFFFFF).value if name == "openat" else AT_FDCWD
        address = notif.data.args[1] if name == "openat" else notif.data.args[0]
        return Notification(notif.id, name, False, (int(notif.pid), dirfd, int(address)))
    return Notification(notif.id, name, name in TASK_CALLS)


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


PATH_MAX = 4096


def opened_path(open_at: tuple[int, int, int]) -> str | None:
    """The absolute path a watched open names, read from the caller's memory (process_vm_readv) and resolved
    against its directory (/proc/<pid>/cwd or fd/<dirfd>); None when it cannot be read. What is read may have
    changed by the time the kernel opens it (another thread): the check observes, Landlock decides."""
    pid, dirfd, address = open_at
    libc = _libc()
    data = bytearray()
    while len(data) < PATH_MAX:
        # never across a page: the rest of a page is mapped if its first byte is
        size = min(256, 4096 - (address + len(data)) % 4096)
        chunk = ctypes.create_string_buffer(size)
        local, remote = _IoVec(ctypes.addressof(chunk), size), _IoVec(address + len(data), size)
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            return None
        data += chunk.raw[:got]
        if b"\0" in data:
            break
    raw = bytes(data).split(b"\0", 1)[0]
    path = os.fsdecode(raw)
    if not path.startswith("/"):
        base = f"/proc/{pid}/cwd" if dirfd == AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
        try:
            path = os.path.join(os.readlink(base), path)
        except OSError:
            return None
    return os.path.realpath(path)


def respond(listener: int, notification: Notification, *, error: int = 0) -> None:
    """Let the call go on (error 0: only ever for counted new tasks, whose flags the filter checked, and
    watched opens the supervisor checked) or fail it with `error`."""
    import fcntl

    if error:
        resp = _NotifResp(notification.id, 0, -error, 0)
    else:
        resp = _NotifResp(notification.id, 0, 0, NOTIF_FLAG_CONTINUE)
    with contextlib.suppress(OSError):
        fcntl.ioctl(listener, NOTIF_SEND, resp)  # type: ignore[call-overload]
