"""Every number that changes what is flagged, in one place, and the scales that turn statistics into evidence.

Detectors emit evidence as log-likelihood ratios (nats): how much likelier a cell's value is under "wrong"
than under "right", given the detector's statistic. The combiner (iterate.detect.decide) adds the evidence
of independent signal families on a cell to the prior log-odds of its column — the column's error rate,
estimated from the table itself — and flags the cell when the posterior reaches `decide_at`.

The scales below were set from what each statistic means (a robust z of 5 is already rare under a normal
model; a value missing from a column filled 99% of the time is strong evidence), never fitted to a file.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

# Signal families: evidence within a family is not independent (a value that fails to parse as a number also
# breaks the column's shape), so a cell takes the strongest item of each family and adds up the families.
FAMILIES: dict[str, str] = {
    "reader": "structure",
    "missing": "missing",
    "placeholders": "missing",
    "sentinels": "missing",
    "shape": "format",
    "parse": "format",
    "units": "format",
    "dates": "format",
    "precision": "precision",
    "encoding": "text",
    "whitespace": "text",
    "typos": "spelling",
    "typos-masked": "spelling",
    "typos-words": "spelling",
    "foreign": "spelling",
    "outliers": "range",
    "frequency": "frequency",
    "dependencies": "context",
    "derived": "context",
    "rules": "context",
    "merged": "context",
    "sequence": "context",
    "neighbours": "context",
    "sources": "context",
    "sources-format": "format",
    "cooccur": "context",
    "numcontext": "context",
    "arithmetic": "context",
    "symbols": "text",
    "decimals": "format",
    "zeroled": "format",
    "convention": "format",
}

# Families whose evidence only supports: it never flags a cell on its own (no other family agreeing) and it
# does not raise a column's estimated error rate. Rarity is one: real rare values are common.
SUPPORTING = frozenset({"frequency"})
# Detectors whose evidence reaches the decision only through their own fitted features (iterate.detect.model):
# it is not part of the evidence's own reading (the `base` feature, the column error rates), so the
# decision before any fit is what it was without them.
FITTED_ONLY = frozenset({"cooccur", "numcontext", "arithmetic", "symbols", "decimals", "zeroled"})
# Families whose evidence does not raise a column's estimated error rate: a column with gaps is not a column
# whose values are wrong (gaps carry evidence strong enough to be judged on their own).
NOT_RATED = frozenset({"missing"})


@dataclass(frozen=True)
class Calibration:
    """The decision's parameters; printed with every run (analysis.json, steps/profile.json)."""

    decide_at: float = 0.5  # posterior probability at or above which a cell is flagged
    # The error rate of a column is estimated by expectation-maximisation over its cells: start, bounds.
    prior_start: float = 0.01
    prior_floor: float = 0.001
    prior_ceiling: float = 0.3
    rounds: int = 8
    # Share of wrong cells that no detector sees: a cell with no evidence is this much likelier right.
    miss_rate: float = 0.3
    # A column's rate is shrunk toward the table's as if the table added this many cells to it.
    column_pseudo_cells: float = 200.0
    certain_llr: float = 12.0  # evidence of a rule that leaves no doubt (encoding damage, a merged column)
    max_llr: float = 12.0

    # Missing values: the rarer blanks are in a column, the more a blank is a gap to fill.
    missing_bonus: float = 4.0  # added to log((1 - m) / m) for a nearly filled column (missing.gap_llr)
    missing_convention_share: float = 0.5  # a column at least this empty writes "none" by leaving it empty
    comissing_z: float = 3.0  # a partner column is missing alongside far more often than chance (binomial z)
    comissing_share: float = 0.5  # ... in at least this share of the rarer column's missing rows
    placeholder_llr: float = 6.0  # a placeholder other than the dataset's own way to write missing
    foreign_value_llr: float = 5.0  # a value of another column's vocabulary, rare in this one

    # Validity by parsing: log(p / (1 - p)) + bonus, p the share of the column's rows that parse.
    parse_bonus: float = 4.0
    parse_min_share: float = 0.5  # the column's kind must be read by a majority of its rows
    shape_bonus: float = 3.0
    # A value that breaks a column's sequence (a counter, a regular timestamp): log(p / (1 - p)) + bonus, p the
    # share of rows that keep to it.
    sequence_bonus: float = 3.0
    # A value unlike its neighbours in a column that runs in blocks in file order: log(p / (1 - p)) + bonus,
    # p the share of the column's judged rows that hold their neighbours' value.
    neighbour_bonus: float = 1.0
    # A format break the column repeats as often as it repeats its own values is likelier a second
    # convention than a slip: evidence falls by this much per unit of log(rows holding the value), counted
    # up to the column's typical count (a value repeated in a column of unique values gets no discount).
    repeat_discount: float = 1.0

    # Precision: significant digits far beyond what the column writes.
    precision_gap: float = 4.0  # digits beyond the column's typical count before it counts at all
    precision_llr_per_digit: float = 1.0
    precision_max_llr: float = 5.0

    # Outliers, on the scale (linear or log) that makes the column most symmetric.
    outlier_z: float = 5.0  # robust z (median / MAD) from which a value is evidence
    outlier_llr_per_z: float = 0.8
    outlier_gap_bonus: float = 2.0  # the value is cut off from the bulk by an empty stretch
    outlier_max_llr: float = 9.0
    # A grouping column explains a numeric one when the spread within its groups is at most this share of
    # the spread overall; outliers are then judged within their group as well.
    context_spread_ratio: float = 0.6
    # A log scale is still chosen when at most this share of the rows falls off it (zero or negative).
    offscale_share: float = 0.1
    sign_bonus: float = 1.0  # a negative value in a column that is otherwise never negative
    # ... further below zero than this share of the column's robust spread (nearer: a value near a floor)
    sign_edge_spread: float = 0.25

    # A numeric column's domain: its most common values, each this many times as common as any other.
    frequency_min_ratio: float = 5.0
    # Rarity: a value held by far fewer rows than the column's values typically are. Weak alone (real rare
    # values exist): it counts when another signal agrees.
    rare_min_typical: float = 3.0  # only where values typically fill at least this many rows
    rare_min_ratio: float = 5.0  # ... and the value fills at most a fifth of that
    rare_base_llr: float = 1.0
    rare_max_llr: float = 2.5
    # One value repeated in a column of nearly unique values: this many times the 99th percentile count.
    placeholder_repeat_ratio: float = 10.0

    # Typos against far more frequent spellings.
    typo_llr: float = 7.0
    case_variant_llr: float = 8.0

    # Entity consensus (dependencies).
    dependency_llr_cap: float = 10.0
    # A faction off its group's consensus that noise would produce less often than this is a split.
    split_tail: float = 1e-3
    # The least share of rows a dependency is assumed to let vary legitimately (caps a deviation's evidence).
    dependency_floor: float = 0.002
    # A key is blamed when two or more of its dependents each hold at least this evidence against the row.
    blame_min_llr: float = 3.0
    # A value pasted as the odd faction into many entities: other values split at most this share as many
    # groups as it does, and the dependency without it splits at most this share of its rows.
    paste_other_share: float = 0.1
    consistent_discount: float = 6.0  # a value every row of its entity agrees on is that entity's value

    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        return out


DEFAULT = Calibration()


def logit(p: float | np.ndarray) -> Any:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


def sigmoid(x: float | np.ndarray) -> Any:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def repeat_discount(counts: np.ndarray, typical: float, cal: Calibration = DEFAULT) -> np.ndarray:
    """Evidence to take off a format break held by `counts` rows, in a column whose values are typically
    held by `typical` rows (none for a value seen once, or in a column where values are not repeated)."""
    held = np.minimum(np.asarray(counts, dtype=np.float64), max(float(typical), 1.0))
    return cal.repeat_discount * np.log(np.maximum(held, 1.0))


def share_llr(p: float, bonus: float) -> float:
    """Evidence from a rule that `p` of the column's rows follow: log(p / (1 - p)) + bonus (p < 1)."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p)) + bonus
