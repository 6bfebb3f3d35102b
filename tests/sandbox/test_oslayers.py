"""The OS layers' own parts: the hand-written seccomp tables and filter, the run uid, the import view."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits, oslayers
from iterate.sandbox.confine import seccomp
from iterate.sandbox.importview import import_view

pytestmark = pytest.mark.unit

AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        pytest.skip("libseccomp is not installed here: the tables cannot be cross-checked")
    lib.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    return lib


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_syscall_numbers_match_libseccomp_on_both_architectures(arch: str) -> None:
    lib = libseccomp()
    for table in (seccomp.DENIED[arch], seccomp.CONDITIONAL[arch], seccomp.SELF_ONLY[arch]):
        for name, number in table.items():
            expected = lib.seccomp_syscall_resolve_name_arch(AUDIT[arch], name.encode())
            assert expected == number, f"{arch} {name}: {number} here, {expected} in libseccomp"


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_filter_checks_the_architecture_first_and_kills_any_other(arch: str) -> None:
    program = seccomp.build_filter(arch, own_pid=1234, deny=seccomp.RET_USER_NOTIF)
    ops = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert ops[0] == (seccomp.LD_ABS, 0, 0, seccomp.OFFSET_ARCH)
    code, jt, jf, k = ops[1]
    assert (code, jt, k) == (seccomp.JEQ, 0, AUDIT[arch])
    assert ops[1 + 1 + jf] == (seccomp.RET, 0, 0, seccomp.RET_KILL_PROCESS)  # mismatch: kill
    if arch == "x86_64":  # the x32 ABI shares the architecture: its numbers are killed too
        assert ops[3][0] == seccomp.JGE and ops[3][3] == seccomp.X32_SYSCALL_BIT
    assert len(ops) < 256  # every jump is forward and fits classic BPF's 8-bit offsets


def _child(code: str, *, count: bool = False, watch: bool = False) -> subprocess.CompletedProcess[str]:
    """Run `code` after installing the filter (kill mode: no supervisor) in a fresh interpreter."""
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(seccomp.__file__).parent)!r})
        import seccomp
        listener, mode = seccomp.install_filter(own_pid=os.getpid(), notify=False, watch_files={watch!r})
        print("installed", mode, flush=True)
        """
    ) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("socket AF_INET", "import socket\nsocket.socket()"),
        ("socket AF_UNIX", "import socket\nsocket.socket(socket.AF_UNIX)"),
        ("datagram socketpair", "import socket\nsocket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)"),
        ("unshare", "import ctypes\nctypes.CDLL(None).unshare(0x10000000)"),
        ("execve", "os.execv('/bin/true', ['true'])"),
        ("kill -1", "os.kill(-1, 0)"),
        ("ptrace", "import ctypes\nctypes.CDLL(None).ptrace(16, 1, 0, 0)"),
        ("SysV shared memory", "import ctypes\nctypes.CDLL(None).shmget(0, 4096, 0o1600)"),
        ("SysV message queue", "import ctypes\nctypes.CDLL(None).msgget(0, 0o1600)"),
        ("SysV semaphore", "import ctypes\nctypes.CDLL(None).semget(0, 1, 0o1600)"),
        (
            "POSIX message queue",
            "import ctypes\nctypes.CDLL('librt.so.1').mq_open(b'/q', 0o100 | 2, 0o600, None)",
        ),
        ("a limit raised", "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))"),
        ("another's limits", "import resource\nresource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)"),
        ("another's priority", "os.setpriority(os.PRIO_PROCESS, os.getppid(), 5)"),
        ("a user's priority", "os.setpriority(os.PRIO_USER, 0, 5)"),
        ("another's CPUs", "os.sched_setaffinity(os.getppid(), {0})"),
        ("another's scheduler", "os.sched_setscheduler(os.getppid(), os.SCHED_OTHER, os.sched_param(0))"),
        ("a pidfd on another", "os.pidfd_open(os.getppid())"),
    ],
)
def test_a_denied_call_kills_the_process_without_a_supervisor(what: str, code: str) -> None:
    done = _child(code + "\nprint('survived')")
    assert "installed kill" in done.stdout, done.stderr
    assert "survived" not in done.stdout, what
    assert done.returncode == -31  # SIGSYS


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
def test_what_benign_code_needs_still_works_under_the_filter() -> None:
    done = _child(
        """
        import socket, threading
        a, b = socket.socketpair()
        a.sendall(b"ok"); assert b.recv(2) == b"ok"
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3
        os.kill(os.getpid(), 0)
        import resource
        resource.getrlimit(resource.RLIMIT_AS); resource.prlimit(0, resource.RLIMIT_NOFILE)
        resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE)
        os.sched_setaffinity(0, os.sched_getaffinity(0)); os.getpriority(os.PRIO_PROCESS, 0)
        os.close(os.pidfd_open(os.getpid()))
        print("fine")
        """
    )
    assert "fine" in done.stdout, done.stderr


def test_run_uids_are_outside_every_allocated_range_and_unused() -> None:
    uid = oslayers.pick_run_uid()
    assert oslayers.is_run_uid(uid) and uid > 0x6FFFFFFF
    assert list(oslayers.pids_of_uid(uid)) == []


def test_the_import_view_holds_the_allowed_packages_and_hides_every_other_site_folder() -> None:
    view = import_view()
    names = {Path(p).name for p in view.package_paths}
    assert {"pandas", "numpy", "pyarrow", "dateutil"} <= names
    assert not any(Path(p).name in {"sympy", "anthropic", "boto3", "iterate"} for p in view.python_paths)
    site = next(p for p in sys.path if p.endswith("site-packages"))
    assert os.path.realpath(site) in view.site_masks
    # Landlock reads: never a masked folder or anything below it, except the allowed packages
    for path in view.landlock_paths:
        for mask in view.site_masks:
            if path == mask or path.startswith(mask + "/"):
                assert path in view.package_paths, path


@pytest.mark.parametrize("namespaces", [None, False], ids=["jail", "landlock"])
def test_other_installed_packages_cannot_be_found(namespaces: bool | None, dataset: Path) -> None:
    # Given the checks off (no import finder, the real __import__) and sympy installed in the same venv
    limits = SandboxLimits(timeout_s=10, namespaces=namespaces, inprocess_checks=False, enforce_policy=False)
    code = (
        "import importlib, importlib.metadata, sys\n"
        "out = {}\n"
        "for name in ['sympy', 'anthropic', 'iterate', 'boto3']:\n"
        "    try:\n        importlib.import_module(name)\n        out[name] = 'imported'\n"
        "    except ImportError:\n        out[name] = 'not found'\n"
        "try:\n    df.plot(backend='sympy')\nexcept Exception as e:\n    out['plot'] = type(e).__name__\n"
        "out['sympy_loaded'] = 'sympy' in sys.modules\n"
        "out['entry_points'] = len(list(importlib.metadata.entry_points()))\n"
        "result = out"
    )
    with LocalSandbox(limits) as sandbox:
        outcome = sandbox.run_detailed(code, DatasetRef(path=str(dataset)))
    assert outcome.investigation.success, outcome.investigation.error
    out = outcome.investigation.output
    assert out["sympy"] == out["anthropic"] == out["iterate"] == out["boto3"] == "not found"
    assert out["sympy_loaded"] is False and out["entry_points"] == 0
    assert "plot" in out  # pandas could not load the backend


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("a file opened for writing", "open('/tmp/iterate-watch-test', 'w')"),
        ("a file opened to append", "os.open('/tmp/iterate-watch-test', os.O_WRONLY | os.O_APPEND)"),
        ("a folder made", "os.mkdir('/tmp/iterate-watch-dir')"),
        ("a file removed", "os.unlink('/tmp/iterate-watch-missing')"),
        ("a file renamed", "os.rename('/tmp/iterate-a', '/tmp/iterate-b')"),
    ],
)
def test_without_a_jail_every_write_to_the_file_system_is_refused(what: str, code: str) -> None:
    done = _child(code + "\nprint('survived')", watch=True)
    assert "installed kill" in done.stdout, done.stderr
    assert "survived" not in done.stdout, what
    assert done.returncode == -31


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux only")
def test_without_a_jail_reads_still_work_under_the_filter() -> None:
    done = _child("open(os.__file__).read(10)\nos.listdir('/')\nprint('fine')", watch=True)
    assert "fine" in done.stdout, done.stderr
