"""A batch of template proofs in one sandbox run, this checkout against another's, alternately:
`make bench-batch BASE=../baseline` (a `git worktree add ../baseline <commit>`).

Each measurement is a fresh process whose engine comes from PYTHONPATH=<checkout>/layers: it writes a
ROWS x COLS all-text dataset, warms the sandbox (zygote and dataset zygote) with one run, then times
`LocalSandbox.run_batch` of ITEMS template proofs (three template bodies, one column each) REPEAT times. Sides
alternate (A B B A ...); prints the median batch wall time and per-item cost of each side and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
import pyarrow as pa
from iterate.io import write_parquet_text
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.table import SourceInfo, Table

rows, cols, items, repeat = map(int, sys.argv[1:5])
names = [f"c{j}" for j in range(cols)]
data = {n: [("" if (i * 7 + j) % 13 == 0 else f"v{i % 97}") for i in range(rows)] for j, n in enumerate(names)}
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "data.parquet"
    write_parquet_text(Table.from_arrow(pa.table(data), name="t", source=SourceInfo(path=str(path), format="csv")), path)
    ref = DatasetRef(path=str(path))
    bodies = ["result = {'affected_rows': int((df[PARAMS['column']] == '').sum())}",
              "result = {'affected_rows': int(df[PARAMS['column']].str.startswith('v1').sum())}",
              "result = {'affected_rows': int(df[PARAMS['column']].str.len().gt(2).sum())}"]
    codes = ["import json\\nPARAMS = json.loads('{\\"column\\": \\"%s\\"}')\\n%s" % (names[k % cols], bodies[k % 3])
             for k in range(items)]
    columns = [(names[k % cols],) for k in range(items)]
    with LocalSandbox(SandboxLimits(timeout_s=60)) as sandbox:
        sandbox.run("result = {'affected_rows': len(df)}", ref)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            done = sandbox.run_batch(codes, ref, columns=columns)
            times.append(time.perf_counter() - started)
            assert all(r.success for r in done), [r.error for r in done if not r.success][:3]
print(json.dumps({"times": times}))
"""


def one(layers: Path, args: argparse.Namespace) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(layers))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(args.rows), str(args.cols), str(args.items), str(args.repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1])["times"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=10)
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2, help="fresh processes per side")
    args = parser.parse_args()
    sides = {"this checkout": REPO / "layers", f"base ({args.base})": args.base.resolve() / "layers"}
    found: dict[str, list[float]] = {name: [] for name in sides}
    order = [name for k in range(args.runs) for name in (list(sides) if k % 2 == 0 else list(sides)[::-1])]
    for name in order:
        found[name] += one(sides[name], args)
    print(f"\nbatch of {args.items} proofs, {args.rows:,} rows x {args.cols} columns; {len(order)} processes")
    print(f"{'side':<40} {'median s':>9} {'ms/item':>8} {'batches':>8}")
    medians = {}
    for name, times in found.items():
        medians[name] = statistics.median(times)
        print(f"{name:<40} {medians[name]:>9.3f} {1000 * medians[name] / args.items:>8.1f} {len(times):>8}")
    this, base = medians.values()
    print(f"this / base: {this / base:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
