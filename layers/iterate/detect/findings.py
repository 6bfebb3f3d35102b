"""Finding: one detector result with its flagged cells, before it becomes an Issue contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from iterate.contracts import Category

if TYPE_CHECKING:
    from iterate.detect.context import ColumnFacts

# Values listed in a finding's stats (so code can recount it) are capped: enough for any real vocabulary
# of variants, small enough for analysis.json and an investigation script to carry.
MAX_LISTED = 5000
MISSING_TYPES = frozenset({"missing_values", "disguised_missing", "missing_together"})


@dataclass
class Finding:
    """Cells a detector believes hold a wrong (or absent) value, with the parameters that let code re-check it.

    rows/cols are parallel arrays: 0-based data row and column position of each affected cell. `expected`
    (optional, parallel) is the value the detector would put there. `flag` says whether the cells go to
    flags.csv: True for wrong values; False for facts about a column or a row (a missing value written the
    dataset's own way, a duplicate row, a constant column), which are reported but are not wrong cells.

    A detector's finding is *evidence*, not a verdict: `llr` (parallel) is the log-likelihood ratio the
    detector's statistic gives each cell (how much likelier the value is under "wrong" than under "right"),
    and `stat` (parallel, optional) the statistic itself. The combiner (iterate.detect.decide) weighs every
    detector's evidence on a cell against the table's estimated error rate, keeps the cells it decides are
    wrong, and writes their posterior probability into `score`. `describe` builds the description from the
    cells that were kept, so every count in it is the count of the finding as reported.
    """

    type: str
    columns: list[str]
    rows: np.ndarray
    cols: np.ndarray
    title: str
    description: str
    suggested_action: str
    category: Category
    detector: str
    stats: dict[str, Any] = field(default_factory=dict)
    expected: Sequence[str | None] | None = None
    flag: bool = True
    row_level: bool = False  # affects whole rows (duplicates): affectedRows counts rows, not cells
    blocks_analysis: bool = False
    key: str = ""  # stable identity within a run, used to build the issue id
    llr: np.ndarray | None = None  # per cell; None: certain (a fact, or a rule with no doubt left)
    stat: np.ndarray | None = None  # per cell: the statistic behind llr (a z-score, a count ratio, ...)
    stat_name: str = ""
    # Cells of one value always share their evidence (the finding is about values, recounted by value).
    value_level: bool = True
    # Whether a value its entity's rows all repeat is vouched for by that agreement (a zip code that lost
    # its leading zero is wrong however consistently it was lost).
    vouchable: bool = True
    score: np.ndarray | None = None  # per cell, after the decision: probability that the value is wrong
    describe: Callable[[Finding], str] | None = None
    # What the flagged cells cost (iterate.severity): "wrong" values, "missing" ones, values written unlike
    # the column's convention ("format": the same value, another way), or a "fact" that flags nothing.
    # Empty: worked out from `flag` and `type` (see `damage_kind`).
    damage: str = ""
    # Per cell (parallel), statistics beyond `llr` that the fitted decision reads as features of its own
    # (model.EXTRAS names which): how far out, how crowded the value's neighbourhood is, ...
    features: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rows = np.asarray(self.rows, dtype=np.int64)
        self.cols = np.asarray(self.cols, dtype=np.int64)
        if self.rows.shape != self.cols.shape:
            raise ValueError("rows and cols must be parallel arrays")
        for name in ("llr", "stat"):
            arr = getattr(self, name)
            if arr is not None:
                arr = np.broadcast_to(np.asarray(arr, dtype=np.float64), self.rows.shape).copy()
                setattr(self, name, arr)
        self.features = {
            k: np.broadcast_to(np.asarray(v, dtype=np.float64), self.rows.shape).copy()
            for k, v in self.features.items()
        }

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the cells where `mask` is True (every parallel array follows)."""
        mask = np.asarray(mask, dtype=bool)
        self.rows, self.cols = self.rows[mask], self.cols[mask]
        if self.expected is not None:
            self.expected = [e for e, k in zip(self.expected, mask.tolist(), strict=True) if k]
        for name in ("llr", "stat", "score"):
            arr = getattr(self, name)
            if arr is not None:
                setattr(self, name, arr[mask])
        self.features = {k: v[mask] for k, v in self.features.items()}

    @property
    def damage_kind(self) -> str:
        if self.damage:
            return self.damage
        if not self.flag:
            return "fact"
        return "missing" if self.type in MISSING_TYPES else "wrong"

    @property
    def n_cells(self) -> int:
        return int(self.rows.size)

    @property
    def n_rows(self) -> int:
        return int(unique_rows(self.rows).size)

    def unique_rows(self) -> np.ndarray:
        """The distinct rows, ascending."""
        return unique_rows(self.rows)


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """Distinct values of an int array, ascending; one linear pass when it is already sorted (the usual case).

    Detectors list rows in order, so a finding over most of a 1M-row column skips np.unique's sort.
    """
    if rows.size < 2:
        return rows
    steps = rows[1:] >= rows[:-1]
    if not steps.all():
        return np.unique(rows)
    keep = np.empty(rows.size, dtype=bool)
    keep[0] = True
    np.not_equal(rows[1:], rows[:-1], out=keep[1:])
    return rows[keep]


def cells(rows: np.ndarray, col_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Parallel (rows, cols) arrays for cells of one column."""
    rows = np.asarray(rows, dtype=np.int64)
    return rows, np.full(rows.shape, col_index, dtype=np.int64)


def value_finding(
    f: ColumnFacts,
    ids: np.ndarray,
    llr_per_id: np.ndarray,
    stat_per_id: np.ndarray,
    features_per_id: dict[str, np.ndarray] | None = None,
    **kwargs: object,
) -> Finding:
    """A finding over whole values (dictionary ids): each distinct value's cells share its evidence."""
    order = np.argsort(ids)
    ids, llr_per_id, stat_per_id = ids[order], llr_per_id[order], stat_per_id[order]
    rows = f.column.rows_of(ids)
    pos = np.searchsorted(ids, f.column.codes[rows])
    r, c = cells(rows, f.index)
    features = {k: np.asarray(v)[order][pos] for k, v in (features_per_id or {}).items()}
    return Finding(rows=r, cols=c, llr=llr_per_id[pos], stat=stat_per_id[pos], features=features, **kwargs)  # type: ignore[arg-type]
