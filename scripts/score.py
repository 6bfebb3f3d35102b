"""Score flags.csv on the dirty/clean benchmark datasets beside the repo: `make score` (prints a table).

`--stress 0.05,0.25` (`make score-stress`) scores instead pairs made from each benchmark's clean file with
generic errors injected at those rates (scripts/inject_errors.py, into out/stress/): how detection holds as
errors grow common and where the clean data's own conventions (an optional column, a placeholder) meet noise;
plus one generated table merged from several sources (scripts/gen_sources.py), the conflicting-sources kind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def stressed(datasets: list[Path], rates: list[float]) -> list[Path]:
    """A dirty/clean pair per benchmark and rate, made from the benchmark's clean file (seed 1)."""
    made = []
    for ds in datasets:
        for rate in rates:
            target = REPO / "out" / "stress" / f"{ds.name}-{rate:g}"
            inject = [sys.executable, str(REPO / "scripts" / "inject_errors.py"), str(ds / "clean.csv")]
            subprocess.run(
                [*inject, str(target), "--rate", str(rate)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            made.append(target)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stress", help="comma-separated error rates: score injected pairs instead")
    args = parser.parse_args(argv)
    datasets = sorted(p for p in (SHARED / "datasets").iterdir() if (p / "dirty.csv").exists())
    if not datasets:
        print(f"no datasets under {SHARED / 'datasets'}", file=sys.stderr)
        return 1
    if args.stress:
        datasets = stressed(datasets, [float(r) for r in args.stress.split(",")])
        # And a table merged from several sources of varied accuracy (scripts/gen_sources.py, seed 4): the
        # conflicting-sources kind the seven do not have.
        merged = REPO / "out" / "stress" / "sources-sim"
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "gen_sources.py"), str(merged)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        datasets.append(merged)
    rows = []
    for ds in datasets:
        out = (ds / "out") if args.stress else REPO / "out" / "score" / ds.name
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "iterate", "analyze", str(ds / "dirty.csv"), "--out", str(out), "--quiet"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - started
        for mode in ("strict", "semantic"):
            cmd = [
                sys.executable,
                str(SHARED / "eval" / "score.py"),
                str(ds / "dirty.csv"),
                str(ds / "clean.csv"),
            ]
            cmd += [str(out / "flags.csv"), "--json"] + (["--semantic"] if mode == "semantic" else [])
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            rows.append(
                (
                    ds.name,
                    mode,
                    res["precision"],
                    res["recall"],
                    res["f1"],
                    res["tp"],
                    res["fp"],
                    res["fn"],
                    seconds,
                )
            )
    print(
        f"{'dataset':<14}{'mode':<10}{'precision':>10}{'recall':>8}{'F1':>8}{'TP':>7}{'FP':>6}{'FN':>6}{'analyze s':>11}"
    )
    for name, mode, p, r, f1, tp, fp, fn, s in rows:
        print(f"{name:<14}{mode:<10}{p:>10.3f}{r:>8.3f}{f1:>8.3f}{tp:>7}{fp:>6}{fn:>6}{s:>11.1f}")
    for mode in ("strict", "semantic"):
        mine = [row for row in rows if row[1] == mode]
        means = [sum(row[k] for row in mine) / len(mine) for k in (2, 3, 4)]
        lowest = min(mine, key=lambda row: row[4])
        print(
            f"{'mean':<14}{mode:<10}{means[0]:>10.3f}{means[1]:>8.3f}{means[2]:>8.3f}"
            f"   (lowest F1: {lowest[0]} {lowest[4]:.3f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
