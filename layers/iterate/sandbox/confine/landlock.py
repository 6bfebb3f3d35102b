"""Landlock: the kernel's own read-only view of the interpreter's files, no writes, no exec, no TCP.

Where there is no jail (no namespaces: the sandbox Lambda, `namespaces=False`) this is the filesystem layer.
"""

import os

from .kernel import PR_SET_NO_NEW_PRIVS, check_rc

# Besides the interpreter: shared libraries, the loader's cache and the time zone. Nothing of /sys: its
# cgroup tree names every host process (thread pools are sized from the CPUs the process may use).
SYSTEM_READ_PATHS = [
    "/usr",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
]


LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # same on every arch
LANDLOCK_FS_READ_FILE, LANDLOCK_FS_READ_DIR = 1 << 2, 1 << 3
# Every filesystem right the kernel knows per ABI version (execute, write, remove, make*, refer, truncate, ioctl).
LANDLOCK_FS_ALL = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
LANDLOCK_NET_ALL = 0b11  # bind and connect TCP (ABI 4+)
LANDLOCK_SCOPE_ALL = 0b11  # abstract unix sockets and signals outside the domain (ABI 6+)


def apply_landlock(
    libc, read_paths: list[str], *, filesystem: bool = True, list_dirs: list[str] | None = None
) -> str:  # type: ignore[no-untyped-def]
    """Unprivileged kernel confinement: read-only access to `read_paths`, no writes, no exec, no TCP.

    Holds even for C code that never raises an audit event (pyarrow's file system, numpy's fopen).
    `filesystem=False`: no TCP only (ABI 4+), leaving files, mounts and signals alone: a domain with
    filesystem rules forbids every mount to the process and its children, which a jail is built with.
    Returns a description of what was applied, or why not.
    """
    import ctypes

    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return f"unavailable ({os.strerror(ctypes.get_errno())})"
    if not filesystem and abi < 4:
        return f"unavailable (abi {abi} has no network rules)"
    fs_all = LANDLOCK_FS_ALL.get(abi, LANDLOCK_FS_ALL[5]) if filesystem else 0

    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    scoped = LANDLOCK_SCOPE_ALL if abi >= 6 and filesystem else 0
    ruleset = Ruleset(fs_all, LANDLOCK_NET_ALL if abi >= 4 else 0, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = libc.syscall(
        LANDLOCK_CREATE_RULESET, ctypes.byref(ruleset), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if fd < 0:
        return f"refused ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [(p, False) for p in read_paths] + [(p, True) for p in list_dirs or []]
        for path, list_only in rules if filesystem else []:
            if not os.path.exists(path):
                continue
            is_dir = os.path.isdir(path)
            allowed = LANDLOCK_FS_READ_FILE | (LANDLOCK_FS_READ_DIR if is_dir else 0)
            if list_only:
                allowed = LANDLOCK_FS_READ_DIR
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(allowed, target)
                libc.syscall(
                    LANDLOCK_ADD_RULE,
                    ctypes.c_int(fd),
                    ctypes.c_int(1),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
            finally:
                os.close(target)
        check_rc(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return f"refused ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(fd)
    if not filesystem:
        return f"abi {abi}: no TCP"
    return (
        f"abi {abi}: read-only interpreter, no writes, no exec"
        + (", no TCP" if abi >= 4 else "")
        + (", no signals out" if abi >= 6 else "")
    )
