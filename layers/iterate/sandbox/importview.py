"""What investigation code may import: the standard library and the allowed packages, nothing else installed.

Computed once per process from this interpreter's paths; the jail binds them, Landlock reads them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from iterate.sandbox import oslayers

# What investigation code may find: the standard library and these packages (pandas and what it and
# the runner need), nothing else that is installed.
SANDBOX_PACKAGES = ("pandas", "numpy", "pyarrow", "dateutil", "six", "pytz", "tzdata")


@dataclass(frozen=True)
class ImportView:
    """Paths of the sandbox's import view, computed once per process.

    `python_paths`: every path the runner reads (standard library, lib-dynload, allowed packages);
    `package_paths`: the allowed packages alone; `site_masks`: every other site directory, hidden in the
    jail; `landlock_paths`: what Landlock lets a runner without a jail read (site directories left out);
    `sys_path`: the runner's sys.path.
    """

    python_paths: tuple[str, ...]
    package_paths: tuple[str, ...]
    site_masks: tuple[str, ...]
    landlock_paths: tuple[str, ...]
    landlock_dirs: tuple[str, ...]
    sys_path: tuple[str, ...]
    packages: tuple[str, ...]
    readable_by_others: bool


def _expand(path: str, masks: tuple[str, ...], listed: list[str]) -> list[str]:
    """`path`, or its entries (recursively) when a masked directory lies inside it (Landlock allows trees).

    A directory split this way goes to `listed`: it may be listed (the import system needs that to find
    modules in it), while the masked directory's files stay unreadable.
    """
    inside = [m for m in masks if m.startswith(path.rstrip("/") + "/")]
    if not inside or not os.path.isdir(path):
        return [path]
    listed.append(path)
    found: list[str] = []
    for name in sorted(os.listdir(path)):
        child = os.path.join(path, name)
        if child not in masks:
            found += _expand(child, masks, listed)
    return found


_VIEW: list[ImportView] = []


def import_view() -> ImportView:
    if _VIEW:
        return _VIEW[0]
    import importlib.util
    import site
    import sysconfig

    from iterate.sandbox.confine.landlock import SYSTEM_READ_PATHS

    real = os.path.realpath
    stdlib = real(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["stdlib"])
    dynload = real(os.path.join(stdlib, "lib-dynload"))
    packages: list[str] = []
    paths: list[str] = []
    for name in SANDBOX_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or (not spec.origin and not spec.submodule_search_locations):
            continue
        packages.append(name)
        locations = list(spec.submodule_search_locations or []) or [str(spec.origin)]
        for location in locations:
            paths.append(real(location))
            libs = real(os.path.join(os.path.dirname(real(location)), f"{name}.libs"))  # vendored .so files
            if os.path.isdir(libs):
                paths.append(libs)
    paths = list(dict.fromkeys(paths))
    parents = list(dict.fromkeys(os.path.dirname(p) for p in paths))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = set(site.getsitepackages()) | {site.getusersitepackages(), *parents}
    for prefix in ("/usr", "/usr/local", sys.base_prefix, sys.prefix):
        for lib in ("lib", "lib64"):
            for name in ("site-packages", "dist-packages"):
                candidates.add(os.path.join(prefix, lib, version, name))
                candidates.add(os.path.join(prefix, lib, "python3", name))
    # Every other directory on sys.path (the engine's own, a Lambda's /var/task and /opt/python layers).
    candidates |= {p for p in sys.path if p and not p.endswith(".zip")}
    masks = tuple(
        sorted(
            {real(c) for c in candidates if c and os.path.isdir(c)} - {stdlib, dynload} - set(paths) - {"/"}
        )
    )
    # A mask holding the standard library (a sys.path entry) would hide it: only site directories are masks.
    masks = tuple(m for m in masks if not stdlib.startswith(m + "/") and m != stdlib)
    python_paths = tuple(dict.fromkeys([stdlib, dynload, *paths]))
    landlock: list[str] = []
    listed: list[str] = []
    for path in [*python_paths, *SYSTEM_READ_PATHS, os.devnull]:
        landlock += _expand(path, masks, listed) if path not in paths else [path]
    view = ImportView(
        python_paths=python_paths,
        package_paths=tuple(paths),
        site_masks=masks,
        landlock_paths=tuple(dict.fromkeys(landlock)),
        landlock_dirs=tuple(dict.fromkeys(listed)),
        sys_path=tuple(dict.fromkeys([stdlib, dynload, *parents])),
        packages=tuple(packages),
        readable_by_others=oslayers.readable_by_others(python_paths),
    )
    _VIEW.append(view)
    return view
