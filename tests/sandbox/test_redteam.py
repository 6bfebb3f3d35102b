"""Hostile code against the sandbox: every snippet must end contained, in every layer configuration."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from host_listener import Listener

from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits, check_policy

pytestmark = pytest.mark.redteam

SECRET = f"canary-{uuid.uuid4().hex}"
HOST_FILE_MARKERS = ("root:x:0:0", "/bin/bash", "ITERATE_TEST_SECRET")


@dataclass(frozen=True)
class Snippet:
    id: str
    code: str
    # With the static policy switched off, a few snippets run harmlessly to the end (the empty environment
    # has nothing to leak); they must still be contained, but "success" is not a breach for them.
    may_succeed_at_runtime: bool = False


# Placeholders: CANARY (a host file the code must not read or touch), TARGET (a host path it must not
# create), PORT (a listener on the host that must never see a connection), ZYGOTES (the sockets of every
# zygote and dataset zygote the module's sandboxes started, which must never take a job from the code).
SNIPPETS = [
    # --- shell and subprocesses
    Snippet("os_system", "import os\nos.system('touch TARGET')"),
    Snippet("subprocess_run", "import subprocess\nsubprocess.run(['touch', 'TARGET'])"),
    Snippet("chain_os_system", "pd.io.common.os.system('touch TARGET')"),
    Snippet("chain_execv", "pd.io.common.os.execv('/usr/bin/touch', ['touch', 'TARGET'])"),
    Snippet("chain_posix_spawn", "pd.io.common.os.posix_spawn('/usr/bin/touch', ['touch', 'TARGET'], {})"),
    Snippet("chain_popen", "result = {'x': pd.io.common.os.popen('cat CANARY').read()}"),
    Snippet(
        "sys_modules_subprocess", "import re\nre.enum.sys.modules['subprocess'].run(['touch', 'TARGET'])"
    ),
    Snippet("pty_spawn", "import pty\npty.spawn('/bin/sh')"),
    # --- files through every route
    Snippet("builtin_open_read", "result = {'x': open('CANARY').read()}"),
    Snippet("builtin_open_write", "open('TARGET', 'w').write('pwned')"),
    Snippet("builtins_dict_open", "result = {'x': __builtins__['open']('CANARY').read()}"),
    Snippet("pathlib_write", "import pathlib\npathlib.Path('TARGET').write_text('pwned')"),
    Snippet("chain_pathlib_read", "result = {'x': pd.io.common.Path('CANARY').read_text()}"),
    Snippet("pandas_read_csv", "result = {'x': pd.read_csv('CANARY', header=None).to_dict()}"),
    Snippet("pandas_to_csv", "df.to_csv('TARGET')"),
    Snippet("pandas_to_parquet", "df.to_parquet('TARGET')"),
    Snippet("pandas_to_json_path", "df.to_json('TARGET')"),
    Snippet("numpy_save", "np.save('TARGET', np.arange(3))"),
    Snippet("numpy_loadtxt", "result = {'x': np.loadtxt('CANARY', dtype=str).tolist()}"),
    Snippet("numpy_fromfile", "result = {'x': np.fromfile('CANARY', dtype=np.uint8).tolist()}"),
    Snippet("proc_self_environ", "result = {'x': open('/proc/self/environ').read()}"),
    Snippet(
        "proc_parent_environ",
        "result = {'x': pd.read_csv('/proc/PARENT/environ', header=None, sep='|').to_dict()}",
    ),
    Snippet("etc_passwd", "result = {'x': pd.read_csv('/etc/passwd', header=None, sep='|').to_dict()}"),
    Snippet("chain_remove", "pd.io.common.os.remove('CANARY')"),
    Snippet("chain_rename", "pd.io.common.os.rename('CANARY', 'TARGET')"),
    Snippet("chain_listdir", "result = {'x': pd.io.common.os.listdir('/')}"),
    Snippet(
        "chain_os_open",
        "fd = pd.io.common.os.open('CANARY', 0)\nresult = {'x': str(pd.io.common.os.read(fd, 100))}",
    ),
    # C-level file access that raises no audit event: only the jail or Landlock stop these at run time
    Snippet(
        "pyarrow_write_from_c",
        "pa = pd.io.parquet.import_optional_dependency('pyarrow')\n"
        "pq = pd.io.parquet.import_optional_dependency('pyarrow.parquet')\n"
        "pq.write_table(pa.table({'a': [1]}), 'TARGET')",
    ),
    Snippet(
        "pyarrow_read_from_c",
        "fs = pd.io.parquet.import_optional_dependency('pyarrow.fs')\n"
        "result = {'x': fs.LocalFileSystem().open_input_stream('CANARY').read().decode()}",
    ),
    Snippet("numpy_tofile_from_c", "np.arange(3).tofile('TARGET')"),
    # --- environment and secrets
    Snippet("os_environ", "import os\nresult = dict(os.environ)"),
    Snippet("chain_environ", "result = dict(pd.io.common.os.environ)", may_succeed_at_runtime=True),
    Snippet(
        "gc_objects",
        "import gc\nresult = {'x': [str(o)[:200] for o in gc.get_objects() if 'canary' in str(o)]}",
    ),
    Snippet(
        "chain_gc_objects",
        "import re\ng = re.enum.sys.modules['gc']\nresult = {'x': [str(o)[:100] for o in g.get_objects()][:50]}",
    ),
    Snippet("getframe_globals", "import sys\nresult = {'x': str(sys._getframe().f_back.f_globals)}"),
    Snippet(
        "traceback_frame_walk",
        "try:\n    1 / 0\nexcept Exception as e:\n    result = {'x': str(e.__traceback__.tb_frame.f_back.f_globals)}",
    ),
    Snippet("generator_frame", "g = (i for i in [1])\nresult = {'x': str(g.gi_frame.f_back.f_globals)}"),
    # --- sockets and URL readers
    Snippet("socket_connect", "import socket\nsocket.create_connection(('127.0.0.1', PORT), timeout=1)"),
    Snippet(
        "chain_socket",
        "import re\ns = re.enum.sys.modules['socket'].socket()\ns.settimeout(1)\ns.connect(('127.0.0.1', PORT))",
    ),
    Snippet(
        "urllib_urlopen", "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:PORT/', timeout=1)"
    ),
    Snippet(
        "zygote_sockets",
        "import re\nk = re.enum.sys.modules['socket']\n"
        "for path in ZYGOTES:\n    s = k.socket(k.AF_UNIX)\n    s.connect(path)\n"
        "    s.sendall(b'00000017{\"kind\": \"dataset\"}')\n    result = {'x': str(s.recv(100))}",
    ),
    Snippet("pandas_read_csv_url", "result = {'x': pd.read_csv('http://127.0.0.1:PORT/x.csv').to_dict()}"),
    Snippet("pandas_read_json_url", "result = {'x': str(pd.read_json('http://127.0.0.1:PORT/x.json'))}"),
    # --- pickles and ctypes
    Snippet("pickle_loads", "import pickle\npickle.loads(b\"cos\\nsystem\\n(S'touch TARGET'\\ntR.\")"),
    Snippet("chain_pickle_loads", "pd.io.pickle.pickle.loads(b\"cos\\nsystem\\n(S'touch TARGET'\\ntR.\")"),
    Snippet("pandas_read_pickle", "pd.read_pickle('CANARY')"),
    Snippet("ctypes_system", "import ctypes\nctypes.CDLL(None).system(b'touch TARGET')"),
    Snippet("chain_ctypes", "np.ctypeslib.ctypes.CDLL(None).system(b'touch TARGET')"),
    # --- reflection
    Snippet(
        "subclasses_wrap_close",
        "c = [k for k in ().__class__.__base__.__subclasses__() if k.__name__ == '_wrap_close'][0]\n"
        "c.__init__.__globals__['system']('touch TARGET')",
    ),
    Snippet("getattr_concat", "result = {'x': str(getattr(getattr((), '_' + '_class_' + '_'), 'mro')())}"),
    Snippet(
        "format_string_walk",
        "result = {'x': '{0.__globals__[os].environ}'.format(pd.io.common.get_handle)}",
        may_succeed_at_runtime=True,
    ),
    Snippet("chain_sys_modules_os", "import re\nre.enum.sys.modules['os'].system('touch TARGET')"),
    Snippet("class_metaclass", "class X(type):\n    pass\nresult = {'x': str(X)}"),
    # --- dynamic code and pandas expression engines
    Snippet("exec_builtin", "exec(\"import os; os.system('touch TARGET')\")"),
    Snippet("eval_builtin", "result = {'x': eval('1 + 1')}"),
    Snippet("dunder_import", "__import__('os').system('touch TARGET')"),
    Snippet("importlib", "import importlib\nimportlib.import_module('os').system('touch TARGET')"),
    Snippet("pd_eval_injection", "pd.eval(\"pd.io.common.os.system('touch TARGET')\")"),
    Snippet("query_injection", "df.query(\"@pd.io.common.os.system('touch TARGET') == 0\")"),
    Snippet("df_eval_injection", "df.eval(\"x = @pd.io.common.os.system('touch TARGET')\")"),
    Snippet(
        "apply_string_dispatch", "df.apply('query', expr=\"@pd.io.common.os.system('touch TARGET') == 0\")"
    ),
    # --- loops, bombs and limits
    Snippet("busy_loop", "x = 0\nwhile True:\n    x += 1"),
    Snippet(
        "loop_swallowing_exceptions",
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
    ),
    Snippet(
        "ignore_signals_then_loop",
        "import re\ns = re.enum.sys.modules['signal']\ns.signal(s.SIGXCPU, s.SIG_IGN)\ns.signal(s.SIGTERM, s.SIG_IGN)\nwhile True:\n    pass",
    ),
    Snippet("memory_one_shot", "x = 'a' * (10 ** 11)"),
    Snippet("memory_growing", "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 8))"),
    Snippet("fork_bomb", "import os\nwhile True:\n    os.fork()"),
    Snippet("chain_fork_bomb", "while True:\n    pd.io.common.os.fork()"),
    Snippet(
        "raise_rlimit",
        "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (-1, -1))\nwhile True:\n    pass",
    ),
    Snippet(
        "chain_raise_rlimit",
        "import re\nr = re.enum.sys.modules['resource']\nr.setrlimit(r.RLIMIT_AS, (-1, -1))\nx = 'a' * (10 ** 11)",
    ),
    Snippet("kill_parent", "import os\nos.kill(os.getppid(), 9)"),
    Snippet("chain_kill_parent", "o = pd.io.common.os\no.kill(o.getppid(), 9)\no.kill(PARENT, 9)"),
    Snippet(
        "thread_race",
        # Many threads hammering os.system while others keep the hook busy: none may slip through.
        "import re\nt = re.enum.sys.modules['_thread']\no = pd.io.common.os\n"
        "for i in range(20):\n    t.start_new_thread(o.system, ('touch TARGET',))\n"
        "for i in range(10 ** 6):\n    pass",
    ),
    # --- output floods
    Snippet("huge_print", "print('x' * 10 ** 8)"),
    Snippet("huge_result", "result = {'x': 'y' * 10 ** 8}"),
    Snippet("print_flood", "while True:\n    print('spam')"),
    Snippet("mmap_canary", "m = pd.io.common.mmap\nresult = {'x': str(m.mmap(-1, 10 ** 6))}"),
    Snippet("fd1_flood", "o = pd.io.common.os\nwhile True:\n    o.write(1, b'z' * 65536)"),
]

MODES = {
    # everything on: what users get
    "full": SandboxLimits(timeout_s=1, memory_mb=512, max_output_bytes=100_000, setup_allowance_s=4),
    # the static policy assumed bypassed: namespaces, limits, audit hook and builtins must hold
    "runtime": SandboxLimits(
        timeout_s=1, memory_mb=512, max_output_bytes=100_000, setup_allowance_s=4, enforce_policy=False
    ),
    # as for an ordinary (non-root) account on a laptop: the namespaces come from a user namespace
    "runtime_user_namespace": SandboxLimits(
        timeout_s=1,
        memory_mb=512,
        max_output_bytes=100_000,
        setup_allowance_s=4,
        enforce_policy=False,
        user_namespace_first=True,
    ),
    # namespaces off: seccomp, Landlock, limits, audit hook, disabled library I/O and builtins (forked from
    # the dataset zygote; a fresh process per run, as on Lambda, is test_redteam_os.py's "nons" modes)
    "runtime_no_namespaces": SandboxLimits(
        prefork=True,
        timeout_s=1,
        memory_mb=512,
        max_output_bytes=100_000,
        setup_allowance_s=4,
        enforce_policy=False,
        namespaces=False,
    ),
}


@pytest.fixture(scope="module")
def sandboxes(dataset: Path) -> Iterator[dict[str, LocalSandbox]]:
    """One sandbox per layer configuration, each with its zygotes started, shared by the module's tests."""
    made = {mode: LocalSandbox(limits) for mode, limits in MODES.items()}
    for sandbox in made.values():
        assert sandbox.run("result = {'n': len(df)}", DatasetRef(path=str(dataset))).success
    yield made
    for sandbox in made.values():
        sandbox.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def zygote_sockets(sandboxes: dict[str, LocalSandbox]) -> list[str]:
    paths = [s._zygote.path for s in sandboxes.values() if s._zygote is not None]
    for sandbox in sandboxes.values():
        paths += [e.zygote.path for e in sandbox._datasets._entries.values() if e.zygote is not None]
    assert len(paths) >= 6  # three prefork modes: each a zygote and a dataset zygote
    return paths


def test_there_are_at_least_40_hostile_snippets() -> None:
    assert len(SNIPPETS) >= 40
    assert len({s.id for s in SNIPPETS}) == len(SNIPPETS)


# Loops, bombs and floods test limits that do not depend on how the namespaces were made: the user
# namespace mode skips them to keep the suite fast.
LIMITS_ONLY = {
    "busy_loop",
    "loop_swallowing_exceptions",
    "ignore_signals_then_loop",
    "memory_one_shot",
    "memory_growing",
    "huge_print",
    "huge_result",
    "print_flood",
    "fd1_flood",
}
CASES = [
    pytest.param(snippet, mode, id=f"{snippet.id}-{mode}")
    for mode in MODES
    for snippet in SNIPPETS
    if not (mode == "runtime_user_namespace" and snippet.id in LIMITS_ONLY)
]


@pytest.mark.parametrize(("snippet", "mode"), CASES)
def test_hostile_snippet_is_contained(
    snippet: Snippet,
    mode: str,
    dataset: Path,
    tmp_path: Path,
    listener: Listener,
    sandboxes: dict[str, LocalSandbox],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a secret in the caller's environment, a host file with a token, a path that must not appear
    token = f"host-token-{uuid.uuid4().hex}"
    canary = tmp_path / "canary.txt"
    canary.write_text(f"{token}\nroot:x:0:0 {token}\n")
    target = tmp_path / "pwned.txt"
    monkeypatch.setenv("ITERATE_TEST_SECRET", SECRET)
    code = (
        snippet.code.replace("CANARY", str(canary))
        .replace("TARGET", str(target))
        .replace("PORT", str(listener.port))
        .replace("PARENT", str(os.getpid()))
        .replace("ZYGOTES", json.dumps(zygote_sockets(sandboxes)))
    )
    sandbox = sandboxes[mode]
    accepted_before = listener.accepted

    # When the snippet runs in the sandbox
    outcome = sandbox.run_detailed(code, DatasetRef(path=str(dataset)))
    result = outcome.investigation

    # Then it is contained: no side effect, nothing leaked, no connection, the caller alive
    everything = json.dumps(result.model_dump(mode="json")) + json.dumps(outcome.violations)
    assert not target.exists(), f"{snippet.id} created a file on the host"
    assert canary.read_text() == f"{token}\nroot:x:0:0 {token}\n", f"{snippet.id} changed a host file"
    assert SECRET not in everything, f"{snippet.id} leaked the caller's secret"
    assert token not in everything, f"{snippet.id} leaked a host file"
    for marker in HOST_FILE_MARKERS:
        assert marker not in everything, f"{snippet.id} leaked host content ({marker})"
    assert listener.accepted == accepted_before, f"{snippet.id} reached the network"
    os.kill(os.getpid(), 0)  # the caller is alive (a kill would not have let us get here anyway)
    # And it is reported as failed with a clear reason
    if mode == "full" or not snippet.may_succeed_at_runtime:
        assert result.success is False, f"{snippet.id} ran to success in mode {mode}: {result.output!r:.300}"
        assert result.stopped in {"policy", "timeout", "memory", "output_size", "crash", "error"}
        assert result.error and len(result.error) > 10
    if mode == "full" and check_policy(code):
        assert result.stopped == "policy"
    # And whatever reached a runner got there the way its configuration runs code: forked from the dataset
    # zygote onto the preloaded frame (no earlier snippet broke it), or loading the file in a fresh process
    if "network" in outcome.isolation:
        assert outcome.isolation["frame"] == ("preloaded" if sandbox.limits.prefork else "loaded")


def test_the_namespaces_are_really_used_here(dataset: Path) -> None:
    # Given a sandbox allowed to use namespaces on a machine that grants them (root in CI and here)
    sandbox = LocalSandbox(SandboxLimits(timeout_s=5))
    # When benign code runs
    outcome = sandbox.run_detailed("result = {'n': len(df)}", DatasetRef(path=str(dataset)))
    # Then the isolation it reports is the strongest one, or the refusal is recorded
    assert outcome.investigation.success
    if os.geteuid() == 0:
        assert outcome.isolation["network"] == "namespace"
        assert outcome.isolation["filesystem"] == "jail"
        assert outcome.isolation["capabilities"] == "dropped"
        assert outcome.isolation["namespaces"] == "root"
    else:
        assert outcome.isolation["network"] in {"namespace", "audit_hook"}
        assert outcome.isolation.get("namespaces") in {"user", None}


def test_the_user_namespace_path_isolates_like_root(
    dataset: Path, sandboxes: dict[str, LocalSandbox]
) -> None:
    outcome = sandboxes["runtime_user_namespace"].run_detailed(
        "result = {'n': len(df)}", DatasetRef(path=str(dataset))
    )
    assert outcome.investigation.success
    if outcome.isolation.get("namespaces_refused"):
        pytest.skip(f"user namespaces refused here: {outcome.isolation['namespaces_refused']}")
    assert outcome.isolation["namespaces"] == "user"
    assert outcome.isolation["network"] == "namespace" and outcome.isolation["filesystem"] == "jail"
