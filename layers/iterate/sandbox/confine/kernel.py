"""What every confinement step needs from the C library: libc, checked calls, prctl numbers."""

import os

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
EXIT_SIGNAL_BASE = 128


# Layer 1: namespaces, a minimal root, no capabilities


def c_library():  # type: ignore[no-untyped-def]
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def check_rc(rc: int, what: str) -> None:
    if rc != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def exit_code(status: int) -> int:
    return EXIT_SIGNAL_BASE + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
