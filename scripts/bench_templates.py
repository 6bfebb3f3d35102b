"""Offline investigation templates, old vs new: CPU time per issue on a big file, and whether results agree.

    .venv/bin/python scripts/bench_templates.py [--data DATA.parquet] [--analysis analysis.json]
                                                [--old-ref GIT_REF | --old-file FILE] [--dtype str|object|category]

Each issue of an analysis is turned into its template (both versions), and each template runs in a forked
child on the same in-memory frame, the way the sandbox's zygote runs it; the child times itself with
`time.process_time()` (CPU, so a busy shared machine skews it less than wall time) and data loading is
not counted. The results must be identical: they are what the issue's confirmation is decided on.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODULE = "layers/iterate/agents/offline/investigation.py"
# The templates as they were before the work on their speed: the reference every result is compared to.
BASELINE_REF = "babc638"


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def old_module(ref: str | None, file: str | None) -> ModuleType:
    if file:
        return load_module(Path(file), "old_investigation")
    text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:{MODULE}"], capture_output=True, text=True, check=True
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(text)
    return load_module(Path(handle.name), "old_investigation")


def load_frame(path: Path, dtype: str) -> Any:
    from iterate.io import read_parquet_text

    frame = read_parquet_text(path)
    if dtype == "object":
        frame = frame.astype(object)
    elif dtype == "category":
        frame = frame.astype("category")
    return frame


def run_code(frame: Any, code: str) -> tuple[float, Any, str | None]:
    """Exec `code` on `frame` the way the sandbox does; returns (CPU seconds, result, error)."""
    import numpy as np
    import pandas as pd

    scope: dict[str, Any] = {"df": frame, "pd": pd, "np": np, "json": json, "result": None}
    started = time.process_time()
    try:
        exec(compile(code, "<investigation>", "exec"), scope)
    except Exception as exc:  # reported, not raised: the table goes on
        return time.process_time() - started, None, f"{type(exc).__name__}: {exc}"
    return time.process_time() - started, scope["result"], None


def _child(frame: Any, code: str, conn: Any) -> None:
    cpu, result, error = run_code(frame, code)
    conn.send((cpu, json.dumps(result, sort_keys=True, default=str), error))
    conn.close()


def in_child(frame: Any, code: str) -> tuple[float, str, str | None]:
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(frame, code, child))
    process.start()
    child.close()
    out = parent.recv()
    process.join()
    return out  # type: ignore[no-any-return]


def best_of(repeat: int, frame: Any, code: str) -> tuple[float, str, str | None]:
    runs = [in_child(frame, code) for _ in range(max(repeat, 1))]
    return min(runs, key=lambda run: run[0])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(REPO / "bench/out/analyze/data.parquet"))
    parser.add_argument("--analysis", default=None, help="analysis.json (default: beside --data)")
    parser.add_argument("--old-ref", default=BASELINE_REF, help="git revision of the old templates")
    parser.add_argument("--old-file", default=None, help="a copy of the old module instead of a git revision")
    parser.add_argument("--dtype", choices=("str", "object", "category"), default="str")
    parser.add_argument("--only", default=None, help="run only issues whose id contains this")
    parser.add_argument("--repeat", type=int, default=1, help="runs per template; the least CPU time is kept")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO / "layers"))
    from iterate.agents.offline import investigation as new
    from iterate.contracts import Issue

    old = old_module(args.old_ref, args.old_file)
    analysis = Path(args.analysis) if args.analysis else Path(args.data).with_name("analysis.json")
    issues = [Issue.model_validate(raw) for raw in json.loads(analysis.read_text())["issues"]]
    started = time.perf_counter()
    frame = load_frame(Path(args.data), args.dtype)
    print(
        f"loaded {frame.shape[0]:,} x {frame.shape[1]} ({args.dtype}) in {time.perf_counter() - started:.1f}s"
    )

    print(f"{'issue':32} {'template':18} {'old s':>7} {'new s':>7} {'x':>6}  same")
    totals = [0.0, 0.0]
    all_same = True
    for issue in issues:
        if (args.only and args.only not in issue.id) or not new.supports(issue):
            continue
        old_cpu, old_out, old_err = best_of(args.repeat, frame, old.template_code(issue))
        new_cpu, new_out, new_err = best_of(args.repeat, frame, new.template_code(issue))
        same = old_out == new_out and old_err == new_err
        all_same &= same
        totals[0] += old_cpu
        totals[1] += new_cpu
        kind = _template_name(new, issue)
        speedup = old_cpu / new_cpu if new_cpu else float("inf")
        print(
            f"{issue.id:32} {kind:18} {old_cpu:7.3f} {new_cpu:7.3f} {speedup:6.1f}  {'yes' if same else 'NO'}"
        )
        if not same:
            print(f"    old: {old_err or old_out[:300]}\n    new: {new_err or new_out[:300]}")
    print(f"{'total':51} {totals[0]:7.3f} {totals[1]:7.3f}")
    print("all results identical" if all_same else "RESULTS DIFFER")
    return 0 if all_same else 1


def _template_name(module: ModuleType, issue: Any) -> str:
    stats = issue.evidence.stats if issue.evidence else {}
    if issue.type == "dependency_violation":
        return (
            "DEPENDENCY_VOTES"
            if "determinants" in stats
            else "DERIVED"
            if "separator" in stats
            else "DEPENDENCY"
        )
    template = module.TEMPLATES[issue.type]
    for name in ("MARKERS", "DUPLICATES", "NEAR_DUPLICATES", "PATTERN", "BAD_VALUES", "OUTLIER", "MERGED"):
        if getattr(module, name, None) is template:
            return name
    return (
        "CONSTANT"
        if issue.type == "constant_column"
        else "ALL_UNIQUE"
        if "unique" in issue.type
        else issue.type
    )


if __name__ == "__main__":
    raise SystemExit(main())
