"""Per-column and per-issue breakdown of flags.csv against a benchmark's clean file (evaluation only).

    python scripts/score_columns.py DATASET_DIR OUT_DIR [--fp N] [--fn N]

Reads DATASET_DIR/dirty.csv, DATASET_DIR/clean.csv and OUT_DIR/flags.csv; prints TP/FP/FN per column and per
issue id, and a few false positives and misses with their values. Detection code never reads clean files:
this script is for people tuning it, and for nothing the product runs.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("out")
    ap.add_argument("--fp", type=int, default=0, help="false positives to show per column")
    ap.add_argument("--fn", type=int, default=0, help="misses to show per column")
    args = ap.parse_args()
    d = pd.read_csv(Path(args.dataset) / "dirty.csv", dtype=str, keep_default_na=False)
    c = pd.read_csv(Path(args.dataset) / "clean.csv", dtype=str, keep_default_na=False)
    truth = d.values != c.values
    flags = pd.read_csv(
        Path(args.out) / "flags.csv", dtype={"row": int, "column": str}, keep_default_na=False
    )
    names = list(d.columns)
    pos = {n: i for i, n in enumerate(names)}
    flagged = np.zeros_like(truth)
    by_issue: dict[str, Counter] = {}
    for r, col, iid in zip(flags["row"], flags["column"], flags["issue_id"], strict=True):
        j = pos[col]
        flagged[r, j] = True
        by_issue.setdefault(iid, Counter())["tp" if truth[r, j] else "fp"] += 1
    print(f"{'column':<24}{'errors':>8}{'TP':>7}{'FP':>7}{'FN':>7}{'F1':>7}")
    for j, n in enumerate(names):
        tp = int((truth[:, j] & flagged[:, j]).sum())
        fp = int((~truth[:, j] & flagged[:, j]).sum())
        fn = int((truth[:, j] & ~flagged[:, j]).sum())
        f1 = 2 * tp / max(1, 2 * tp + fp + fn)
        print(f"{n[:23]:<24}{int(truth[:, j].sum()):>8}{tp:>7}{fp:>7}{fn:>7}{f1:>7.3f}")
        for r in np.flatnonzero(~truth[:, j] & flagged[:, j])[: args.fp]:
            print(f"    FP row {r}: {d.iat[r, j]!r}")
        for r in np.flatnonzero(truth[:, j] & ~flagged[:, j])[: args.fn]:
            print(f"    FN row {r}: {d.iat[r, j]!r} (clean {c.iat[r, j]!r})")
    tp, fp, fn = int((truth & flagged).sum()), int((~truth & flagged).sum()), int((truth & ~flagged).sum())
    print(f"{'ALL':<24}{int(truth.sum()):>8}{tp:>7}{fp:>7}{fn:>7}{2 * tp / max(1, 2 * tp + fp + fn):>7.3f}")
    print()
    for iid, cnt in sorted(by_issue.items()):
        print(f"  {iid:<50} tp {cnt['tp']:>6}  fp {cnt['fp']:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
