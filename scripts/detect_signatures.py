"""A signature of what detection finds in each file (every finding's rows, cells, evidence, scores, stats and
description), to tell whether a change kept detection exactly as it was, or whether a run depends on
Python's string hashing.

    python scripts/detect_signatures.py FILE ... > before.txt     (then again after a change, and diff)
    python scripts/detect_signatures.py --seeds 0,1,2 FILE ...    (each file under each PYTHONHASHSEED; exit 1
                                                                    when a file's signature changes with it)
    python scripts/detect_signatures.py --spill FILE ...          (the table moved to mapped files first, as a
                                                                    large one is: Table.spill)

The signature is a hash: it says whether, not where. scripts/same_outputs.py compares two whole runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys

import numpy as np


def signature(path: str, *, spill: bool = False) -> str:
    """The hash of the detection's findings on `path`, in their order; with `spill`, detected on the table
    moved to mapped files (Table.spill) whatever its size."""
    from iterate.detect import detect
    from iterate.io import ReadLimits, read_table
    from iterate.settings import Settings

    table = read_table(path, limits=ReadLimits.from_settings(Settings.from_env()))
    if spill:
        import tempfile

        table.spill(tempfile.gettempdir())
    digest = hashlib.sha256()
    for f in detect(table).findings:
        record = (
            f.key,
            f.type,
            f.flag,
            f.rows.tolist(),
            f.cols.tolist(),
            None if f.llr is None else np.round(f.llr, 9).tolist(),
            None if f.score is None else np.round(f.score, 9).tolist(),
            sorted((k, repr(v)) for k, v in f.stats.items()),
            f.description,
        )
        digest.update(repr(record).encode())
    return digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument(
        "--seeds", help="comma-separated PYTHONHASHSEED values: run each in its own interpreter"
    )
    parser.add_argument("--spill", action="store_true", help="detect on the table moved to mapped files")
    args = parser.parse_args(argv)
    if not args.seeds:
        for path in args.files:
            print(f"{path} {signature(path, spill=args.spill)}", flush=True)
        return 0
    runs = {}
    for seed in args.seeds.split(","):
        env = {**os.environ, "PYTHONHASHSEED": seed.strip()}
        done = subprocess.run(
            [sys.executable, __file__, *args.files], env=env, capture_output=True, text=True, check=True
        )
        runs[seed] = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    changed = 0
    for path in args.files:
        seen = {seed: found[path] for seed, found in runs.items()}
        same = len(set(seen.values())) == 1
        changed += not same
        shown = next(iter(seen.values())) if same else ", ".join(f"seed {s}: {h}" for s, h in seen.items())
        print(f"{path} {'same' if same else 'CHANGES WITH THE SEED'} {shown}", flush=True)
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
