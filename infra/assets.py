"""Lambda layer assets for arm64, built without Docker (pip --platform) and cached by content hash in .assets/."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / ".assets"
ENGINE_SRC = REPO / "layers" / "iterate"

PYTHON_VERSION = "3.12"
# Lambda python3.12 runs on Amazon Linux 2023 (glibc 2.34). Wheels tagged up to manylinux_2_34 run there, and
# numpy/pandas/pyarrow publish some aarch64 wheels only as manylinux_2_27/2_28, so manylinux2014 alone is not enough.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
# Bump when the strip rules change, so cached layers are rebuilt.
BUILD_RECIPE = "5"

REQUIREMENT_LAYERS = {
    "core": REPO / "layers" / "requirements-core.txt",
    "data": REPO / "layers" / "requirements-data.txt",
    "llm": REPO / "layers" / "requirements-llm.txt",
    "powertools": REPO / "layers" / "requirements-powertools.txt",
}
LAYER_NAMES = (*REQUIREMENT_LAYERS, "iterate")

# The python3.12 runtime ships boto3 and its dependencies; aws-xray-sdk pulls botocore (~25 MB) and dateutil
# again. Dropping them also keeps this layer from overwriting the data layer's newer dateutil in /opt/python.
RUNTIME_PROVIDED = {
    "powertools": (
        "boto3*",
        "botocore*",
        "s3transfer*",
        "jmespath*",
        "urllib3*",
        "dateutil",
        "python_dateutil-*",
        "six.py",
        "six-*",
    ),
}
STRIP_DIRS = frozenset({"__pycache__", "tests", "include"})
STRIP_TOP = ("bin",)  # console scripts: nothing can run them from /opt/python
STRIP_SUFFIXES = (".pyc", ".pyx", ".pxd", ".pxi", ".h", ".hpp", ".cc", ".cpp", ".pyi")
DIST_INFO_BULK = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"})
# Arrow Flight (RPC) is the one optional pyarrow library that pyarrow.lib does not link against (readelf -d:
# substrait, acero, dataset and parquet are all NEEDED), and nothing in Iterate imports pyarrow.flight.
PYARROW_UNUSED = ("*flight*", "_pyarrow_cpp_tests*")
# Wheels cannot hold symlinks, so pip writes libarrow_python.so three times; the loader only asks for *.so.<ABI>.
PYARROW_LINK_COPIES = ("libarrow_python*.so", "libarrow_python*.so.*.*.*")


STALE_AFTER_S = 24 * 3600


class AssetBuildError(RuntimeError):
    """A layer could not be built (pip failed, or the requirements file is missing)."""


@dataclass(frozen=True)
class BuiltLayer:
    """A layer directory ready for `Code.from_asset`: it holds `python/…` and a content hash for the asset."""

    name: str
    path: Path
    digest: str
    placeholder: bool = False


def _hash_files(paths: list[Path], root: Path, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in sorted(paths):
        h.update(str(p.relative_to(root)).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _engine_files() -> list[Path]:
    return [
        p
        for p in ENGINE_SRC.rglob("*")
        if p.is_file() and not (set(p.relative_to(ENGINE_SRC).parts) & STRIP_DIRS) and p.suffix != ".pyc"
    ]


def layer_digest(name: str) -> str:
    """The cache key of a layer: its inputs (requirements or engine sources) plus the build recipe."""
    recipe = f"{BUILD_RECIPE}|{PYTHON_VERSION}|{','.join(PLATFORMS)}|{name}"
    if name == "iterate":
        return _hash_files(_engine_files(), ENGINE_SRC, recipe)
    req = REQUIREMENT_LAYERS.get(name)
    if req is None:
        raise AssetBuildError(f"unknown layer {name!r}; known: {', '.join(LAYER_NAMES)}")
    if not req.is_file():
        raise AssetBuildError(f"requirements file missing: {req}")
    return _hash_files([req], req.parent, recipe)


@contextmanager
def _locked(name: str) -> Iterator[None]:
    # Parallel test workers may ask for the same layer; one builds, the others wait and reuse it.
    locks = ASSETS / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


def strip_tree(site: Path, layer: str) -> None:
    """Removes what Lambda never imports: tests, caches, C sources/headers, stubs, RECORD files, runtime dups."""
    for pattern in (*RUNTIME_PROVIDED.get(layer, ()), *STRIP_TOP):
        for p in site.glob(pattern):
            _remove(p)
    for dirpath, dirnames, filenames in os.walk(site, topdown=True):
        here = Path(dirpath)
        for d in list(dirnames):
            if d in STRIP_DIRS or d.endswith("-stubs"):
                shutil.rmtree(here / d, ignore_errors=True)
                dirnames.remove(d)
        for f in filenames:
            in_dist_info = here.name.endswith(".dist-info")
            if f.endswith(STRIP_SUFFIXES) or (in_dist_info and f in DIST_INFO_BULK):
                (here / f).unlink()
    pyarrow = site / "pyarrow"
    if pyarrow.is_dir():
        for pattern in (*PYARROW_UNUSED, *PYARROW_LINK_COPIES):
            for p in pyarrow.glob(pattern):
                _remove(p)


def _pip_install(requirements: Path, target: Path, pip_cache: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",  # host Python != 3.12: its .pyc files would be useless on Lambda
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        *[arg for plat in PLATFORMS for arg in ("--platform", plat)],
        "--target",
        str(target),
        "--cache-dir",
        str(pip_cache),
        "-r",
        str(requirements),
    ]
    # The host's pip constraints (if any) are for the host; a layer is pinned by its own requirements file.
    env = {**os.environ, "PIP_CONSTRAINT": ""}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise AssetBuildError(f"pip failed for {requirements.name}:\n{proc.stderr[-4000:]}")


def _build_into(name: str, site: Path) -> None:
    if name == "iterate":
        shutil.copytree(
            ENGINE_SRC,
            site / "iterate",
            ignore=shutil.ignore_patterns(*STRIP_DIRS, "*.pyc"),
        )
        return
    _pip_install(REQUIREMENT_LAYERS[name], site, ASSETS / "pip-cache")
    strip_tree(site, name)


def build_layer(name: str) -> BuiltLayer:
    """Builds (or reuses from .assets/) the layer `name`; returns the directory holding `python/`."""
    digest = layer_digest(name)
    root = ASSETS / "layers"
    final = root / f"{name}-{digest}"
    with _locked(name):
        if (final / ".complete").is_file():
            return BuiltLayer(name, final, digest)
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{name}-") as tmp:
            staging = Path(tmp) / "layer"
            site = staging / "python"
            site.mkdir(parents=True)
            _build_into(name, site)
            (staging / ".complete").write_text(digest)
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        # Older builds go once they are a day old: a synth or test started before the engine changed may
        # still be reading one.
        cutoff = time.time() - STALE_AFTER_S
        for stale in root.glob(f"{name}-*"):
            if stale != final and stale.is_dir() and stale.stat().st_mtime < cutoff:
                shutil.rmtree(stale, ignore_errors=True)
    return BuiltLayer(name, final, digest)


def placeholder_layer(name: str) -> BuiltLayer:
    """An almost empty layer directory, for template tests that must not download 300 MB of wheels."""
    path = ASSETS / "placeholder" / name
    marker = path / "python" / "PLACEHOLDER.txt"
    if not marker.is_file():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"placeholder for the {name} layer; run scripts/build_assets.py for the real one\n")
    return BuiltLayer(name, path, f"placeholder-{name}", placeholder=True)


def layer_assets(*, placeholder: bool) -> dict[str, BuiltLayer]:
    """Every layer the stack uses, real (built or cached) or placeholders."""
    make = placeholder_layer if placeholder else build_layer
    return {name: make(name) for name in LAYER_NAMES}


def tree_size(path: Path) -> int:
    """Unzipped bytes under `path`, as Lambda counts them (regular files, symlinks not followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for f in filenames:
            p = Path(dirpath) / f
            if not p.is_symlink():
                total += p.stat().st_size
    return total
