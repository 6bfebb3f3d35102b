"""A dataset zygote's confinement while it parses the file: what its runners can spare, taken away first."""

import contextlib
import errno
import os
import resource
import sys

from .confine.kernel import PR_SET_NO_NEW_PRIVS, c_library, check_rc
from .confine.landlock import SYSTEM_READ_PATHS, apply_landlock
from .confine.lockdown import drop_capabilities
from .confine.namespaces import CLONE_NEWNET, enter_namespaces

# A dataset zygote's ids inside its own user namespace (any but 0, see `confine_loader`).
LOADER_ID = 1000


def _vm_bytes(fd: int) -> int:
    return int(os.pread(fd, 256, 0).split()[0]) * resource.getpagesize()


def confine_loader(request: dict, max_mb: int):  # type: ignore[no-untyped-def]
    """Lock a dataset zygote down before it parses the file, keeping what its runners need to isolate.

    The Parquet reader runs here, outside any jail: a parser bug set off by crafted cell content would
    run with this process's rights. Taken away for good (its handlers and runners inherit it):
      - new privileges (PR_SET_NO_NEW_PRIVS; every runner sets it anyway);
      - the network, when namespaces are on: a new network namespace, as root directly, else in a new
        user namespace, whose capabilities are then dropped so that a runner makes its own (nested) user
        namespace exactly as it would from the host. There this process is not root (LOADER_ID): a
        runner may map its parent's root into its namespace only if the parent could set file
        capabilities, which this one no longer can. Not the mount or PID namespace: the runners make
        those themselves, and a dataset zygote that is pid 1 of its own namespace would take their
        orphans. As root the capabilities stay: the runners build their jail with them;
      - Landlock: with namespaces off, read-only access to the interpreter's paths, no writes, no exec,
        no TCP (the runners build no jail); with namespaces on, no TCP only, since a domain with
        filesystem rules refuses every mount to its descendants, and the runners' jail is mounts;
      - core dumps.
    Lowered while loading only (soft limits, restored by the function returned): address space (by the
    preload cap), file size (nothing is written), open files. The runners set their own.
    Returns (what was applied, a function to call once the frame is loaded that restores the limits and
    returns what PRELOADED needs). Raises when a step half-done would leave the runners worse off.
    """
    loader: dict = {}
    if sys.platform != "linux":
        loader["confinement"] = "none (not Linux)"
        return loader, dict
    vm = 0
    # Measured before Landlock may hide /proc.
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/statm", "rb") as handle:
        vm = int(handle.read().split()[0]) * resource.getpagesize()
    libc = c_library()
    check_rc(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    loader["no_new_privs"] = True
    namespaces = bool(request.get("namespaces"))
    if namespaces:
        before = os.stat("/proc/self/ns/user").st_ino
        mode, refused = enter_namespaces(
            libc,
            user_first=bool(request.get("user_namespace_first")),
            flags=CLONE_NEWNET,
            inner_id=LOADER_ID,
        )
        if mode is None and os.stat("/proc/self/ns/user").st_ino != before:
            # In a user namespace without a mapping: the runners could make no namespace of their own.
            raise OSError(errno.EPERM, f"loader's user namespace unusable: {refused}")
        if mode is None:
            loader["network"] = f"host (namespaces refused: {refused})"
        else:
            loader.update(network="namespace", namespaces=mode)
            if mode == "user":
                drop_capabilities(libc)  # raises if refused: runners would otherwise get "root" here
                loader["capabilities"] = "dropped"
            else:
                loader["capabilities"] = "kept (the runners build their jail with them)"
    else:
        loader["network"] = "host (namespaces off)"
    python_paths = list(request.get("python_paths") or [])
    statm = -1
    if not namespaces and python_paths:
        # The runners cannot read /proc/self/statm under this domain: measured here for them instead.
        with contextlib.suppress(OSError):
            statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        read = request.get("landlock_paths") or [*python_paths, *SYSTEM_READ_PATHS, os.devnull]
        loader["landlock"] = apply_landlock(libc, list(read), list_dirs=request.get("landlock_dirs"))
    else:
        loader["landlock"] = apply_landlock(libc, [], filesystem=False)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    saved: dict[int, tuple[int, int]] = {}

    def lower(kind: int, soft: int) -> None:
        old, hard = resource.getrlimit(kind)
        for cap in (old, hard):
            if cap != resource.RLIM_INFINITY:
                soft = min(soft, cap)
        resource.setrlimit(kind, (soft, hard))
        saved[kind] = (old, hard)

    limits: dict = {"core": 0, "file_size": 0, "open_files": 64}
    if vm:
        # The preload cap is an estimate of the frame; reading builds the table and the frame side by side.
        address_space = vm + (2 * max_mb + 1024) * 2**20
        lower(resource.RLIMIT_AS, address_space)
        limits["address_space_mb"] = address_space // 2**20
    lower(resource.RLIMIT_FSIZE, 0)
    lower(resource.RLIMIT_NOFILE, 64)
    loader["limits_while_loading"] = limits
    probe = request.get("probe")
    if probe:
        loader["probe"] = _probe(probe)

    def loaded() -> dict:
        for kind, (soft, hard) in saved.items():
            resource.setrlimit(kind, (soft, hard))
        extra = {}
        if statm >= 0:
            with contextlib.suppress(OSError, ValueError, IndexError):
                extra["vm_bytes"] = _vm_bytes(statm)
            os.close(statm)
        return extra

    return loader, loaded


def _probe(probe: dict) -> dict:
    """Test hook (only the host sends a dataset request): what the loader could do, tried in its place."""
    import socket

    found: dict = {}
    if probe.get("tcp"):
        host, port = probe["tcp"]
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                found["tcp"] = "connected"
        except OSError as exc:
            found["tcp"] = f"refused ({exc.strerror or exc})"
    if probe.get("read"):
        try:
            with open(probe["read"], "rb") as handle:
                handle.read(1)
            found["read"] = "read"
        except OSError as exc:
            found["read"] = f"refused ({exc.strerror or exc})"
    return found
