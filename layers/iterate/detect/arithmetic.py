"""Arithmetic between numeric columns: a total and its parts, a rate and what it is computed from.

Real tables carry columns computed from others: `cnt = casual + registered`, `Unemployed = Labor Force -
Employed`, `density = population / area`, `Tax 5% = 0.05 x Unit price x Quantity`. Where such a relation holds
on most rows, a row that breaks it holds a wrong number, and nothing else in the row need look odd: noise
inside a column's range, a value from another row, a digit slipped.

**Found** on a sample of rows: for each numeric column, the pairs of others it is the sum, difference, product
or ratio of (a product or a ratio up to a constant factor, fitted), and the others it is a constant multiple of.
A candidate is screened on a few rows, then measured on the sample: it is kept where it holds, within what
rounding the values as written allows (half a unit of each one's last digit; none for numbers written as
integers where taking them as exact counts loses no more than 1% of the rows), on at least half of the rows that fill its columns, and at most a twentieth as often with the target
in a random order (chance). One relation per set of columns (the best held).

**Judged** on every row. A row that breaks a relation holds a wrong value among its columns; a column that
takes part in another relation that holds on the row is cleared, as one wrong value breaks every relation it
enters, and so is one whose value solved from the others would lie outside what it holds where the relation
holds, or off the grid it is written on (a price solved to 45.0225 in a column of cents) where the others'
rounding leaves the solved value sure to finer than that grid. The evidence on each column still suspect is how
rarely the relation breaks, shared among the suspects; the decision (iterate.detect.model) weighs it with how
well the relation holds, how many suspects share it and how far the row is off. The `arithmetic` rule of the rows template recounts each listed row from the same
numbers and tolerances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts
from iterate.detect.decide import MAX_ROWS_LISTED
from iterate.detect.findings import Finding, cells
from iterate.detect.model import LLR_CAP
from iterate.detect.numeric import GROUPED, NUMBER
from iterate.wording import agree, plural

MIN_VALUES = 10  # a column of fewer distinct numbers is a code or a scale
MAX_COLUMNS = 40  # numeric columns searched (those with the most distinct values)
SAMPLE = 2_000  # rows a relation is found and measured on
SCREEN = 60  # rows a candidate is screened on first
MIN_ROWS = 50  # rows filling a relation's columns, in the sample, before it is measured
MIN_HOLDS = 0.5  # a relation holds on at least this share of the rows that fill its columns
CHANCE = 20.0  # ... and this many times as often as with its target in a random order
SCREEN_SLACK = 0.005  # relative slack of the screen (the measure uses the rounding of each value)


@dataclass(frozen=True)
class Relation:
    """target = left + right | left - right | k x left x right | k x left / right | k x left."""

    target: int
    form: str
    left: int
    right: int  # -1 for "k"
    k: float
    exact: bool  # numbers written as integers are exact (counts): no rounding allowed them
    holds: float  # share of the sample's filled rows it holds on

    @property
    def columns(self) -> tuple[int, ...]:
        return (self.target, self.left) if self.right < 0 else (self.target, self.left, self.right)


def plain_numbers(f: ColumnFacts) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct value: the plain number it is written as (NaN: not a plain number) and half a unit of its
    last digit as written (0.005 for 1.25, 0.5 for 12, 50 for 1.2e3). The rows template reads them the same way."""
    text = pc.utf8_trim_whitespace(f.column.dictionary)
    grouped = pc.fill_null(pc.match_substring_regex(text, GROUPED), False)
    text = pc.if_else(grouped, pc.replace_substring(text, ",", ""), text)  # 25,649 is 25649
    plain = np.asarray(
        pc.fill_null(pc.match_substring_regex(text, NUMBER), False).to_numpy(zero_copy_only=False)
    )
    lower = pc.utf8_lower(pc.if_else(pa.array(plain), text, pa.scalar("0")))
    parts = pc.split_pattern(lower, "e", max_splits=1)
    mantissa = pc.list_element(parts, 0)
    has_exponent = np.asarray(pc.list_value_length(parts).to_numpy(zero_copy_only=False)) > 1
    exponent = np.zeros(len(text))
    if has_exponent.any():
        tail = pc.list_slice(parts, 1, 2)
        flat = pc.list_flatten(tail).to_numpy(zero_copy_only=False)
        exponent[has_exponent] = np.asarray(flat, dtype=object).astype(float)
    point = np.asarray(pc.find_substring(mantissa, ".").to_numpy(zero_copy_only=False), dtype=np.float64)
    length = np.asarray(pc.utf8_length(mantissa).to_numpy(zero_copy_only=False), dtype=np.float64)
    decimals = np.where(point >= 0, length - point - 1, 0.0) - exponent
    numbers = np.full(len(text), np.nan)
    if plain.any():
        numbers[plain] = np.asarray(
            pc.cast(pc.filter(text, pa.array(plain)), pa.float64()).to_numpy(), dtype=float
        )
    with np.errstate(over="ignore"):
        half = np.where(
            plain & (np.abs(decimals) <= 300), 0.5 * 10.0 ** (-np.clip(decimals, -300, 300)), np.nan
        )
    return numbers, half


def written_like_column(numbers: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Per row, the rounding of its number: its own last digit's, but a zero's is the column's usual (the
    median over its other rows): a `0` among values written to nine decimals is no coarser than they are."""
    others = half[np.isfinite(half) & (numbers != 0)]
    if not others.size:
        return half
    return np.where(numbers == 0, np.minimum(half, float(np.median(others))), half)


def _integers(half: np.ndarray) -> bool:
    """The column writes its numbers as integers (most of its rows that hold one: a wrong value may not)."""
    finite = half[np.isfinite(half)]
    return bool(finite.size) and float(np.median(finite)) >= 0.5


def _predict(r: Relation, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if r.form == "+":
            return a + b
        if r.form == "-":
            return a - b
        if r.form == "*":
            return r.k * a * b
        if r.form == "/":
            return np.where(b != 0, r.k * a / b, np.nan)
        return r.k * a


def _tolerance(
    r: Relation, c: np.ndarray, a: np.ndarray, b: np.ndarray, rc: np.ndarray, ra: np.ndarray, rb: np.ndarray
) -> np.ndarray:
    """What rounding the values as written allows the relation (first-order), with a hair for float error. An
    exact relation takes numbers written as integers as exact (counts are not rounded)."""
    with np.errstate(all="ignore"):
        if r.exact:
            rc, ra, rb = (np.where(x >= 0.5, 0.0, x) for x in (rc, ra, rb))
        if r.form in ("+", "-"):
            tol = rc + ra + rb
        elif r.form == "*":
            tol = rc + abs(r.k) * (np.abs(b) * ra + np.abs(a) * rb)
        elif r.form == "/":
            tol = rc + abs(r.k) * (ra / np.abs(b) + np.abs(a) * rb / (b * b))
        else:
            tol = rc + abs(r.k) * ra
        return tol * 1.001 + 1e-9 * np.maximum(1.0, np.abs(c))


def breaks(
    r: Relation, values: dict[int, np.ndarray], half: dict[int, np.ndarray], rows: np.ndarray | slice
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(checkable, broken, how far off in tolerances) on the given rows."""
    c, a = values[r.target][rows], values[r.left][rows]
    rc, ra = half[r.target][rows], half[r.left][rows]
    if r.right >= 0:
        b, rb = values[r.right][rows], half[r.right][rows]
    else:
        b, rb = np.zeros_like(a), np.zeros_like(a)
    pred = _predict(r, a, b)
    tol = _tolerance(r, c, a, b, rc, ra, rb)
    with np.errstate(invalid="ignore"):
        checkable = np.isfinite(c) & np.isfinite(pred) & np.isfinite(tol)
        gap = np.abs(pred - c)
        broken = checkable & (gap > tol)  # as the rows template recounts it
        off = np.where(broken, gap / np.where(tol > 0, tol, 1e-300), 0.0)
    return checkable, broken, off


def _screen(sample_values: np.ndarray) -> list[tuple[int, str, int, int, float]]:
    """Candidates (target, form, left, right, k) that hold within SCREEN_SLACK on half the screened rows."""
    x = sample_values[:SCREEN]  # rows x columns
    n_cols = x.shape[1]
    out: list[tuple[int, str, int, int, float]] = []
    with np.errstate(all="ignore"):
        logs = np.log(np.abs(x))
        logs[~np.isfinite(logs)] = np.nan
        for t in range(n_cols):
            c = x[:, t][:, None, None]
            others = [j for j in range(n_cols) if j != t]
            o = np.array(others)
            a, b = x[:, o][:, :, None], x[:, o][:, None, :]
            scale = np.abs(c) * SCREEN_SLACK + 1e-9
            for form, pred in (("+", a + b), ("-", a - b)):
                ok = np.isfinite(pred) & np.isfinite(c)
                hit = (np.abs(pred - c) <= scale) & ok
                _keep(out, t, form, o, hit, ok, 1.0, symmetric=form == "+")
            lc = logs[:, t][:, None, None]
            la, lb = logs[:, o][:, :, None], logs[:, o][:, None, :]
            for form, d in (("*", lc - la - lb), ("/", lc - la + lb)):
                ok = np.isfinite(d)
                centre = _column_medians(d, ok)
                hit = ok & (np.abs(d - centre[None]) <= SCREEN_SLACK)
                _keep(out, t, form, o, hit, ok, centre, symmetric=form == "*")
            d = lc[:, :, 0] - logs[:, o]
            ok = np.isfinite(d)
            centre = _column_medians(d, ok)
            hit = ok & (np.abs(d - centre[None]) <= SCREEN_SLACK)
            n_ok, n_hit = ok.sum(axis=0), hit.sum(axis=0)
            for i in np.flatnonzero((n_ok >= SCREEN // 3) & (n_hit * 2 >= n_ok)).tolist():
                out.append((t, "k", int(o[i]), -1, float(np.exp(centre[i]))))
    return out


def _column_medians(d: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Medians over axis 0 of the entries where `ok` (NaN where there is none): np.nanmedian's values, from one
    sort (its masked path was half the detector's time on a wide table)."""
    x = np.sort(np.where(ok, d, np.nan), axis=0)  # NaN last
    n = ok.sum(axis=0)
    lo = np.take_along_axis(x, np.maximum((n - 1) // 2, 0)[None], axis=0)[0]
    hi = np.take_along_axis(x, np.maximum(n // 2, 0)[None], axis=0)[0]
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, (lo + hi) / 2, np.nan)


def _keep(
    out: list[tuple[int, str, int, int, float]],
    t: int,
    form: str,
    o: np.ndarray,
    hit: np.ndarray,
    ok: np.ndarray,
    centre: np.ndarray | float,
    symmetric: bool,
) -> None:
    """Add the (left, right) pairs whose screen holds on half the rows that fill them (each pair once where the
    form is symmetric), with the form's constant where it has one."""
    n_ok, n_hit = ok.sum(axis=0), hit.sum(axis=0)
    good = (n_ok >= SCREEN // 3) & (n_hit * 2 >= n_ok)
    if symmetric:
        good = np.triu(good, 1)
    else:
        np.fill_diagonal(good, False)
    for i, j in zip(*np.nonzero(good), strict=True):
        k = float(np.exp(centre[i, j])) if isinstance(centre, np.ndarray) else 1.0
        out.append((t, form, int(o[i]), int(o[j]), k))


def find_relations(
    facts: list[ColumnFacts], n_rows: int
) -> tuple[list[Relation], dict[int, np.ndarray], dict[int, np.ndarray]]:
    """The relations that hold, with every searched column's per-row numbers and rounding."""
    candidates = [
        f
        for f in facts
        if f.column.n_unique >= MIN_VALUES and f.numeric.numeric and f.numeric.code_width is None
    ]
    candidates = sorted(candidates, key=lambda f: -f.column.n_unique)[:MAX_COLUMNS]
    if len(candidates) < 2 or n_rows < MIN_ROWS:
        return [], {}, {}
    values: dict[int, np.ndarray] = {}
    half: dict[int, np.ndarray] = {}
    for f in candidates:
        numbers, h = plain_numbers(f)
        x = numbers[f.column.codes]
        values[f.index], half[f.index] = x, written_like_column(x, h[f.column.codes])
    rng = np.random.default_rng(13)
    sample = np.sort(rng.choice(n_rows, SAMPLE, replace=False)) if n_rows > SAMPLE else np.arange(n_rows)
    index = [f.index for f in candidates]
    matrix = np.stack([values[i][sample] for i in index], axis=1)
    shuffled = rng.permutation(sample.size)
    best: dict[frozenset[int], Relation] = {}
    for t, form, a, b, k in _screen(matrix):
        target, left, right = index[t], index[a], index[b] if b >= 0 else -1
        if form in ("*", "/", "k"):
            k = _refined(form, values, sample, target, left, right, k)
        kept = _measure(Relation(target, form, left, right, k, False, 0.0), values, half, sample, shuffled)
        if any(_integers(half[j][sample]) for j in (target, left, right) if j >= 0):
            # Counts are not rounded: integers are taken as exact where that loses at most 1% of the rows the
            # rounded reading holds on (integers rounded from amounts lose many more).
            exact = _measure(
                Relation(target, form, left, right, k, True, 0.0), values, half, sample, shuffled
            )
            if exact is not None and (kept is None or exact.holds >= kept.holds - 0.01):
                kept = exact
        if kept is None:
            continue
        key = frozenset(kept.columns)
        if key not in best or kept.holds > best[key].holds:
            best[key] = kept
    return list(best.values()), values, half


def _refined(
    form: str, values: dict[int, np.ndarray], sample: np.ndarray, target: int, left: int, right: int, k: float
) -> float:
    """The constant factor read off the sample's rows the screened one fits (within SCREEN_SLACK), as a ratio of
    sums: the large values, whose rounding is the least of them, weigh the most."""
    c, a = values[target][sample], values[left][sample]
    b = values[right][sample] if right >= 0 else np.ones_like(a)
    with np.errstate(all="ignore"):
        base = a * b if form == "*" else a / b if form == "/" else a
        ok = np.isfinite(c) & np.isfinite(base) & (np.abs(k * base - c) <= SCREEN_SLACK * np.abs(c))
        total = float(np.abs(base[ok]).sum())
        return float((c[ok] * np.sign(base[ok])).sum()) / total if total > 0 else k


def _measure(
    r: Relation,
    values: dict[int, np.ndarray],
    half: dict[int, np.ndarray],
    sample: np.ndarray,
    shuffled: np.ndarray,
) -> Relation | None:
    """The relation with the share of the sample's filled rows it holds on, if it holds on MIN_HOLDS of at least
    MIN_ROWS of them and CHANCE times as often as with the target's numbers in a random order; else None."""
    checkable, broken, _ = breaks(r, values, half, sample)
    n = int(checkable.sum())
    if n < MIN_ROWS:
        return None
    holds = float((checkable & ~broken).sum()) / n
    if holds < MIN_HOLDS:
        return None
    trial = {j: values[j][sample] for j in r.columns}
    trial_half = {j: half[j][sample] for j in r.columns}
    trial[r.target], trial_half[r.target] = trial[r.target][shuffled], trial_half[r.target][shuffled]
    c_ok, c_broken, _ = breaks(r, trial, trial_half, slice(None))
    chance = float((c_ok & ~c_broken).sum()) / max(int(c_ok.sum()), 1)
    if holds < CHANCE * chance:
        return None
    return Relation(r.target, r.form, r.left, r.right, r.k, r.exact, holds)


def detect_arithmetic(facts: list[ColumnFacts], n_rows: int) -> list[Finding]:
    """One finding per column that some broken relation leaves suspect, its rows' evidence the strongest."""
    relations, values, half = find_relations(facts, n_rows)
    if not relations:
        return []
    everything = slice(None)
    judged = [(r, *breaks(r, values, half, everything)) for r in relations]
    # A column is cleared on a row where another relation it enters holds.
    cleared: dict[int, np.ndarray] = {}
    for r, checkable, broken, _ in judged:
        for j in r.columns:
            held = checkable & ~broken
            cleared[j] = cleared[j] | held if j in cleared else held
    # Per column, its suspect rows over every relation it enters (the strongest evidence where several).
    parts: dict[int, list[tuple[np.ndarray, ...]]] = {}
    entered: dict[int, list[Relation]] = {}
    for r, checkable, broken, off in judged:
        rows = np.flatnonzero(broken)
        if not rows.size:
            continue
        suspect = {j: ~cleared[j][rows] for j in r.columns}
        possible = _possible_culprits(r, values, half, rows, checkable & ~broken)
        for j in r.columns:
            others = np.sum([suspect[i] for i in r.columns if i != j], axis=0)
            # Kept where no other column would be left suspect.
            suspect[j] = np.where(others > 0, suspect[j] & possible[j], suspect[j])
        n_suspects = np.sum([suspect[j] for j in r.columns], axis=0)
        # Every column cleared (two wrong values in the row): none can be told apart, all stay.
        for j in r.columns:
            suspect[j] |= n_suspects == 0
        n_suspects = np.where(n_suspects == 0, len(r.columns), n_suspects)
        base = -math.log(max(1.0 - r.holds, 1.0 / max(int(checkable.sum()), 1)))
        for j in r.columns:
            mine = suspect[j]
            if mine.any():
                share = n_suspects[mine]
                llr = np.minimum(base - np.log(share), LLR_CAP)
                parts.setdefault(j, []).append((rows[mine], llr, share, off[rows[mine]]))
                entered.setdefault(j, []).append(r)
    by_index = {f.index: f for f in facts}
    out: list[Finding] = []
    for j, pieces in parts.items():
        rows = np.concatenate([p[0] for p in pieces])
        llr, share, off = (np.concatenate([p[k] for p in pieces]) for k in (1, 2, 3))
        order = np.lexsort((-llr, rows))
        rows, llr, share, off = rows[order], llr[order], share[order], off[order]
        first = np.r_[True, rows[1:] != rows[:-1]]
        out.append(
            _finding(by_index[j], entered[j], by_index, rows[first], llr[first], share[first], off[first])
        )
    return out


def _possible_culprits(
    r: Relation,
    values: dict[int, np.ndarray],
    half: dict[int, np.ndarray],
    rows: np.ndarray,
    held: np.ndarray,
) -> dict[int, np.ndarray]:
    """Per column of the relation, on its broken rows: whether the column can be the wrong one. Not where its
    value solved from the others would lie outside what it holds where the relation holds (a negative count, a
    price ten times the dearest), nor where that value falls off the grid the column is written on (a price of
    199.2433 in a column of cents) while the others' rounding leaves it sure to finer than the grid."""
    spread = _solved_spread(r, values, half, rows)
    out: dict[int, np.ndarray] = {}
    for j, repaired in _repairs(r, values, rows).items():
        known = values[j][held]
        known = known[np.isfinite(known)]
        if not known.size:
            out[j] = np.ones(rows.size, dtype=bool)
            continue
        inside = (repaired >= known.min()) & (repaired <= known.max())
        step = 2.0 * float(np.median(half[j][held]))
        if np.isfinite(step) and step > 0:
            with np.errstate(invalid="ignore"):
                off_grid = np.abs(repaired - np.round(repaired / step) * step) > spread[j]
            inside &= ~(off_grid & (spread[j] < step / 2))
        out[j] = inside
    return out


def _repairs(r: Relation, values: dict[int, np.ndarray], rows: np.ndarray) -> dict[int, np.ndarray]:
    """Per column of the relation, on the given rows: the value it would hold if the others were right."""
    c, a = values[r.target][rows], values[r.left][rows]
    b = values[r.right][rows] if r.right >= 0 else np.ones_like(a)
    k = r.k
    with np.errstate(all="ignore"):
        if r.form == "+":
            out = {r.target: a + b, r.left: c - b, r.right: c - a}
        elif r.form == "-":
            out = {r.target: a - b, r.left: c + b, r.right: a - c}
        elif r.form == "*":
            out = {r.target: k * a * b, r.left: c / (k * b), r.right: c / (k * a)}
        elif r.form == "/":
            out = {r.target: k * a / b, r.left: c * b / k, r.right: k * a / c}
        else:
            out = {r.target: k * a, r.left: c / k}
    return out


def _solved_spread(
    r: Relation, values: dict[int, np.ndarray], half: dict[int, np.ndarray], rows: np.ndarray
) -> dict[int, np.ndarray]:
    """Per column of the relation, on the given rows: how far its value solved from the others may be from the
    truth through their rounding (the relation's tolerance without the column's own rounding, over how fast the
    target moves with the column)."""
    c, a = values[r.target][rows], values[r.left][rows]
    b = values[r.right][rows] if r.right >= 0 else np.zeros_like(a)
    halves = {j: half[j][rows] if j >= 0 else np.zeros_like(a) for j in (r.target, r.left, r.right)}
    k = r.k
    with np.errstate(all="ignore"):
        if r.form in ("+", "-"):
            rate = {r.target: np.ones_like(a), r.left: np.ones_like(a), r.right: np.ones_like(a)}
        elif r.form == "*":
            rate = {r.target: np.ones_like(a), r.left: np.abs(k * b), r.right: np.abs(k * a)}
        elif r.form == "/":
            rate = {r.target: np.ones_like(a), r.left: np.abs(k / b), r.right: np.abs(k * a / (b * b))}
        else:
            rate = {r.target: np.ones_like(a), r.left: np.full(a.size, abs(k))}
        out = {}
        for j, g in rate.items():
            others = {i: (np.zeros_like(a) if i == j else h) for i, h in halves.items()}
            tol = _tolerance(r, c, a, b, others[r.target], others[r.left], others[r.right])
            out[j] = np.where(g > 0, tol / g, np.inf)
    return out


def formula(r: Relation, by_name: dict[int, ColumnFacts]) -> str:
    t, a = repr(by_name[r.target].name), repr(by_name[r.left].name)
    b = repr(by_name[r.right].name) if r.right >= 0 else ""
    k = "" if abs(r.k - 1.0) < 1e-9 else f"{r.k:.6g} x "
    return {
        "+": f"{t} = {a} + {b}",
        "-": f"{t} = {a} - {b}",
        "*": f"{t} = {k}{a} x {b}",
        "/": f"{t} = {k}{a} / {b}",
        "k": f"{t} = {k}{a}",
    }[r.form]


def _finding(
    fy: ColumnFacts,
    relations: list[Relation],
    by_index: dict[int, ColumnFacts],
    rows: np.ndarray,
    llr: np.ndarray,
    suspects: np.ndarray,
    off: np.ndarray,
) -> Finding:
    name = fy.name
    said = "; ".join(f"{formula(r, by_index)} on {r.holds:.0%} of the rows" for r in relations)

    def describe(fd: Finding) -> str:
        first = int(fd.rows[0])
        return (
            f"{said}. {plural(fd.n_cells, 'row')} {agree(fd.n_cells, 'breaks', 'break')} that arithmetic, and "
            f"'{name}' is the likeliest wrong value there (e.g. row {first}: '{fy.column.value(first)}'): a number "
            "mistyped, noise, or a value from another row."
        )

    def spelled(r: Relation) -> dict[str, object]:
        out: dict[str, object] = {"target": by_index[r.target].name, "left": by_index[r.left].name}
        if r.right >= 0:
            out["right"] = by_index[r.right].name
        return {**out, "form": r.form, "k": r.k, "exact": r.exact}

    rr, cc = cells(rows, fy.index)
    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=rr,
        cols=cc,
        title=f"{name} breaks its arithmetic with other columns",
        description="",
        describe=describe,
        suggested_action=f"Check these values of '{name}' against the source; the row's other numbers say what "
        "it should be if they are right.",
        category="smart_fixes",
        detector="arithmetic",
        stats={
            "column": name,
            "rule": "arithmetic",
            "relations": [spelled(r) for r in relations],
            "formulas": [formula(r, by_index) for r in relations],
            # The other columns of its relations: what the verdict on a cell depends on (shown beside each
            # example, read by the template, part of a cell's key on the engine path).
            "determinants": sorted({by_index[c].name for r in relations for c in r.columns} - {name}),
            "number_regex": NUMBER,
            "grouped_regex": GROUPED,
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
        },
        key=f"arithmetic:{name}",
        llr=llr,
        stat=off,
        stat_name="how far the row is off the relation, in what rounding allows",
        value_level=False,
        vouchable=False,
        features={
            "suspects": np.log(suspects.astype(np.float64)),
            "holds": np.full(rows.size, max(_logit(r.holds) for r in relations)),
            "off": np.log1p(np.minimum(off, 1e9)),
        },
    )


def _logit(p: float) -> float:
    return math.log(max(p, 1e-6) / max(1.0 - p, 1e-6))
