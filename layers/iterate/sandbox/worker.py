"""The sandbox's entry script: `python -I -B worker.py` starts a zygote or one supervised run (zygote.main).

Started by LocalSandbox with an empty environment; never imported as `iterate`. The engine must not be
reachable from an investigation's process, so this folder is registered as a package of its own
(`_iterate_sandbox`) without running `iterate/__init__.py` or `iterate/sandbox/__init__.py`, and only the
modules of the sandbox's own processes are loaded from it, by their relative imports:

    zygote.py      pandas imported once, a fork per run; a dataset zygote per dataset (frame loaded once)
    loader.py      a dataset zygote's confinement while it parses the file
    supervisor.py  the trusted parent of one run: watches the runner, records every refusal, reports
    runner.py      loads the frame, locks itself down, runs the code, reports on a pipe
    batch.py       a batch of template proofs: each code's items in a child process of their own
    frames.py      the dataset as `df`: from the Parquet descriptor, preloaded, or read on demand
    confine/       the OS layers: namespaces and the jail, Landlock, seccomp, limits and the lockdown
    inprocess.py   the in-process layers (audit hook, restricted builtins, import allowlist): not a boundary

The engine imports the same files as `iterate.sandbox.<module>` (tests, LocalSandbox's settings).
"""

import os
import sys
import types

PACKAGE = "_iterate_sandbox"


def _package() -> str:
    """This folder as the package PACKAGE (its __init__, which imports the engine, never runs)."""
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = [os.path.dirname(os.path.abspath(__file__))]
        package.__package__ = PACKAGE
        sys.modules[PACKAGE] = package
    return PACKAGE


if __name__ == "__main__":
    import importlib

    sys.exit(importlib.import_module(_package() + ".zygote").main())
