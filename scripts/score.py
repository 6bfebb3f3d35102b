"""Score detection on the benchmark pairs beside the repo: `make score` prints the study and the check split.

    python scripts/score.py [--split study|check|all] [--reference] [--keep DIR]

Each pair's dirty.csv runs through detection in-process, exactly as `iterate analyze` runs it (read_table →
detect → flags_of, the rows and columns of flags.csv), and ../shared/eval/score.py scores the flags (strict: every
cell that differs from clean.csv; semantic: formatting-only differences left out).

- study (../shared/datasets): per pair precision, recall, F1 and the counts, strict and semantic.
- check (../shared/datasets-check): **for measuring only**. Per pair the aggregate precision, recall and F1 and
  nothing else: no rows, no flags, no per-column scores are printed or kept (the flags are written to a
  temporary directory and deleted), so nobody tunes on them by accident.
- `--reference`: the same pairs flagged by scripts/heuristic.py, a plain pandas detector, side by side.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SPLITS = {"study": SHARED / "datasets", "check": SHARED / "datasets-check"}


def official() -> Any:
    """../shared/eval/score.py, imported as a module (the scorer every figure comes from)."""
    spec = importlib.util.spec_from_file_location("shared_score", SHARED / "eval" / "score.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"score: cannot load {SHARED / 'eval' / 'score.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_flags(dirty: Path, target: Path, reference: bool) -> float:
    """Flag one dirty file into `target` (flags.csv's columns): by Iterate's detection, or the reference."""
    started = time.perf_counter()
    if reference:
        sys.path.insert(0, str(REPO / "scripts"))
        import heuristic

        heuristic.main([str(dirty), str(target)])
        return time.perf_counter() - started
    import csv

    from iterate.detect import detect
    from iterate.io import read_table
    from iterate.issues import flags_of

    table = read_table(dirty, name=dirty.parent.name)
    flags = flags_of(detect(table).findings, table)
    with target.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "column", "issue_id"])
        w.writerows(zip(flags.rows.tolist(), flags.columns, flags.issue_ids, strict=True))
    return time.perf_counter() - started


def score_pair(pair: Path, split: str, keep: Path | None, reference: bool) -> dict[str, Any]:
    scorer = official()
    with tempfile.TemporaryDirectory() as tmp:
        where = keep / split / pair.name if keep is not None and split == "study" else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        flags = where / ("reference.csv" if reference else "flags.csv")
        seconds = write_flags(pair / "dirty.csv", flags, reference)
        out: dict[str, Any] = {"name": pair.name, "split": split, "seconds": seconds}
        for mode in ("strict", "semantic"):
            res = scorer.score(
                str(pair / "dirty.csv"), str(pair / "clean.csv"), str(flags), semantic=mode == "semantic"
            )
            keys = ("precision", "recall", "f1") + (("tp", "fp", "fn") if split == "study" else ())
            out[mode] = {k: res[k] for k in keys}
    return out


def pairs(split: str) -> list[Path]:
    root = SPLITS[split]
    return sorted(p for p in root.iterdir() if (p / "dirty.csv").exists()) if root.exists() else []


def table(results: list[dict[str, Any]], split: str, label: str) -> None:
    mine = [r for r in results if r["split"] == split]
    if not mine:
        return
    counts = split == "study"
    print(f"\n{label}")
    head = f"{'dataset':<16}{'mode':<10}{'precision':>10}{'recall':>8}{'F1':>8}"
    print(head + (f"{'TP':>8}{'FP':>7}{'FN':>7}" if counts else "") + f"{'s':>6}")
    for r in mine:
        for mode in ("strict", "semantic"):
            m = r[mode]
            line = f"{r['name']:<16}{mode:<10}{m['precision']:>10.3f}{m['recall']:>8.3f}{m['f1']:>8.3f}"
            if counts:
                line += f"{m['tp']:>8}{m['fp']:>7}{m['fn']:>7}"
            print(line + f"{r['seconds']:>6.1f}")
    for mode in ("strict", "semantic"):
        f1s = [r[mode]["f1"] for r in mine]
        p = sum(r[mode]["precision"] for r in mine) / len(mine)
        rec = sum(r[mode]["recall"] for r in mine) / len(mine)
        low = min(mine, key=lambda r: r[mode]["f1"])
        print(
            f"{'mean':<16}{mode:<10}{p:>10.3f}{rec:>8.3f}{sum(f1s) / len(f1s):>8.3f}"
            f"   (lowest F1: {low['name']} {low[mode]['f1']:.3f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("study", "check", "all"), default="all")
    parser.add_argument("--reference", action="store_true", help="also score the plain pandas heuristic")
    parser.add_argument("--keep", type=Path, help="keep the study pairs' flags.csv under this directory")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    splits = ("study", "check") if args.split == "all" else (args.split,)
    jobs = [(p, s) for s in splits for p in pairs(s)]
    if not jobs:
        print(f"score: no dirty/clean pairs under {SHARED}", file=sys.stderr)
        return 1
    runs = [False, True] if args.reference else [False]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {
            (ref, p.name, s): pool.submit(score_pair, p, s, args.keep, ref) for ref in runs for p, s in jobs
        }
        results = {key: fut.result() for key, fut in futures.items()}
    for ref in runs:
        who = "a plain pandas heuristic (scripts/heuristic.py)" if ref else "Iterate"
        mine = [results[(ref, p.name, s)] for p, s in jobs]
        table(mine, "study", f"study pairs (../shared/datasets): {who}")
        table(mine, "check", f"check split (../shared/datasets-check, measured only, aggregates): {who}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
