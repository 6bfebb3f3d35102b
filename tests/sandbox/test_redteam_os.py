"""Red team against the OS layers: each snippet first disarms the in-process layers, then goes for a goal.

Every snippet runs in both sandbox modes (namespaces on, the local default; namespaces off in a fresh
process per run, as the sandbox Lambda runs) and with and without ITERATE_SANDBOX_INPROCESS_CHECKS=0
(read through Settings). Canaries on the host say whether anything got out: a secret in this process's
environment, a root-only file, another run's files, TCP/UDP/Unix/abstract listeners, a process to signal
or trace, paths that must not appear, and the pids of processes that must not outlive the run.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from host_listener import Listener

from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.sandbox.oslayers import ipc_objects, is_run_uid
from iterate.settings import Settings

pytestmark = pytest.mark.redteam

SECRET = f"canary-secret-{uuid.uuid4().hex}"
TOKEN = f"canary-token-{uuid.uuid4().hex}"
OTHER_RUN_TOKEN = f"canary-other-run-{uuid.uuid4().hex}"
SHM_TOKEN = f"canary-shm-{uuid.uuid4().hex}"
STAMP = uuid.uuid4().hex[:10]

# Disarm first, as the corpus did: a formatter looks attributes up by names built at run time (so
# the AST policy sees no dunder), walks from a traceback to the worker's frame, switches the audit hook
# off, keeps a way to clear the list of refusals, and takes the real builtins. Then a plotting backend by
# name. With the in-process checks off there is nothing to disarm and this is harmless.
PRELUDE = """
import string
u = "_" * 2
fmt = string.Formatter()
def get(obj, path):
    return fmt.get_field("0." + path.replace("@", u), (obj,), {})[0]
try:
    raise ValueError("x")
except ValueError as e:
    here = get(e, "@traceback@.tb_frame")
runner = get(here, "f_back")
names = get(runner, "f_locals")
try:
    for cell in get(names["hook"], "@closure@"):
        box = get(cell, "cell_contents")
        if isinstance(box, dict) and "armed" in box:
            box["armed"] = False
except Exception:
    pass
b = get(runner, "f_globals")["@builtins@".replace("@", u)]
imp = b["@import@".replace("@", u)] if isinstance(b, dict) else get(b, "@import@")
def clean():
    try:
        names["violations"].clear()
    except Exception:
        pass
try:
    df.plot(backend="sympy")
except Exception:
    pass
os = imp("os")
sys = imp("sys")
leak = []
def note(what, fn):
    try:
        leak.append([what, str(fn())[:3000]])
    except BaseException as exc:
        leak.append([what, "refused: " + str(type(exc))])
"""
# The code then forges a clean result: the verdict must come from what was seen, not from this.
FORGE = """
clean()
result = {"affected_rows": 7, "affected_cells": 7, "share": 0.5, "leak": leak}
"""


@dataclass(frozen=True)
class Goal:
    id: str
    code: str
    # Attempts the supervisor sees (a seccomp refusal, a limit): such a run must never end in success.
    # Others (a file the jail or Landlock hides) may end "successfully" with whatever the code says, but
    # must leak nothing and change nothing.
    observable: bool = True
    # Seen all the same without a jail, where Landlock's view is read-only: writes are refused by the
    # filter, and a read of a file outside the view is shown to the supervisor (isolation.file_access).
    observable_without_jail: bool = False
    limits_only: bool = False  # run in the fallback (no cgroup) modes too
    # The wall clock for a goal that tests another limit: long enough that the limit under test, not the
    # clock, ends the run even on a loaded machine (four children filling 850 MB each can take over 3 s).
    timeout_s: float | None = None


GOALS = [
    # --- network
    Goal(
        "tcp",
        "s = imp('socket')\nnote('tcp', lambda: s.create_connection(('127.0.0.1', PORT), timeout=1))\n"
        "note('tcp-raw', lambda: s.socket().connect(('127.0.0.1', PORT)))",
    ),
    Goal(
        "udp",
        "s = imp('socket')\nk = s.socket(s.AF_INET, s.SOCK_DGRAM)\n"
        "note('udp', lambda: k.sendto(b'CANARY-UDP', ('127.0.0.1', UDPPORT)))",
    ),
    Goal(
        "unix_path",
        "s = imp('socket')\nk = s.socket(s.AF_UNIX)\nnote('unix', lambda: k.connect(UNIXPATH))",
    ),
    Goal(
        "unix_abstract",
        "s = imp('socket')\nk = s.socket(s.AF_UNIX)\nnote('abstract', lambda: k.connect('\\0' + ABSTRACT))",
    ),
    Goal(
        "socketpair_datagram_to_abstract",
        "s = imp('socket')\na, b = s.socketpair(s.AF_UNIX, s.SOCK_DGRAM)\n"
        "note('dgram', lambda: a.sendto(b'x', '\\0' + ABSTRACT))",
    ),
    Goal("netlink", "s = imp('socket')\nnote('netlink', lambda: s.socket(16, s.SOCK_RAW, 0))"),
    Goal(
        "io_uring",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\n"
        "p = c.create_string_buffer(120)\nnote('io_uring', lambda: libc.syscall(425, 8, p))",
    ),
    # --- secrets and host files
    Goal(
        "environment_and_proc_environ",
        "note('env', lambda: dict(os.environ))\n"
        "for p in ['/proc/self/environ', '/proc/1/environ', '/proc/HOSTPID/environ', '/proc/%d/environ' % os.getppid()]:\n"
        "    note(p, lambda: open(p, 'rb').read())",
        observable=False,
        observable_without_jail=True,
    ),
    Goal(
        "host_files",
        "for p in ['CANARYFILE', '/root/.aws/credentials', '/etc/shadow', 'OTHERRUN', '/proc/HOSTPID/cmdline']:\n"
        "    note(p, lambda: open(p, 'rb').read())\n"
        "g = imp('glob')\nnote('glob', lambda: [open(f).read() for f in g.glob('/tmp/iterate-*/**', recursive=True) if os.path.isfile(f)])",
        observable=False,
        observable_without_jail=True,
    ),
    Goal(
        "other_runs_and_zygotes_memory",
        "note('mem', lambda: open('/proc/%d/mem' % os.getppid(), 'r+b'))\n"
        "note('zygote', lambda: open('/proc/HOSTPID/mem', 'rb'))\n"
        "note('fd', lambda: os.listdir('/proc/%d/fd' % os.getppid()))",
        observable=False,
        observable_without_jail=True,
    ),
    Goal(
        "sys_path_import",
        "sys.path.extend(SITEPATHS)\nimp('importlib').invalidate_caches()\n"
        "note('sympy', lambda: imp('sympy'))\nnote('anthropic', lambda: imp('anthropic'))\n"
        "note('iterate', lambda: imp('iterate'))\n"
        "leak.append(['modules', sorted(m for m in ['sympy', 'anthropic', 'boto3', 'iterate'] if m in sys.modules)])\n"
        "md = imp('importlib.metadata')\nleak.append(['entry_points', len(list(md.entry_points()))])",
        observable=False,
    ),
    # --- writes outside scratch
    Goal(
        "writes",
        "for p in ['TARGET', '/tmp/pwned-STAMP', '/dev/shm/pwned-STAMP', 'CANARYFILE']:\n"
        "    note(p, lambda: open(p, 'a').write('pwned'))",
        observable=False,
        observable_without_jail=True,
    ),
    # --- processes, signals, tracing, namespaces, mounts
    Goal("exec", "note('exec', lambda: os.execv('/bin/sh', ['sh', '-c', 'touch TARGET']))"),
    Goal("system", "note('system', lambda: os.system('touch TARGET'))"),
    Goal("signal_canary", "sg = imp('signal')\nnote('kill', lambda: os.kill(CANARYPID, sg.SIGUSR1))"),
    Goal("signal_group", "sg = imp('signal')\nnote('killpg', lambda: os.killpg(CANARYPID, sg.SIGUSR1))"),
    Goal("signal_everyone_probe", "note('kill -1', lambda: os.kill(-1, 0))"),
    Goal(
        "pidfd_signal",
        "sg = imp('signal')\nnote('pidfd', lambda: sg.pidfd_send_signal(os.pidfd_open(CANARYPID), sg.SIGUSR1))",
        observable=False,  # with a PID namespace the canary's pid does not even exist in there
    ),
    Goal(
        "ptrace",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\nnote('ptrace', lambda: libc.ptrace(16, CANARYPID, 0, 0))",
    ),
    Goal(
        "user_namespace",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\nnote('unshare', lambda: libc.unshare(0x10000000))",
    ),
    Goal("chroot", "note('chroot', lambda: os.chroot('/tmp'))"),
    Goal(
        "mount",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\n"
        "note('mount', lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))",
    ),
    Goal(
        "bpf_keyctl_perf",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\n"
        "x86 = imp('platform').machine() == 'x86_64'\n"
        "note('bpf', lambda: libc.syscall(321 if x86 else 280, 0, 0, 0))",
    ),
    Goal(
        "raise_limits",
        "r = imp('resource')\nnote('nproc', lambda: r.setrlimit(r.RLIMIT_NPROC, (-1, -1)))\n"
        "note('as', lambda: r.setrlimit(r.RLIMIT_AS, (-1, -1)))\nx = bytearray(3 * 1024 ** 3)",
    ),
    # --- other processes by pid: limits, priority, CPUs, descriptors
    Goal(
        "prlimit_other_processes",
        "r = imp('resource')\n"
        "note('canary', lambda: r.prlimit(CANARYPID, r.RLIMIT_NOFILE, (3, 3)))\n"
        "note('supervisor', lambda: r.prlimit(os.getppid(), r.RLIMIT_NOFILE, (3, 3)))\n"
        "note('read', lambda: r.prlimit(CANARYPID, r.RLIMIT_NOFILE))",
    ),
    Goal(
        "schedule_other_processes",
        "note('nice', lambda: os.setpriority(os.PRIO_PROCESS, CANARYPID, 19))\n"
        "note('cpus', lambda: os.sched_setaffinity(CANARYPID, {0}))\n"
        "note('pidfd', lambda: os.pidfd_open(CANARYPID))",
    ),
    # --- IPC: objects that would outlive the run (a channel to the next run), and the host's own
    Goal(
        "sysv_and_posix_ipc",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\n"
        "note('shm', lambda: libc.shmget(0x1D0BEEF, 1 << 20, 0o1666))\n"
        "note('shm-private', lambda: libc.shmget(0, 1 << 20, 0o1600))\n"
        "note('msg', lambda: libc.msgget(0x1D0BEEF, 0o1666))\n"
        "note('sem', lambda: libc.semget(0x1D0BEEF, 1, 0o1666))\n"
        "note('mq', lambda: c.CDLL('librt.so.1').mq_open(b'/iterate-STAMP', 0o100 | 2, 0o666, None))",
    ),
    Goal(
        "host_sysv_segment",
        "c = imp('ctypes')\nlibc = c.CDLL(None, use_errno=True)\nlibc.shmat.restype = c.c_void_p\n"
        "note('attach', lambda: c.string_at(libc.shmat(SHMID, None, 0o10000), 64))",
    ),
    # --- the host's cgroup tree (every host pid) and a scratch filled with files
    Goal(
        "sys_cgroup",
        "g = imp('glob')\nnote('cgroup', lambda: os.listdir('/sys/fs/cgroup'))\n"
        "note('procs', lambda: [open(f).read() for f in g.glob('/sys/fs/cgroup/**/cgroup.procs', recursive=True)][:3])",
        observable=False,  # a path the jail or Landlock hides
    ),
    Goal(
        "scratch_inodes",
        "n = 0\nfor i in range(100000):\n"
        "    try:\n        open('f%d' % i, 'w').close()\n    except OSError:\n        break\n    n += 1\n"
        "os.write(2, b'FILES %d\\n' % n)",
        observable=False,  # the tmpfs says "no space left", as a full disk would
    ),
    # --- bombs, memory, outliving the run (also in the modes without a cgroup)
    Goal(
        "fork_bomb",
        "tm = imp('time')\nn = 0\n"
        "for i in range(300):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        continue\n"
        "    if pid == 0:\n        tm.sleep(30)\n        os._exit(0)\n    n += 1\n"
        "os.write(2, b'FORKS %d\\n' % n)",
        limits_only=True,
    ),
    Goal(
        "thread_bomb",
        "th = imp('threading')\ntm = imp('time')\nth.stack_size(65536)\nn = 0\n"
        "for i in range(300):\n"
        "    try:\n        th.Thread(target=tm.sleep, args=(30,), daemon=True).start()\n        n += 1\n"
        "    except BaseException:\n        pass\n"
        "os.write(2, b'THREADS %d\\n' % n)",
        limits_only=True,
    ),
    Goal(
        "aggregate_memory",
        "tm = imp('time')\nkids = []\n"
        "for i in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        x = bytearray(850 * 1024 ** 2)\n        os.write(2, b'CHILD-DONE\\n')\n        tm.sleep(5)\n        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids:\n    os.waitpid(pid, 0)",
        limits_only=True,
        timeout_s=20,
    ),
    Goal(
        "double_fork_setsid",
        "tm = imp('time')\npid = os.fork()\n"
        "if pid == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        os.write(2, b'OUTLIVER %d\\n' % os.getpid())\n        tm.sleep(60)\n        os._exit(0)\n"
        "    os._exit(0)\nos.waitpid(pid, 0)\ntm.sleep(0.3)",
        observable=False,  # forking is allowed where a limit holds; what matters is the kill afterwards
        limits_only=True,
    ),
    # --- verdict forgery, output floods
    Goal(
        "forge_report_after_refusal",
        "s = imp('socket')\nnote('tcp', lambda: s.create_connection(('127.0.0.1', PORT), timeout=1))\nclean()\n"
        'fake = b\'{"success": true, "output": {"affected_rows": 7}, "violations": [], "stopped": null}\'\n'
        "for fd in range(3, 40):\n"
        "    try:\n        os.write(fd, fake)\n    except OSError:\n        pass\n"
        "os._exit(0)",
    ),
    Goal(
        "forge_report_after_memory",
        "tm = imp('time')\npid = os.fork()\nif pid == 0:\n    x = bytearray(900 * 1024 ** 2)\n    tm.sleep(1)\n    os._exit(0)\n"
        "y = bytearray(900 * 1024 ** 2)\nos.waitpid(pid, 0)",
    ),
    Goal(
        "flood_result_pipe",
        "for fd in range(3, 40):\n    try:\n        os.write(fd, b'x' * 10 ** 7)\n    except OSError:\n        pass",
    ),
    Goal("flood_stderr", "for i in range(200):\n    os.write(2, b'z' * 10 ** 6)", observable=False),
    Goal("huge_result", "leak.append('y' * 10 ** 7)"),
]

BASE = {"timeout_s": 3, "memory_mb": 1024, "max_output_bytes": 100_000, "setup_allowance_s": 8}


def limits_for(mode: str, timeout_s: float | None = None) -> SandboxLimits:
    checks = "0" if "nochecks" in mode else "1"
    settings = Settings.from_env({"ITERATE_SANDBOX_INPROCESS_CHECKS": checks})
    # With the checks on, the static policy alone refuses these snippets before any process starts (see
    # the test below): it is left out so that the runtime in-process layers are met, and disarmed.
    extra: dict[str, object] = {"enforce_policy": False}
    if mode.startswith("nons"):
        extra.update(namespaces=False, prefork=False)  # as the sandbox Lambda runs: a fresh process per run
    if "nocgroup" in mode:
        extra["cgroup"] = False
    if timeout_s is not None:
        extra["timeout_s"] = timeout_s
    return SandboxLimits.from_settings(settings, **(BASE | extra))  # type: ignore[arg-type]


MODES = ["ns", "ns-nochecks", "nons", "nons-nochecks"]
FALLBACK_MODES = ["ns-nocgroup-nochecks", "nons-nocgroup-nochecks"]
CASES = [pytest.param(g, m, id=f"{g.id}-{m}") for m in MODES for g in GOALS] + [
    pytest.param(g, m, id=f"{g.id}-{m}") for m in FALLBACK_MODES for g in GOALS if g.limits_only
]


@dataclass
class Canaries:
    listener: Listener
    udp: socket.socket
    unix: socket.socket
    unix_path: str
    abstract: socket.socket
    abstract_name: str
    process: subprocess.Popen[bytes]
    signals: Path
    other_run: Path
    directory: Path
    shmid: int

    def unix_accepted(self) -> int:
        count = 0
        for sock in (self.unix, self.abstract):
            while True:
                try:
                    conn, _ = sock.accept()
                except (BlockingIOError, OSError):
                    break
                count += 1
                conn.close()
        return count

    def udp_received(self) -> bytes:
        try:
            return self.udp.recv(100)
        except (BlockingIOError, OSError):
            return b""


@pytest.fixture(scope="module")
def canaries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Canaries]:
    directory = Path(f"/tmp/iterate-redteam-{STAMP}")
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)  # reachable by any uid: only the sandbox's own layers may stop a connect
    listener = Listener()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    unix_path = str(directory / "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(8)
    unix.setblocking(False)
    abstract_name = f"iterate-redteam-{STAMP}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    signals = directory / "signals.txt"
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGUSR1, lambda *a: open(sys.argv[1], 'a').write('x'))\n"
            "time.sleep(900)",
            str(signals),
        ],
        start_new_session=True,
    )
    # A host SysV segment, private to its owner (0600), holding a token.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shmid = libc.shmget(0, 4096, 0o1600)
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    address = libc.shmat(shmid, None, 0)
    ctypes.memmove(address, SHM_TOKEN.encode(), len(SHM_TOKEN))
    libc.shmdt(ctypes.c_void_p(address))
    # Another run's files, as a concurrent run would leave them: root's, in a private folder.
    other = Path(f"/tmp/iterate-sandbox-redteam-{STAMP}")
    other.mkdir(mode=0o700)
    (other / "result.json").write_text(OTHER_RUN_TOKEN)
    yield Canaries(
        listener,
        udp,
        unix,
        unix_path,
        abstract,
        abstract_name,
        process,
        signals,
        other / "result.json",
        directory,
        shmid,
    )
    libc.shmctl(shmid, 0, None)  # IPC_RMID
    process.kill()
    process.wait()
    listener.close()
    for sock in (udp, unix, abstract):
        sock.close()
    for path in (other / "result.json", signals, Path(unix_path)):
        path.unlink(missing_ok=True)
    other.rmdir()
    directory.rmdir()


def sandbox_for(mode: str, made: dict[str, LocalSandbox], timeout_s: float | None = None) -> LocalSandbox:
    key = mode if timeout_s is None else f"{mode}-{timeout_s:g}s"
    if key not in made:
        made[key] = LocalSandbox(limits_for(mode, timeout_s))
    return made[key]


def fill(code: str, canaries: Canaries, canary_file: Path, target: Path) -> str:
    site = sorted(
        {p for p in sys.path if p.endswith("site-packages")} | {str(Path(__file__).parents[2] / "layers")}
    )
    return (
        code.replace("UNIXPATH", repr(canaries.unix_path))
        .replace("ABSTRACT", repr(canaries.abstract_name))
        .replace("UDPPORT", str(canaries.udp.getsockname()[1]))
        .replace("PORT", str(canaries.listener.port))
        .replace("CANARYPID", str(canaries.process.pid))
        .replace("HOSTPID", str(os.getpid()))
        .replace("CANARYFILE", str(canary_file))
        .replace("OTHERRUN", str(canaries.other_run))
        .replace("TARGET", str(target))
        .replace("STAMP", STAMP)
        .replace("SHMID", str(canaries.shmid))
        .replace("SITEPATHS", json.dumps(site))
    )


@pytest.mark.parametrize(("goal", "mode"), CASES)
def test_os_layers_contain_the_goal(
    goal: Goal,
    mode: str,
    dataset: Path,
    tmp_path: Path,
    canaries: Canaries,
    sandboxes: dict[str, LocalSandbox],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a secret in this process's environment, a root-only file with a token, a path that must not
    # appear, and the host's listeners and canary process
    monkeypatch.setenv("ITERATE_TEST_SECRET", SECRET)
    canary_file = tmp_path / "credentials"
    canary_file.write_text(TOKEN)
    canary_file.chmod(0o600)
    target = tmp_path / "pwned.txt"
    code = PRELUDE + fill(goal.code, canaries, canary_file, target) + FORGE
    accepted = canaries.listener.accepted
    sandbox = sandbox_for(mode, sandboxes, goal.timeout_s)
    ipc_before = set(ipc_objects())
    canary_limits = Path(f"/proc/{canaries.process.pid}/limits").read_text()

    # When the snippet runs
    started = time.monotonic()
    outcome = sandbox.run_detailed(code, DatasetRef(path=str(dataset)))
    elapsed = time.monotonic() - started
    result = outcome.investigation

    # Then nothing got out
    everything = (
        json.dumps(result.model_dump(mode="json")) + json.dumps(outcome.violations) + outcome.stderr_tail
    )
    for secret in (SECRET, TOKEN, OTHER_RUN_TOKEN, SHM_TOKEN, "root:x:0:0", "aws_secret_access_key"):
        assert secret not in everything, f"{goal.id} leaked {secret[:20]}"
    assert not target.exists(), "a file appeared on the host"
    assert not Path(f"/tmp/pwned-{STAMP}").exists() and not Path(f"/dev/shm/pwned-{STAMP}").exists()
    assert canary_file.read_text() == TOKEN, "a host file was changed"
    assert canaries.listener.accepted == accepted, "TCP reached the host"
    assert canaries.udp_received() == b"", "UDP reached the host"
    assert canaries.unix_accepted() == 0, "a Unix socket reached the host"
    assert not canaries.signals.exists(), "a signal reached a host process"
    assert canaries.process.poll() is None, "the canary process was killed"
    assert canaries.other_run.read_text() == OTHER_RUN_TOKEN
    assert Path(f"/proc/{canaries.process.pid}/limits").read_text() == canary_limits, "a host limit changed"
    # And no IPC object outlived the run (in an IPC namespace none was ever visible here)
    # (a segment whose creator still runs outside any sandbox is another test worker's canary)
    alive = [o for o in set(ipc_objects()) - ipc_before if o.cpid > 0 and Path(f"/proc/{o.cpid}").exists()]
    left = set(ipc_objects()) - ipc_before - {o for o in alive if _not_sandboxed(o.cpid)}
    assert left == set(), "an IPC object outlived the run"
    assert not Path(f"/dev/mqueue/iterate-{STAMP}").exists()
    # And nothing outlived the run: the processes it reported are gone, its cgroup and uid are empty
    for pid in map(int, re.findall(r"OUTLIVER (\d+)", outcome.stderr_tail)):
        assert not Path(f"/proc/{pid}").exists() or _not_sandboxed(pid), f"pid {pid} outlived the run"
    assert not outcome.supervisor.get("leftovers"), outcome.supervisor
    if outcome.isolation.get("stage") != "static_policy":  # a refused snippet started no process
        assert "verified empty" in outcome.supervisor.get("cleanup", ""), outcome.supervisor
    # And the verdict is the supervisor's: a run it saw refused or limited is never a success
    # (With the in-process checks on, the restricted builtins refuse the attempt before the OS sees it, and
    # code that walks frames can erase that refusal: the attempt got nothing, but it is not seen from outside.)
    watched = str(outcome.isolation.get("file_access", "")).startswith("writes refused by seccomp, reads")
    if goal.observable or (goal.observable_without_jail and watched and "nochecks" in mode):
        assert result.success is False, f"{goal.id} in {mode} ended as a success: {result.output!r:.300}"
        assert result.stopped in {"policy", "timeout", "memory", "output_size", "crash", "error"}
    if goal.id == "sys_path_import" and result.success:  # nothing outside the view could be imported
        found = dict((k, v) for k, v in result.output["leak"] if k in ("modules", "entry_points"))
        assert found == {"modules": "[]", "entry_points": "0"} or found == {"modules": [], "entry_points": 0}
    # Limits hold run-wide: where the kernel holds the count (a cgroup, RLIMIT_NPROC on the run's uid),
    # 300 never start; where neither exists (root, no cgroup, no other uid possible), the host's count
    # kills the run (checked below through its verdict)
    for label in ("FORKS", "THREADS"):
        started_n = re.findall(rf"{label} (\d+)", outcome.stderr_tail)
        if started_n:
            assert int(started_n[0]) < 256
    if goal.id in ("fork_bomb", "thread_bomb"):
        # The limit (or, without a cgroup, the host's sum of the copies' memory) ends the run
        assert result.stopped in {"policy", "timeout", "memory"}, result.error
    if goal.id == "sys_cgroup" and result.success:  # the tree was not there to read
        for what, value in result.output["leak"]:
            assert str(value).startswith("refused") or value in ("[]", []), (what, value)
    for files in re.findall(r"FILES (\d+)", outcome.stderr_tail):
        assert int(files) <= SandboxLimits().scratch_inodes
    if goal.id == "aggregate_memory":
        assert outcome.stderr_tail.count("CHILD-DONE") < 2, "the children together went past the budget"
        assert result.stopped in {"memory", "policy"}, result.error
    assert elapsed < 30


def _not_sandboxed(pid: int) -> bool:
    """A reused pid belongs to someone else: not one of the sandbox's uids."""
    try:
        uids = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split("\n")[0].split()
    except (OSError, IndexError):
        return True
    return not any(is_run_uid(int(u)) for u in uids)


def test_there_is_a_goal_for_each_os_target() -> None:
    ids = {g.id for g in GOALS}
    for needed in ("tcp", "udp", "unix_path", "unix_abstract", "environment_and_proc_environ", "host_files",
                   "writes", "signal_canary", "ptrace", "user_namespace", "chroot", "mount", "fork_bomb",
                   "thread_bomb", "aggregate_memory", "double_fork_setsid", "forge_report_after_refusal",
                   "flood_result_pipe", "sysv_and_posix_ipc", "host_sysv_segment", "prlimit_other_processes",
                   "schedule_other_processes", "sys_cgroup", "scratch_inodes"):  # fmt: skip
        assert needed in ids
    assert len(CASES) >= 4 * len(GOALS)


def test_with_every_check_on_the_static_policy_refuses_the_disarm(dataset: Path) -> None:
    settings = Settings.from_env({"ITERATE_SANDBOX_INPROCESS_CHECKS": "1"})
    sandbox = LocalSandbox(SandboxLimits.from_settings(settings, **BASE))  # type: ignore[arg-type]
    outcome = sandbox.run_detailed(PRELUDE + FORGE, DatasetRef(path=str(dataset)))
    assert outcome.investigation.stopped == "policy"
    assert any("get_field" in v for v in outcome.violations)


def test_the_prelude_really_disarms_the_in_process_layers(
    dataset: Path, sandboxes: dict[str, LocalSandbox]
) -> None:
    """The disarm is not a no-op: with the runtime checks on, code they refuse runs once it has run."""
    sandbox = sandbox_for("ns", sandboxes)
    ref = DatasetRef(path=str(dataset))
    refused = sandbox.run_detailed("import os\nresult = {'affected_rows': len(os.listdir('/'))}", ref)
    assert refused.investigation.stopped == "policy"
    assert refused.isolation.get("stage") != "static_policy"  # refused at run time, in the process
    disarmed = sandbox.run_detailed(
        PRELUDE + "result = {'affected_rows': len(os.listdir('/')), 'real_import': imp is not None}\nclean()",
        ref,
    )
    assert disarmed.investigation.success, disarmed.investigation.error
    assert disarmed.investigation.output["real_import"] is True


@pytest.mark.parametrize("mode", MODES + FALLBACK_MODES)
def test_the_os_layers_are_on_in_every_mode(
    mode: str, dataset: Path, sandboxes: dict[str, LocalSandbox]
) -> None:
    outcome = sandbox_for(mode, sandboxes).run_detailed(
        "result = {'affected_rows': len(df)}", DatasetRef(path=str(dataset))
    )
    assert outcome.investigation.success, outcome.investigation.error
    iso = outcome.isolation
    assert iso["seccomp"] in {"notify", "kill"} and iso["capabilities"] == "dropped"
    if os.geteuid() == 0 and not mode.startswith("nons"):
        assert iso["filesystem"] == "jail" and iso["uid"].startswith("the run's own")
    if mode.startswith("nons"):
        assert iso["network"] == "seccomp" and iso["pid_namespace"] is False
    fallback = {"RLIMIT_NPROC", "no new processes", "counted by the supervisor"}
    expected = {"cgroup"} if "nocgroup" not in mode and os.geteuid() == 0 else fallback
    assert iso["processes"] in expected


def test_a_caller_whose_runs_share_its_uid_is_not_readable_through_proc(
    sandboxes: dict[str, LocalSandbox],
) -> None:
    # Given a sandbox whose runs keep the caller's uid (no namespaces; here the interpreter's files are
    # private to root, so no other uid could run it)
    sandbox = sandbox_for("nons", sandboxes)
    if sandbox._view.readable_by_others and os.geteuid() == 0:
        pytest.skip("runs get their own uid here")
    # Then this process is not dumpable: /proc/<pid>/environ and mem need CAP_SYS_PTRACE, which no run has
    import ctypes

    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE
