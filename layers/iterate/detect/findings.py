"""Finding: one detector result with its flagged cells, before it becomes an Issue contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iterate.contracts import Category

# Values listed in a finding's stats (so code can recount it) are capped: enough for any real vocabulary
# of variants, small enough for analysis.json and an investigation script to carry.
MAX_LISTED = 5000


@dataclass
class Finding:
    """Cells a detector believes hold a wrong (or absent) value, with the parameters that let code re-check it.

    rows/cols are parallel arrays: 0-based data row and column position of each affected cell. `expected`
    (optional, parallel) is the value the detector would put there. `flag` says whether the cells go to
    flags.csv: True for wrong values; False for facts about a column or a row (a missing value written the
    dataset's own way, a duplicate row, a constant column), which are reported but are not wrong cells.
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

    def __post_init__(self) -> None:
        self.rows = np.asarray(self.rows, dtype=np.int64)
        self.cols = np.asarray(self.cols, dtype=np.int64)
        if self.rows.shape != self.cols.shape:
            raise ValueError("rows and cols must be parallel arrays")

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
