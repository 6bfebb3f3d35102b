"""`make bench-large`: `iterate analyze` on the engine path against DuckDB's own SUMMARIZE of the same file.

    python scripts/bench_large.py [--rows 50000000] [--dir out/bench-large]

The CSV (20 columns of orders with planted errors from scripts/gen_bench.py's generator, written a million
rows at a time, each block's ids its own; text quoted as pyarrow's writer quotes it) is written once and cached
under --dir. Then, each in a fresh process
watched from outside (wall time, peak PSS summed over the process and every process it starts):
DuckDB's `SUMMARIZE` of the file, and a whole offline `iterate analyze` on the engine path, every proof run.
Targets (issue 35): peak <= 4 GB, wall <= 3x SUMMARIZE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import _WRAP, _child  # scripts/ is not a package: found beside this file
from gen_bench import generate

REPO = Path(__file__).resolve().parents[1]
BLOCK = 1_000_000
SEEDS = 5
TARGET_PEAK_MB = 4096.0
TARGET_RATIO = 3.0

_SUMMARIZE = """
import sys, duckdb
con = duckdb.connect()
rows = con.execute("SUMMARIZE SELECT * FROM read_csv(?)", [sys.argv[1]]).fetchall()
print(len(rows))
"""


def _tagged(table: pa.Table, block: int) -> pa.Table:
    """A block with its ids made its own: ORD-bbb... and Cbbb... (the same width in every block)."""
    tag = f"{block:03d}"
    for name, prefix in (("order_id", "ORD-"), ("customer_id", "C")):
        i = table.column_names.index(name)
        col = pc.replace_substring(
            table.column(i), pattern=prefix, replacement=prefix + tag, max_replacements=1
        )
        table = table.set_column(i, name, col)
    return table


def ensure_file(rows: int, directory: Path) -> Path:
    """The cached CSV of `rows` rows, written a block of a million rows at a time (never whole in memory).

    Generating a block takes 5-15 s here, so SEEDS distinct blocks are generated and cycled, each copy with ids
    of its own (orders and customers): every value the detectors judge recurs once per SEEDS blocks."""
    import pyarrow.csv as pcsv

    path = directory / f"large_{rows}.csv"
    done = path.with_suffix(".done")
    if path.exists() and done.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    bases: list[pa.Table] = []
    with path.open("wb") as fh:
        for block, start in enumerate(range(0, rows, BLOCK)):
            n = min(BLOCK, rows - start)
            if len(bases) < SEEDS:
                bases.append(generate(BLOCK, 1000 + block)[0])
            table = _tagged(bases[block % SEEDS].slice(0, n), block)
            options = pcsv.WriteOptions(include_header=block == 0, quoting_style="needed")
            pcsv.write_csv(table, fh, write_options=options)
    done.write_text(json.dumps({"rows": rows, "bytes": path.stat().st_size}))
    print(
        f"wrote {path} ({rows:,} rows, {path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t:.0f} s"
    )
    return path


def _proofs(out: Path) -> tuple[int, int]:
    analysis = json.loads((out / "analysis.json").read_text())
    tried = [i for i in analysis["issues"] if i.get("investigation")]
    return sum(1 for i in tried if i["investigation"].get("success")), len(tried)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--dir", type=Path, default=REPO / "out" / "bench-large")
    parser.add_argument(
        "--base",
        type=Path,
        default=None,
        help="another checkout (a `git worktree add` of the code to compare with): its engine runs too, in the "
        "same run, between SUMMARIZE and this checkout's",
    )
    args = parser.parse_args(argv)
    path = ensure_file(args.rows, args.dir)
    size = path.stat().st_size
    out = args.dir / f"run_{args.rows}"
    summarize = _child(_WRAP, sys.executable, "-c", _SUMMARIZE, str(path), timeout=7200)
    os.environ.update(ITERATE_ENGINE="always", ITERATE_MAX_FILE_BYTES=str(max(size + 1, 5_000_000_000)))
    base = None
    if args.base is not None:
        # The other checkout's engine first on sys.path (PYTHONPATH holds this one's: see bench._child).
        entry = f"import sys; sys.path.insert(0, {str(args.base.resolve() / 'layers')!r}); from iterate.cli import entry; entry()"
        base_out = args.dir / f"run_{args.rows}_base"
        base = _child(
            _WRAP, sys.executable, "-c", entry, "analyze", str(path), "--out", str(base_out), timeout=7200
        )
        if base["rc"] != 0:
            print(base["stderr"], file=sys.stderr)
            return 1
    iterate = str(Path(sys.executable).with_name("iterate"))
    run = _child(_WRAP, iterate, "analyze", str(path), "--out", str(out), timeout=7200)
    if run["rc"] != 0:
        print(run["stderr"], file=sys.stderr)
        return 1
    ok, tried = _proofs(out)
    timings = json.loads((out / "analysis.json").read_text())["run"]["timingsMs"]
    ratio = run["wall_s"] / summarize["wall_s"]
    peak = max(run["tree_pss_mb"] or 0, run["peak_mb"])
    print(f"\nbench-large: {args.rows:,} rows x 20 columns, {size / 1e9:.2f} GB ({path})")
    print(f"{'':<34}{'wall s':>9}{'CPU s':>9}{'peak MB':>10}{'ratio':>8}")
    print(
        f"{'DuckDB SUMMARIZE (whole file)':<34}{summarize['wall_s']:>9.1f}{summarize['cpu_s']:>9.1f}"
        f"{summarize['tree_pss_mb'] or 0:>10.0f}"
    )
    if base is not None:
        base_peak = max(base["tree_pss_mb"] or 0, base["peak_mb"])
        print(
            f"{'iterate analyze, ' + args.base.name:<34}{base['wall_s']:>9.1f}{base['cpu_s']:>9.1f}{base_peak:>10.0f}"
            f"{base['wall_s'] / summarize['wall_s']:>7.2f}x"
        )
    print(
        f"{'iterate analyze (engine path)':<34}{run['wall_s']:>9.1f}{run['cpu_s']:>9.1f}{peak:>10.0f}{ratio:>7.2f}x"
    )
    print(
        f"ratio to SUMMARIZE: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'})"
    )
    print(f"peak over all processes: {peak:,.0f} MB (target <= {TARGET_PEAK_MB:,.0f}: "
          f"{'met' if peak <= TARGET_PEAK_MB else 'NOT met'})")  # fmt: skip
    print(f"proofs: {ok} of {tried} succeeded")
    steps = ("engine_summaries", "engine_detect", "engine_flags", "engine_rest_wait", "investigate", "report")
    print("run steps (s): " + ", ".join(f"{k} {timings[k] / 1000:.1f}" for k in steps if k in timings))
    record = json.loads((out / "steps" / "profile.json").read_text())["detail"]
    cpu = record.get("engineStatementsCpuS", {})
    print(
        "engine statements (wall/CPU s): "
        + ", ".join(f"{k} {v:.1f}/{cpu.get(k, 0.0):.1f}" for k, v in record["engineStatementsS"].items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
