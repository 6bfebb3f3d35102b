"""Sandbox benchmark: overhead per investigation on 1,000 rows, and a 20-investigation run on the 1M-row file.

The 20-investigation run is measured side by side with and without the dataset zygote (the frame loaded
once per run rather than once per investigation), in wall time and in CPU time summed over every process
involved: this one, the zygote, the dataset zygote and each investigation's processes.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILE = REPO / "bench" / "data" / "bench_1m.csv"
OVERHEAD_TARGET_S = 1.0
TRIVIAL = "result = {'affected_rows': len(df)}"


def _interpreter_floor() -> dict[str, float]:
    """What any fresh Python process pays before the sandbox adds anything: start-up, then pandas+pyarrow."""
    out = {}
    for label, code in (
        ("python_start_s", "pass"),
        ("import_pandas_pyarrow_s", "import pandas, pyarrow.parquet"),
    ):
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-I", "-B", "-c", code], check=True)
            runs.append(time.perf_counter() - started)
        out[label] = round(min(runs), 3)
    return out


def overhead(
    data: Path, *, repeats: int, namespaces: bool | None, prefork: bool, preload: bool = True
) -> dict[str, Any]:
    """Start-to-result wall time of a trivial investigation (the sandbox's own cost), `repeats` times.

    With `prefork`, the first run also starts the zygote (and, with `preload`, loads the dataset in the
    dataset zygote): it is reported apart (`first_s`) and left out of the median, which is what every
    further investigation of a run pays.
    """
    from iterate.ports import DatasetRef
    from iterate.sandbox import LocalSandbox, SandboxLimits

    ref = DatasetRef(path=str(data))
    walls, isolation = [], {}
    limits = SandboxLimits(
        timeout_s=30, namespaces=namespaces, prefork=prefork, preload_datasets=2 if preload else 0
    )
    with LocalSandbox(limits) as sandbox:
        for _ in range(repeats + (1 if prefork else 0)):
            started = time.perf_counter()
            outcome = sandbox.run_detailed(TRIVIAL, ref)
            walls.append(time.perf_counter() - started)
            if not outcome.investigation.success:
                raise RuntimeError(f"trivial investigation failed: {outcome.investigation.error}")
            isolation = outcome.isolation
    first = walls.pop(0) if prefork else None
    walls.sort()
    return {
        "median_s": round(statistics.median(walls), 3),
        "p90_s": round(walls[min(len(walls) - 1, int(0.9 * len(walls)))], 3),
        "min_s": round(walls[0], 3),
        "first_s": round(first, 3) if first is not None else None,
        "runs": repeats,
        "isolation": isolation,
    }


def _bench_issues(columns: list[str]) -> list[Any]:
    """Twenty investigations of the kinds the detectors raise, over the benchmark file's columns."""
    from iterate.contracts import Evidence, Issue

    def issue(n: int, type_: str, stats: dict[str, Any]) -> Issue:
        return Issue(
            id=f"bench-{n:02d}-{type_}",
            type=type_,
            severity="low",
            description="benchmark",
            affectedColumns=[],
            suggestedAction="-",
            category="quick_fixes",
            affectedRows=None,
            evidence=Evidence(affectedCells=0, affectedRows=0, affectedShare=0.0, stats=stats),
        )

    pick = {name: name for name in columns}
    specs: list[tuple[str, dict[str, Any]]] = [
        ("duplicate_rows", {"columns": columns}),
        ("near_duplicate_rows", {"columns": [c for c in columns if c not in ("order_id",)]}),
    ]
    for name in columns[:6]:
        specs.append(("missing_values", {"column": pick[name], "markers": ["", "n/a", "null", "none", "-"]}))
    regexes = {"zip": r"\d{5}", "order_date": r"\d{4}-\d{2}-\d{2}", "state": r"[A-Z]{2}", "quantity": r"\d+"}
    for name, regex in regexes.items():
        if name in pick:
            specs.append(("format_violation", {"column": name, "expected_regex": regex}))
    for name in ("amount", "unit_price", "quantity"):
        if name in pick:
            specs.append(("numeric_outlier", {"column": name, "low": 0.0, "high": 1000.0}))
    if "category" in pick:
        specs.append(
            ("inconsistent_category", {"column": "category", "bad_values": ["Electronis", "Clothng"]})
        )
    if "city" in pick and "state" in pick:
        specs.append(("dependency_violation", {"lhs": ["city"], "rhs": "state", "min_support": 3}))
    for name in columns:
        if len(specs) >= 20:
            break
        specs.append(("constant_column", {"column": name}))
    return [issue(n, t, s) for n, (t, s) in enumerate(specs[:20])]


def _cpu_now() -> tuple[float, float]:
    """CPU seconds of this process (all threads) and of its waited-for children (the zygote, once closed)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def throughput(
    data: Path, columns: list[str], rows: int, *, workers: int, preload: bool = True
) -> dict[str, Any]:
    """Twenty offline investigations of the 1M-row file, `workers` sandboxes at a time.

    `preload`: with the dataset zygote (the default), else every investigation loads its own frame.
    CPU is summed over this process, the zygote (reaped when the sandbox closes) and what the sandbox's
    processes report: each investigation's handler and runner, and the dataset zygote when it stops.
    """
    from iterate.agents.offline.investigation import OfflineInvestigationAgent
    from iterate.contracts import DatasetProfile, DuplicateStats
    from iterate.investigate import investigate_all
    from iterate.ports import DatasetRef
    from iterate.sandbox import LocalSandbox, SandboxLimits

    profile = DatasetProfile(
        name=data.stem,
        rowCount=rows,
        columnCount=len(columns),
        contentHash="bench",
        nullMarker="",
        columns=[],
        duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
    )
    issues = _bench_issues(columns)
    own_before, children_before = _cpu_now()
    started = time.perf_counter()
    with LocalSandbox(SandboxLimits(timeout_s=120, preload_datasets=2 if preload else 0)) as sandbox:
        out = investigate_all(
            issues,
            agent=OfflineInvestigationAgent(),
            sandbox=sandbox,
            data=DatasetRef(path=str(data)),
            profile=profile,
            workers=workers,
            max_attempts=1,
        )
        wall = time.perf_counter() - started
    own_after, children_after = _cpu_now()
    stats = sandbox.stats()
    cpu = {
        "caller_s": round(own_after - own_before, 2),
        "zygote_s": round(children_after - children_before, 2),
        "investigations_s": round(stats.get("job_cpu_s", 0.0), 2),
        "dataset_zygote_s": round(stats.get("dataset_zygote_cpu_s", 0.0), 2),
    }
    times = sorted((i.investigation.execution_time_ms or 0) / 1000 for i in out if i.investigation)
    failed = [
        (i.id, i.investigation.stopped, i.investigation.error)
        for i in out
        if i.investigation and not i.investigation.success
    ]
    return {
        "investigations": len(out),
        "succeeded": len(out) - len(failed),
        "failed": failed[:5],
        "workers": workers,
        "preload": preload,
        "preloads": int(stats.get("preloads", 0)),
        "preloaded_runs": int(stats.get("preloaded_runs", 0)),
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(cpu.values()), 2),
        "cpu": cpu,
        "per_investigation_median_s": round(statistics.median(times), 2) if times else None,
        "per_investigation_max_s": round(times[-1], 2) if times else None,
        "investigations_per_min": round(60 * len(out) / wall, 1),
    }


def side_by_side(
    data: Path, columns: list[str], rows: int, *, workers: int, repeats: int = 1
) -> dict[str, Any]:
    """The 20 investigations without and with the dataset zygote, alternating; the best of each kept."""
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for i in range(repeats):
        order = ("without", "with") if i % 2 == 0 else ("with", "without")
        for label in order:
            runs[label].append(throughput(data, columns, rows, workers=workers, preload=label == "with"))
    return {label: min(results, key=lambda r: r["cpu_s"]) for label, results in runs.items()}


def _parquet_of(
    csv_path: Path, scratch: Path, *, head: int | None = None
) -> tuple[Path, list[str], int, float]:
    from iterate.io import read_table, write_parquet_text

    started = time.perf_counter()
    table = read_table(csv_path)
    if head is not None:
        import pyarrow as pa

        from iterate.table import Table

        sliced = table.to_arrow().slice(0, head)
        table = Table.from_arrow(
            pa.table(sliced), name=table.name, source=table.source, names=table.column_names
        )
    path = write_parquet_text(table, scratch / f"{csv_path.stem}-{head or 'all'}.parquet")
    return path, table.column_names, table.n_rows, time.perf_counter() - started


def _existing_parquet(path: Path) -> tuple[Path, list[str], int, None]:
    """An all-text Parquet written by iterate: its written column names and row count (nothing converted)."""
    import json

    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    kv = meta.metadata or {}
    schema = pq.read_schema(path)
    names = json.loads(kv[b"iterate.names"]) if b"iterate.names" in kv else schema.names
    return path, list(names), meta.num_rows, None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the 1M-row benchmark CSV")
    parser.add_argument("--repeats", type=int, default=10, help="trivial investigations for the overhead")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-throughput", action="store_true", help="skip the 20-investigation run")
    parser.add_argument(
        "--parquet",
        type=Path,
        help="an all-text Parquet of --file already written by iterate (e.g. an analyze run's data.parquet);"
        " only read, it saves converting the CSV",
    )
    parser.add_argument("--pairs", type=int, default=1, help="with/without dataset zygote runs, alternated")
    args = parser.parse_args(argv)
    if not args.file.exists():
        sys.path.insert(0, str(REPO / "scripts"))
        from gen_bench import write  # the benchmark generator (scripts/gen_bench.py)

        write(args.file, 1_000_000)
    results: dict[str, Any] = {"file": str(args.file), "target_overhead_s": OVERHEAD_TARGET_S}
    results["floor"] = _interpreter_floor()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch_dir:
        scratch = Path(scratch_dir)
        small, _, small_rows, _ = _parquet_of(args.file, scratch, head=1000)
        results["overhead_zygote"] = overhead(small, repeats=args.repeats, namespaces=None, prefork=True)
        results["overhead_fresh"] = overhead(small, repeats=args.repeats, namespaces=None, prefork=False)
        results["overhead_lambda_like"] = overhead(
            small, repeats=args.repeats, namespaces=False, prefork=False
        )
        results["overhead_rows"] = small_rows
        results["meets_overhead_target"] = results["overhead_zygote"]["median_s"] < OVERHEAD_TARGET_S
        if not args.no_throughput:
            if args.parquet is not None:
                big, columns, rows, convert_s = _existing_parquet(args.parquet)
            else:
                big, columns, rows, convert_s = _parquet_of(args.file, scratch)
            results["big_rows"] = rows
            results["csv_to_parquet_s"] = round(convert_s, 2) if convert_s is not None else None
            loaded = overhead(big, repeats=3, namespaces=None, prefork=True, preload=False)
            preloaded = overhead(big, repeats=3, namespaces=None, prefork=True, preload=True)
            results["load_in_sandbox_s"] = loaded["median_s"]
            results["preload_first_s"] = preloaded["first_s"]
            results["preloaded_trivial_s"] = preloaded["median_s"]
            results["side_by_side"] = sbs = side_by_side(
                big, columns, rows, workers=args.workers, repeats=max(1, args.pairs)
            )
            results["throughput"] = sbs["with"]
    _print(results)
    return results


def _print(r: dict[str, Any]) -> None:
    f = r["floor"]
    print("\nsandbox (scripts/bench_sandbox.py)")
    print(f"  {'':<58s}{'seconds':>9s}")
    print(f"  {'fresh python, start-up only':<58s}{f['python_start_s']:9.3f}")
    print(f"  {'fresh python + import pandas, pyarrow':<58s}{f['import_pandas_pyarrow_s']:9.3f}")
    rows = f"{r['overhead_rows']:,} rows"
    z = r["overhead_zygote"]
    print(
        f"  {'overhead, ' + rows + ', forked from the zygote (median)':<58s}{z['median_s']:9.3f}   p90 {z['p90_s']:.3f}"
    )
    print(f"  {'  first run, zygote start included':<58s}{z['first_s']:9.3f}")
    fresh, lam = r["overhead_fresh"], r["overhead_lambda_like"]
    print(
        f"  {'overhead, ' + rows + ', fresh process (median)':<58s}{fresh['median_s']:9.3f}   p90 {fresh['p90_s']:.3f}"
    )
    label = f"overhead, {rows}, fresh, no namespaces, as on Lambda"
    print(f"  {label:<58s}{lam['median_s']:9.3f}   p90 {lam['p90_s']:.3f}")
    verdict = "MET" if r["meets_overhead_target"] else "NOT MET"
    print(f"  -> overhead target < {r['target_overhead_s']:.1f} s locally: {verdict}")
    if "throughput" in r:
        if r["csv_to_parquet_s"] is not None:
            label = "1M-row file: CSV -> all-text Parquet (once per run)"
            print(f"  {label:<58s}{r['csv_to_parquet_s']:9.2f}")
        label = "1M-row file: trivial investigation, runner loads the frame"
        print(f"  {label:<58s}{r['load_in_sandbox_s']:9.2f}")
        label = "1M-row file: trivial investigation, dataset zygote, 1st"
        print(f"  {label:<58s}{r['preload_first_s']:9.2f}   (zygote start and load included)")
        label = "1M-row file: trivial investigation, dataset zygote, next"
        print(f"  {label:<58s}{r['preloaded_trivial_s']:9.2f}   (median)")
        sbs = r["side_by_side"]
        label = (
            f"1M-row file: {sbs['with']['investigations']} investigations, {sbs['with']['workers']} workers"
        )
        print(f"  {label:<49s}{'wall s':>9s}{'cpu s':>9s}   cpu = caller + zygote + runners + dataset zygote")
        for key, text in (
            ("without", "frame loaded by each investigation"),
            ("with", "frame loaded once (dataset zygote)"),
        ):
            t = sbs[key]
            c = t["cpu"]
            parts = " + ".join(
                f"{c[k]:.2f}" for k in ("caller_s", "zygote_s", "investigations_s", "dataset_zygote_s")
            )
            print(f"  {'  ' + text:<49s}{t['wall_s']:9.2f}{t['cpu_s']:9.2f}   {parts}")
            print(
                f"  {'    per investigation (median / max)':<49s}{t['per_investigation_median_s']:9.2f}"
                f"{t['per_investigation_max_s']:9.2f}   {t['succeeded']}/{t['investigations']} succeeded"
            )
        saved = sbs["without"]["cpu_s"] - sbs["with"]["cpu_s"]
        print(
            f"  -> the dataset zygote saves {saved:.2f} s of CPU over {sbs['with']['investigations']} investigations"
        )


if __name__ == "__main__":
    main()
