"""Namespaces and the jail: new network, mount, PID and IPC namespaces, a tmpfs root of read-only binds.

The jail holds the interpreter, the standard library and the allowed packages only; a fresh /proc; a
writable /work and /tmp inside a tmpfs bounded in bytes and in files. Pid 1 of the run's PID namespace
only reaps (`reap_as_init`): every process the code starts dies with it.
"""

import contextlib
import os
import signal

from .kernel import EXIT_SIGNAL_BASE, check_rc

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWIPC = 0x08000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_RELATIME = 1 << 21
ST_RELATIME = 4096  # statvfs's flag for relatime (the MS_ value differs)


def _mount(libc, source, target, fstype, flags, data=None) -> None:  # type: ignore[no-untyped-def]
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    check_rc(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _bind_readonly(libc, path: str, newroot: str) -> None:  # type: ignore[no-untyped-def]
    target = newroot + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if not os.path.exists(path):
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    _mount(libc, path, target, None, MS_BIND | MS_REC)
    # Flags the source mount already has must be kept (a user namespace may not clear them).
    kept = os.statvfs(path).f_flag & (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    if os.statvfs(path).f_flag & ST_RELATIME:
        kept |= MS_RELATIME
    _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


def build_jail(libc, job: dict, *, owner: int | None = None) -> None:  # type: ignore[no-untyped-def]
    """In a fresh mount namespace: a tmpfs root with read-only binds of what Python needs, then chroot.

    What the interpreter can find is what the jail holds: the standard library and the allowed packages
    (`package_paths`), bound one by one; every other site directory (`site_masks`) that a system bind
    would show is covered by an empty read-only tmpfs, so no other installed package can be imported.
    """
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    newroot = job["jail_root"]
    os.makedirs(newroot, exist_ok=True)
    # Bounded in bytes and in files: a loop of empty files cannot fill the host's memory with inodes.
    room = f"size={job['scratch_mb']}m,nr_inodes={job['scratch_inodes']},mode=755"
    _mount(libc, "tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, room)
    packages = list(job.get("package_paths") or [])
    for path in [
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        "/etc/ld.so.cache",
        "/etc/localtime",
        *(p for p in job["python_paths"] if p not in packages),
    ]:
        _bind_readonly(libc, path, newroot)
    masked = []
    for site in job.get("site_masks") or []:
        target = newroot + site
        if os.path.isdir(target) and not os.path.ismount(target):
            _mount(libc, "tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
            masked.append(target)
    for path in packages:
        _bind_readonly(libc, path, newroot)
    for target in masked:
        _mount(libc, None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for dev in ("null", "zero", "urandom", "random"):
        _bind_readonly(libc, f"/dev/{dev}", newroot)
    os.makedirs(newroot + "/proc", exist_ok=True)
    # A container may refuse a fresh /proc to a user namespace; the jail works without one.
    with contextlib.suppress(OSError):
        _mount(libc, "proc", newroot + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("/work", "/tmp"):
        os.makedirs(newroot + name, exist_ok=True)
        if owner:  # the only places the run's own uid may write (inside this tmpfs)
            os.chown(newroot + name, owner, owner)
    os.chdir(newroot)
    _mount(libc, newroot, "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/work")


def reap_as_init(child: int) -> int:
    """Pid 1 of the namespace: reap everything, return the investigation process's status."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return EXIT_SIGNAL_BASE + signal.SIGKILL
        if pid == child:
            if os.WIFSIGNALED(status):
                return EXIT_SIGNAL_BASE + os.WTERMSIG(status)
            return os.WEXITSTATUS(status)


def in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as handle:
            return handle.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def enter_namespaces(  # type: ignore[no-untyped-def]
    libc,
    *,
    user_first: bool,
    flags: int = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC,
    inner_id: int = 0,
) -> tuple[str | None, str]:
    """New network, mount and PID namespaces (`flags`): as root directly, else inside a new user namespace.

    The user namespace is how an ordinary account (a laptop) gets the same isolation: "root" inside maps
    to the caller's own uid outside, with no power over anything the caller could not touch already.
    Returns the mode used ("root", "user") or None, and the reason the last attempt was refused.
    `inner_id`: the user and group ids the caller gets inside a user namespace.
    """
    import ctypes

    if not user_first and libc.unshare(flags) == 0:
        return "root", ""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(flags | CLONE_NEWUSER) != 0:
        return None, os.strerror(ctypes.get_errno())
    try:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{inner_id} {uid} 1"),
            ("gid_map", f"{inner_id} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError as exc:
        return None, f"user namespace mapping refused: {exc.strerror}"
    return "user", ""
