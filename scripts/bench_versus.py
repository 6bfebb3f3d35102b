"""`iterate analyze` with this checkout's engine against another checkout's, alternately, on the same files:
`make bench-versus BASE=../baseline` (a `git worktree add ../baseline <commit>` of the code to compare with).

Each run is a fresh process (`python -m iterate analyze FILE --out DIR --quiet`, the offline default) whose
engine comes from PYTHONPATH=<checkout>/layers; runs alternate (A B B A ...) so a machine's drift reaches both
sides. Prints, per file and side, the wall time and the peak RSS of the largest process of each run, and the
ratio of the medians. The input files default to the `make bench` files (generated if absent).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILES = [REPO / "bench" / "data" / "bench_1m.csv", REPO / "bench" / "data" / "wide.csv"]


def ensure(path: Path) -> None:
    """The `make bench` inputs, generated the way scripts/bench.py does when they are absent."""
    if path.exists():
        return
    sys.path.insert(0, str(REPO / "scripts"))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name == "wide.csv":
        import csv

        from gen_wide import generate

        names, rows, _ = generate(2000, 500, 5)
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(names)
            writer.writerows(rows)
    else:
        from gen_bench import write

        write(path, 1_000_000)


def one_run(layers: Path, data: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB of the run's largest process) of one analyze run with `layers` on the path.

    wait4 gives this run's own resource usage (the child and the descendants it waited for), not the maximum
    over every child this script has started."""
    env = dict(os.environ, PYTHONPATH=str(layers), PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "iterate", "analyze", str(data), "--out", out, "--quiet"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 3):  # 3: the default gate found issues at its level
            err.seek(0)
            raise SystemExit(f"analyze failed with {layers}: {err.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (its layers/ is used)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side per file")
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES)
    args = parser.parse_args(argv)
    sides = {"this": REPO / "layers", "base": args.base.resolve() / "layers"}
    print(f"this: {sides['this']}\nbase: {sides['base']}\nload average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'file':<16}{'side':<6}{'wall s (each run)':<34}{'median':>8}{'peak RSS MiB':>14}")
    for data in args.files:
        ensure(data)
        walls: dict[str, list[float]] = {s: [] for s in sides}
        rss: dict[str, float] = dict.fromkeys(sides, 0.0)
        order = ["this", "base", "base", "this"] * args.runs
        for side in order[: 2 * args.runs]:
            wall, peak = one_run(sides[side], data)
            walls[side].append(wall)
            rss[side] = max(rss[side], peak)
        for side in sides:
            each = ", ".join(f"{w:.1f}" for w in walls[side])
            print(
                f"{data.name:<16}{side:<6}{each:<34}{statistics.median(walls[side]):>8.1f}{rss[side]:>14.0f}"
            )
        ratio = statistics.median(walls["this"]) / statistics.median(walls["base"])
        print(f"{data.name:<16}this / base, median wall: {ratio:.2f}x")
    print("(peak RSS: the largest single process of a side's runs, not the process tree)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
