"""Sandbox worker: runs one untrusted investigation in a fresh, locked-down process (a script, never imported)."""

# Started by LocalSandbox as `python -I -B worker.py` with an empty environment. It reads its job (JSON) on
# stdin, the dataset arrives as an inherited read-only file descriptor, and the verdict goes to another
# inherited descriptor. Only the standard library, pyarrow and pandas are used here: the engine (`iterate`)
# is not importable inside the jail and must not be. Locally the process is usually forked from a zygote
# instead (end of this file); one forked from a dataset zygote takes the frame that zygote loaded once
# rather than reading the descriptor, and is otherwise isolated the same way.
#
# Layers, each meant to hold when the others are bypassed:
#   1. namespaces (when the OS allows): new network (no interfaces), PID (the code is not pid 1 and every
#      process it starts dies with it), mount (a tmpfs root holding read-only binds of the interpreter and
#      system libraries only, a fresh /proc, a throwaway writable work dir); then every capability dropped.
#   2. resource limits: CPU seconds, address space, file size, open files, processes, no core dumps.
#   3. an audit hook refusing processes, sockets, file access outside the interpreter, ctypes, pickles,
#      frame and gc introspection, dynamic code from pandas' expression engine, limit changes.
#   4. restricted builtins for the user code: no open/eval/exec/compile, an import allowlist, attribute
#      helpers that refuse private names, no class creation.

import contextlib
import errno
import json
import math
import os
import re
import resource
import signal
import sys
import time
import traceback
import weakref


def _load_oslayers():  # type: ignore[no-untyped-def]
    """oslayers.py beside this file, by path: `python -I` puts no script folder on sys.path, and the engine
    (`iterate`) must never be imported here (it would be reachable from the investigation's process)."""
    import importlib.util

    if "oslayers" in sys.modules:
        return sys.modules["oslayers"]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oslayers.py")
    spec = importlib.util.spec_from_file_location("oslayers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["oslayers"] = module
    spec.loader.exec_module(module)
    return module


oslayers = _load_oslayers()

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
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
CODE_NAME = "<investigation>"

# Code that begins with import lines and then `PARAMS = json.loads('<one string literal>')` on a line of its
# own: the engine's templates, hundreds per run on a wide table, differ in nothing else. The static policy
# (policy.check_policy) and a batch's compiler (compile_batch_item) read it with this one pattern.
PARAMS_HEAD = re.compile(
    r"(?P<head>(?:(?:import [A-Za-z_.]+(?: as [A-Za-z_]+)?)?\n)*PARAMS = json\.loads\()"
    r"(?P<literal>'(?:[^'\\\n]|\\.)*')\)\n"
)
# Besides the interpreter: shared libraries, the loader's cache and the time zone. Nothing of /sys: its
# cgroup tree names every host process (thread pools are sized from the CPUs the process may use).
SYSTEM_READ_PATHS = [
    "/usr",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
]
EXIT_SIGNAL_BASE = 128

ALLOWED_IMPORTS = {
    "pandas",
    "numpy",
    "json",
    "math",
    "re",
    "datetime",
    "statistics",
    "collections",
    "itertools",
    "decimal",
    "difflib",
    "string",
    "unicodedata",
    "base64",
    "zlib",
}

# Audit events refused outright once the untrusted code runs (prefix match).
DENIED_EVENT_PREFIXES = (
    "socket.",
    "subprocess.",
    "_posixsubprocess",
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.symlink",
    "os.link",
    "os.truncate",
    "os.chmod",
    "os.chown",
    "os.lchown",
    "os.chflags",
    "os.utime",
    "os.chdir",
    "os.putenv",
    "os.unsetenv",
    "os.setxattr",
    "os.removexattr",
    "os.getxattr",
    "os.listxattr",
    "os.walk",
    "os.fwalk",
    "os.startfile",
    "glob.",
    "shutil.",
    "ctypes.",
    "pty.",
    "resource.",
    "signal.",
    "sys._current_frames",
    "sys._current_exceptions",
    "sys.settrace",
    "sys.setprofile",
    "sys.addaudithook",
    "sys.monitoring",
    "gc.",
    "code.__new__",
    "function.__new__",
    "pickle.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "nntplib.",
    "telnetlib.",
    "webbrowser.",
    "mmap.",
    "sqlite3.",
    "tempfile.",
    "fcntl.",
    "syslog.",
    "builtins.input",
    "builtins.breakpoint",
    "cpython.",
    "_thread.start_new_thread",  # raised from Python 3.13 on; the hook is per-thread anyway
)
# Modules whose import is refused at run time, whoever asks (pandas imports none of these lazily).
DENIED_MODULES = {
    "ctypes",
    "_ctypes",
    "subprocess",
    "_posixsubprocess",
    "socket",
    "_socket",
    "ssl",
    "_ssl",
    "multiprocessing",
    "_multiprocessing",
    "pty",
    "urllib",
    "http",
    "ftplib",
    "smtplib",
    "webbrowser",
    "asyncio",
    "mmap",
    "fcntl",
    "pdb",
    "code",
    "codeop",
    "runpy",
    "sqlite3",
}


class SandboxViolation(PermissionError):
    """Raised inside the jail when the runtime guard refuses an action."""


class OutputTooLarge(Exception):
    """Printed output went past the cap."""


class CappedWriter:
    """Stands in for sys.stdout: keeps what is printed, up to a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        text = str(text)
        self.size += len(text)
        if self.size > self.cap:
            raise OutputTooLarge(f"printed output exceeded {self.cap} characters")
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        return None

    def getvalue(self) -> str:
        return "".join(self.parts)


# ---------------------------------------------------------------------------------------------------------
# Layer 1: namespaces, a minimal root, no capabilities


def _libc():  # type: ignore[no-untyped-def]
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(libc, source, target, fstype, flags, data=None) -> None:  # type: ignore[no-untyped-def]
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


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


def drop_capabilities(libc) -> None:  # type: ignore[no-untyped-def]
    """No new privileges and an empty capability set: root in the jail can no longer mount or chroot."""
    import ctypes
    import platform

    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
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
    _check(libc.syscall(number, ctypes.byref(header), ctypes.byref(data)), "capset")


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
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
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


# ---------------------------------------------------------------------------------------------------------
# Layer 2-4: limits, audit hook, restricted builtins


def _user_frame_calling() -> bool:
    """True when the frame that triggered the current audit event is the investigation code itself."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in (__file__, "<frozen importlib._bootstrap>"):
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and frame.f_code.co_filename == CODE_NAME


def _called_by_importer() -> bool:
    """True when the event comes straight from the import system (reading a module's cached bytecode)."""
    frame = sys._getframe(2)
    return frame is not None and frame.f_code.co_filename.startswith("<frozen importlib")


def _stack_has(fragment: str) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if fragment in frame.f_code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def make_audit_hook(read_prefixes: tuple[str, ...], violations: list[str]):  # type: ignore[no-untyped-def]
    """An audit hook (active once `arm()` is called) that refuses what the static policy should have caught."""
    from _thread import get_ident

    state = {"armed": False}
    # Threads inside the hook right now: it must not re-enter itself, yet a second thread's events must
    # still be judged while the first one is being checked.
    busy: set[int] = set()

    def deny(event: str, detail: str = "") -> None:
        message = f"{event} refused by the sandbox" + (f" ({detail})" if detail else "")
        if len(violations) < 20:
            violations.append(message)
        raise SandboxViolation(message)

    def readable(path: object) -> bool:
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        if not isinstance(path, str):
            return False
        real = os.path.realpath(path)
        return any(real == p or real.startswith(p + os.sep) for p in read_prefixes)

    def hook(event: str, args: tuple) -> None:
        if not state["armed"]:
            return
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            if event.startswith(DENIED_EVENT_PREFIXES):
                deny(event)
            elif event.startswith("marshal."):
                # Lazy imports inside pandas unmarshal cached bytecode; nothing else may.
                if not _called_by_importer():
                    deny(event)
            elif event == "open":
                path, mode, flags = ((*tuple(args), None, None, None))[:3]
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC)
                )
                if writing or not readable(path):
                    deny(event, str(path)[:200])
            elif event in ("os.listdir", "os.scandir"):
                if not readable(args[0] if args else "."):
                    deny(event, str(args[0] if args else ".")[:200])
            elif event == "import":
                name = str(args[0]) if args else ""
                if name.split(".")[0] in DENIED_MODULES:
                    deny(event, name)
            elif event in ("sys._getframe", "object.__getattr__", "object.__setattr__", "object.__delattr__"):
                # pandas walks frames to place its warnings; only the investigation code is refused.
                if _user_frame_calling():
                    deny(event, str(args[-1]) if args else "")
            elif event in ("compile", "exec") and (
                # Library code may build small functions (namedtuple); user code and pandas' expression
                # engine (pd.eval, DataFrame.query/eval) may not.
                _user_frame_calling() or _stack_has("pandas/core/computation")
            ):
                deny(event)
        finally:
            busy.discard(me)

    def arm() -> None:
        state["armed"] = True

    return hook, arm


def make_refuse(violations: list[str]):  # type: ignore[no-untyped-def]
    def refuse(what: str) -> None:
        message = f"{what} refused by the sandbox"
        if len(violations) < 20:
            violations.append(message)
        raise SandboxViolation(message)

    return refuse


def restricted_builtins(violations: list[str]) -> dict:
    """Builtins for the investigation code: no file, code or reflection helpers, an import allowlist."""
    import builtins

    real_import = builtins.__import__
    safe = dict(vars(builtins))
    refuse = make_refuse(violations)

    def refusing(name: str):  # type: ignore[no-untyped-def]
        def refused(*args, **kwargs):  # type: ignore[no-untyped-def]
            refuse(f"{name}()")

        return refused

    for name in (
        "eval",
        "exec",
        "compile",
        "open",
        "input",
        "breakpoint",
        "help",
        "exit",
        "quit",
        "globals",
        "locals",
        "vars",
        "dir",
        "memoryview",
        "__build_class__",
        "__loader__",
        "__spec__",
        "copyright",
        "credits",
        "license",
    ):
        # A stub rather than a missing name, so the refusal is reported as such and not as a NameError.
        safe[name] = refusing(name)
    for name in ("__loader__", "__spec__", "copyright", "credits", "license"):
        safe.pop(name, None)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # type: ignore[no-untyped-def]
        top = name.split(".")[0]
        if isinstance(fromlist, list):
            # Import statements pass None or a tuple; a list comes from C (PyImport_Import, Cython in
            # pyarrow) importing lazily while the investigation is the innermost Python frame. It gets
            # the real import minus the modules no one may load; the audit hook still watches what it does.
            if top in DENIED_MODULES:
                refuse(f"import of {name!r}")
            return real_import(name, globals, locals, fromlist, level)
        if level or top not in ALLOWED_IMPORTS:
            refuse(f"import of {name!r}")
        for item in fromlist or ():
            if str(item).startswith("_"):
                refuse(f"import of {name}.{item}")
        return real_import(name, globals, locals, fromlist, level)

    def safe_name(name: object) -> str:
        if not isinstance(name, str) or name.startswith("_"):
            refuse(f"attribute access to {name!r}")
        return name  # type: ignore[return-value]

    _missing = object()

    def safe_getattr(obj, name, default=_missing):  # type: ignore[no-untyped-def]
        name = safe_name(name)
        return getattr(obj, name) if default is _missing else getattr(obj, name, default)

    def safe_hasattr(obj, name):  # type: ignore[no-untyped-def]
        return hasattr(obj, safe_name(name))

    def safe_setattr(obj, name, value):  # type: ignore[no-untyped-def]
        return setattr(obj, safe_name(name), value)

    def safe_delattr(obj, name):  # type: ignore[no-untyped-def]
        return delattr(obj, safe_name(name))

    safe.update(
        __import__=guarded_import,
        getattr=safe_getattr,
        hasattr=safe_hasattr,
        setattr=safe_setattr,
        delattr=safe_delattr,
    )
    return safe


# Writers that always take a target, and writers that return text when given none.
PANDAS_WRITERS = (
    "to_parquet",
    "to_feather",
    "to_orc",
    "to_pickle",
    "to_hdf",
    "to_sql",
    "to_excel",
    "to_stata",
    "to_clipboard",
    "to_gbq",
    "to_xml",
    "to_latex",
)
PANDAS_TEXT_WRITERS = ("to_csv", "to_json", "to_string", "to_markdown", "to_html")
NUMPY_IO = (
    "save",
    "savez",
    "savez_compressed",
    "savetxt",
    "load",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "fromregex",
)


def disable_library_io(pd, np, refuse) -> None:  # type: ignore[no-untyped-def]
    """Replace pandas readers/writers and numpy's file functions with refusals, in this process only.

    pyarrow and numpy read and write files from C, which no audit event sees; where neither the jail
    nor Landlock is available (Lambda), this is the runtime layer that covers them.
    """

    def refusing(name: str):  # type: ignore[no-untyped-def]
        def refused(*args, **kwargs):  # type: ignore[no-untyped-def]
            refuse(f"{name}()")

        return refused

    def text_only(name: str, method):  # type: ignore[no-untyped-def]
        def writer(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if args or any(kwargs.get(k) is not None for k in ("buf", "path_or_buf", "path")):
                refuse(f"{name}() to a file")
            return method(self, **kwargs)

        return writer

    for name in dir(pd):
        if name.startswith("read_"):
            setattr(pd, name, refusing(f"pandas.{name}"))
    for cls in (pd.DataFrame, pd.Series):
        for name in PANDAS_WRITERS:
            if hasattr(cls, name):
                setattr(cls, name, refusing(f"{cls.__name__}.{name}"))
        for name in PANDAS_TEXT_WRITERS:
            if hasattr(cls, name):
                setattr(cls, name, text_only(f"{cls.__name__}.{name}", getattr(cls, name)))
    for name in NUMPY_IO:
        if hasattr(np, name):
            setattr(np, name, refusing(f"numpy.{name}"))
    pd.eval = refusing("pandas.eval")
    pd.DataFrame.eval = refusing("DataFrame.eval")
    pd.DataFrame.query = refusing("DataFrame.query")
    # A plotting backend is any module named at run time (and entry points of installed packages).
    import pandas.plotting._core as plotting_core

    plotting_core._get_plot_backend = refusing("pandas plotting")  # type: ignore[attr-defined]


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
        baseline = PRELOADED.get("vm_bytes") or 2 * 1024**3
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


def _jsonable(value: object, depth: int = 0) -> object:
    """Plain JSON values; numpy scalars and arrays converted, NaN and infinities to None."""
    import numpy as np

    if depth > 50:
        raise ValueError("result nested too deeply")
    if isinstance(value, dict):
        return {str(_jsonable(k, depth + 1)): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v, depth + 1) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    raise TypeError(f"result contains a {type(value).__name__}, which is not JSON-serialisable")


def written_names(schema) -> list[str]:  # type: ignore[no-untyped-def]
    """The names as written (repeats included), which iterate.io.write_parquet_text keeps in metadata."""
    meta = schema.metadata or {}
    return json.loads(meta[b"iterate.names"]) if b"iterate.names" in meta else list(schema.names)


def _text_frame(table):  # type: ignore[no-untyped-def]
    """A pandas frame of the table's columns as text, nulls as empty strings, under the written names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in table.columns:
        if column.type != pa.string() and column.type != pa.large_string():
            column = pc.cast(column, pa.string())
        columns.append(pc.fill_null(column, ""))
    frame = pa.table(columns, names=[f"c{i}" for i in range(len(columns))]).to_pandas()
    names = written_names(table.schema)
    frame.columns = names if len(names) == len(columns) else table.column_names
    return frame


def load_frame(fd: int, wanted: list[str] | None = None):  # type: ignore[no-untyped-def]
    """The dataset as a DataFrame of text columns, nulls as empty strings, from the inherited descriptor.

    `wanted`: names (as written) of the only columns to load; a big file's other columns are never read.
    """
    return load_frame_narrowed(fd, wanted)[0]


def load_frame_narrowed(fd: int, wanted: list[str] | None = None):  # type: ignore[no-untyped-def]
    """`load_frame`, and how: (frame, narrowed, narrowable). `narrowed`: only `wanted`'s columns were read;
    otherwise the frame is the whole table, and `narrowable` says whether columns can be picked from it."""
    import pyarrow.parquet as pq

    with os.fdopen(fd, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        written = written_names(schema)
        narrowable = len(written) == len(schema.names)
        if wanted is not None:
            picked = [i for i, name in enumerate(written) if name in set(wanted)]
            if picked and narrowable:
                return _read_text_frame(parquet, picked), True, True
        return _read_text_frame(parquet), False, narrowable


# A line of code that asks for the columns to be read from the file as it asks for them (see ColumnReader):
# the engine's whole-row templates carry it. A whole line, so no value or name inside a literal can make it.
ON_DEMAND_LINE = "# iterate: columns read on demand"


def reads_on_demand(code: str) -> bool:
    """Whether `code` asks for its columns read one at a time from the file rather than a whole frame."""
    return f"\n{ON_DEMAND_LINE}\n" in f"\n{code}\n"


class ColumnReader:
    """The dataset for code that reads its columns one at a time (the duplicate-row proofs read every column,
    one after the other, on fewer rows each time): what such code uses of a frame, `len(df)`, `df.columns`,
    `df.shape` and `df.iloc[rows, i]`, with each column read from the Parquet file when asked for, as
    `load_frame` would have made it. The whole table is never in memory: 10M rows x 20 columns is a 3.2 GB
    frame, one column of it ~160 MB.

    The file is opened (read-only) before the lockdown; reading an open descriptor afterwards needs no path.
    """

    @classmethod
    def open(cls, fd: int) -> "ColumnReader | None":
        """A reader of the file behind `fd` (on a duplicate of it: `fd` stays open), or None when its columns
        cannot be read one by one (the caller then loads the frame from `fd` as before)."""
        copy = os.dup(fd)
        try:
            return cls(copy)
        except ValueError:
            return None

    def __init__(self, fd: int) -> None:
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self._handle = os.fdopen(fd, "rb")
        self._parquet = pq.ParquetFile(self._handle)
        schema = self._parquet.schema_arrow
        self._stored = list(schema.names)
        self._nullable = [field.nullable for field in schema]
        # The same file read with its dictionary pages kept as dictionaries (`factorized`): made now, before
        # the lockdown, as the other reader is.
        self._coded = pq.ParquetFile(self._handle, read_dictionary=self._stored)
        written = written_names(schema)
        if len(written) != len(self._stored) or len(set(self._stored)) != len(self._stored):
            self._handle.close()
            raise ValueError("columns cannot be read one by one from this file")
        self.columns = pd.Index(written)
        metadata = self._parquet.metadata
        self._rows = metadata.num_rows
        self._first_group = metadata.row_group(0).num_rows if metadata.num_row_groups else 0
        self.shape = (self._rows, len(written))
        self.iloc = _ColumnIndexer(self)

    def __len__(self) -> int:
        return self._rows

    def column(self, position: int, rows):  # type: ignore[no-untyped-def]
        """Column `position` as the frame holds it (a Series named after it), on `rows` (a slice or positions)."""
        name = self._stored[position]
        head = isinstance(rows, slice) and rows.start in (None, 0) and rows.step in (None, 1)
        if head and rows.stop is not None and 0 <= rows.stop <= self._first_group:
            table = self._parquet.read_row_group(0, columns=[name], use_threads=False)
        else:
            table = self._parquet.read(columns=[name], use_threads=False)
        text = _text_column(table.column(0))
        del table
        series = self._pa.table([text], names=["c"]).to_pandas()["c"]
        series.name = self.columns[position]
        return series.iloc[rows]

    def factorized(self, position: int, rows):  # type: ignore[no-untyped-def]
        """`pd.factorize(df.iloc[rows, position].astype(str), use_na_sentinel=False)`, the same codes and distinct
        values in the same order, read from the file's dictionary pages where its column is stored as one (the
        engine's data.parquet on a column of repeated values): the codes come from the page's indices and only
        the distinct values are text, instead of every row's text being read and hashed again (10M rows, the
        bench's dictionary-encoded columns: 0.02-0.13 s a column against 0.2-0.9 s). A column stored as plain
        values (most values distinct, where the writer gave up its dictionary) is read as text and factorized,
        as before."""
        import numpy as np
        import pandas as pd

        # A column that may hold nulls (not the engine's: its columns are written `not null`) is read as text,
        # which turns them into "" as the frame does.
        if self._nullable[position] or not self._dictionary_encoded(position):
            return pd.factorize(self.column(position, rows).astype(str), use_na_sentinel=False)
        table = self._coded.read(columns=[self._stored[position]], use_threads=False).unify_dictionaries()
        column = table.column(0)  # dictionary-typed, one chunk or more (the file has row groups)
        dictionary = column.chunk(0).dictionary
        indices = np.concatenate([chunk.indices.to_numpy() for chunk in column.chunks])
        del table, column
        codes, used = pd.factorize(indices[rows], use_na_sentinel=False)
        del indices
        values = _text_column(self._pa.chunked_array([dictionary.take(self._pa.array(used))]))
        return codes, pd.array(values, dtype="str")

    def _dictionary_encoded(self, position: int) -> bool:
        """Whether column `position` is stored as dictionary indices in every row group: under 4 bytes a value
        uncompressed, which a value written plainly never is (its length alone takes 4)."""
        metadata = self._parquet.metadata
        for group in range(metadata.num_row_groups):
            chunk = metadata.row_group(group).column(position)
            if not chunk.has_dictionary_page or chunk.total_uncompressed_size >= 4 * max(chunk.num_values, 1):
                return False
        return metadata.num_row_groups > 0


class _ColumnIndexer:
    def __init__(self, reader: ColumnReader) -> None:
        self._reader = reader

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        if not isinstance(key, tuple) or len(key) != 2 or isinstance(key[1], (slice, list, tuple)):
            raise TypeError("columns read on demand: df.iloc[rows, i] with one column position i")
        rows, position = key
        return self._reader.column(int(position), rows)


def _text_column(column):  # type: ignore[no-untyped-def]
    """One column as text, nulls as empty strings, in one chunk of large_string: what pandas 3 keeps
    (it converts string to large_string anyway), made here once, in one buffer of text and one of offsets."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.type != pa.string() and column.type != pa.large_string():
        column = pc.cast(column, pa.string())
    column = pc.cast(pc.fill_null(column, ""), pa.large_string())
    if column.num_chunks == 1:
        return column
    return pa.chunked_array([column.combine_chunks()], pa.large_string())


def _read_text_frame(parquet, picked: list[int] | None = None):  # type: ignore[no-untyped-def]
    """The Parquet file's columns (the positions `picked`, or all) as `_text_frame` makes them, read and
    converted one column at a time.

    What the frame holds is the same (964 MB of buffers on 3M rows x 20 columns); what differs is the memory
    around it. Read whole, the table (the text with 4-byte offsets, 23 chunks a column) lived beside its
    converted copy (8-byte offsets) and the pool kept the pages the table's chunks left between the frame's:
    a dataset zygote held 1,579-1,584 MB once loaded. A column at a time, the conversion re-uses the text
    buffer (only the offsets are widened): 1,201-1,227 MB at the load's peak, 1,145 MB once loaded (after
    _hand_back), loaded in 3.4-4.8 s instead of 4.8-9.2 s. One chunk per column also leaves the frame in a
    few large blocks that mimalloc backs with huge pages: forking a runner from it took 9-27 ms instead of
    24-29 ms (medians of 20 forks, three rounds alternated, load 10)."""
    import pyarrow as pa

    schema = parquet.schema_arrow
    stored = schema.names
    positions = list(range(len(stored))) if picked is None else list(picked)
    if len(set(stored)) == len(stored):
        columns = [
            _text_column(parquet.read(columns=[stored[i]], use_threads=False).column(0)) for i in positions
        ]
    else:  # repeated stored names cannot be read one by one by name (never so in the engine's data.parquet)
        table = parquet.read(use_threads=False)
        columns = [_text_column(table.column(i)) for i in positions]
        del table
    frame = pa.table(columns, names=[f"c{k}" for k in range(len(columns))]).to_pandas()
    written = written_names(schema)
    names = written if len(written) == len(stored) else stored
    frame.columns = [names[i] for i in positions]
    return frame


ARROW_MAGIC = b"ARROW1"  # the first bytes of an Arrow IPC file


def preload_frame(fd: int, max_mb: int):  # type: ignore[no-untyped-def]
    """The whole dataset, loaded once by a dataset zygote: (frame, whether columns can be picked from it).

    Refuses (MemoryError) a dataset estimated above `max_mb` in memory: runners then load only the
    columns they need, as without a dataset zygote.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    # Arrow-backed strings (pandas 3) cost their bytes and offsets; Python str objects far more.
    per_cell = 64 if pd.Series(["x"]).dtype == object else 16
    if os.pread(fd, len(ARROW_MAGIC), 0) == ARROW_MAGIC:
        # The caller's own table, handed over in a sealed memfd (LocalSandbox.prepare): mapped read-only, so
        # the frame's text is that memory itself (nothing to parse or copy; runners share it).
        import mmap

        import pyarrow as pa
        import pyarrow.ipc as ipc

        size = os.fstat(fd).st_size
        with os.fdopen(fd, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
        reader = ipc.open_file(pa.py_buffer(mapped))
        estimate_mb = size / 2**20  # the frame is the mapping; pandas adds little on top
        if estimate_mb > max_mb:
            raise MemoryError(f"about {estimate_mb:.0f} MB in memory, over the {max_mb} MB preload cap")
        table = reader.read_all()
        narrowable = len(written_names(table.schema)) == table.num_columns
        return _text_frame(table), narrowable
    with os.fdopen(fd, "rb") as handle:
        meta = pq.read_metadata(handle)
        raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        estimate_mb = (2 * raw + per_cell * meta.num_rows * meta.num_columns) / 2**20
        if estimate_mb > max_mb:
            raise MemoryError(f"about {estimate_mb:.0f} MB in memory, over the {max_mb} MB preload cap")
        handle.seek(0)
        parquet = pq.ParquetFile(handle)
        frame = _read_text_frame(parquet)
        # load_frame narrows only when the written names match the stored columns one to one.
        narrowable = len(written_names(parquet.schema_arrow)) == len(parquet.schema_arrow.names)
    _hand_back()
    return frame, narrowable


def _hand_back() -> None:
    """What loading freed goes back to the system before the runners fork from this process: objects only a
    cycle holds, then pyarrow's pool (mimalloc keeps freed pages: 80 MB on 3M rows x 20 columns) and malloc's
    heaps."""
    import gc

    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)


def select_columns(frame, narrowable: bool, wanted: list[str] | None):  # type: ignore[no-untyped-def]
    """What `load_frame(fd, wanted)` gives, taken from the preloaded whole frame (same names, order, values)."""
    if wanted is None:
        return frame
    positions = _column_positions(frame)
    picked = sorted({i for name in set(wanted) for i in positions.get(name, ())})
    if not picked or not narrowable:
        return frame
    return frame.iloc[:, picked].copy(deep=False)


# [(frame, its columns Index, {name: [positions]})], both held weakly: the last frame's, reused by every
# item of a batch, and never what keeps a frame alive.
_POSITIONS: list = []


def _column_positions(frame) -> dict:  # type: ignore[no-untyped-def]
    """Each column name's positions in `frame` (a name can repeat), computed once per frame and names: reading
    a wide frame's names costs more than narrowing it, and a batch narrows the same frame for every item.
    (An Index is immutable: renaming the columns gives the frame a new one, and the positions are recomputed.)"""
    if not _POSITIONS or _POSITIONS[0][0]() is not frame or _POSITIONS[0][1]() is not frame.columns:
        positions: dict = {}
        for i, name in enumerate(frame.columns.tolist()):
            positions.setdefault(name, []).append(i)
        _POSITIONS[:] = [(weakref.ref(frame), weakref.ref(frame.columns), positions)]
    return _POSITIONS[0][2]


# Set in a dataset zygote before it serves: {"frame": DataFrame, "narrowable": bool}. Each runner forked
# from it takes its frame from here (copy-on-write) instead of reading the file.
PRELOADED: dict = {}


def run_investigation(job: dict, isolation: dict, result_fd: int) -> int:
    """Load, lock down, run the code and write its report. Returns the process exit code.

    A job with a `batch` (a list of {"code", "columns"}) runs each code in turn, each in its own namespace
    on the frame a single run with its columns would see, and reports a list of per-item verdicts (see
    `_run_batch`). The report is only what this process says: the supervisor outside decides from what it
    saw itself.
    """
    started = time.perf_counter()
    violations: list[str] = []
    verdict: dict = {"success": False, "output": None, "error": None, "stopped": None}
    checks = job.get("inprocess_checks", True)
    batch = job.get("batch")
    try:
        import numpy as np
        import pandas as pd

        for name in ALLOWED_IMPORTS:
            __import__(name)
        if PRELOADED:
            isolation["frame"] = "preloaded"
            isolation["loader"] = PRELOADED.get("loader")
            base, narrowed, narrowable = PRELOADED["frame"], False, PRELOADED["narrowable"]
        elif (
            batch is None
            and job.get("columns") is None
            and reads_on_demand(job["code"])
            and (reader := ColumnReader.open(job["data_fd"])) is not None
        ):
            isolation["frame"] = "read on demand"
            base, narrowed, narrowable = reader, True, False
        else:
            isolation["frame"] = "loaded"
            base, narrowed, narrowable = load_frame_narrowed(job["data_fd"], job.get("columns"))
        if batch is None:
            frame = select_columns(base, narrowable, job.get("columns")) if not narrowed else base
            code = compile(job["code"], CODE_NAME, "exec")
        else:
            union = job.get("columns")
            if not narrowed and narrowable and union is not None:
                # The batch's columns picked once (from a preloaded whole table): each item's pick from
                # them is the same as from the whole, and far cheaper on a wide table.
                picked = select_columns(base, True, union)
                base, narrowed = picked, picked is not base
            prepared = [_batch_item(item, base, narrowed, narrowable) for item in batch]
    except SyntaxError as exc:
        verdict.update(error=f"SyntaxError: {exc.msg} (line {exc.lineno})", stopped="error")
        return _finish(result_fd, verdict, violations, started)
    except Exception as exc:  # the dataset or the interpreter failed before any untrusted code ran
        verdict.update(error=f"sandbox setup failed: {type(exc).__name__}: {exc}", stopped="crash")
        return _finish(result_fd, verdict, violations, started)

    hook = arm = None
    if checks:
        read_prefixes = tuple(os.path.realpath(p) for p in [*job["python_paths"], *SYSTEM_READ_PATHS])
        hook, arm = make_audit_hook(read_prefixes, violations)
        disable_library_io(pd, np, make_refuse(violations))

    def namespace(df):  # type: ignore[no-untyped-def]
        user_globals: dict = {"__name__": "__investigation__", "df": df, "pd": pd, "np": np, "json": json}
        user_globals["result"] = None
        if checks:
            user_globals["__builtins__"] = restricted_builtins(violations)
        else:
            # Tests and red teams only (ITERATE_SANDBOX_INPROCESS_CHECKS=0): the OS layers alone must hold.
            import builtins

            user_globals["__builtins__"] = builtins
        return user_globals

    if batch is None:
        user_globals = namespace(frame)
    else:
        # Every namespace made now, before the lockdown; a shallow copy of the frame each: with pandas'
        # copy-on-write, what one item does to its `df` no other item sees.
        prepared = [e if isinstance(e, dict) else (e[0], namespace(e[1].copy(deep=False))) for e in prepared]
    os.environ.clear()
    try:
        lockdown(job, isolation, guard_imports=checks)
    except Exception as exc:  # an OS layer could not be applied: nothing untrusted runs without it
        verdict.update(error=f"sandbox setup failed: {type(exc).__name__}: {exc}", stopped="crash")
        return _finish(result_fd, verdict, violations, started)
    if hook is not None and arm is not None:
        sys.addaudithook(hook)
    if batch is not None:
        apart = isolation.get("processes") != "no new processes"
        verdict.update(_run_batch(prepared, violations, job["max_output_bytes"], arm=arm, apart=apart))
    else:
        # Inline, not through _run_code: the code's caller is this frame, as it always was for one run.
        captured = CappedWriter(job["max_output_bytes"])
        sys.stdout = captured  # type: ignore[assignment]
        if arm is not None:
            arm()
        try:
            exec(code, user_globals)
            verdict.update(_collect(user_globals.get("result"), captured.getvalue(), job["max_output_bytes"]))
        except OutputTooLarge as exc:
            verdict.update(error=str(exc), stopped="output_size")
        except MemoryError:
            verdict.update(error="MemoryError: the code ran out of its memory budget", stopped="memory")
        except OSError as exc:
            if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE: writing straight to a descriptor past the cap
                verdict.update(error="output exceeded the file size limit", stopped="output_size")
            else:
                verdict.update(error=_user_traceback(exc), stopped="error")
        except SandboxViolation as exc:
            verdict.update(error=str(exc), stopped="policy")
        except BaseException as exc:
            verdict.update(error=_user_traceback(exc), stopped="error")
        finally:
            sys.stdout = sys.__stdout__
    if violations and verdict.get("stopped") != "policy":
        # The code caught the refusal and carried on: still a policy stop.
        verdict.update(success=False, stopped="policy", error="; ".join(violations[:5]))
    return _finish(result_fd, verdict, violations, started)


_BODIES: dict = {}  # compile_batch_item's compiled bodies, by their text


def compile_batch_item(code: str) -> tuple:
    """`code` compiled as the code objects that, run in turn in one namespace, do what `code` does.

    A template (PARAMS_HEAD) is its head (imports and the PARAMS line) and a body that a batch's other items
    of the same template share: the body is compiled once per batch, not once per item. It is compiled with
    the head's lines blank and a `pass` on the PARAMS line, so its line numbers are the code's own and its
    first statement is never a docstring or a `__future__` import that would only be one after the split.
    """
    found = PARAMS_HEAD.match(code)
    if found is None:
        return (compile(code, CODE_NAME, "exec"),)
    head = code[: found.end()]
    lines = head.count("\n")
    body = "\n" * (lines - 1) + "pass\n" + code[found.end() :]
    compiled = _BODIES.get(body)
    if compiled is None:
        if len(_BODIES) >= 64:  # a warm Lambda sandbox serves many batches: the cache stays small
            _BODIES.clear()
        compiled = _BODIES[body] = compile(body, CODE_NAME, "exec")
    return (compile(head, CODE_NAME, "exec"), compiled)


def _run_code(codes: tuple, user_globals: dict, captured: "CappedWriter", cap: int) -> dict:
    """Run compiled investigation code (compile_batch_item's) in `user_globals` with stdout going to
    `captured`: its verdict."""
    sys.stdout = captured  # type: ignore[assignment]
    try:
        for code in codes:
            exec(code, user_globals)
        return _collect(user_globals.get("result"), captured.getvalue(), cap)
    except OutputTooLarge as exc:
        return {"error": str(exc), "stopped": "output_size"}
    except MemoryError:
        return {"error": "MemoryError: the code ran out of its memory budget", "stopped": "memory"}
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE: writing straight to a descriptor past the cap
            return {"error": "output exceeded the file size limit", "stopped": "output_size"}
        return {"error": _user_traceback(exc), "stopped": "error"}
    except SandboxViolation as exc:
        return {"error": str(exc), "stopped": "policy"}
    except BaseException as exc:
        return {"error": _user_traceback(exc), "stopped": "error"}
    finally:
        sys.stdout = sys.__stdout__


def _batch_item(item: dict, base, narrowed: bool, narrowable: bool):  # type: ignore[no-untyped-def]
    """(compiled code, its frame) for one batch item, or its verdict when it cannot run in this batch.

    The frame is what a single run with the item's columns gets: picked from the whole table as a
    preloaded run would; from the batch's columns (`narrowed`) only when a single run would narrow too.
    """
    wanted = item.get("columns")
    try:
        code = compile_batch_item(item["code"])
    except SyntaxError as exc:
        return {"error": f"SyntaxError: {exc.msg} (line {exc.lineno})", "stopped": "error"}
    if not narrowed:
        return code, select_columns(base, narrowable, wanted)
    if wanted is None or not set(wanted) & set(base.columns):
        # Alone it would see the whole table, which this batch did not load.
        return {
            "error": "not run: its columns are not among the batch's",
            "stopped": "crash",
            "skipped": True,
        }
    return code, select_columns(base, True, wanted)


def _run_batch(prepared: list, violations: list[str], cap: int, *, arm=None, apart: bool = True) -> dict:  # type: ignore[no-untyped-def]
    """Each item in its own namespace (its own `df` object, `result`, builtins and stdout); one item's
    failure is its own. A refusal ends the batch: the host then discards it whole (and runs each alone).

    `apart`: the items of one code (a template's body with its own PARAMS each) run in a process of
    their own, forked from this one, which runs no investigation code itself: no code can change what
    another code computes or reports (the interpreter, the frame, the modules are each process's own
    copy). Within one code's process an item can only meet what that same code did. Without new
    processes, every item shares this one.
    """
    if apart:
        return _run_apart(prepared, violations, cap, arm)
    if arm is not None:
        arm()
    items: list[dict] = []
    for k, entry in enumerate(prepared):
        prepared[k] = None  # an item's namespace (and what it cached) goes once it has run
        if isinstance(entry, dict):
            items.append({"success": False, "output": None, **entry})
            continue
        items.append(_run_item(entry, cap))
        del entry
        if violations:
            return _refused(items, violations)
    return {"success": True, "output": {"items": items}}


def _run_item(entry: tuple, cap: int) -> dict:
    """One prepared item (its compiled code and namespace): its verdict, timed."""
    began = time.perf_counter()
    item: dict = {"success": False, "output": None, "error": None, "stopped": None}
    code, user_globals = entry
    item.update(_run_code(code, user_globals, CappedWriter(cap), cap))
    item["elapsed_ms"] = (time.perf_counter() - began) * 1000
    return item


def _refused(items: list[dict], violations: list[str]) -> dict:
    """The batch's verdict once an item was refused: the last item carries the refusal."""
    error = "; ".join(violations[:5])
    items[-1].update(success=False, output=None, stopped="policy", error=error)
    return {"success": False, "output": None, "stopped": "policy", "error": error, "items": items}


PROCESSES_AT_ONCE = 2  # code processes in flight: a second core tears one down while another runs


def _run_apart(prepared: list, violations: list[str], cap: int, arm) -> dict:  # type: ignore[no-untyped-def]
    """The batch with each code's items in a child process of their own, up to PROCESSES_AT_ONCE at a time.

    A child keeps only a pipe of its own (the run's report pipe and control socket are closed in it
    first), sends one length-prefixed JSON message (its items' verdicts and its in-process refusals: its
    copy of `violations`) and exits. Anything else (a signal, an exit without a message, a malformed
    one) fails that child's items alone. This process is made non-dumpable first: no child can open its
    memory.
    """
    import ctypes
    import select

    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    limit = cap * 2 * len(prepared) + 65536
    at_once = min(PROCESSES_AT_ONCE, max(1, len(os.sched_getaffinity(0))))
    results: list[dict | None] = [None] * len(prepared)
    groups: dict[int, list[int]] = {}  # the compiled body (compile_batch_item shares it) -> items
    for k, entry in enumerate(prepared):
        if isinstance(entry, dict):
            results[k] = {"success": False, "output": None, **entry}
        else:
            groups.setdefault(id(entry[0][-1]), []).append(k)
    waiting = list(groups.values())[::-1]
    running: dict[int, tuple[list[int], int, bytearray]] = {}  # read end -> (items, pid, received)
    refused = False
    while running or (waiting and not refused):
        while waiting and not refused and len(running) < at_once:
            members = waiting.pop()
            entries = [prepared[k] for k in members]
            for k in members:
                prepared[k] = None
            fd, pid = _start_process(entries, arm, cap, violations)
            del entries
            running[fd] = (members, pid, bytearray())
        for fd in select.select(list(running), [], [])[0]:
            members, pid, received = running[fd]
            chunk = os.read(fd, 65536)
            received += chunk
            size = int.from_bytes(received[:8], "big") if len(received) >= 8 else None
            if chunk and len(received) <= limit and (size is None or len(received) < 8 + size):
                continue
            os.close(fd)
            del running[fd]
            verdicts, seen = _process_message(pid, received, len(members))
            for k, verdict in zip(members, verdicts, strict=True):
                results[k] = {"success": False, "output": None, "error": None, "stopped": None, **verdict}
            if seen:
                violations.extend(seen)
                refused = True
        with contextlib.suppress(ChildProcessError):  # children that sent their verdicts and have exited
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
    done = [r for r in results if r is not None]
    if refused:
        return _refused(done, violations)
    return {"success": True, "output": {"items": done}}


def _start_process(entries: list, arm, cap: int, violations: list[str]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Fork the child that runs `entries` (one code's items) in turn: (the read end of its pipe, its pid)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.closerange(3, write_end)  # close_range(2): one call, not one per descriptor
            os.closerange(write_end + 1, 1024)
            if arm is not None:
                arm()
            verdicts = []
            for k, entry in enumerate(entries):
                entries[k] = None
                verdicts.append(_run_item(entry, cap))
                del entry
                if violations:
                    break
            message = {"verdicts": verdicts, "violations": [str(v) for v in violations[:20]]}
            data = json.dumps(message).encode()
            view = memoryview(len(data).to_bytes(8, "big") + data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return read_end, pid


def _process_message(pid: int, received: bytes | bytearray, count: int) -> tuple[list[dict], list[str]]:
    """(one verdict per item, in-process refusals) from what a child sent; every item failed if it sent
    nothing usable. A child stopped by a refusal sends fewer verdicts: its other items were not run."""
    message = None
    size = int.from_bytes(received[:8], "big") if len(received) >= 8 else 0
    if size and len(received) == 8 + size:
        with contextlib.suppress(ValueError):
            message = json.loads(bytes(received[8:]))
    verdicts = message.get("verdicts") if isinstance(message, dict) else None
    ok = (
        isinstance(verdicts, list)
        and 0 < len(verdicts) <= count
        and all(isinstance(v, dict) for v in verdicts)
    )
    if not ok or verdicts is None:
        _, status = os.waitpid(pid, 0)
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"status {_decode(status)}"
        failed = {"error": f"the item's process ended without a verdict ({how})", "stopped": "crash"}
        return [dict(failed) for _ in range(count)], []
    seen = [str(v) for v in message.get("violations") or []][:20]  # type: ignore[union-attr]
    skipped = {"error": "not run: an item before it in its process was refused", "stopped": "policy"}
    return list(verdicts) + [dict(skipped) for _ in range(count - len(verdicts))], seen


class _ImportAllowList:
    """A finder first on sys.meta_path: names outside the standard library and the allowed packages are
    not found (as if not installed). In-process, so not a layer of its own: what the interpreter can find
    (the jail's files, Landlock's read rules) is what holds."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] not in self.allowed:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as handle:
            return handle.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def lockdown(job: dict, isolation: dict, *, guard_imports: bool = True) -> None:
    """The OS layers, last thing before untrusted code: limits, an unprivileged uid, no capabilities,
    no new privileges, Landlock, the import view, then the seccomp filter; then tell the supervisor.

    Every step raises rather than leave a layer half applied.
    """
    import importlib
    import socket

    libc = _libc()
    run_uid = job.get("run_uid")
    jailed = isolation.get("filesystem") == "jail" and isolation.get("namespaces") == "root"
    plain_root = not isolation.get("pid_namespace") and bool(job.get("host_root"))
    dropped = False
    if run_uid and os.getuid() == 0 and (jailed or (plain_root and job.get("paths_readable"))):
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        oslayers.drop_to(run_uid, run_uid)
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
        sys.meta_path.insert(0, _ImportAllowList(allowed))
    listener, mode = oslayers.install_filter(
        own_pid=os.getpid(), allow_processes=bool(job.get("cgroup") or job.get("nproc"))
    )
    isolation["seccomp"] = mode
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


def _collect(result: object, printed: str, cap: int) -> dict:
    set_result = result is not None
    if result is None:
        text = printed.strip()
        if not text:
            return {
                "error": "the code neither set `result` nor printed a JSON object",
                "stopped": "invalid_output",
            }
        try:
            result = json.loads(text)
        except ValueError:
            return {"error": "printed output is not exactly one JSON object", "stopped": "invalid_output"}
    if not isinstance(result, dict):
        return {"error": f"result must be a dict, got {type(result).__name__}", "stopped": "invalid_output"}
    try:
        output = _jsonable(result)
        size = len(json.dumps(output))
    except (TypeError, ValueError, RecursionError) as exc:
        return {"error": f"result is not JSON-serialisable: {exc}", "stopped": "invalid_output"}
    if size > cap:
        return {"error": f"result is {size} bytes, over the {cap}-byte cap", "stopped": "output_size"}
    verdict: dict = {"success": True, "output": output}
    if set_result and printed.strip():
        # print() beside `result` (debugging, a table) is kept, within what the cap leaves after the output.
        verdict["printed"] = _fit(printed, cap - size)
    return verdict


def _fit(text: str, budget: int) -> str:
    """`text`, cut so that its JSON encoding takes at most `budget` bytes (the supervisor caps the report)."""
    while text and len(json.dumps(text)) > budget:
        text = text[: len(text) // 2]
    return text


def _user_traceback(exc: BaseException) -> str:
    # lookup_lines=False: reading source lines would open files, which the armed audit hook refuses.
    summary = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
    frames = [f for f in summary if f.filename == CODE_NAME]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}"[:2000] + where


def _finish(result_fd: int, verdict: dict, violations: list[str], started: float) -> int:
    """Write the report to the supervisor's pipe. In-process refusals ride along: they can only fail a run."""
    verdict["violations"] = violations[:20]
    verdict["elapsed_ms"] = (time.perf_counter() - started) * 1000
    data = json.dumps(verdict).encode()
    view = memoryview(data)
    while view:
        written = os.write(result_fd, view)
        view = view[written:]
    return 0


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


def execute(job: dict) -> int:
    """One investigation in this (forked) process: join the run's cgroup, isolate, run; return the status."""
    for fd in job.get("cgroup_fds") or []:
        # Descriptors the host opened on the run's cgroup.procs: every process from here on is counted.
        os.write(fd, b"0")
        os.close(fd)
    with contextlib.suppress(OSError):
        os.setsid()  # its own process group: `kill(0, …)` reaches the run only
    result_fd = job["result_fd"]
    isolation: dict = {"network": "seccomp", "filesystem": "landlock", "pid_namespace": False}
    if job.get("namespaces"):
        libc = _libc()
        mode, refused = enter_namespaces(libc, user_first=bool(job.get("user_namespace_first")))
        if mode is not None:
            init = os.fork()
            if init:
                # Outside the namespaces: wait for its pid 1 and pass its status on.
                _, status = os.waitpid(init, 0)
                return (
                    EXIT_SIGNAL_BASE + os.WTERMSIG(status)
                    if os.WIFSIGNALED(status)
                    else os.WEXITSTATUS(status)
                )
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            try:
                build_jail(libc, job, owner=job.get("run_uid") if mode == "root" else None)
                isolation = {"network": "namespace", "filesystem": "jail", "pid_namespace": True}
            except OSError as exc:
                isolation = {
                    "network": "namespace",
                    "filesystem": f"landlock (jail refused: {exc})",
                    "pid_namespace": True,
                }
            isolation["namespaces"] = mode
            child = os.fork()
            if child:
                _lock_init(libc, job if mode == "root" else {})
                os._exit(reap_as_init(child))
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os._exit(run_investigation(job, isolation, result_fd))
        isolation["namespaces_refused"] = refused
    if job.get("workdir"):
        os.chdir(job["workdir"])
    return run_investigation(job, isolation, result_fd)


def _lock_init(libc, job: dict) -> None:  # type: ignore[no-untyped-def]
    """Pid 1 of the run's namespace only waits: the run's uid, no capabilities, the same seccomp filter."""
    with contextlib.suppress(OSError):
        for fd in (job.get("control_fd"), job.get("result_fd")):
            if fd is not None:
                os.close(fd)
        if job.get("run_uid") and os.getuid() == 0:
            for cap in range(64):
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
            oslayers.drop_to(job["run_uid"], job["run_uid"])
        drop_capabilities(libc)
        oslayers.install_filter(own_pid=os.getpid(), notify=False)


# ---------------------------------------------------------------------------------------------------------
# The supervisor: the trusted parent of one run (a handler forked from a zygote, or the process LocalSandbox
# started). It never runs investigation code. It decides nothing alone: it reports what it saw to the host
# (LocalSandbox), which adds what it saw from outside (cgroup, processes, time) and gives the verdict.
#
#   supervisor → host   {"pid", "runner"}            the runner is started
#                       {"armed": true}              the runner's OS layers are on; untrusted code starts now
#                       {"exited": status, ...}      the runner ended (or was killed for a refusal)
#   host → supervisor   {"cleaned": true}            every other process of the run is dead
#   supervisor → host   {"status", "cpu_s", "seen"}  what it saw and the runner's report; it ends
#
# The runner reports on a pipe only the supervisor reads; its OS refusals reach the supervisor through
# the seccomp listener (each refused call is answered EPERM, and the run is killed at once).


class _Lines:
    """Newline-delimited JSON from a socket, without buffering hidden from select()."""

    def __init__(self, sock) -> None:  # type: ignore[no-untyped-def]
        self.sock = sock
        self.buffer = b""

    def pop(self) -> dict | None:
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def feed(self) -> bool:
        """Read what is there; False at the end of the stream."""
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)


def _decode(status: int) -> int:
    return EXIT_SIGNAL_BASE + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def supervise(job: dict, host, *, stderr_fd: int, data_fd: int | None, cgroup_fds: list[int]) -> int:  # type: ignore[no-untyped-def]
    """Start the runner, watch it, and send the host what was seen (see the protocol above).

    Should this process fail, the runner is killed and the host told why (it then gives a crash verdict
    and kills what is left of the run itself)."""
    runner: list[int] = []
    try:
        return _supervise(
            job, host, stderr_fd=stderr_fd, data_fd=data_fd, cgroup_fds=cgroup_fds, runner=runner
        )
    except BaseException as exc:
        for pid in runner:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            _send_line(
                host, {"status": None, "seen": {"supervisor_error": f"{type(exc).__name__}: {exc}"[:500]}}
            )
        raise


def _supervise(  # type: ignore[no-untyped-def]
    job: dict, host, *, stderr_fd: int, data_fd: int | None, cgroup_fds: list[int], runner: list[int]
) -> int:
    import select
    import socket

    libc = _libc()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of the run can read or write this one's memory
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the run come back here, not to init
    read_end, write_end = os.pipe()
    control, control_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child_fd = control_child.detach()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            host.close()
            control.close()
            os.close(read_end)
            os.dup2(stderr_fd, 1)
            os.dup2(stderr_fd, 2)
            keep = {0, 1, 2, write_end, child_fd, *cgroup_fds} | ({data_fd} if data_fd is not None else set())
            for fd in range(3, 1024):
                if fd not in keep:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            job.update(result_fd=write_end, control_fd=child_fd, data_fd=data_fd, cgroup_fds=cgroup_fds)
            code = execute(job)
        finally:
            os._exit(code)
    runner.append(child)
    for fd in (write_end, child_fd, *cgroup_fds, *([data_fd] if data_fd is not None else [])):
        os.close(fd)
    _send_line(host, {"pid": os.getpid(), "runner": child})
    # Readable when the runner ends: its end wakes the loop below at once rather than at the next tick.
    try:
        runner_fd: int | None = os.pidfd_open(child)
    except (OSError, AttributeError):
        runner_fd = None
    cap = int(job["max_output_bytes"]) * 2 + 65536
    report = bytearray()
    state: dict = {
        "overflow": False,
        "eof": False,
        "armed": None,
        "listener": None,
        "status": None,
        "tasks": 0,
        "task_limit": False,
    }
    refusals: list[str] = []
    control_lines = _Lines(control)
    host_lines = _Lines(host)
    control_open = True

    # Counted for the whole run (the count never goes down): a batch's own process per item on top.
    max_tasks = int(job["max_processes"]) + len(job.get("batch") or ())

    def answer(listener: int) -> bool:
        """One notification: count a new task (refuse it past the limit), or record a refused call.
        Anything refused or over the limit ends the run at once."""
        note = oslayers.receive_notification(listener)
        if note is None:
            return False
        if note.new_task and state["tasks"] + 1 < max_tasks:
            state["tasks"] += 1
            oslayers.respond(listener, note)
            return True
        if note.new_task:
            state["task_limit"] = True
            oslayers.respond(listener, note, error=errno.EAGAIN)
        else:
            if len(refusals) < 20:
                refusals.append(note.name)
            oslayers.respond(listener, note, error=errno.EPERM)
        kill_runner()
        return True

    def kill_runner() -> None:
        for target in (lambda: os.killpg(child, signal.SIGKILL), lambda: os.kill(child, signal.SIGKILL)):
            with contextlib.suppress(OSError):
                target()

    def step(timeout: float) -> dict | None:
        """One round: pipe, control, refusals, reaping; returns a message from the host, if any."""
        nonlocal control_open
        watched = [host] + ([read_end] if not state["eof"] else []) + ([control] if control_open else [])
        if runner_fd is not None and state["status"] is None:
            watched.append(runner_fd)
        if state["listener"] is not None:
            watched.append(state["listener"])
        ready = select.select(watched, [], [], timeout)[0]
        if read_end in ready:
            data = os.read(read_end, 65536)
            if not data:
                state["eof"] = True
            elif len(report) + len(data) > cap:
                state["overflow"] = True
                kill_runner()
            else:
                report.extend(data)
        if control_open and control in ready:
            try:
                message, fds, _, _ = socket.recv_fds(control, 65536, 1)
            except OSError:  # the runner died mid-message: nothing more comes from it
                message, fds = b"", []
            for fd in fds:
                state["listener"] = fd
            control_lines.buffer += message
            if not message:
                control_open = False
            while (line := control_lines.pop()) is not None:
                if line.get("armed") and state["armed"] is None:
                    state["armed"] = line.get("isolation") or {}
                    _send_line(host, {"armed": True})
        if state["listener"] is not None and state["listener"] in ready:
            answer(state["listener"])
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == child:
                state["status"] = _decode(status)
                runner.clear()  # reaped: its pid may be reused from now on
        if host in ready:
            if not host_lines.feed():
                raise ConnectionError("the host went away")
            return host_lines.pop()
        return host_lines.pop()

    while state["status"] is None:
        step(0.05)
    if runner_fd is not None:
        os.close(runner_fd)
    _send_line(host, {"exited": state["status"], "refusals": refusals})
    while True:  # the host kills every other process of the run, then says so
        message = step(0.05)
        if message is not None and message.get("cleaned"):
            break
    end = time.monotonic() + 5
    while time.monotonic() < end:  # everything is dead: reap it, then read the pipe to its end
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
            children = True
        except ChildProcessError:
            children = False
        if not children and state["eof"]:
            break
        step(0.005)
    while state["listener"] is not None and select.select([state["listener"]], [], [], 0)[0]:
        if not answer(state["listener"]):
            break
    parsed, problem = None, None
    if state["overflow"]:
        problem = "output_size"
    elif not state["eof"]:
        problem = "the result channel was still open after the run"
    else:
        try:
            parsed = json.loads(bytes(report)) if report else None
            if parsed is not None and not isinstance(parsed, dict):
                parsed, problem = None, "the report is not a JSON object"
        except ValueError:
            problem = "the report is not valid JSON"
    seen = {
        "status": state["status"],
        "armed": state["armed"] is not None,
        "isolation": state["armed"] or {},
        "refusals": refusals,
        "tasks_started": state["tasks"],
        "task_limit": state["task_limit"],
        "report": parsed,
        "report_problem": problem,
    }
    cpu = _cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN)) + _cpu_s(
        resource.getrusage(resource.RUSAGE_SELF)
    )
    # On the connection to the host, which no process of the run holds (no file a run could name).
    _send_line(host, {"status": state["status"], "cpu_s": round(cpu, 4), "seen": seen})
    return 0


# ---------------------------------------------------------------------------------------------------------
# Zygote: pandas and pyarrow imported once, one fork per investigation (saves the ~0.3 s import each time).
# A dataset zygote, forked from it on the host's request, also holds one dataset's frame, loaded once.

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


def _send_line(conn, message: dict) -> None:  # type: ignore[no-untyped-def]
    conn.sendall(json.dumps(message).encode() + b"\n")


def _cpu_s(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


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
        _send_line(conn, {"pid": os.getpid()})
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
    libc = _libc()
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
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
        if _libc().mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK) != 1:
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
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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
            _send_line(control, {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        return
    PRELOADED.update(frame=frame, narrowable=narrowable, loader=loader)
    gc.freeze()  # collections in the runners then leave the preloaded objects' pages shared
    _runners_allocate_plainly()
    rows, width = frame.shape
    cpu = round(_cpu_s(resource.getrusage(resource.RUSAGE_SELF)), 4)
    _send_line(control, {"ready": True, "rows": rows, "columns": width, "cpu_s": cpu, "loader": loader})
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
        _send_line(control, {"cpu_s": round(_cpu_s(resource.getrusage(resource.RUSAGE_SELF)), 4)})


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
        _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
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


if __name__ == "__main__":
    sys.exit(main())
