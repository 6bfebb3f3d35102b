"""Make a dirty/clean pair from a clean table at a chosen error rate (evaluation only, like score_columns.py).

    python scripts/inject_errors.py CLEAN.csv OUT_DIR --rate 0.25 [--seed 1]

Writes OUT_DIR/clean.csv (a copy) and OUT_DIR/dirty.csv where about `rate` of each column's filled cells are
corrupted by one generic error each: a typo (a character replaced, dropped, doubled or two swapped), a lost
value (written as the clean table writes one: its own placeholder, else blank), a value from another row of
the column, or, for numbers, noise (a factor of 10 or a large shift). It is a stress test of how detection
holds as errors grow common (the dev benchmarks have 1-12%); the product never reads it.
"""

from __future__ import annotations

import argparse
import re
import string
from pathlib import Path

import numpy as np
import pandas as pd

NUMBER = re.compile(r"-?\d+(\.\d+)?")
PLACEHOLDERS = {"", "n/a", "na", "null", "none", "empty", "?", "-", "nan"}


def typo(value: str, rng: np.random.Generator) -> str:
    if len(value) < 2:
        return value + rng.choice(list(string.ascii_lowercase))
    i = int(rng.integers(len(value) - 1))
    kind = rng.integers(4)
    if kind == 0:
        pool = string.digits if value[i].isdigit() else string.ascii_lowercase
        return value[:i] + str(rng.choice(list(pool))) + value[i + 1 :]
    if kind == 1:
        return value[:i] + value[i + 1 :]
    if kind == 2:
        return value[:i] + value[i] + value[i:]
    return value[:i] + value[i + 1] + value[i] + value[i + 2 :]


def noise(value: str, rng: np.random.Generator) -> str:
    x = float(value)
    y = x * 10 if rng.random() < 0.5 else x + (abs(x) + 1) * float(rng.choice([-3, 3]))
    return str(int(y)) if "." not in value else f"{y:.{len(value.split('.')[1])}f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("clean")
    ap.add_argument("out")
    ap.add_argument("--rate", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    clean = pd.read_csv(args.clean, dtype=str, keep_default_na=False)
    dirty = clean.copy()
    # A lost value is written the way the clean table writes one (its own placeholder, else blank).
    tokens = [t for t in clean.to_numpy().ravel().tolist() if str(t).strip().lower() in PLACEHOLDERS]
    missing = max(set(tokens), key=tokens.count) if tokens else ""
    for name in clean.columns[1:] if clean.columns[0].lower() in ("index", "id", "tid") else clean.columns:
        values = clean[name].to_numpy()
        filled = np.flatnonzero(values != "")
        if filled.size < 20 or len(set(values)) < 2:
            continue
        numeric = all(NUMBER.fullmatch(v) for v in values[filled][:200])
        chosen = rng.choice(filled, round(args.rate * filled.size), replace=False)
        out = values.copy()
        for r in chosen:
            kind = rng.integers(4)
            v = values[r]
            if kind == 0:
                new = typo(v, rng)
            elif kind == 1:
                new = missing
            elif kind == 2:
                new = values[filled[int(rng.integers(filled.size))]]
            else:
                new = noise(v, rng) if numeric else typo(v, rng)
            out[r] = new
        dirty[name] = out
    target = Path(args.out)
    target.mkdir(parents=True, exist_ok=True)
    clean.to_csv(target / "clean.csv", index=False)
    dirty.to_csv(target / "dirty.csv", index=False)
    share = (dirty.values != clean.values).mean()
    print(f"{target / 'dirty.csv'}: {share:.1%} of cells differ from clean")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
