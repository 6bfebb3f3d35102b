"""The lockdown: every OS layer applied, in order, in the runner just before untrusted code.

limits → the run's own uid → no capabilities, no_new_privs → Landlock (without a jail) → the import view →
the seccomp filter (confine/seccomp.py), whose listener goes to the supervisor with the "armed" message.
"""

import contextlib
import errno
import json
import math
import os
import resource
import sys

from ..inprocess import ImportAllowList
from . import seccomp
from .kernel import PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, SYS_CAPSET, c_library, check_rc
from .landlock import apply_landlock


def drop_capabilities(libc) -> None:  # type: ignore[no-untyped-def]
    """No new privileges and an empty capability set: root in the jail can no longer mount or chroot."""
    import ctypes
    import platform

    check_rc(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    number = SYS_CAPSET.get(platform.machine())
    if number is None:
        return

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    check_rc(libc.syscall(number, ctypes.byref(header), ctypes.byref(data)), "capset")


def set_limits(job: dict) -> None:
    cpu = math.ceil(job["timeout_s"]) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    # Address space: what the loaded interpreter and dataset already reserve, plus the memory budget.
    try:
        with open("/proc/self/statm") as statm:
            baseline = int(statm.read().split()[0]) * resource.getpagesize()
    except OSError:
        # No /proc in the jail, or a dataset zygote's Landlock (which measured itself for this case);
        # otherwise what pandas and pyarrow reserve, measured at about 1.5 GB.
        baseline = job.get("preloaded_vm_bytes") or 2 * 1024**3
    limit = baseline + job["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    fsize = job["max_output_bytes"] * 2 + 65536
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    nproc = job.get("nproc")
    if nproc:
        # Per real uid, threads included: the whole run when the uid is the run's own (or the caller's
        # tasks plus the budget where it is not). The kernel does not apply it to uid 0.
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def lockdown(job: dict, isolation: dict, *, guard_imports: bool = True) -> None:
    """The OS layers, last thing before untrusted code: limits, an unprivileged uid, no capabilities,
    no new privileges, Landlock, the import view, then the seccomp filter; then tell the supervisor.

    Every step raises rather than leave a layer half applied.
    """
    import importlib
    import socket

    libc = c_library()
    run_uid = job.get("run_uid")
    jailed = isolation.get("filesystem") == "jail" and isolation.get("namespaces") == "root"
    plain_root = not isolation.get("pid_namespace") and bool(job.get("host_root"))
    dropped = False
    if run_uid and os.getuid() == 0 and (jailed or (plain_root and job.get("paths_readable"))):
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        drop_to(run_uid, run_uid)
        dropped = True
        isolation["uid"] = "the run's own (unprivileged, used by no other process)"
    else:
        isolation["uid"] = f"caller's ({os.getuid()})"
    drop_capabilities(libc)  # no_new_privs; an empty bounding, permitted and effective set
    isolation["capabilities"] = "dropped"
    if dropped:
        job["nproc"] = job["max_processes"]
    elif os.getuid() != 0 and job.get("caller_tasks") is not None:
        job["nproc"] = int(job["caller_tasks"]) + job["max_processes"]
    set_limits(job)
    isolation["processes"] = (
        "cgroup" if job.get("cgroup") else "RLIMIT_NPROC" if job.get("nproc") else "no new processes"
    )
    if isolation.get("filesystem") != "jail":
        try:
            isolation["landlock"] = apply_landlock(
                libc, job.get("landlock_paths") or job["python_paths"], list_dirs=job.get("landlock_dirs")
            )
        except (OSError, AttributeError) as exc:
            isolation["landlock"] = f"unavailable ({exc})"
    sys.path[:] = list(job.get("sys_path") or sys.path)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    if guard_imports:
        allowed = frozenset(sys.stdlib_module_names) | frozenset(job.get("packages") or ())
        sys.meta_path.insert(0, ImportAllowList(allowed))
    # Without a jail and with Landlock's read-only view on: what Landlock would refuse is seen first.
    watch = isolation.get("filesystem") != "jail" and str(isolation.get("landlock", "")).startswith("abi")
    listener, mode = seccomp.install_filter(
        own_pid=os.getpid(), allow_processes=bool(job.get("cgroup") or job.get("nproc")), watch_files=watch
    )
    isolation["seccomp"] = mode
    if watch:
        isolation["file_access"] = (
            "writes refused by seccomp, reads outside the view seen by the supervisor"
            if mode == "notify"
            else "writes refused by seccomp (reads left to Landlock alone)"
        )
    if mode == "notify" and isolation["processes"] == "no new processes":
        isolation["processes"] = "counted by the supervisor"
    if job.get("batch") is not None:
        apart = isolation["processes"] != "no new processes"
        isolation["batch"] = "a process per item" if apart else "one process (no new processes allowed)"
    control = socket.socket(fileno=job["control_fd"])
    try:
        message = json.dumps({"armed": True, "isolation": isolation}).encode() + b"\n"
        socket.send_fds(control, [message], [listener] if listener is not None else [])
    finally:
        control.close()
        if listener is not None:
            os.close(listener)


def lock_init(libc, job: dict) -> None:  # type: ignore[no-untyped-def]
    """Pid 1 of the run's namespace only waits: the run's uid, no capabilities, the same seccomp filter."""
    with contextlib.suppress(OSError):
        for fd in (job.get("control_fd"), job.get("result_fd")):
            if fd is not None:
                os.close(fd)
        if job.get("run_uid") and os.getuid() == 0:
            for cap in range(64):
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
            drop_to(job["run_uid"], job["run_uid"])
        drop_capabilities(libc)
        seccomp.install_filter(own_pid=os.getpid(), notify=False)


def drop_to(uid: int, gid: int) -> None:
    """setgroups([]), then gid and uid (real, effective and saved): every capability goes with uid 0."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(errno.EPERM, "the uid did not change")
