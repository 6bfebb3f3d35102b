"""Make a dirty/clean pair of a table merged from several sources (evaluation only, like inject_errors.py).

    python scripts/gen_sources.py OUT_DIR [--flights 120] [--sources 20] [--seed 4]

Flights reported by many sources of varied accuracy (0.55-0.99), each source covering about 70% of the
flights and writing times its own way (7:10 a.m., 7:10am, Dec 1 7:10 a.m.); a wrong report is the time
shifted by minutes to hours, and a few reports are blank. The clean file has every report's true time in
one format. It stands in for the conflicting-sources benchmarks this project does not have (issue 10:
"conflicting sources"), so figures on it are a check of the mechanism, not a benchmark score.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def clock(minutes: int, style: int) -> str:
    h, m = divmod(int(minutes) % 1440, 60)
    half, h12 = ("a.m." if h < 12 else "p.m."), (h % 12 or 12)
    return [f"{h12}:{m:02d} {half}", f"{h12}:{m:02d}{half[0]}m", f"Dec 1 {h12}:{m:02d} {half}"][style]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--flights", type=int, default=120)
    ap.add_argument("--sources", type=int, default=20)
    ap.add_argument("--seed", type=int, default=4)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    accuracy = rng.uniform(0.55, 0.99, args.sources)
    style = rng.choice(3, args.sources, p=[0.7, 0.2, 0.1])
    columns = [
        "tuple_id",
        "src",
        "flight",
        "sched_dep_time",
        "act_dep_time",
        "sched_arr_time",
        "act_arr_time",
    ]
    dirty, clean = [], []
    for f in range(args.flights):
        route = f"{rng.choice(['ORD', 'MIA', 'JFK', 'LAX'])}-{rng.choice(['BOS', 'SFO', 'DFW', 'ATL'])}"
        name = f"AA-{1000 + f}-{route}"
        dep = int(rng.integers(300, 1300))
        times = [dep, dep + int(rng.integers(-5, 40)), dep + int(rng.integers(60, 300))]
        times.append(times[2] + int(rng.integers(-10, 40)))
        for s in range(args.sources):
            if rng.random() < 0.3:
                continue
            row, truth = [], []
            for t in times:
                truth.append(clock(t, 0))
                if rng.random() > accuracy[s]:
                    row.append(clock(t + int(rng.choice([-60, -15, -5, 5, 10, 30, 120])), style[s]))
                elif rng.random() < 0.03:
                    row.append("")
                else:
                    row.append(clock(t, style[s]))
            dirty.append([len(dirty), f"src{s}", name, *row])
            clean.append([len(clean), f"src{s}", name, *truth])
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(dirty, columns=columns).to_csv(args.out / "dirty.csv", index=False)
    pd.DataFrame(clean, columns=columns).to_csv(args.out / "clean.csv", index=False)
    d = pd.read_csv(args.out / "dirty.csv", dtype=str, keep_default_na=False)
    c = pd.read_csv(args.out / "clean.csv", dtype=str, keep_default_na=False)
    print(
        f"{args.out / 'dirty.csv'}: {len(d):,} rows, {(d.values != c.values).mean():.1%} of cells differ from clean"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
