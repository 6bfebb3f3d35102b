"""A plain pandas error detector (blanks, shapes, z-scores, typos, dependencies), the reference Iterate must beat.

    python scripts/heuristic.py DIRTY.csv FLAGS.csv

Issue 32 measured "a 20-line pandas heuristic" above Iterate on held-back benchmarks. This is such a
heuristic, written from its one-line description with textbook thresholds (no tuning on any table): `make
score` scores it beside Iterate on the same pairs, so the gap is measured side by side, not remembered.
"""

from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path

import numpy as np
import pandas as pd

MISSING = {"", "n/a", "na", "null", "none", "nan", "?", "-", "--", "unknown"}


def shape(v: str) -> str:
    return re.sub(r"([9a])\1+", r"\1", re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", v)))


def flags(df: pd.DataFrame) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    n = len(df)
    for j, c in enumerate(df.columns):
        s = df[c]
        blank = s.str.strip().str.lower().isin(MISSING)
        if blank.mean() < 0.5:  # blanks in a mostly filled column
            out |= {(i, j) for i in np.flatnonzero(blank)}
        filled = s[~blank]
        shapes = filled.map(shape)
        share = shapes.map(shapes.value_counts(normalize=True))
        if len(share) and share.max() >= 0.8:  # a rare shape in a column with a dominant one
            out |= {(i, j) for i in share.index[share < 0.01]}
        x = pd.to_numeric(filled, errors="coerce")
        if x.notna().mean() > 0.9 and x.std() > 0:  # z-scores in a numeric column
            z = (x - x.mean()).abs() / x.std()
            out |= {(i, j) for i in z.index[z > 3]}
        counts = filled.value_counts()
        frequent = [v for v, k in counts.items() if k >= 5][:200]
        for v, k in counts.items():  # a rare value close to a frequent one
            if k <= 2 and x.notna().mean() <= 0.9 and difflib.get_close_matches(v, frequent, 1, 0.85):
                out |= {(i, j) for i in filled.index[filled == v]}
    for a in df.columns:  # a -> b dependencies: cells off their group's majority
        groups = df.groupby(a)[a].transform("size")
        if not (2 <= n / max(df[a].nunique(), 1) <= n / 2):
            continue
        for j, b in enumerate(df.columns):
            if a == b:
                continue
            mode = df.groupby(a)[b].transform(lambda s: s.mode().iloc[0])
            agree = df[b] == mode
            if agree.mean() >= 0.9:
                out |= {(i, j) for i in np.flatnonzero(~agree & (groups >= 3))}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirty", type=Path)
    ap.add_argument("flags", type=Path)
    args = ap.parse_args(argv)
    df = pd.read_csv(args.dirty, dtype=str, keep_default_na=False)
    found = sorted(flags(df))
    pd.DataFrame([(r, df.columns[c]) for r, c in found], columns=["row", "column"]).to_csv(
        args.flags, index=False
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
