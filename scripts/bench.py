"""`make bench`: `iterate analyze` on the 1M-row benchmark CSV against a bare pyarrow read; sandbox overhead."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from same_outputs import outcomes  # scripts/ is not a package: found beside this file

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILE = REPO / "bench" / "data" / "bench_1m.csv"
WIDE_FILE = REPO / "bench" / "data" / "wide.csv"
DEFAULT_OUT = REPO / "bench" / "out"
TARGET_RATIO = 5.0
# Issue 14: the whole `iterate analyze` process within 8x a whole process that only reads the file with pyarrow.
TARGET_PROCESS_RATIO = 8.0
TARGET_PEAK_MB = 4096.0

# Each measurement runs in a fresh child so its peak memory is its own. The child prints one JSON line.
_BARE = """
import json, resource, sys, time
import pyarrow.csv as pacsv
times, cpus = [], []
for _ in range(int(sys.argv[2])):
    t, c = time.perf_counter(), time.process_time()
    table = pacsv.read_csv(sys.argv[1])
    times.append(time.perf_counter() - t); cpus.append(time.process_time() - c)
    rows = table.num_rows; del table
print(json.dumps({"times": times, "cpus": cpus, "rows": rows,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
_PROFILE = """
import json, resource, sys, time
t0 = time.perf_counter()
from iterate.io import ReadLimits, read_table
from iterate.profile import profile_table
from iterate.settings import Settings
t1, c1 = time.perf_counter(), time.process_time()
table = read_table(sys.argv[1], limits=ReadLimits.from_settings(Settings.from_env()))  # ITERATE_MAX_* as a run
t2, c2 = time.perf_counter(), time.process_time()
profile = profile_table(table)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "profile_s": t3 - t2, "total_s": t3 - t0,
                  "total_cpu_s": c3, "read_cpu_s": c2 - c1, "profile_cpu_s": c3 - c2,
                  "rows": table.n_rows, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
_WRAP = """
import json, os, resource, subprocess, sys, tempfile, threading, time

def tree_pss_kb(root):
    # Proportional set size of the process and all its descendants: pages shared by forked processes
    # (the sandbox's runners share the dataset zygote's frame) are counted once, split between them.
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, changed = {root}, True
    while changed:
        grown = {p for p, pp in parents.items() if pp in tree} - tree
        changed = bool(grown)
        tree |= grown
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += sum(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
        except (OSError, ValueError):
            return None  # it exited while read: its share is missing
    # A process that exited after it was read hands its share of shared pages to those read after it, which
    # counts them twice (up to 100 MB at 3M rows): such a sample is dropped, the next one is taken.
    if not all(os.path.exists(f"/proc/{pid}") for pid in tree):
        return None
    return total

err = tempfile.TemporaryFile(mode="w+")
t = time.perf_counter(); proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=err, text=True)
peak_tree = [0]
def sample():
    while proc.poll() is None:
        try:
            peak_tree[0] = max(peak_tree[0], tree_pss_kb(proc.pid) or 0)
        except OSError:
            pass
        time.sleep(0.1)
watcher = threading.Thread(target=sample, daemon=True)
if os.path.exists("/proc/self/smaps_rollup"):
    watcher.start()
rc = proc.wait(); wall = time.perf_counter() - t
if watcher.is_alive():
    watcher.join()
err.seek(0)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rc": rc,
                  "stderr": err.read()[-2000:], "peak_mb": usage.ru_maxrss / 1024,
                  "tree_pss_mb": (peak_tree[0] / 1024) or None}))
"""


def _child(code: str, *args: str, timeout: float = 1800) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "layers") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed: {proc.stderr.strip()[-1500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def bare_read(path: Path, repeats: int) -> dict[str, Any]:
    """Best of `repeats` bare `pyarrow.csv.read_csv` calls, and the peak memory of that process."""
    out = _child(_BARE, str(path), str(repeats))
    best = min(range(len(out["times"])), key=lambda i: out["times"][i])
    out["best_s"], out["best_cpu_s"] = out["times"][best], out["cpus"][best]
    return out


_BARE_PROCESS = "import sys, pyarrow.csv as c; c.read_csv(sys.argv[1])"

# Writes 512 MiB a process has never touched, then the same memory again: what memory new to a process costs
# here. In a virtual machine that hands free memory back to its host (virtio_balloon's free page reporting),
# the first write also waits for the host to back each page: 0.5-2.7 GB/s against 15 GB/s rewritten, measured
# on the machine these figures come from (iterate analyze's CPU on 1M rows was 18% the kernel clearing such
# pages, perf). The whole-process ratio below is read on such a machine; bare metal clears pages far faster.
_FIRST_TOUCH = """
import json, time
import numpy as np
n = 512 * 2**20 // 8
t = time.perf_counter(); a = np.ones(n); first = time.perf_counter() - t
t = time.perf_counter(); a[:] = 2.0; again = time.perf_counter() - t
print(json.dumps({"first_gb_s": 0.5 / first, "again_gb_s": 0.5 / again}))
"""


def first_touch() -> dict[str, Any]:
    """GB/s writing memory new to a fresh process, and rewriting it (`_FIRST_TOUCH`)."""
    return _child(_FIRST_TOUCH)


def bare_process(path: Path) -> dict[str, Any]:
    """Wall time and peak of a whole process that imports pyarrow and reads the file (what `iterate analyze`,
    a whole process too, is compared with)."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, sys.executable, "-c", _BARE_PROCESS, str(path)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def read_and_profile(path: Path) -> dict[str, Any]:
    """`iterate.io.read_table` + `iterate.profile.profile_table` alone, in one child process."""
    return _child(_PROFILE, str(path))


_RUN_LOCAL = "import sys; from iterate.pipeline import run_local; run_local(sys.argv[1], sys.argv[2])"


def _analyze_command() -> tuple[list[str], str] | None:
    """How to run `iterate analyze FILE --out DIR` (argv prefix, label); the pipeline itself if no CLI yet."""
    if importlib.util.find_spec("iterate.cli.analyze") is not None:
        exe = shutil.which("iterate", path=str(Path(sys.executable).parent)) or shutil.which("iterate")
        return ([exe, "analyze"] if exe else [sys.executable, "-m", "iterate", "analyze"]), "iterate analyze"
    if importlib.util.find_spec("iterate.pipeline") is not None:
        return [sys.executable, "-c", _RUN_LOCAL], "pipeline.run_local (no CLI yet)"
    return None


def analyze(
    path: Path, out: Path, env: dict[str, str] | None = None, extra: list[str] | None = None
) -> dict[str, Any] | None:
    """Wall time and peak RSS of `iterate analyze FILE --out DIR` as a subprocess (None if unavailable).

    env: variables set for that run (e.g. ITERATE_INVESTIGATION_BATCH); extra: more arguments (--workers 2)."""
    found = _analyze_command()
    if found is None:
        return None
    cmd, label = found
    env_free = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # offline: no LLM calls
    env_free["PYTHONPATH"] = str(REPO / "layers") + os.pathsep + os.environ.get("PYTHONPATH", "")
    env_free.update(env or {})
    out.mkdir(parents=True, exist_ok=True)
    args = (
        [str(path), "--out", str(out), *(extra or [])]
        if label == "iterate analyze"
        else [str(path), str(out)]
    )
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, *cmd, *args], capture_output=True, text=True, env=env_free, timeout=3600
    )
    result = dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    result["label"] = label
    analysis = out / "analysis.json"
    if result["rc"] == 0 and analysis.exists():
        run = json.loads(analysis.read_text(encoding="utf-8")).get("run") or {}
        result["timings_ms"] = run.get("timingsMs", {})
        result["issues"] = len(json.loads(analysis.read_text(encoding="utf-8")).get("issues", []))
        step = out / "steps" / "investigate.json"
        if step.exists():  # the sandbox's runners are reaped by its zygotes: their CPU is reported here
            sandbox = json.loads(step.read_text(encoding="utf-8")).get("detail", {}).get("sandbox", {})
            # A dataset zygote still running when the step ended has reported only its load so far.
            zygotes = max(float(sandbox.get(k, 0.0)) for k in ("dataset_zygote_cpu_s", "preload_cpu_s"))
            result["sandbox_cpu_s"] = float(sandbox.get("job_cpu_s", 0.0)) + zygotes
    return result


WIDE_STEPS = ("profile", "detect", "investigate", "report")


def wide_table(out: Path, path: Path = WIDE_FILE, runs: int = 1) -> dict[str, Any]:
    """`iterate analyze` on the wide table (2,000 x 500, ~1,150 issues), template proofs batched into one
    sandbox process per batch (ITERATE_INVESTIGATION_BATCH=1, the default) against one process per proof
    (=0), run alternately on the same machine; prints the time of each step side by side."""
    if not path.exists():
        sys.path.insert(0, str(REPO / "scripts"))
        from gen_wide import generate

        names, rows, _ = generate(2000, 500, 5)
        path.parent.mkdir(parents=True, exist_ok=True)
        import csv

        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(names)
            writer.writerows(rows)
    modes = {"batch off": "0", "batch on": "1"}
    found: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for k in range(runs):
        for mode, value in modes.items() if k % 2 == 0 else reversed(modes.items()):
            folder = out / "wide" / mode.replace(" ", "-")
            shutil.rmtree(folder, ignore_errors=True)
            result = analyze(path, folder, env={"ITERATE_INVESTIGATION_BATCH": value}) or {"rc": "n/a"}
            if result.get("rc") == 0:
                result["outcomes"] = outcomes(folder)
            found[mode].append(result)
    print(f"\nwide table {path.name} (2,000 rows x 500 columns): batch on vs off, alternately, {runs} run(s)")
    print(f"  load average now {_load()}")
    print(f"  {'':<28s}" + "".join(f"{m:>12s}" for m in modes))
    summary: dict[str, Any] = {}
    for mode, results in found.items():
        good = [r for r in results if r.get("rc") == 0]
        if not good:
            summary[mode] = {"error": results[-1].get("stderr", "")[-500:] if results else "not run"}
            continue
        best = min(good, key=lambda r: r["wall_s"])
        summary[mode] = {
            "wall_s": [round(r["wall_s"], 2) for r in good],
            "steps_s": {s: round(best["timings_ms"].get(s, 0) / 1000, 2) for s in WIDE_STEPS},
            "issues": best.get("issues"),
        }
    rows = (
        [("whole run (wall, best)", "wall")]
        + [(f"step {s}" if s != "detect" else "  of which detect", s) for s in WIDE_STEPS]
        + [("issues", "issues")]
    )
    for label, key in rows:
        cells = []
        for mode in modes:
            entry = summary.get(mode, {})
            if "error" in entry or not entry:
                cells.append("failed")
            elif key == "wall":
                cells.append(f"{min(entry['wall_s']):.2f} s")
            elif key == "issues":
                cells.append(str(entry["issues"]))
            else:
                cells.append(f"{entry['steps_s'][key]:.2f} s")
        print(f"  {label:<28s}" + "".join(f"{c:>12s}" for c in cells))
    ons = [r.get("outcomes") for r in found["batch on"] if r.get("rc") == 0]
    offs = [r.get("outcomes") for r in found["batch off"] if r.get("rc") == 0]
    same = bool(ons and offs) and all(o == offs[0] for o in ons + offs)
    summary["identical_outcomes"] = same
    print(f"  every issue's status, counts and examples identical on and off: {'yes' if same else 'NO'}")
    return summary


def _workers_compared(path: Path, out: Path) -> dict[str, Any]:
    """`iterate analyze --workers 1` against `--workers 2` (ranges of ITERATE_CHUNK_BYTES, 64 MiB by default),
    run one after the other; whether both wrote the same flags.csv and issues."""
    found: dict[str, Any] = {}
    for n in (1, 2):
        folder = out / f"analyze-workers-{n}"
        shutil.rmtree(folder, ignore_errors=True)
        found[f"workers {n}"] = analyze(path, folder, extra=["--workers", str(n)]) or {"rc": "n/a"}
    ones, twos = out / "analyze-workers-1", out / "analyze-workers-2"
    found["identical"] = (
        all(found[f"workers {n}"].get("rc") == 0 for n in (1, 2))
        and (ones / "flags.csv").read_bytes() == (twos / "flags.csv").read_bytes()
        and outcomes(ones) == outcomes(twos)
    )
    return found


def sandbox_numbers(path: Path) -> dict[str, Any] | None:
    """Numbers from `scripts/bench_sandbox.py` (sandbox engineer's), when that script exists, on `path`."""
    script = REPO / "scripts" / "bench_sandbox.py"
    if not script.exists():
        return None
    spec = importlib.util.spec_from_file_location("bench_sandbox", script)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Its main() may parse sys.argv: give it a clean one rather than this script's options.
    saved = sys.argv
    sys.argv = [str(script)]
    try:
        try:
            result = module.main(["--file", str(path)])
        except TypeError:  # a main() that takes no arguments
            result = module.main()
    except SystemExit as exc:
        result = {"exit": exc.code}
    finally:
        sys.argv = saved
    return result if isinstance(result, dict) else {"result": result}


def _row(
    label: str,
    wall: float | None,
    peak: float | None,
    bare: float,
    cpu: float | None = None,
    bare_cpu: float = 0,
) -> str:
    w = f"{wall:8.2f}" if wall is not None else "       -"
    p = f"{peak:9.0f}" if peak is not None else "        -"
    r = f"{wall / bare:7.2f}x" if wall is not None and bare > 0 else "       -"
    c = f"{cpu:8.2f}" if cpu is not None else "       -"
    rc = f"{cpu / bare_cpu:7.2f}x" if cpu is not None and bare_cpu > 0 else "       -"
    return f"  {label:<40s}{w}{p}{r}{c}{rc}"


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def run(
    path: Path,
    out: Path,
    *,
    repeats: int = 3,
    with_analyze: bool = True,
    with_sandbox: bool = True,
    with_workers: bool = True,
) -> dict:
    """Measure everything and print the table; returns the numbers (also written to out/bench.json)."""
    size_mb = path.stat().st_size / 1e6
    results: dict[str, Any] = {"file": str(path), "size_mb": round(size_mb, 1), "cpus": os.cpu_count()}
    results["load_before"] = load_before = _load()
    results["bare"] = bare = bare_read(path, repeats)
    results["profile"] = prof = read_and_profile(path)
    results["bare_process"] = bare_proc = bare_process(path)
    results["analyze"] = ana = analyze(path, out / "analyze") if with_analyze else None
    workers = _workers_compared(path, out) if with_analyze and with_workers else None
    results["workers"] = workers
    b, bc = bare["best_s"], bare["best_cpu_s"]
    results["load_after"] = load_after = _load()
    print(f"\nfile {path.name}: {size_mb:.0f} MB, {bare['rows']:,} rows; {os.cpu_count()} CPUs")
    print(f"  load average before {load_before}, after {load_after} (wall times swing with it; CPU less so)")
    print(f"  {'':<40s}{'wall s':>8s}{'peak MB':>9s}{'ratio':>8s}{'cpu s':>8s}{'ratio':>8s}")
    print(_row(f"bare pyarrow.csv.read_csv (best of {repeats})", b, bare["peak_mb"], b, bc, bc))
    if not with_analyze:
        print("  iterate analyze                         skipped (--no-analyze)")
    elif ana is None:
        print("  iterate analyze                         not available (neither the CLI nor the pipeline)")
    elif ana["rc"] != 0:
        print(f"  {ana['label']} FAILED (exit {ana['rc']}): {ana['stderr'].strip().splitlines()[-1:]}")
    else:
        cpu = ana.get("cpu_s")
        if cpu is not None and ana.get("sandbox_cpu_s"):
            cpu += ana["sandbox_cpu_s"]  # counted once: RUSAGE_CHILDREN never sees processes a zygote reaped
        print(_row(ana["label"], ana["wall_s"], ana["peak_mb"], b, cpu, bc))
        if ana.get("sandbox_cpu_s"):
            print(_row("  of which sandbox processes (CPU)", None, None, b, ana["sandbox_cpu_s"], bc))
        if ana.get("tree_pss_mb"):
            print(_row("  all its processes together (peak PSS)", None, ana["tree_pss_mb"], b))
        timings = ana.get("timings_ms", {})
        parts = {"read", "detect", "profile_table"}  # parts of the profile step, timed inside it
        for step, ms in timings.items():
            if step not in parts:
                print(_row(f"  step {step}", ms / 1000, None, b))
            if step == "profile":
                for part in ("read", "detect", "profile_table"):
                    if part in timings:
                        print(_row(f"    of which {part}", timings[part] / 1000, None, b))
    if workers is not None:
        for n in (1, 2):
            run_n = workers[f"workers {n}"]
            if run_n.get("rc") != 0:
                print(f"  iterate analyze --workers {n} FAILED: {run_n.get('stderr', '').strip()[-300:]}")
                continue
            print(
                _row(
                    f"iterate analyze --workers {n}", run_n["wall_s"], run_n["peak_mb"], b, run_n["cpu_s"], bc
                )
            )
            if run_n.get("tree_pss_mb"):
                print(_row("  all its processes together (peak PSS)", None, run_n["tree_pss_mb"], b))
        print(
            f"  --workers 1 and 2: flags.csv and every issue identical: {'yes' if workers['identical'] else 'NO'}"
        )
    print(
        _row(
            "read_table + profile_table (one process)",
            prof["total_s"],
            prof["peak_mb"],
            b,
            prof["total_cpu_s"],
            bc,
        )
    )
    print(_row("  of which read_table", prof["read_s"], None, b, prof["read_cpu_s"], bc))
    print(_row("  of which profile_table", prof["profile_s"], None, b, prof["profile_cpu_s"], bc))
    print(f"  targets: iterate analyze <= {TARGET_RATIO:.0f}x the bare read, peak < {TARGET_PEAK_MB:.0f} MB")
    if ana is not None and ana["rc"] == 0:
        peak = max(ana["peak_mb"], ana.get("tree_pss_mb") or 0)  # the largest process, or all of them
        ok = ana["wall_s"] <= TARGET_RATIO * b and peak < TARGET_PEAK_MB
        results["meets_targets"] = ok
        print(f"  -> {'MET' if ok else 'NOT MET'}: {ana['wall_s'] / b:.2f}x, {peak:.0f} MB ({ana['label']})")
    if ana is not None and ana["rc"] == 0 and bare_proc.get("rc") == 0:
        whole = bare_proc["wall_s"]
        ratio = ana["wall_s"] / whole
        results["process_ratio"] = round(ratio, 2)
        print(
            f"  whole process against whole process: a bare pyarrow read takes {whole:.2f} s "
            f"({bare_proc.get('tree_pss_mb') or bare_proc['peak_mb']:.0f} MB), iterate analyze {ana['wall_s']:.2f} s"
            f" = {ratio:.2f}x -> {'MET' if ratio <= TARGET_PROCESS_RATIO else 'NOT MET'}"
            f" (issue 14: <= {TARGET_PROCESS_RATIO:.0f}x)"
        )
    results["first_touch"] = touch = first_touch()
    print(
        f"  memory new to a process written at {touch['first_gb_s']:.1f} GB/s, rewritten at "
        f"{touch['again_gb_s']:.1f} GB/s (slow first writes: a VM handing free memory back to its host; "
        "every process of a run pays them, a bare read least)"
    )
    if with_sandbox:
        print("\nsandbox (scripts/bench_sandbox.py):", flush=True)
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                results["sandbox"] = sb = sandbox_numbers(path)
        except Exception as exc:  # the sandbox bench is someone else's; its failure must not hide ours
            results["sandbox"] = sb = {"error": f"{type(exc).__name__}: {exc}"}
        # Its own printout when it has one; otherwise the numbers it returned.
        text = printed.getvalue().strip()
        if sb is None:
            print("  not present")
        else:
            print(text if text and "error" not in sb else json.dumps(sb, indent=2, default=str))
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    return results


def flags_writing(n: int = 3_000_000) -> dict[str, Any]:
    """Seconds to write n flags over a million rows and 40 columns (what the detectors hand the report)."""
    import numpy as np
    import pyarrow as pa

    from iterate.report import write_flags_csv

    rng = np.random.default_rng(0)
    header = [f"c{i}" for i in range(40)]
    flags = pa.table(
        {
            "row": rng.integers(0, 1_000_000, n),
            "column": pa.DictionaryArray.from_arrays(rng.integers(0, 40, n).astype(np.int32), header),
            "issue_id": pa.DictionaryArray.from_arrays(
                rng.integers(0, 25, n).astype(np.int32), [f"issue-{k}" for k in range(25)]
            ),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), time.process_time()
        written = write_flags_csv(flags, Path(tmp) / "flags.csv", columns=header)
        result = {"flags": n, "written": written, "wall_s": time.perf_counter() - started}
        result["cpu_s"] = time.process_time() - cpu
    print(f"\nflags.csv: {n:,} flags written in {result['wall_s']:.2f} s ({result['cpu_s']:.2f} s CPU)")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--file", type=Path, default=DEFAULT_FILE, help="CSV to measure (generated if missing)"
    )
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="rows to generate when the file is missing"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-analyze", action="store_true", help="skip `iterate analyze`")
    parser.add_argument("--no-sandbox", action="store_true", help="skip scripts/bench_sandbox.py")
    parser.add_argument("--no-workers", action="store_true", help="skip `iterate analyze --workers 1` vs 2")
    parser.add_argument("--no-wide", action="store_true", help="skip the wide table (batch on vs off)")
    parser.add_argument("--wide-only", action="store_true", help="only the wide table (batch on vs off)")
    parser.add_argument("--wide-runs", type=int, default=1, help="runs of each mode on the wide table")
    args = parser.parse_args(argv)
    if args.wide_only:
        wide_table(args.out, runs=args.wide_runs)
        return 0
    if not args.file.exists():
        sys.path.insert(0, str(REPO / "scripts"))
        from gen_bench import write

        started = time.perf_counter()
        print(f"generating {args.file} ({args.rows:,} rows) ...", flush=True)
        write(args.file, args.rows)
        print(f"  done in {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryDirectory():
        run(
            args.file,
            args.out,
            repeats=args.repeats,
            with_analyze=not args.no_analyze,
            with_sandbox=not args.no_sandbox,
            with_workers=not args.no_workers,
        )
    bench = args.out / "bench.json"
    saved = json.loads(bench.read_text(encoding="utf-8")) if bench.exists() else {}
    saved["flags_csv"] = flags_writing()
    if not args.no_wide:
        saved["wide"] = wide_table(args.out, runs=args.wide_runs)
    bench.write_text(json.dumps(saved, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
