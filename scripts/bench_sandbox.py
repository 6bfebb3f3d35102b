"""Sandbox benchmark: overhead per investigation on 1,000 rows, and a 20-investigation run on the 1M-row file."""

from __future__ import annotations

import argparse
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


def overhead(data: Path, *, repeats: int, namespaces: bool | None, prefork: bool) -> dict[str, Any]:
    """Start-to-result wall time of a trivial investigation (the sandbox's own cost), `repeats` times.

    With `prefork`, the first run also starts the zygote: it is reported apart (`first_s`) and left
    out of the median, which is what every further investigation of a run pays.
    """
    from iterate.ports import DatasetRef
    from iterate.sandbox import LocalSandbox, SandboxLimits

    ref = DatasetRef(path=str(data))
    walls, isolation = [], {}
    with LocalSandbox(SandboxLimits(timeout_s=30, namespaces=namespaces, prefork=prefork)) as sandbox:
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


def throughput(data: Path, columns: list[str], rows: int, *, workers: int) -> dict[str, Any]:
    """Twenty offline investigations of the 1M-row file, `workers` sandboxes at a time."""
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
    started = time.perf_counter()
    out = investigate_all(
        issues,
        agent=OfflineInvestigationAgent(),
        sandbox=LocalSandbox(SandboxLimits(timeout_s=120)),
        data=DatasetRef(path=str(data)),
        profile=profile,
        workers=workers,
        max_attempts=1,
    )
    wall = time.perf_counter() - started
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
        "wall_s": round(wall, 2),
        "per_investigation_median_s": round(statistics.median(times), 2) if times else None,
        "per_investigation_max_s": round(times[-1], 2) if times else None,
        "investigations_per_min": round(60 * len(out) / wall, 1),
    }


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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the 1M-row benchmark CSV")
    parser.add_argument("--repeats", type=int, default=10, help="trivial investigations for the overhead")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-throughput", action="store_true", help="skip the 20-investigation run")
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
            big, columns, rows, convert_s = _parquet_of(args.file, scratch)
            results["big_rows"] = rows
            results["csv_to_parquet_s"] = round(convert_s, 2)
            results["load_in_sandbox_s"] = overhead(big, repeats=3, namespaces=None, prefork=True)["median_s"]
            results["throughput"] = throughput(big, columns, rows, workers=args.workers)
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
        t = r["throughput"]
        print(f"  {'1M-row file: CSV -> all-text Parquet (once per run)':<58s}{r['csv_to_parquet_s']:9.2f}")
        print(f"  {'1M-row file: trivial investigation, start to result':<58s}{r['load_in_sandbox_s']:9.2f}")
        label = f"1M-row file: {t['investigations']} investigations, {t['workers']} workers (wall)"
        print(f"  {label:<58s}{t['wall_s']:9.2f}   {t['investigations_per_min']} / min")
        print(
            f"  {'  per investigation (median / max)':<58s}{t['per_investigation_median_s']:9.2f}"
            f"   max {t['per_investigation_max_s']:.2f};  {t['succeeded']}/{t['investigations']} succeeded"
        )


if __name__ == "__main__":
    main()
