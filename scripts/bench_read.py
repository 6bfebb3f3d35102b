"""Micro benchmark: iterate.io.read_table against a bare pyarrow.csv.read_csv of the same generated CSV."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from iterate.io import read_table
from iterate.table import Table


def generate(path: Path, rows: int, cols: int, seed: int = 0) -> None:
    """Realistic text: ids, decimals, labels with blanks and 'N/A', zip codes with leading zeros, dates."""
    rng = np.random.default_rng(seed)
    columns: dict[str, pa.Array] = {}
    for j in range(cols):
        kind = j % 5
        if kind == 0:
            values = rng.integers(0, 10**6, rows).astype(str)
        elif kind == 1:
            values = np.char.mod("%.2f", rng.random(rows) * 1000)
        elif kind == 2:
            values = np.array(["alpha", "beta", "gamma delta", "N/A", "", "01907"])[rng.integers(0, 6, rows)]
        elif kind == 3:
            values = np.char.add(np.char.add("2024-0", rng.integers(1, 10, rows).astype(str)), "-15")
        else:
            values = np.char.add("cust_", rng.integers(0, 50_000, rows).astype(str))
        columns[f"col_{j}"] = pa.array(values)
    pacsv.write_csv(pa.table(columns), path, write_options=pacsv.WriteOptions(quoting_style="none"))


def interleaved(repeats: int, *fns: Callable[[], object]) -> list[list[tuple[float, float]]]:
    """(wall, CPU) seconds per run; candidates take turns so a noisy machine slows them alike.

    CPU time (all threads of this process) barely moves with other processes' load; wall time does.
    """
    times: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[i].append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--file", type=Path, help="benchmark this CSV instead of a generated one")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or Path(tmp) / "bench.csv"
        if args.file is None:
            generate(path, args.rows, args.cols)
        size_mb = path.stat().st_size / 1e6
        table = read_table(path)  # warm-up: imports, page cache
        text = table.to_arrow()
        bare, ours, wrap = interleaved(
            args.repeats,
            lambda: pacsv.read_csv(path),
            lambda: read_table(path),
            lambda: Table.from_arrow(text, name="t", source=table.source),
        )

        def med(runs: list[tuple[float, float]], k: int) -> float:
            return statistics.median(r[k] for r in runs)

        print(f"file: {path.name} {size_mb:.1f} MB, {table.n_rows} rows x {len(table.columns)} columns")
        print(f"{'':34} {'wall (median)':>14} {'CPU (median)':>13}")
        for label, runs in (
            ("bare pyarrow.csv.read_csv", bare),
            ("iterate.io.read_table", ours),
            ("  of which Table.from_arrow", wrap),
        ):
            print(f"{label:34} {med(runs, 0):13.3f}s {med(runs, 1):12.3f}s")
        for k, kind in ((0, "wall"), (1, "CPU")):
            reading = med(ours, k) - med(wrap, k)
            print(
                f"{kind:>4}: read_table / bare = {med(ours, k) / med(bare, k):.2f}x;"
                f" without Table.from_arrow = {reading / med(bare, k):.2f}x"
            )


if __name__ == "__main__":
    main()
