"""Zygotes: pandas and pyarrow imported once, one fork per investigation; a dataset zygote per dataset.

`main` is what `python -I -B worker.py` runs: a zygote (`--zygote FD`, locally) or one supervised run
whose job arrives on stdin (the sandbox Lambda, `namespaces=False`).
"""

import contextlib
import json
import os
import resource
import signal
import sys

from .confine.kernel import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, c_library
from .frames import PRELOADED, preload_frame
from .inprocess import ALLOWED_IMPORTS
from .loader import confine_loader
from .supervisor import cpu_seconds, send_line, supervise

HEADER = 8


def _recv_job(conn) -> tuple[dict, list[int]]:  # type: ignore[no-untyped-def]
    """A length-prefixed JSON job whose first chunk carries the descriptors it needs."""
    import socket

    first, fds, _, _ = socket.recv_fds(conn, 65536, 8)
    if len(first) < HEADER:
        raise ValueError("short job header")
    size = int(first[:HEADER])
    data = bytearray(first[HEADER:])
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("job cut short")
        data += chunk
    return json.loads(bytes(data)), fds


def _handle(conn, preloaded: bool = False) -> None:  # type: ignore[no-untyped-def]
    """In a process forked from a zygote: take one job and supervise its runner (see `supervise`).

    A job's descriptors are (stderr, [dataset], cgroup.procs...); from a dataset zygote
    (`preloaded`) there is no dataset descriptor: the runner takes the frame already in memory. The base
    zygote also takes `{"kind": "dataset"}` requests (descriptors: dataset, listening socket): this process
    then becomes that dataset's zygote. Anything else is refused by closing the connection before any pid
    is sent.
    """
    os.setsid()  # the caller kills this whole group if it stops answering
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # not the base zygote's stdin, which is the host's lifeline
    os.close(devnull)
    job, fds = _recv_job(conn)
    kind = job.get("kind", "run")
    if kind == "dataset" and not preloaded and len(fds) == 2:
        send_line(conn, {"pid": os.getpid()})
        dataset_zygote(conn, data_fd=fds[0], listen_fd=fds[1], max_mb=int(job["max_mb"]), request=job)
        return
    fixed = 1 if preloaded else 2
    cgroups = int(job.get("cgroups") or 0)
    if kind != "run" or len(fds) != fixed + cgroups:
        for fd in fds:
            os.close(fd)
        return
    job.pop("data_fd", None)
    supervise(job, conn, stderr_fd=fds[0], data_fd=None if preloaded else fds[1], cgroup_fds=fds[fixed:])


# glibc's mallopt parameter for its mmap threshold (malloc.h), and the size from which a block gets a mapping
# of its own: what iterate.memory does in the engine's process (which this file may not import).
M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20


def _runners_allocate_plainly() -> None:
    """Once the frame is loaded (in pyarrow's pool, mimalloc, which backs its large buffers with huge pages
    and so keeps forks cheap): the runners forked from here allocate their own buffers with the C library's
    malloc, each large block a mapping of its own, returned to the system as soon as it is freed (mimalloc
    keeps freed pages for re-use). On 3M rows x 20 columns a runner then peaks this far above the frame:
    the duplicate-rows proof 233 MB instead of 308 MB, the shape proof of a column of 3M distinct values
    272 MB instead of 392 MB, that of emails 81 MB instead of 157 MB; the same CPU time (6.5-7.0 s against
    6.6-6.8 s for three such proofs, alternated). glibc only (mallopt answers 1); elsewhere nothing changes."""
    try:
        if c_library().mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK) != 1:
            return
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    except (OSError, AttributeError):
        return


def dataset_zygote(  # type: ignore[no-untyped-def]
    control, *, data_fd: int, listen_fd: int, max_mb: int, request: dict | None = None
) -> None:
    """Load one dataset's frame once, then fork a handler per job arriving on `listen_fd`.

    A process forked from the base zygote at the host's request, before any investigation code and
    outside any job's time limit. It never runs investigation code itself: each job gets a handler and a
    runner forked from here, isolated exactly as from the base zygote, which inherit the frame
    copy-on-write instead of reading the file. It serves this dataset only (the host keys it on the
    file's identity), stops when the host closes `control` (or dies), and dies with the base zygote.
    The file is parsed here, outside any jail: `confine_loader` first takes away what its children can
    spare (`request` carries the runners' namespace settings and interpreter paths).
    """
    import gc
    import select
    import socket

    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        c_library().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    listener = socket.socket(fileno=listen_fd)
    if os.getppid() != parent:  # the base zygote died before the death signal was armed
        return
    try:
        # Confined as much as its children can spare, or not loaded at all: the runners then load it.
        loader, loaded = confine_loader(request or {}, max_mb)
        frame, narrowable = preload_frame(data_fd, max_mb)
        PRELOADED.update(loaded())
    except Exception as exc:  # the host falls back to loading in each runner, which reports the failure
        with contextlib.suppress(OSError):
            send_line(control, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        return
    PRELOADED.update(frame=frame, narrowable=narrowable, loader=loader)
    gc.freeze()  # collections in the runners then leave the preloaded objects' pages shared
    _runners_allocate_plainly()
    rows, width = frame.shape
    cpu = round(cpu_seconds(resource.getrusage(resource.RUSAGE_SELF)), 4)
    send_line(control, {"ready": True, "rows": rows, "columns": width, "cpu_s": cpu, "loader": loader})
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    while True:
        if control in select.select([listener, control], [], [])[0]:
            break  # the host closed it (or died): serve no more
        try:
            conn, _ = listener.accept()
        except OSError:
            break
        pid = os.fork()
        if pid == 0:
            listener.close()
            control.close()
            try:
                _handle(conn, preloaded=True)
            finally:
                os._exit(0)
        conn.close()
    listener.close()
    with contextlib.suppress(OSError):
        send_line(control, {"cpu_s": round(cpu_seconds(resource.getrusage(resource.RUSAGE_SELF)), 4)})


def zygote(listen_fd: int) -> int:
    """Serve jobs on an inherited listening socket, one forked handler per job.

    Stops when the socket is closed or stdin (a pipe the host holds) ends: no zygote outlives its host.
    """
    import select
    import socket

    import numpy  # noqa: F401 (imported once here, shared by every fork)
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    for name in ALLOWED_IMPORTS:
        __import__(name)
    with contextlib.suppress(OSError, AttributeError):
        # Not readable or writable through /proc by processes of the caller's uid (runs that kept it).
        c_library().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    listener = socket.socket(fileno=listen_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    os.write(1, b"ready\n")
    while True:
        if 0 in select.select([listener.fileno(), 0], [], [])[0]:
            return 0
        try:
            conn, _ = listener.accept()
        except OSError:
            return 0
        pid = os.fork()
        if pid == 0:
            listener.close()
            try:
                _handle(conn)
            finally:
                os._exit(0)
        conn.close()


def main() -> int:
    # `-I` ignores PYTHONPATH, which is how Lambda layers (/opt/python) are found: the caller names the
    # directories holding pandas, numpy and pyarrow instead.
    for path in os.environ.get("ITERATE_SANDBOX_PATHS", "").split(os.pathsep):
        if path and path not in sys.path:
            sys.path.append(path)
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        return zygote(int(sys.argv[2]))
    import socket

    # A fresh process per investigation (Lambda): it supervises its runner exactly as a zygote's handler.
    job = json.loads(sys.stdin.read())
    host = socket.socket(fileno=int(job.pop("host_fd")))
    return supervise(
        job,
        host,
        stderr_fd=2,
        data_fd=int(job.pop("data_fd")),
        cgroup_fds=[int(fd) for fd in job.pop("cgroup_fds", [])],
    )
