"""The in-process layers: an audit hook, restricted builtins, an import allowlist, pandas and numpy I/O off.

Early, friendly refusals with a clear message, and never a boundary: code that walks frames can disarm
them, and ITERATE_SANDBOX_INPROCESS_CHECKS=0 turns them off (tests and red teams) so that the OS layers
(confine/) are shown to hold alone. What they refuse is recorded in a run's `violations` and fails it.
"""

import os
import sys

CODE_NAME = "<investigation>"  # the file name of the investigation's code in its frames

# What investigation code may import: pandas, numpy and the pure-computation standard library (the
# static policy, policy.py, reads this same set).
ALLOWED_IMPORTS = frozenset(
    {
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
        # Pure computation too: a template's long parameters travel deflated in base64
        "base64",
        "zlib",
    }
)

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


class ImportAllowList:
    """A finder first on sys.meta_path: names outside the standard library and the allowed packages are
    not found (as if not installed). In-process, so not a layer of its own: what the interpreter can find
    (the jail's files, Landlock's read rules) is what holds."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] not in self.allowed:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
