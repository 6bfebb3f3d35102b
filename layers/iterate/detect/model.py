"""The fitted decision: what turns a cell's evidence into a flag, with every weight read from fitted.json.

Detectors give evidence per cell (log-likelihood ratios, `Finding.llr`). The decision reads, per cell with
evidence, a handful of features of that evidence (below) and flags the cell when the logistic score of their
weighted sum reaches the fitted threshold. The weights, the bias and the threshold are not set by hand: `make
calibrate` (scripts/calibrate.py) fits them over a corpus of tables with known wrong cells, checks them by
leaving tables out, and writes them to fitted.json beside this module, with the corpus and the scores.

Features of a cell (all computed from the evidence alone, before any weight):
- `base`: the log-odds of the evidence's own reading: the cell's column prior (its error rate, estimated
  from the table by expectation-maximisation) plus each signal family's strongest evidence;
- `llr:<detector>` / `has:<detector>`: the strongest evidence each detector gives the cell, and whether it
  gives any (how far each detector's scale is to be trusted, and its own offset);
- `families`: how many signal families point to a wrong value (independent signals agreeing);
- `column_share`: log-odds of the share of the column's cells with evidence pointing to a wrong value;
- `value_rows`: log of the rows holding the cell's value in its column (a repeated value is a convention
  more often than a slip).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from iterate.detect.calibration import FAMILIES

FITTED = Path(__file__).with_name("fitted.json")

# The detectors whose evidence reaches the decision, in a fixed order (feature names follow it).
DETECTORS: tuple[str, ...] = tuple(sorted(FAMILIES))
LLR_CAP = 12.0  # evidence beyond this says nothing more (a rule that leaves no doubt is already certain)

# Statistics a detector gives beside its evidence (Finding.features), read as features of their own:
# `x:<detector>:<statistic>`, from the detector's strongest item on the cell.
EXTRAS: tuple[str, ...] = (
    "x:outliers:far",  # log(1 + z): how far out on the column's scale (within its group, where one explains it)
    "x:outliers:crowd",  # log of the share of other rows within one spread of the value (a mode is crowded)
    "x:outliers:spacing",  # log(1 + how far it is cut off from the rest of its tail, in the tail's own spacings)
    "x:cooccur:weakest",  # the least the associated columns say against the value
    "x:cooccur:strongest",  # the most they say against it
    "x:cooccur:strength",  # log of how much the most telling associated column tells about the column
    "x:numcontext:group",  # log(1 + distance from the group's median, in within-group spreads)
    "x:numcontext:fit",  # log(1 + distance from the line through the closest numeric column, in residual spreads)
    "x:numcontext:tight",  # log of the spread the groups leave, as a share of the column's
    "x:numcontext:corr",  # the closest numeric column's rank correlation (absolute)
    "x:arithmetic:suspects",  # log of the columns of the broken relation still suspect on the row
    "x:arithmetic:holds",  # log-odds of the share of rows the relation holds on
    "x:arithmetic:off",  # log(1 + how far the row is off the relation, in what rounding allows)
    "x:symbols:rarity",  # -log of the share of the column's rows writing the symbol
    "x:symbols:edge",  # the symbol sits at the start or the end of the value
    "x:symbols:doubled",  # a doubled punctuation mark, or a symbol proper (*, #, ~)
    "x:symbols:bare",  # log(1 + rows writing the value without the mark): a mark added to a value as written
    "x:typos:rows",  # log of the rows writing the variant (a slip is seldom made the same way many times)
    "x:typos:ratio",  # log of how many times more rows write its reference
    "x:convention:share",  # log-odds of the share of the column's numbers written the column's way
)

FEATURES: tuple[str, ...] = (
    "base",
    *(f"llr:{d}" for d in DETECTORS),
    *(f"has:{d}" for d in DETECTORS),
    "families",
    "column_share",
    "value_rows",
    *EXTRAS,
)


@dataclass(frozen=True)
class Model:
    """A fitted logistic decision: flag a cell when sigmoid(bias + weights · features) >= threshold."""

    weights: dict[str, float]
    bias: float
    threshold: float
    meta: dict[str, Any] = field(default_factory=dict)

    def logit_threshold(self) -> float:
        t = min(max(self.threshold, 1e-9), 1 - 1e-9)
        return float(np.log(t / (1 - t)))

    def score(self, features: dict[str, np.ndarray], n: int) -> np.ndarray:
        """The log-odds of each cell, accumulated feature by feature (no cells x features matrix is built:
        on a long table the decision's arrays are the detection's peak)."""
        out = np.full(n, self.bias, dtype=np.float64)
        for name, w in self.weights.items():
            if w and name in features:
                out += w * features[name]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": {k: round(v, 6) for k, v in self.weights.items() if v},
            "bias": round(self.bias, 6),
            "threshold": round(self.threshold, 6),
            **{k: v for k, v in self.meta.items() if k in ("version", "fitted")},
        }


# The decision before any fit: the evidence's own reading (the posterior of the column prior plus each
# family's strongest evidence) decides at even odds. `make calibrate` starts from it.
UNFITTED = Model(weights={"base": 1.0}, bias=0.0, threshold=0.5, meta={"version": 0, "fitted": None})


def model_from_dict(data: dict[str, Any]) -> Model:
    unknown = sorted(set(data.get("weights", {})) - set(FEATURES))
    if unknown:
        raise ValueError(f"fitted decision names features the code does not compute: {unknown}")
    return Model(
        weights={k: float(v) for k, v in data["weights"].items()},
        bias=float(data["bias"]),
        threshold=float(data["threshold"]),
        meta={k: v for k, v in data.items() if k not in ("weights", "bias", "threshold")},
    )


@cache
def load(path: Path = FITTED) -> Model:
    """The fitted decision (fitted.json), read once; the unfitted one where no fit was written."""
    if not path.exists():
        return UNFITTED
    try:
        return model_from_dict(json.loads(path.read_text())["decision"])
    except (ValueError, KeyError, TypeError) as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(
            f"the fitted decision {path} cannot be read ({e}): restore it from git or rebuild it with "
            "`make calibrate`"
        ) from e


def cell_features(
    where: np.ndarray,
    detector: np.ndarray,
    llr: np.ndarray,
    n_cells: int,
    *,
    base: np.ndarray,
    families: np.ndarray,
    column_share: np.ndarray,
    value_rows: np.ndarray,
    extras: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Per cell (`where` maps each evidence item to its cell, `detector` to its index in DETECTORS): every
    feature of FEATURES, as float32 arrays of n_cells (`has:` as booleans). `extras`: per item, the EXTRAS its finding gives
    (0 where it gives none)."""
    out: dict[str, np.ndarray] = {
        "base": base.astype(np.float32),
        "families": families.astype(np.float32),
        "column_share": column_share.astype(np.float32),
        "value_rows": value_rows.astype(np.float32),
    }
    llr = np.clip(np.nan_to_num(llr, nan=0.0), -LLR_CAP, LLR_CAP)
    if where.size:
        # The strongest item of each detector on each cell: one sort on (detector, cell) as one key, then -llr
        # (two keys, not three: millions of items on a long table); each detector's picks are then one slice.
        key = (detector.astype(np.int64) + 1) * (int(where.max()) + 1) + where.astype(np.int64)
        order = np.lexsort((-llr, key))
        sorted_key = key[order]
        first = np.ones(order.size, dtype=bool)
        first[1:] = sorted_key[1:] != sorted_key[:-1]
        pick = order[first]
        bounds = np.searchsorted(detector[pick], np.arange(len(DETECTORS) + 1))
        for k, name in enumerate(DETECTORS):
            sel = pick[bounds[k] : bounds[k + 1]]
            if not sel.size:
                continue
            x = np.zeros(n_cells, dtype=np.float32)
            x[where[sel]] = llr[sel]
            out[f"llr:{name}"] = x
            h = np.zeros(n_cells, dtype=bool)  # an indicator: a quarter of a float's bytes on a long table
            h[where[sel]] = True
            out[f"has:{name}"] = h
            for extra, values in (extras or {}).items():
                if extra.split(":")[1] == name:
                    e = np.zeros(n_cells, dtype=np.float32)
                    e[where[sel]] = values[sel]
                    out[extra] = e
    return out


def extras_of(judged: list[Any], sizes: np.ndarray) -> dict[str, np.ndarray]:
    """Per evidence item, each of EXTRAS from the findings that give it (0 elsewhere)."""
    out: dict[str, np.ndarray] = {}
    for extra in EXTRAS:
        _, detector, stat = extra.split(":")
        if not any(f.detector == detector and stat in f.features for f in judged):
            continue
        values = np.zeros(int(np.sum(sizes)))
        start = 0
        for f, k in zip(judged, sizes.tolist(), strict=True):
            if f.detector == detector and stat in f.features:
                values[start : start + k] = f.features[stat]
            start += k
        out[extra] = values
    return out
