"""Fit the decision over the training corpus and check it by leaving tables out: `make calibrate`.

    python scripts/calibrate.py [--corpus out/corpus] [--rebuild] [--no-write]

1. The corpus (scripts/corpus.py) is built if absent (`--rebuild`: built anew).
2. Every table of it runs through detection once; the evidence of each cell a detector points at is kept as
   the decision's features (iterate.detect.model), with the cell's truth (dirty != clean). Kept in
   out/calibrate/evidence/, keyed by the table's bytes and the engine's code: a re-run only re-reads.
3. The decision is fitted: the weights that maximise the mean table score (F1 on a table with wrong cells; on
   a table without any, 1 minus the flagged share of its cells over 0.2%, floored at 0, weighing half a table;
   on a real table as it is, whose right columns a reader judged, 1 minus its flagged cells over 2, weighing a
   whole table), smoothed so it has a gradient, pulled toward the unfitted decision (the evidence's own reading) by a penalty chosen by leaving
   groups out.
4. Leave-one-out: each group (a base table and everything made from it) is scored by a decision fitted
   without it. That table, not the in-fit one, says whether a change generalises.
5. fitted.json (layers/iterate/detect/) gets the decision, the corpus's summary and both scores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
FITTED = REPO / "layers" / "iterate" / "detect" / "fitted.json"
CACHE = REPO / "out" / "calibrate" / "evidence"
# What a false alarm costs against a miss (a product decision, not a detector's threshold): a real table as it
# is, whose right columns a reader judged, loses its score over REAL_ROOM flagged cells and weighs as much as a
# table with wrong cells: each flagged cell there is an issue a user reads and finds wrong.
REAL_ROOM = 2.0
REAL_WEIGHT = 1.0
NULL_SHARE = 0.002  # a table without wrong cells scores 0 once this share of its cells is flagged
FORMAT = 4  # of the cached evidence files: raised when what they hold changes


@dataclass
class TableEvidence:
    name: str
    group: str
    kind: str
    X: np.ndarray  # candidate cells x features (float32)
    y: np.ndarray  # truth per candidate cell
    eligible: np.ndarray  # the evidence points to a wrong value (only such cells can be flagged)
    n_truth: int  # wrong cells in the scored columns, with or without evidence
    n_cells: int  # scored cells
    cells: np.ndarray  # (row, column) of each candidate cell
    planted: dict[tuple[int, int], str]  # injected tables: the kind of each planted error, by cell


def code_hash() -> str:
    """The engine's code that makes evidence (every module of the imported engine but the fitted decision)."""
    import iterate

    h = hashlib.sha256(str(FORMAT).encode())
    for path in sorted(Path(iterate.__file__).parent.rglob("*.py")):
        if path.name == "model.py" and path.parent.name == "detect":
            continue
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def extract(directory: str, code: str) -> str:
    """Run detection on one corpus table and keep its candidate cells' features (cached); an error is
    returned as text (a table that breaks detection is a bug to fix, named with its table)."""
    try:
        return _extract(directory, code)
    except Exception as e:  # reported by the caller, with the table's name
        return f"ERROR {Path(directory).name}: {type(e).__name__}: {e}"


def _extract(directory: str, code: str) -> str:
    from iterate.detect import detect
    from iterate.detect.model import FEATURES
    from iterate.io import read_table

    d = Path(directory)
    key = hashlib.sha256((d / "dirty.csv").read_bytes() + (d / "clean.csv").read_bytes()).hexdigest()[:16]
    out = CACHE / f"{d.name}-{key}-{code}.npz"
    if out.exists():
        return str(out)
    meta = json.loads((d / "meta.json").read_text())
    dirty = pd.read_csv(d / "dirty.csv", dtype=str, keep_default_na=False)
    clean = pd.read_csv(d / "clean.csv", dtype=str, keep_default_na=False)
    truth = dirty.to_numpy() != clean.to_numpy()
    # Cells scored: those of the columns not left out; and outside the study pairs (whose truth is published),
    # not the cells the base itself leaves blank: whether such a blank is the record's gap or its convention
    # nobody can say cell by cell, and the generators did not put it there.
    scored = np.broadcast_to(
        np.array([c not in set(meta["ignore"]) for c in dirty.columns]), truth.shape
    ).copy()
    if meta["kind"] != "study":
        scored &= np.char.strip(clean.to_numpy().astype(str)) != ""
    table = read_table(d / "dirty.csv", name="dirty")
    detection = detect(table, keep_evidence=True)
    ev = detection.decision.evidence if detection.decision is not None else None
    n_cols = truth.shape[1]
    if ev is None:
        X = np.zeros((0, len(FEATURES)), dtype=np.float32)
        y = eligible = np.zeros(0, dtype=bool)
        cells = np.zeros((0, 2), dtype=np.int32)
    else:
        rows, cols = ev.ucid // ev.n_cols, ev.ucid % ev.n_cols
        keep = scored[rows, cols] if ev.n_cols == n_cols else np.ones(rows.size, dtype=bool)
        X = np.zeros((int(keep.sum()), len(FEATURES)), dtype=np.float32)
        for j, name in enumerate(FEATURES):
            if name in ev.features:
                X[:, j] = ev.features[name][keep]
        y = truth[rows[keep], cols[keep]]
        eligible = ev.eligible[keep]
        cells = np.stack([rows[keep], cols[keep]], axis=1).astype(np.int32)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp.npz")  # several runs may extract the same table at once
    np.savez_compressed(
        tmp,
        X=X,
        y=y,
        eligible=eligible,
        cells=cells,
        n_truth=int(truth[scored].sum()),
        n_cells=int(scored.sum()),
        meta=json.dumps(meta),
    )
    os.replace(tmp, out)
    return str(out)


def load(path: str, corpus: Path) -> TableEvidence:
    z = np.load(path)
    meta = json.loads(str(z["meta"]))
    planted: dict[tuple[int, int], str] = {}
    source = corpus / meta["name"] / "planted.csv"
    if source.exists():
        header = pd.read_csv(corpus / meta["name"] / "clean.csv", dtype=str, nrows=0).columns.tolist()
        for r, c, k in pd.read_csv(source, dtype={"column": str}).itertuples(index=False):
            planted[(int(r), header.index(c))] = str(k)
    return TableEvidence(
        meta["name"],
        meta["group"],
        meta["kind"],
        z["X"],
        z["y"],
        z["eligible"],
        int(z["n_truth"]),
        int(z["n_cells"]),
        z["cells"],
        planted,
    )


def gather_evidence(corpus: Path, workers: int) -> list[TableEvidence]:
    dirs = sorted(str(p) for p in corpus.iterdir() if (p / "meta.json").exists())
    code = code_hash()
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        paths = list(pool.map(extract, dirs, [code] * len(dirs)))
    print(
        f"evidence: {len(paths)} tables in {time.perf_counter() - started:.0f} s (cache {CACHE})",
        file=sys.stderr,
    )
    failed = [p for p in paths if p.startswith("ERROR ")]
    if failed:
        raise SystemExit("detection failed on corpus tables:\n" + "\n".join(failed))
    return [load(p, corpus) for p in paths]


# ---------------------------------------------------------------------------------------------- the fit


def null_room(t: TableEvidence) -> float:
    """Flagged cells a table without wrong cells takes to lose its score: 0.2% of its cells (the issue's
    bound for a clean file), but only REAL_ROOM on a real table as it is, whose right columns a reader
    judged: there every flagged cell is an issue a user reads and finds wrong."""
    if is_real(t):
        return REAL_ROOM
    return max(NULL_SHARE * t.n_cells, 1.0)


def is_real(t: TableEvidence) -> bool:
    """A real table as it is: its right columns were judged by a reader (tests/realdata verdicts)."""
    return t.kind == "clean" and t.group.startswith(("real-", "shared-"))


def table_weight(t: TableEvidence, null_weight: float) -> float:
    """A table's weight in the objective (and in choosing the penalty): 1, a null table `null_weight`, a real
    table as it is REAL_WEIGHT."""
    if is_real(t):
        return REAL_WEIGHT
    return null_weight if t.n_truth == 0 else 1.0


def table_score(flagged: np.ndarray, t: TableEvidence) -> tuple[float, int, int, int]:
    """(score, tp, fp, fn) of one table: F1 where it has wrong cells, else the null-data score."""
    tp = int((flagged & t.y).sum())
    fp = int((flagged & ~t.y).sum())
    fn = t.n_truth - tp
    if t.n_truth == 0:
        return max(0.0, 1.0 - fp / null_room(t)), tp, fp, fn
    return (2 * tp / max(2 * tp + fp + fn, 1)), tp, fp, fn


FOLDS = (
    12  # leave-out folds of groups: each table is scored by a fit without its group (0: one fit per group)
)
MIN_POSITIVES = 20  # wrong cells a feature must be seen on to be fitted (else it keeps the unfitted weight)
NULL_WEIGHT = 0.5  # a table without wrong cells weighs half a table with some in the fit's objective
PENALTIES = (
    0.1,
    0.01,
    0.001,
)  # pull toward the unfitted decision tried (the fit picks one by leaving groups out)


def unfitted_weights(n_features: int) -> np.ndarray:
    """The decision before any fit, as weights (bias first): the evidence's own reading at even odds."""
    from iterate.detect.model import FEATURES

    w = np.zeros(n_features + 1)
    w[1 + FEATURES.index("base")] = 1.0
    return w


def fit(
    tables: list[TableEvidence],
    penalty: float,
    warm: np.ndarray | None = None,
    null_weight: float | None = None,
) -> np.ndarray:
    """Weights (bias first) that maximise the mean table score, smoothed: each cell flagged with the
    logistic probability of its score, a table's F1 (or null score) computed from those expectations, the
    tables averaged (a null table at NULL_WEIGHT), minus `penalty` x the squared distance of the weights
    (on standardised features) from the unfitted decision. L-BFGS on the exact gradient; the cut is 0."""
    from scipy.optimize import minimize

    X = np.concatenate([t.X[t.eligible] for t in tables]).astype(np.float64)
    y = np.concatenate([t.y[t.eligible] for t in tables]).astype(np.float64)
    tid = np.concatenate([np.full(int(t.eligible.sum()), k) for k, t in enumerate(tables)])
    truth = np.array([t.n_truth for t in tables], dtype=np.float64)
    room = np.array([null_room(t) for t in tables])
    null = truth == 0
    weight = np.array([table_weight(t, NULL_WEIGHT if null_weight is None else null_weight) for t in tables])
    weight /= weight.sum()
    mean, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    Z = (X - mean) / sd
    w0 = unfitted_weights(X.shape[1])
    start = np.concatenate([[w0[0] + w0[1:] @ mean], w0[1:] * sd])
    # Where to begin the search (`warm`: weights fitted on a larger corpus); the pull is always to `start`.
    begin = start if warm is None else np.concatenate([[warm[0] + warm[1:] @ mean], warm[1:] * sd])
    n = len(tables)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-np.clip(theta[0] + Z @ theta[1:], -30, 30)))
        flagged = np.bincount(tid, p, n)
        hits = np.bincount(tid, p * y, n)
        denom = np.maximum(flagged + truth, 1e-9)
        f1 = np.where(null, 0.0, 2 * hits / denom)
        kept = np.exp(-flagged / room)  # a null table's smooth score: 1 with no flag, falling as flags grow
        score = np.where(null, kept, f1)
        d_p = np.where(null[tid], -kept[tid] / room[tid], (2 * y - f1[tid]) / denom[tid])
        d_s = weight[tid] * d_p * p * (1 - p)
        pull = theta[1:] - start[1:]
        value = -float(weight @ score) + penalty * float(pull @ pull)
        grad = -np.concatenate([[d_s.sum()], Z.T @ d_s]) + np.concatenate([[0.0], 2 * penalty * pull])
        return value, grad

    # A feature too few wrong cells of the corpus carry (a detector whose kind of error no generator plants,
    # such as encoding damage: 2 of its 123 cells) can only be fitted against: it keeps the unfitted reading
    # instead of a weight learned from false alarms alone. Ten events per parameter, the usual floor for a
    # logistic fit, and a detector has two (has:, llr:).
    unseen = (X != 0).any(axis=0) & ((X[y == 1] != 0).sum(axis=0) < MIN_POSITIVES)
    bounds = [(None, None)] + [
        (start[1 + j], start[1 + j]) if unseen[j] else (None, None) for j in range(X.shape[1])
    ]
    begin = np.where(np.concatenate([[False], unseen]), start, begin)
    theta = minimize(objective, begin, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 500}).x
    coef = theta[1:] / sd
    return np.concatenate([[theta[0] - coef @ mean], coef])


def logits(weights: np.ndarray, t: TableEvidence) -> np.ndarray:
    return weights[0] + t.X @ weights[1:]


def flagged_by(weights: np.ndarray, t: TableEvidence) -> np.ndarray:
    return (logits(weights, t) >= 0) & t.eligible


def leave_out(
    tables: list[TableEvidence], penalty: float, null_weight: float | None = None, folds: int = 0
) -> dict[str, np.ndarray]:
    """Each group flagged by a decision fitted without it: the flagged mask of each table's candidates.
    `folds` > 0: the groups are dealt into that many folds (sorted by name, round-robin) and each fold is
    left out at once (every table is still scored by a fit that never saw its group, at a fraction of the
    fits); 0: one fit per group."""
    out: dict[str, np.ndarray] = {}
    everything = fit(tables, penalty, null_weight=null_weight)
    groups = sorted({t.group for t in tables})
    held = [groups[k::folds] for k in range(folds)] if folds > 0 else [[g] for g in groups]
    for fold in held:
        left = set(fold)
        weights = fit(
            [t for t in tables if t.group not in left], penalty, warm=everything, null_weight=null_weight
        )
        for t in tables:
            if t.group in left:
                out[t.name] = flagged_by(weights, t)
    return out


def by_planted_kind(tables: list[TableEvidence], flagged: dict[str, np.ndarray]) -> dict[str, list[int]]:
    """Per kind of planted error: [wrong cells, with evidence pointing wrong, flagged]."""
    out: dict[str, list[int]] = {}
    for t in tables:
        if not t.planted:
            continue
        at = {(int(r), int(c)): i for i, (r, c) in enumerate(t.cells.tolist())}
        for cell, kind in t.planted.items():
            row = out.setdefault(f"{t.name.rsplit('-', 1)[1]}:{kind}", [0, 0, 0])
            i = at.get(cell)
            row[0] += 1
            if i is not None and t.eligible[i]:
                row[1] += 1
                row[2] += int(flagged[t.name][i])
    return dict(sorted(out.items()))


def summarise(
    scores: dict[str, tuple[float, int, int, int]], tables: list[TableEvidence]
) -> dict[str, float]:
    by_kind: dict[str, list[float]] = {}
    for t in tables:
        by_kind.setdefault(t.kind, []).append(scores[t.name][0])
    return {k: float(np.mean(v)) for k, v in sorted(by_kind.items())}


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record_of(weights: np.ndarray, penalty: float, null_weight: float, tables: list[TableEvidence]) -> dict:
    """What fitted.json holds: the decision, and what it was fitted on."""
    from iterate.detect.model import FEATURES

    kinds = sorted({t.kind for t in tables})
    return {
        "decision": {
            "version": 1,
            "fitted": f"make calibrate at {git_commit()}",
            "weights": {n: float(w) for n, w in zip(FEATURES, weights[1:], strict=True) if abs(w) > 1e-9},
            "bias": float(weights[0]),
            "threshold": 0.5,
        },
        "fit": {
            "penalty": penalty,
            "null_weight": null_weight,
            "tables": len(tables),
            "groups": len({t.group for t in tables}),
            "kinds": {k: sum(t.kind == k for t in tables) for k in kinds},
        },
    }


def main(argv: list[str] | None = None) -> int:
    from iterate.detect.model import FEATURES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO / "out" / "corpus")
    ap.add_argument("--rebuild", action="store_true", help="build the corpus anew")
    ap.add_argument("--no-write", action="store_true", help="print the scores; leave fitted.json as it is")
    ap.add_argument(
        "--out", type=Path, help="write the fit here instead of layers/iterate/detect/fitted.json"
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--penalties", help=f"comma-separated penalties to try (default {PENALTIES})")
    ap.add_argument(
        "--null-weight", type=float, default=NULL_WEIGHT, help="weight of a table without wrong cells"
    )
    ap.add_argument(
        "--without",
        help="leave the groups whose name matches this regular expression out of everything (to measure them "
        "later with the fit written by --out, e.g. `make crossfit`)",
    )
    ap.add_argument(
        "--fit-only",
        action="store_true",
        help="fit with the (first) penalty given and write it; no leaving out",
    )
    ap.add_argument(
        "--folds",
        type=int,
        default=FOLDS,
        help=f"groups left out at once, dealt into this many folds (default {FOLDS}; 0: one group at a time)",
    )
    args = ap.parse_args(argv)
    if args.rebuild or not args.corpus.exists():
        import corpus

        if corpus.main(["--out", str(args.corpus)]) != 0:
            return 1
    tables = gather_evidence(args.corpus, args.workers)
    if args.without:
        left = re.compile(args.without)
        tables = [t for t in tables if not left.search(t.group)]
        print(f"fit: without {args.without!r}: {len(tables)} tables", file=sys.stderr)
    started = time.perf_counter()
    # The regularisation strength is itself chosen by leaving groups out (mean over every table).
    # How hard the weights are pulled toward the unfitted decision is itself chosen by leaving groups out
    # (the mean score over every table, nulls at their weight).
    penalties = tuple(float(p) for p in args.penalties.split(",")) if args.penalties else PENALTIES
    if args.fit_only:
        weights = fit(tables, penalties[0], null_weight=args.null_weight)
        target = args.out if args.out is not None else FITTED
        target.write_text(
            json.dumps(record_of(weights, penalties[0], args.null_weight, tables), indent=1) + "\n"
        )
        print(
            f"fit: penalty {penalties[0]} in {time.perf_counter() - started:.0f} s; wrote {target}",
            file=sys.stderr,
        )
        return 0
    trials = {c: leave_out(tables, c, args.null_weight, args.folds) for c in penalties}
    scored = {c: {t.name: table_score(trials[c][t.name], t) for t in tables} for c in penalties}

    def objective_of(c: float) -> float:
        return float(
            np.average(
                [scored[c][t.name][0] for t in tables],
                weights=[table_weight(t, args.null_weight) for t in tables],
            )
        )

    c_best = max(penalties, key=objective_of)
    loo = scored[c_best]
    weights = fit(tables, c_best, null_weight=args.null_weight)
    in_fit = {t.name: table_score(flagged_by(weights, t), t) for t in tables}
    unfitted = {t.name: table_score(flagged_by(unfitted_weights(len(FEATURES)), t), t) for t in tables}
    print(f"fit: penalty {c_best} in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    print(f"{'study pair':<22}{'unfitted':>9}{'in-fit':>8}{'left out':>10}{'TP':>7}{'FP':>6}{'FN':>6}")
    for t in sorted((t for t in tables if t.kind == "study"), key=lambda t: t.name):
        s, tp, fp, fn = loo[t.name]
        print(
            f"{t.name:<22}{unfitted[t.name][0]:>9.3f}{in_fit[t.name][0]:>8.3f}{s:>10.3f}{tp:>7}{fp:>6}{fn:>6}"
        )
    fit_kind, loo_kind, raw_kind = (
        summarise(in_fit, tables),
        summarise(loo, tables),
        summarise(unfitted, tables),
    )
    print(f"\n{'mean by kind':<22}{'unfitted':>9}{'in-fit':>8}{'left out':>10}{'tables':>8}")
    for k in fit_kind:
        n = sum(t.kind == k for t in tables)
        print(f"{k:<22}{raw_kind[k]:>9.3f}{fit_kind[k]:>8.3f}{loo_kind[k]:>10.3f}{n:>8}")
    print("(study / injected: mean F1; clean / shuffled: 1 - flagged share over 0.2%, floored at 0)")
    print(f"\n{'planted error':<24}{'cells':>8}{'evidence':>10}{'flagged (left out)':>20}")
    for kind, (n, seen, hit) in by_planted_kind(tables, trials[c_best]).items():
        print(f"{kind:<24}{n:>8}{seen / n:>10.1%}{hit / n:>20.1%}")
    if args.no_write:
        return 0
    target = args.out if args.out is not None else FITTED
    record = record_of(weights, c_best, args.null_weight, tables)
    record["fit"].update(
        in_fit=fit_kind,
        leave_one_group_out=loo_kind,
        study_leave_one_out={t.name: round(loo[t.name][0], 4) for t in tables if t.kind == "study"},
    )
    target.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
