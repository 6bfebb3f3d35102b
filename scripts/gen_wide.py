"""A wide benchmark table: 2,000 rows x 500 columns of mixed types, about 1% errors per column (seeded).

    python scripts/gen_wide.py OUT.csv [--rows 2000] [--cols 500] [--seed 5]

Ten kinds of column repeat across the width: ids, measures, categories, dates, flags, codes, prices,
ratings, e-mails and free text. Each column gets about 1% of its cells broken the way such a column breaks
(a typo, a blank, a value in another format, a far-off number). Used by `make bench` to time detection on
wide tables, where cost must follow cells, not columns x columns.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
CATEGORIES = ["Retail", "Wholesale", "Online", "Partner", "Direct", "Export"]
DOMAINS = ["mail.net", "acme.co", "example.org", "post.com"]


def column(kind: str, n: int, rng: np.random.Generator) -> list[str]:
    if kind == "id":
        return [f"{k}" for k in rng.permutation(np.arange(100_000, 100_000 + n))]
    if kind == "measure":
        return [f"{v:.2f}" for v in rng.normal(50, 12, n)]
    if kind == "category":
        return list(rng.choice(CATEGORIES, n, p=[0.35, 0.25, 0.15, 0.1, 0.1, 0.05]))
    if kind == "date":
        days = rng.integers(0, 730, n)
        return [str(np.datetime64("2023-01-01") + int(d)) for d in days]
    if kind == "flag":
        return list(rng.choice(["true", "false"], n, p=[0.3, 0.7]))
    if kind == "code":
        return [f"{rng.choice(['AB', 'CD', 'EF'])}-{k:04d}" for k in rng.integers(0, 10_000, n)]
    if kind == "price":
        return [f"{v:.2f}" for v in rng.lognormal(3, 0.6, n)]
    if kind == "rating":
        return [str(v) for v in rng.integers(1, 6, n)]
    if kind == "email":
        return [f"{rng.choice(WORDS)}.{k}@{rng.choice(DOMAINS)}" for k in rng.integers(0, 100_000, n)]
    return [" ".join(rng.choice(WORDS, rng.integers(3, 9))) for _ in range(n)]


def corrupt(kind: str, value: str, rng: np.random.Generator) -> str:
    """One error of the kind this column gets."""
    roll = rng.random()
    if roll < 0.25:
        return ""
    if kind in {"measure", "price"}:
        return str(float(value) * 1000) if roll < 0.6 else value + "x"
    if kind in {"id", "rating"}:
        return value + value if roll < 0.6 else "n/a"
    if kind == "date":
        y, m, d = value.split("-")
        return f"{d}/{m}/{y}"
    if kind in {"category", "flag", "code", "email", "text"} and len(value) > 2:
        i = int(rng.integers(0, len(value) - 1))
        return value[:i] + "x" + value[i + 1 :]
    return "??"


KINDS = ["id", "measure", "category", "date", "flag", "code", "price", "rating", "email", "text"]


def generate(rows: int, cols: int, seed: int) -> tuple[list[str], list[list[str]], int]:
    rng = np.random.default_rng(seed)
    names, data, errors = [], [], 0
    for c in range(cols):
        kind = KINDS[c % len(KINDS)]
        values = column(kind, rows, rng)
        for r in rng.choice(rows, max(1, rows // 100), replace=False):
            values[int(r)] = corrupt(kind, values[int(r)], rng)
            errors += 1
        names.append(f"{kind}_{c // len(KINDS)}")
        data.append(values)
    return names, [list(r) for r in zip(*data, strict=True)], errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--cols", type=int, default=500)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    names, rows, errors = generate(args.rows, args.cols, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        writer.writerows(rows)
    print(f"{args.out}: {args.rows:,} rows x {args.cols} columns, {errors:,} cells broken")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
