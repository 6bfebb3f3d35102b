"""Per-function packaging facts: unzipped code + layer size, and a cold import limited to what the layers ship."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from infra.assets import REPO, BuiltLayer, build_layer, tree_size
from infra.constructs.functions import CODE_EXCLUDES, FUNCTION_SPECS, FunctionSpec

LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # code + all layers, bytes (Lambda quota)
# The python3.12 runtime ships boto3 and its dependencies; the layers rely on them (see RUNTIME_PROVIDED).
RUNTIME_MODULES = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six"})
HEAVY = ("pandas", "pyarrow", "numpy", "anthropic", "openpyxl")


# What an invocation imports lazily beyond the handler module, exercised in the same restricted interpreter:
# the step functions build their agents (offline when no key, Claude otherwise) and use the pipeline.
_AGENTS_PROBE = (
    "from iterate.agents import build_agents\n"
    "from iterate.settings import Settings\n"
    "build_agents(Settings())\n"
    "build_agents(Settings(anthropic_api_key='probe'))\n"
    "import iterate.pipeline\n"
)
INVOCATION_PROBES: dict[str, str] = {
    # EngineStep (the engine path on Athena) and the owner-role source client
    "profile": _AGENTS_PROBE + "import iterate.aws.large\nimport iterate.aws.sources\n",
    "understand": _AGENTS_PROBE,
    "analyze": _AGENTS_PROBE,
    "investigate": _AGENTS_PROBE,
    "report": _AGENTS_PROBE,
    "followup": _AGENTS_PROBE + "import iterate.api.app\n",
    "api": "import iterate.api.app\n",
}


@dataclass(frozen=True)
class FunctionSize:
    name: str
    layers: tuple[str, ...]
    code_bytes: int
    layer_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.code_bytes + self.layer_bytes


@dataclass(frozen=True)
class ImportResult:
    name: str
    ok: bool
    seconds: float | None
    heavy: tuple[str, ...]
    error: str | None


def code_size(spec: FunctionSpec, functions_dir: Path = REPO / "functions") -> int:
    """Bytes of functions/<name>/ as packaged (caches and tests excluded, like the asset)."""
    root = functions_dir / spec.name
    if not root.is_dir():
        return 0
    skip = {e for e in CODE_EXCLUDES if "*" not in e}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        total += sum((Path(dirpath) / f).stat().st_size for f in filenames if not f.endswith(".pyc"))
    return total


def function_sizes(layers: dict[str, BuiltLayer]) -> list[FunctionSize]:
    """Every function's unzipped size: its code plus each layer it uses, as Lambda counts them."""
    layer_bytes = {name: tree_size(layer.path) for name, layer in layers.items()}
    return [
        FunctionSize(spec.name, spec.layers, code_size(spec), sum(layer_bytes[n] for n in spec.layers))
        for spec in FUNCTION_SPECS
    ]


def top_level_modules(layer: BuiltLayer) -> set[str]:
    """What a layer makes importable: the names directly under python/ (packages, modules, extensions)."""
    names = set()
    for p in (layer.path / "python").iterdir():
        if p.name.endswith((".dist-info", ".libs")) or p.name.startswith("."):
            continue
        names.add(p.name.split(".")[0])
    return names


_CHILD = r"""
import importlib.abc, importlib.machinery, json, sys, sysconfig, time
stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"] + "/lib-dynload"]
allowed = set(json.loads(sys.argv[1]))
heavy = json.loads(sys.argv[2])
sys.path[:0] = json.loads(sys.argv[3])

class OnlyTheLayers(importlib.abc.MetaPathFinder):
    # Top-level imports of anything the function's layers (or the runtime) do not ship fail, as on Lambda.
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if path is None and top not in allowed and top not in sys.stdlib_module_names and top != "handler":
            if importlib.machinery.PathFinder.find_spec(top, stdlib) is not None:
                return None  # private stdlib modules (_sysconfigdata_…)
            raise ModuleNotFoundError(f"No module named {top!r} in this function's layers", name=top)
        return None

sys.meta_path.insert(0, OnlyTheLayers())
t0 = time.perf_counter()
import handler  # noqa
took = time.perf_counter() - t0
assert callable(getattr(handler, "lambda_handler", None)), "handler.lambda_handler missing"
loaded = [m for m in heavy if m in sys.modules]
exec(sys.argv[4])  # the invocation probe: lazily imported engine paths
print(json.dumps({"seconds": took, "heavy": loaded}))
"""


def cold_import(spec: FunctionSpec, layers: dict[str, BuiltLayer], *, probe: bool = True) -> ImportResult:
    """Imports functions/<name>/handler.py in a fresh interpreter that can see only what Lambda would give it.

    The layers are built for arm64/cp312 and cannot load on this host, so the host's own copies of the same
    packages are imported, but only the top-level names the function's layers contain (plus the runtime's
    boto3 stack): a handler that needs pandas without the data layer fails here as it would on Lambda.
    With `probe`, the engine paths an invocation imports lazily (INVOCATION_PROBES) are imported too, after
    the timing: the reported seconds are the handler module's import alone.
    """
    code_dir = REPO / "functions" / spec.name
    if not (code_dir / "handler.py").is_file():
        return ImportResult(spec.name, False, None, (), f"functions/{spec.name}/handler.py missing")
    allowed = set(RUNTIME_MODULES)
    for name in spec.layers:
        allowed |= top_level_modules(layers[name])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ITERATE_", "ANTHROPIC_"))},
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "iterate",
        "POWERTOOLS_METRICS_NAMESPACE": "Iterate",
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-I",  # no PYTHONPATH, user site or cwd: only the paths below plus this venv's site-packages
            "-c",
            _CHILD,
            json.dumps(sorted(allowed)),
            json.dumps(HEAVY),
            json.dumps([str(code_dir), str(REPO / "layers")]),
            INVOCATION_PROBES.get(spec.name, "") if probe else "",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=code_dir,
        check=False,
        timeout=120,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return ImportResult(spec.name, False, None, (), last)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return ImportResult(spec.name, True, float(out["seconds"]), tuple(out["heavy"]), None)


def built_layers() -> dict[str, BuiltLayer]:
    names = sorted({n for spec in FUNCTION_SPECS for n in spec.layers})
    return {n: build_layer(n) for n in names}


def layer_conflicts(spec: FunctionSpec, layers: dict[str, BuiltLayer]) -> list[str]:
    """Distributions shipped by two of the function's layers at different versions (one would overwrite
    the other's files in /opt/python)."""
    seen: dict[str, tuple[str, str]] = {}
    conflicts = []
    for lname in spec.layers:
        for info in (layers[lname].path / "python").glob("*.dist-info"):
            dist, _, version = info.name.removesuffix(".dist-info").partition("-")
            key = dist.lower().replace("-", "_")
            if key in seen and seen[key][1] != version:
                conflicts.append(f"{dist}: {seen[key][0]}={seen[key][1]} vs {lname}={version}")
            seen.setdefault(key, (lname, version))
    return conflicts
