"""False alarms on the real tables of ../shared/realtables, each judged by a decision fitted without it: `make crossfit`.

    python scripts/crossfit.py [--folds 2] [--penalty P]

The training corpus (scripts/corpus.py) holds the shared real tables as null data, so the engine's own fit has
seen them and its false-alarm share on them is an in-fit number. Here the tables are split into folds (sorted by
name, dealt round-robin); for each fold the decision is refitted over the corpus without that fold's groups
(`calibrate.py --without`), and the fold's tables are run and judged against tests/realdata/verdicts_shared.toml
with that decision. The printed share is a held-out reading; issues no verdict covers are counted apart
(review them: they are new).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
OUT = REPO / "out" / "crossfit"


def main(argv: list[str] | None = None) -> int:
    import realdata_review as review

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument(
        "--penalty",
        default=None,
        help="the fit's penalty (default: the one make calibrate chose, read from fitted.json)",
    )
    ap.add_argument("--reuse", action="store_true", help="judge with the fits already in out/crossfit/")
    args = ap.parse_args(argv)
    if args.penalty is None:
        import json

        from calibrate import FITTED

        args.penalty = str(json.loads(FITTED.read_text())["fit"]["penalty"])
    files = sorted(review.SHARED.glob("*.csv"))
    verdicts = review.load_verdicts(review.VERDICTS_SHARED)
    OUT.mkdir(parents=True, exist_ok=True)
    totals: Counter[str] = Counter()
    print(f"{'table':<24}{'fold':>5}{'issues':>7}{'real':>6}{'def.':>6}{'false':>6}{'new':>5}")
    for k in range(args.folds):
        fold = files[k :: args.folds]
        fitted = OUT / f"fold{k}.json"
        if not (args.reuse and fitted.exists()):
            pattern = "^shared-(" + "|".join(re.escape(f.stem) for f in fold) + ")$"
            cmd = [sys.executable, str(REPO / "scripts" / "calibrate.py"), "--without", pattern]
            cmd += ["--penalties", args.penalty, "--fit-only", "--out", str(fitted)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        review.use_fitted(fitted)
        for path in fold:
            run = review.analyse(path)
            judged = verdicts.get("tables", {}).get(run.name, {}).get("issues", {})
            kinds = Counter(
                judged[i.id]["verdict"] if isinstance(judged.get(i.id), dict) else "new" for i in run.issues
            )
            kinds["issues"] = len(run.issues)
            totals.update(kinds)
            print(
                f"{run.name:<24}{k:>5}{kinds['issues']:>7}{kinds['real']:>6}{kinds['defensible']:>6}"
                f"{kinds['false_alarm']:>6}{kinds['new']:>5}",
                flush=True,
            )
    reviewed = totals["real"] + totals["defensible"] + totals["false_alarm"]
    print(
        f"held out: {totals['false_alarm']}/{reviewed} reviewed issues false alarms "
        f"({totals['false_alarm'] / max(reviewed, 1):.1%}); {totals['new']} issues without a verdict"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
