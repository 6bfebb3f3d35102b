"""`make engine-equivalence`: the engine path against the single pass on the study pairs and the bench file.

Per file, the cells both paths flag (same issue id); then per issue type over every file, what the engine path
flags that the single pass does not and what it misses; then ../shared/eval/score.py's F1 for both paths.
Only ../shared/datasets (the study pairs) is read.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

from iterate.engine.equivalence import by_type, compare
from iterate.settings import Settings

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO.parent / "shared" / "datasets"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _f1(pair: Path, flags: list[tuple[int, str, str]]) -> float:
    from score import official

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flags.csv"
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["row", "column", "issue_id"])
            w.writerows(flags)
        return float(official().score(str(pair / "dirty.csv"), str(pair / "clean.csv"), str(path))["f1"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="default: every study pair's dirty.csv")
    parser.add_argument(
        "--sample-rows", type=int, default=None, help="ITERATE_ENGINE_SAMPLE_ROWS for this run"
    )
    args = parser.parse_args(argv)
    files = args.files or sorted(p / "dirty.csv" for p in STUDY.iterdir() if (p / "dirty.csv").exists())
    settings = Settings.from_env()
    if args.sample_rows:
        settings = settings.model_copy(update={"engine_sample_rows": args.sample_rows})
    results = []
    print(
        f"{'file':<16}{'rows':>9}{'sample':>9}{'same detection':>16}{'single':>9}{'engine':>9}{'both':>9}{'exact issues':>14}{'F1 single':>11}{'F1 engine':>11}"
    )
    for f in files:
        r = compare(f, settings)
        results.append(r)
        exact = sum(d.exact for d in r.issues)
        print(
            f"{r.name:<16}{r.rows:>9,}{r.sample_rows:>9,}{r.same_detection!s:>16}{r.single:>9,}{r.engine:>9,}"
            f"{r.common:>9,}{f'{exact}/{len(r.issues)}':>14}"
            + (
                f"{_f1(f.parent, r.single_flags):>11.3f}{_f1(f.parent, r.engine_flags):>11.3f}"
                if (f.parent / "clean.csv").exists()
                else ""
            )
        )
    print(f"\n{'issue type':<28}{'single':>9}{'engine':>9}{'both':>9}{'missed':>9}{'extra':>9}  exact")
    for kind, (a, b, both) in by_type(results).items():
        print(f"{kind:<28}{a:>9,}{b:>9,}{both:>9,}{a - both:>9,}{b - both:>9,}  {a == b == both}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
