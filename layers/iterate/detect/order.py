"""Neighbours in file order: a column that runs in blocks (a month, a day, a sensor's setting, a customer's
consecutive orders) says what each row should hold.

Many exports are written in order: by time, by entity, by experiment. Then rows near each other share a
value, and a row whose value none of its neighbours hold, while most of them agree on another, is a wrong
cell (a value pasted in from elsewhere, a slip) or a record unlike its neighbours. Three things keep the two
apart, all read from the table:
- chance: the neighbours' agreement must be one that the column's value frequencies would rarely give
  (a binomial tail: six of eight neighbours `White` in a column 85% `White` says nothing);
- the rest of the row: a record unlike its neighbours (a new customer between two others' orders) differs
  from them on several such columns at once; a wrong cell differs on one, and only that row is judged;
- the column itself: how often judged rows differ from their neighbours sets how telling a difference is
  (a month column almost never does; a temperature drifts).

The rule is checked in code the same way (the `neighbours` rule of the rows template): the same reach,
agreement, chance bound and missing markers, so the recount is exact.
"""

from __future__ import annotations

import math

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration
from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.discovery import present_codes
from iterate.detect.findings import Finding, cells
from iterate.detect.numeric import NUMBER
from iterate.detect.sequence import row_numbers
from iterate.wording import agree, plural

REACH = 4  # rows either side a value is compared with
MIN_AGREE = 6  # of the 2 * REACH neighbours, at least this many hold one value (a clear majority)
CHANCE = 1e-3  # ... and the column's frequencies would give that agreement less often than this
MIN_ROWS = 50
MIN_JUDGED = 20  # rows a column must judge before its differences are evidence
OWN_CHANGES_TAIL = 0.05  # one-row departures beyond the column's own changes, at this chance at most
NUMBER_TOLERANCE = 1e-6  # relative: two numbers this close are one value written two ways


def _binomial_tail(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """P(X >= k) for X ~ Binomial(n, p), elementwise (n <= 2 * REACH)."""
    out = np.zeros(k.size)
    q = 1.0 - p
    for j in range(2 * REACH + 1):
        coef = np.array([math.comb(int(m), j) if j <= m else 0 for m in range(2 * REACH + 1)], dtype=float)
        term = coef[n] * p**j * q ** np.maximum(n - j, 0)
        out += np.where((j >= k) & (j <= n), term, 0.0)
    return np.clip(out, 0.0, 1.0)


def neighbour_majority(codes: np.ndarray, reach: int = REACH) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the value most of its 2 * reach neighbours hold (-1: none), how many hold it, and how many
    neighbours have a value at all (codes: -1 for a missing value, which neither votes nor is judged)."""
    n = codes.size
    shifted = []
    for s in [*range(-reach, 0), *range(1, reach + 1)]:
        x = np.full(n, -1, dtype=codes.dtype)
        if s < 0:
            x[-s:] = codes[:s]
        else:
            x[:-s] = codes[s:]
        shifted.append(x)
    # Counts of at most 2 * reach fit in a byte: a long file's per-row arrays stay small.
    mode = np.full(n, -1, dtype=codes.dtype)
    count = np.zeros(n, dtype=np.int8)
    voters = np.zeros(n, dtype=np.int8)
    for x in shifted:
        voters += x >= 0
    for t in shifted:
        same = np.zeros(n, dtype=np.int8)
        for x in shifted:
            same += x == t
        same[t < 0] = 0
        better = same > count
        mode = np.where(better, t, mode)
        count = np.maximum(same, count)
    return mode, count, voters


def _in_blocks(codes: np.ndarray, counts: np.ndarray) -> bool:
    """A cheap screen: consecutive rows repeat a value far more often than the value frequencies explain."""
    present = codes >= 0
    pairs = present[1:] & present[:-1]
    if pairs.sum() < MIN_ROWS:
        return False
    repeat = float((codes[1:] == codes[:-1])[pairs].mean())
    p = counts / max(counts.sum(), 1)
    return repeat >= 0.3 and repeat >= float((p**2).sum()) + 0.1


def block_values(codes: np.ndarray, n_unique: int) -> np.ndarray:
    """Per dictionary code: the value holds two or more consecutive rows somewhere (it forms blocks)."""
    held = np.zeros(n_unique, dtype=bool)
    twice = codes[1:][(codes[1:] == codes[:-1]) & (codes[1:] >= 0)]
    held[twice] = True
    return held


def excursions(codes: np.ndarray, blocky: np.ndarray) -> tuple[int, int, int]:
    """Runs of one and of two rows that leave a block and come back to it (A A B A A, A A B B A A): the
    one-row runs, those of them whose value forms blocks elsewhere, and the two-row runs.

    A column's own changes make both lengths (a cloudy hour in a sunny day, a customer's single order
    between another's); a wrong cell makes only the first."""
    n = codes.size
    if n < 3:
        return 0, 0, 0
    start = np.r_[0, np.flatnonzero(codes[1:] != codes[:-1]) + 1]
    length = np.diff(np.r_[start, n])
    value = codes[start]
    inner = slice(1, -1)
    framed = (value[:-2] == value[2:]) & (length[:-2] >= 2) & (length[2:] >= 2) & (value[inner] >= 0)
    framed &= value[:-2] >= 0
    one = framed & (length[inner] == 1)
    in_blocks = one & blocky[np.maximum(value[inner], 0)]
    return int(one.sum()), int(in_blocks.sum()), int((framed & (length[inner] == 2)).sum())


def _beyond_own(one: int, two: int) -> bool:
    """One-row departures are more than the column's own changes explain: its changes make about two of
    them per two-row departure, so among one + two departures the one-row ones are a binomial share of 2/3;
    they are telling when so many would come by chance less than once in a hundred (at least 12 of 12)."""
    n = one + two
    if one == 0 or one < 2 * (2 * two + 1):
        return False
    p = 2.0 / 3.0
    tail = 0.0
    for k in range(one, n + 1):
        tail += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * math.log(p)
            + (n - k) * math.log(1 - p)
        )
    return tail < OWN_CHANGES_TAIL


def detect_neighbour_breaks(
    facts: list[ColumnFacts], n_rows: int, cal: Calibration = DEFAULT
) -> list[Finding]:
    """Cells off their neighbours' clear majority, in columns that run in blocks, on rows that differ from
    their neighbours in that column only."""
    if n_rows < MIN_ROWS:
        return []
    judged_by: dict[int, np.ndarray] = {}
    off_by: dict[int, np.ndarray] = {}
    agree_by: dict[int, np.ndarray] = {}
    mode_by: dict[int, np.ndarray] = {}
    for f in facts:
        if f.column.n_unique < 2 or f.free_text or f.list_delimiter is not None:
            continue  # a list ('1, 5, 8') is not a value its neighbours can be expected to repeat
        codes = present_codes(f)
        counts = np.bincount(codes[codes >= 0], minlength=f.column.n_unique)
        if not _in_blocks(codes, counts):
            continue
        mode, count, voters = neighbour_majority(codes)
        p = counts[np.maximum(mode, 0)] / max(int(counts.sum()), 1)
        clear = (codes >= 0) & (mode >= 0) & (count >= MIN_AGREE)
        tail = np.ones(n_rows)
        tail[clear] = _binomial_tail(count[clear], voters[clear], p[clear])
        judged = clear & (tail < CHANCE)
        if judged.sum() < MIN_JUDGED:
            continue
        off = judged & (codes != mode)
        if off.any() and f.numeric.numeric:
            # The same number written another way (6.0 beside 6) is a format question, not another value.
            values = row_numbers(f, f.numeric)
            at = np.flatnonzero(off)
            by_code = np.full(f.column.n_unique, np.nan)
            by_code[codes[codes >= 0]] = values[codes >= 0]
            own, expected = values[at], by_code[mode[at]]
            with np.errstate(invalid="ignore"):
                same = np.abs(own - expected) <= NUMBER_TOLERANCE * np.maximum(np.abs(own), np.abs(expected))
            off[at[same]] = False
        judged_by[f.index] = judged
        off_by[f.index] = off
        agree_by[f.index] = count
        mode_by[f.index] = mode
    if not off_by:
        return []
    # A record unlike its neighbours differs from them on several block columns; a wrong cell on one.
    offs = np.zeros(n_rows, dtype=np.int64)
    for off in off_by.values():
        offs += off
    out: list[Finding] = []
    for idx, off in off_by.items():
        f = facts[idx]
        single = off & (offs == 1)
        if not single.any():
            continue
        # How many of the column's one-row departures its own changes explain: twice its two-row ones. A
        # departure to a value that forms blocks elsewhere (a cloudy hour, a swapped value) is judged against
        # the departures of that kind; one to a value never seen twice in a row (a typo, a number pasted in)
        # against all of them.
        codes = present_codes(f).astype(np.int64)
        blocky = block_values(codes, f.column.n_unique)
        one, one_in_blocks, two = excursions(codes, blocky)
        own_changes = 2.0 * two + 1.0
        telling = np.where(
            blocky[np.maximum(codes, 0)], _beyond_own(one_in_blocks, two), _beyond_own(one, two)
        )
        single &= telling
        if not single.any():
            continue
        # Evidence: judged rows per departure the column's own changes would make.
        llr = min(math.log(int(judged_by[idx].sum()) / own_changes), cal.dependency_llr_cap)
        rows = np.flatnonzero(single)
        expected = f.column.texts(mode_by[idx][rows])
        out.append(_finding(f, rows, llr, agree_by[idx][rows], expected, f.numeric.numeric))
    return out


def _finding(
    f: ColumnFacts, rows: np.ndarray, llr: float, agreeing: np.ndarray, expected: list[str], numeric: bool
) -> Finding:
    name = f.name
    stats = {
        "column": name,
        "rule": "neighbours",
        "reach": REACH,
        "min_agree": MIN_AGREE,
        "chance": CHANCE,
        "missing_markers": missing_markers(f.null_marker),
        "rows": rows[:MAX_ROWS_LISTED].tolist(),
    }
    if numeric:
        stats.update(number_regex=NUMBER, tolerance=NUMBER_TOLERANCE)

    def describe(fd: Finding) -> str:
        first = int(fd.rows[0])
        return (
            f"'{name}' runs in blocks in file order: rows next to each other share its value. "
            f"{plural(fd.n_cells, 'row')} {agree(fd.n_cells, 'holds', 'hold')} another value than the one at "
            f"least {MIN_AGREE} of the {2 * REACH} rows around it agree on, and none of the row's other "
            "columns that run in blocks (if the file has any) differs from its neighbours there "
            f"(e.g. row {first}: '{f.column.value(first)}' where the rows around it hold "
            f"'{(fd.expected or [''])[0]}'). A value pasted in from elsewhere or mistyped looks like this."
        )

    r, c = cells(rows, f.index)
    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Values of {name} unlike the rows around them",
        description="",
        describe=describe,
        suggested_action=f"Check these values of '{name}' against the source: the rows around each one say "
        "what it probably should be.",
        category="smart_fixes",
        detector="neighbours",
        stats=stats,
        expected=expected,
        key=f"neighbours:{name}",
        llr=np.full(rows.size, llr),
        stat=agreeing.astype(np.float64),
        stat_name=f"neighbours (of {2 * REACH}) that agree on another value",
        value_level=False,
    )
