"""The host's side of the zygotes: the base zygote (pandas imported once) and a dataset zygote per dataset.

LocalSandbox forks each run from one of them (worker.py's zygote.py is the other side).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iterate.sandbox.cage import send_job
from iterate.sandbox.importview import import_view
from iterate.sandbox.model import Counters, SandboxError, ZygoteGone

WORKER = Path(__file__).with_name("worker.py")  # the entry script of every sandbox process
# The child starts with nothing from the caller's environment: no keys, no AWS credentials.
CHILD_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def child_env() -> dict[str, str]:
    parents = dict.fromkeys(os.path.dirname(p) for p in import_view().package_paths)
    return dict(CHILD_ENV, ITERATE_SANDBOX_PATHS=os.pathsep.join(parents))


class Zygote:
    """A worker process that imported pandas and pyarrow once and forks one handler per investigation.

    It never runs investigation code itself; each job is a fresh fork, isolated exactly as a fresh process
    would be. Jobs arrive on a Unix socket in a private directory, with the descriptors they need. Its
    stdin is a pipe from this process: when this process dies, the zygote sees the end and exits.
    """

    def __init__(self, python: str, *, start_timeout_s: float = 60.0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="iterate-zygote-"))
        self.path = str(self.dir / "zygote.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(64)
            env = dict(child_env(), JE_ARROW_MALLOC_CONF="background_thread:false")  # one thread can fork
            self.proc = subprocess.Popen(
                [python, "-I", "-B", str(WORKER), "--zygote", str(listener.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=self.dir,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        finally:
            listener.close()
        self._finalizer = weakref.finalize(self, Zygote._stop, self.proc, str(self.dir))
        assert self.proc.stdout is not None
        ready = select.select([self.proc.stdout], [], [], start_timeout_s)[0]
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.close()
            raise TimeoutError("the sandbox zygote did not start")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], directory: str) -> None:
        if proc.poll() is None:  # still our unreaped child: its pid (and group) cannot name anyone else
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        shutil.rmtree(directory, ignore_errors=True)


def sealed_arrow(table: Any) -> int:
    """An Arrow IPC file of `table` in an anonymous memory file, sealed against any change; its descriptor.

    Sealed (no write, no resize), so no process holding it, however compromised, can alter what the others
    read: the dataset zygote maps it read-only and its runners share that mapping.
    """
    import fcntl

    import pyarrow.ipc as ipc

    fd = os.memfd_create("iterate-dataset", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(fd, "wb", closefd=False) as handle, ipc.new_file(handle, table.schema) as writer:
            writer.write_table(table)
        seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(fd)
        raise
    return fd


class DatasetZygote:
    """A process forked from the zygote that loaded one dataset's frame once; forks a handler per job.

    Its runners inherit the frame copy-on-write and are isolated exactly like the zygote's own. It keeps
    a control connection to this process: closing our end (or this process dying) stops it, and it dies
    with the zygote. Jobs arrive on its own socket, in a private directory.
    """

    def __init__(
        self,
        base: Zygote,
        data_fd: int,
        *,
        max_mb: int,
        timeout_s: float,
        counters: Counters,
        runners: dict[str, Any] | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="iterate-dataset-"))
        self.path = str(self.dir / "dataset.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            listener.listen(64)
            # Its runners' namespace settings and paths: it confines its own load by them (loader.py).
            request = {**(runners or {}), "kind": "dataset", "max_mb": max_mb}
            self.control = send_job(base.path, request, [data_fd, listener.fileno()])
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        finally:
            listener.close()
        self._reader = self.control.makefile("rb")
        self._pid = [0]  # filled in below; the finalizer reads it
        self._finalizer = weakref.finalize(
            self, DatasetZygote._stop, self.control, self._reader, self._pid, str(self.dir), counters
        )
        end = time.monotonic() + timeout_s
        try:
            self.control.settimeout(timeout_s)
            hello = self._reader.readline()
            if not hello:
                raise ZygoteGone("the sandbox zygote did not take the dataset")
            self._pid[0] = int(json.loads(hello)["pid"])
            with contextlib.suppress(OSError, AttributeError):
                self._pid.append(os.pidfd_open(self._pid[0]))  # it waits for us now: it is that process
            self.control.settimeout(max(0.1, end - time.monotonic()))
            ready = json.loads(self._reader.readline() or b"{}")
        except (OSError, ValueError, KeyError) as exc:
            self.close()
            raise SandboxError(f"the dataset zygote did not start: {exc}") from exc
        except BaseException:
            self.close()
            raise
        if not ready.get("ready"):
            self.close()
            raise SandboxError(f"the dataset was not preloaded: {ready.get('error') or 'no answer'}")
        self.control.settimeout(None)
        self.rows = int(ready.get("rows", 0))
        # How its load was confined (each preloaded run's isolation reports it too, as "loader").
        self.loader: dict[str, Any] = ready.get("loader") or {}
        counters.add("preloads")
        counters.add("preload_cpu_s", float(ready.get("cpu_s") or 0))

    @property
    def pid(self) -> int:
        return self._pid[0]

    def alive(self) -> bool:
        """It writes nothing between 'ready' and stopping: a readable control connection means it stopped."""
        try:
            return not select.select([self.control], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        self._finalizer()

    @staticmethod
    def _stop(
        control: socket.socket, reader: Any, pid: list[int], directory: str, counters: Counters
    ) -> None:
        """Tell it to stop (our end closes for writing), take its last report; kill it if it does not end."""
        ended = False
        try:
            control.shutdown(socket.SHUT_WR)
            control.settimeout(5.0)
            while line := reader.readline():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    report = json.loads(line)
                    if "ready" not in report:
                        counters.add("dataset_zygote_cpu_s", float(report["cpu_s"]))
            ended = True  # end of stream: its side is closed, it has exited
        except (OSError, ValueError):
            pass
        if not ended and pid[0]:
            # Through a pidfd taken while it was known alive: a pid reused since names someone else.
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pid[1], signal.SIGKILL)
        if len(pid) > 1:
            with contextlib.suppress(OSError):
                os.close(pid[1])
        with contextlib.suppress(OSError):
            reader.close()
        control.close()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(eq=False)
class ZygoteEntry:
    """One dataset's zygote in the pool: started once, by the first run that needs it."""

    key: tuple[Any, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    zygote: DatasetZygote | None = None
    users: int = 0
    retired: bool = False


class DatasetZygotes:
    """The live dataset zygotes by dataset identity: at most `capacity`, least recently used closed first.

    A retired zygote (evicted, found dead, or the sandbox closed) takes no new runs and stops when the
    runs using it end. A dataset whose zygote could not start is not tried again (its runs load it).
    """

    REFUSED_KEPT = 32

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], ZygoteEntry] = OrderedDict()
        self._refused: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def acquire(self, key: tuple[Any, ...], start: Callable[[], DatasetZygote]) -> ZygoteEntry | None:
        """The entry for `key` with a running zygote (one start however many threads ask), or None.

        Every entry returned must be given back with `release`.
        """
        closing: list[DatasetZygote] = []
        with self._lock:
            if key in self._refused:
                return None
            entry = self._entries.get(key)
            if entry is not None and entry.zygote is not None and not entry.zygote.alive():
                closing += self._retire(entry)
                entry = None
            if entry is None:
                entry = self._entries[key] = ZygoteEntry(key)
                while len(self._entries) > self.capacity:
                    closing += self._retire(next(iter(self._entries.values())))
            self._entries.move_to_end(key)
            entry.users += 1
        for zygote in closing:
            zygote.close()
        with entry.lock:
            if entry.zygote is None and not entry.retired:
                try:
                    entry.zygote = start()
                except (OSError, SandboxError) as exc:
                    with self._lock:
                        if not isinstance(exc, ZygoteGone):  # not the zygote's absence: the dataset's
                            self._refused[key] = str(exc)
                            while len(self._refused) > self.REFUSED_KEPT:
                                self._refused.popitem(last=False)
                        self._retire(entry)
        if entry.zygote is None:
            self.release(entry)
            return None
        return entry

    def release(self, entry: ZygoteEntry) -> None:
        with self._lock:
            entry.users -= 1
            stop = entry.retired and entry.users == 0 and entry.zygote is not None
        if stop and entry.zygote is not None:
            entry.zygote.close()

    def discard(self, entry: ZygoteEntry) -> None:
        """Take a zygote found not serving out of the pool (the next run of its dataset starts another)."""
        with self._lock:
            closing = self._retire(entry)
        for zygote in closing:
            zygote.close()

    def close(self) -> None:
        with self._lock:
            closing = [z for entry in list(self._entries.values()) for z in self._retire(entry)]
        for zygote in closing:
            zygote.close()

    def _retire(self, entry: ZygoteEntry) -> list[DatasetZygote]:
        """Under the lock: out of the pool; returns its zygote when nobody is using it (to close)."""
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        entry.retired = True
        return [entry.zygote] if entry.users == 0 and entry.zygote is not None else []
