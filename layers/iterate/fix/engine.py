"""The fix engine: a run's chosen fix actions applied to a text table, cell by cell, with a log of every change.

Each step names the issue it fixes, the action chosen for it (a FixAction of the follow-up conversation)
and the cells the run's own evidence says the issue touches; an action never reaches beyond those cells,
except the ones whose very meaning is a whole column (drop_column) or a whole value class of one column
(set_null with values: the markers the run counted). Nothing is recomputed differently from the run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iterate.contracts import FixAction

# Actions that remove data: they are applied only once the user confirmed them (`confirm` of apply_fixes).
DESTRUCTIVE = {"drop_rows": "drop", "drop_column": "drop", "set_null": "clear"}
# Cell edits run first (in this order), so that a spelling map sees trimmed values; dropping runs last.
_ORDER = (
    "trim_whitespace",
    "standardize_values",
    "convert_unit",
    "convert_dates",
    "split_column",
    "set_null",
    "fill_value",
    "flag_for_review",
    "keep",
    "drop_column",
    "drop_rows",
)
APPLIED_ACTIONS = frozenset(_ORDER)

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# Units a number can be converted between: factor to the dimension's base unit.
_UNITS: dict[str, tuple[str, float]] = {
    "mg": ("mass", 1e-3),
    "g": ("mass", 1.0),
    "kg": ("mass", 1e3),
    "t": ("mass", 1e6),
    "oz": ("mass", 28.349523125),
    "lb": ("mass", 453.59237),
    "lbs": ("mass", 453.59237),
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "m": ("length", 1.0),
    "km": ("length", 1e3),
    "in": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "mi": ("length", 1609.344),
    "ml": ("volume", 1e-3),
    "cl": ("volume", 1e-2),
    "l": ("volume", 1.0),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
}


class FixError(ValueError):
    """A fix that cannot be applied as asked: what, where and what to do (exit code 2)."""


@dataclass(frozen=True)
class FixStep:
    """One issue's chosen action and the cells the run's evidence says it touches (0-based data rows)."""

    issue_id: str
    action: FixAction
    rows: np.ndarray
    column: str | None = None


@dataclass(frozen=True)
class Change:
    """One line of changes.csv: `row` is the 0-based data row of the parent file; None for a whole column."""

    row: int | None
    column: str
    old: str | None
    new: str | None
    issue_id: str
    action: str


@dataclass
class FixResult:
    table: pa.Table
    changes: list[Change]
    dropped_rows: np.ndarray
    dropped_columns: list[str]
    # issue id -> action -> cells (or rows, or columns) changed; `skipped` -> why a touched cell was left as it was
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    # issue id -> why its step could not be applied (the other steps were)
    failed: dict[str, str] = field(default_factory=dict)


def needs_confirmation(result: FixResult, steps: Sequence[FixStep], confirmed: set[str]) -> list[FixStep]:
    """The destructive steps that would remove something and whose kind (`drop`, `clear`) is not confirmed."""
    return [
        s
        for s in steps
        if s.action.action in DESTRUCTIVE
        and DESTRUCTIVE[s.action.action] not in confirmed
        and result.counts.get(s.issue_id, {}).get(s.action.action, 0) > 0
    ]


class _Work:
    """The table being fixed: columns as Python lists (None = a proper empty value), edited in place."""

    def __init__(self, table: pa.Table) -> None:
        self.names = list(table.column_names)
        self.types = {n: table.schema.field(n).type for n in self.names}
        self.values: dict[str, list[Any]] = {}
        self.table = table
        self.n = table.num_rows
        self.drop_rows: set[int] = set()
        self.drop_cols: list[str] = []

    def col(self, name: str) -> list[Any]:
        if name not in self.names:
            raise FixError(f"column {name!r} is not in the data — was the file changed since the run?")
        if name not in self.values:
            self.values[name] = self.table.column(name).to_pylist()
        return self.values[name]


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def apply_fixes(table: pa.Table, steps: Sequence[FixStep]) -> FixResult:
    """Apply `steps` to `table` (text columns, rows in the parent file's order); the input table is not changed.

    Confirmation is the caller's (see needs_confirmation): every step given here is applied.
    """
    work = _Work(table)
    changes: list[Change] = []
    counts: dict[str, dict[str, int]] = {}
    skipped: dict[str, dict[str, int]] = {}
    ordered = sorted(steps, key=lambda s: _ORDER.index(s.action.action) if s.action.action in _ORDER else -1)
    failed: dict[str, str] = {}
    for step in ordered:
        name = step.action.action
        before = len(changes)
        dropped = (len(work.drop_rows), len(work.drop_cols))
        why: Counter[str] = Counter()
        try:
            if name not in APPLIED_ACTIONS:
                raise FixError(f"{step.issue_id}: the fix action {name!r} is not one Iterate can apply")
            _ACTIONS[name](work, step, changes, why)
        except FixError as exc:
            if len(changes) != before or (len(work.drop_rows), len(work.drop_cols)) != dropped:
                raise  # it failed halfway: nothing is written rather than half a fix
            failed[step.issue_id] = str(exc)  # refused before it changed anything: the others go on
            continue
        counts.setdefault(step.issue_id, {})[name] = len(changes) - before
        if why:
            skipped[step.issue_id] = dict(why)
    kept = np.array([r for r in range(work.n) if r not in work.drop_rows], dtype=np.int64)
    arrays = []
    names = []
    for n in work.names:
        if n in work.drop_cols:
            continue
        names.append(n)
        arr = pa.array(work.values[n], type=pa.string()) if n in work.values else table.column(n)
        arrays.append(arr)
    out = pa.table(arrays, names=names) if names else pa.table({})
    if len(kept) != work.n:
        out = out.take(pa.array(kept))
    if failed and len(failed) == len(steps):
        raise FixError("; ".join(failed.values()))
    return FixResult(
        table=out,
        changes=changes,
        dropped_rows=np.array(sorted(work.drop_rows), dtype=np.int64),
        dropped_columns=list(work.drop_cols),
        counts=counts,
        skipped=skipped,
        failed=failed,
    )


def _column_of(step: FixStep) -> str:
    col = step.action.parameters.get("column") or step.column
    if not col:
        raise FixError(f"{step.issue_id}: the action {step.action.action} names no column")
    return str(col)


def _edit(
    work: _Work,
    step: FixStep,
    changes: list[Change],
    why: Counter[str],
    fn: Callable[[str], str | None],
) -> None:
    """Set each touched cell to fn(value); fn returns the value unchanged when it cannot fix it."""
    col = _column_of(step)
    values = work.col(col)
    for r in step.rows.tolist():
        if r in work.drop_rows:
            continue
        old = values[r]
        if old is None:
            continue
        new = fn(str(old))
        if new == old:  # already right, or fn counted in `why` why it could not change it
            continue
        values[r] = new
        changes.append(Change(r, col, _text(old), new, step.issue_id, step.action.action))


def _trim(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    _edit(work, step, changes, why, lambda v: re.sub(r"(?<=\S) {2,}(?=\S)", " ", v.strip()))


def _standardize(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    p = step.action.parameters
    strategy = p.get("strategy")
    if strategy == "strip_units":
        _edit(work, step, changes, why, lambda v: _strip_unit(v, why))
    elif strategy == "group_majority":
        _group_majority(work, step, changes, why)
    elif isinstance(p.get("mapping"), dict) and p["mapping"]:
        mapping = {str(k): str(v) for k, v in p["mapping"].items()}
        original = work.table.column(_column_of(step))

        def mapped(v: str, r: int) -> str:
            if v in mapping:
                return mapping[v]
            first = original[r].as_py()  # the value the run saw, before an earlier step (a trim) edited it
            if first in mapping:
                return mapping[first]
            why["not in the mapping"] += 1
            return v

        col = _column_of(step)
        values = work.col(col)
        for r in step.rows.tolist():
            if r in work.drop_rows or values[r] is None:
                continue
            old = values[r]
            new = mapped(str(old), r)
            if new != old:
                values[r] = new
                changes.append(Change(r, col, _text(old), new, step.issue_id, "standardize_values"))
    else:
        raise FixError(
            f"{step.issue_id}: standardize_values needs a mapping or a strategy (strip_units, group_majority)"
        )


def _split_number(v: str) -> tuple[float, str] | None:
    found = _NUMBER.findall(v)
    if len(found) != 1:
        return None
    number = found[0].replace(",", "")
    try:
        value = float(number)
    except ValueError:
        return None
    unit = _NUMBER.sub(" ", v).strip().strip(".").strip()
    return value, unit


def _strip_unit(v: str, why: Counter[str]) -> str:
    found = _NUMBER.findall(v)
    if len(found) != 1:
        why["no single number in the value"] += 1
        return v
    return found[0].replace(",", "")


def _plain(x: float) -> str:
    text = f"{x:.10g}"
    return text if "e" not in text else repr(x)


def _convert_unit(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    col = _column_of(step)
    values = work.col(col)
    target = str(step.action.parameters.get("to") or "most_common")
    if target in ("most_common", ""):
        units = Counter(
            parsed[1].lower()
            for v in values
            if v is not None and (parsed := _split_number(str(v))) and parsed[1]
        )
        if not units:
            raise FixError(f"{step.issue_id}: no value of {col!r} carries a unit to convert from")
        target = units.most_common(1)[0][0]
    target_l = target.lower()

    def convert(v: str) -> str:
        parsed = _split_number(v)
        if parsed is None:
            why["no single number in the value"] += 1
            return v
        number, unit = parsed
        unit_l = unit.lower()
        if unit_l in ("", target_l):
            return _NUMBER.findall(v)[0].replace(",", "")  # the number as written, its unit gone
        a, b = _UNITS.get(unit_l), _UNITS.get(target_l)
        if a is None or b is None or a[0] != b[0]:
            why[f"no conversion from {unit!r} to {target!r}"] += 1
            return v
        return _plain(number * a[1] / b[1])

    _edit(work, step, changes, why, convert)


def _convert_dates(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    p = step.action.parameters
    to = str(p.get("to") or "")
    formats = [str(f) for f in p.get("formats", [])]
    if not to or not formats:
        raise FixError(f"{step.issue_id}: convert_dates needs the target format (to) and the formats to read")

    def convert(v: str) -> str:
        for fmt in formats:
            try:
                return datetime.strptime(v.strip(), fmt).strftime(to)
            except ValueError:
                continue
        why["in none of the formats"] += 1
        return v

    _edit(work, step, changes, why, convert)


def _split(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    into = [str(c) for c in step.action.parameters.get("into", [])]
    col = _column_of(step)
    if len(into) != 2 or into[0] != col:
        raise FixError(f"{step.issue_id}: split_column needs into=[{col!r}, OTHER_COLUMN]")
    head_values, tail_values = work.col(col), work.col(into[1])
    for r in step.rows.tolist():
        old = head_values[r]
        if r in work.drop_rows or old is None:
            continue
        parts = str(old).rstrip().rsplit(None, 1)
        if len(parts) != 2 or (tail_values[r] or "").strip():
            why["nothing to split, or the other column is not empty"] += 1
            continue
        head, tail = parts[0].strip(), parts[1].strip()
        changes.append(Change(r, col, str(old), head, step.issue_id, "split_column"))
        changes.append(Change(r, into[1], _text(tail_values[r]), tail, step.issue_id, "split_column"))
        head_values[r], tail_values[r] = head, tail


def _set_null(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    markers = step.action.parameters.get("values")
    col = _column_of(step)
    values = work.col(col)
    wanted = {str(m) for m in markers} if markers else None
    for r in step.rows.tolist():
        old = values[r]
        if r in work.drop_rows or old is None or (wanted is not None and str(old) not in wanted):
            continue
        if old == "" and work.types[col] in (pa.string(), pa.large_string()):
            continue  # already empty: as text, "" is the empty value
        values[r] = None
        changes.append(Change(r, col, _text(old), None, step.issue_id, "set_null"))


def _fill(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    p = step.action.parameters
    col = _column_of(step)
    values = work.col(col)
    if p.get("strategy") == "most_frequent":
        touched = set(step.rows.tolist())
        common = Counter(
            str(v) for r, v in enumerate(values) if r not in touched and v is not None and str(v).strip()
        ).most_common(1)
        if not common:
            raise FixError(f"{step.issue_id}: {col!r} has no value to fill the gaps with")
        fill = common[0][0]
    elif p.get("strategy") == "median":
        median = _median_text(values, set(step.rows.tolist()))
        if median is None:
            raise FixError(f"{step.issue_id}: {col!r} holds no number to take a median of")
        fill = median
    elif "value" in p:
        fill = str(p["value"])
        if _mostly_numbers(values) and _number(fill) is None:
            raise FixError(
                f"{step.issue_id}: {col!r} holds numbers; filling it with the text {fill!r} would not"
            )
    else:
        raise FixError(f"{step.issue_id}: fill_value needs a value or strategy=most_frequent or median")
    for r in step.rows.tolist():
        if r in work.drop_rows or values[r] == fill:
            continue
        old = values[r]
        values[r] = fill
        changes.append(Change(r, col, _text(old), fill, step.issue_id, "fill_value"))


def _number(text: object) -> float | None:
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _mostly_numbers(values: Sequence[object], share: float = 0.95) -> bool:
    """Whether the column's filled cells are numbers (`share` of them at least): it is a number column."""
    filled = [v for v in values if v is not None and str(v).strip()]
    return bool(filled) and sum(_number(v) is not None for v in filled) >= share * len(filled)


def _median_text(values: Sequence[object], skip: set[int]) -> str | None:
    """The median of the column's numbers outside `skip`, written as the column writes them: a whole number
    where every value is one, else with the most decimals a value has (at most 6)."""
    texts = [
        str(v).strip() for r, v in enumerate(values) if r not in skip and v is not None and str(v).strip()
    ]
    numbers = [n for n in map(_number, texts) if n is not None]
    if not numbers:
        return None
    middle = float(np.median(numbers))
    decimals = max((len(t.split(".", 1)[1]) for t in texts if "." in t and _number(t) is not None), default=0)
    if decimals == 0 and middle == int(middle):
        return str(int(middle))
    return f"{middle:.{min(max(decimals, 1), 6)}f}"


def _review(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    """No value changes: the touched cells are listed in changes.csv (old = new) for someone to review."""
    col = step.action.parameters.get("column") or step.column or ""
    values = work.col(str(col)) if col else None
    for r in step.rows.tolist():
        v = _text(values[r]) if values is not None else None
        changes.append(Change(r, str(col), v, v, step.issue_id, "flag_for_review"))


def _keep(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    return None


def _drop_column(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    col = _column_of(step)
    work.col(col)  # must exist
    if col not in work.drop_cols:
        work.drop_cols.append(col)
        changes.append(Change(None, col, None, None, step.issue_id, "drop_column"))


def _drop_rows(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    for r in step.rows.tolist():
        if r not in work.drop_rows:
            work.drop_rows.add(r)
            changes.append(Change(r, "", None, None, step.issue_id, "drop_rows"))


def _group_majority(work: _Work, step: FixStep, changes: list[Change], why: Counter[str]) -> None:
    by = [str(c) for c in step.action.parameters.get("by", [])]
    if not by:
        raise FixError(f"{step.issue_id}: group_majority needs the columns to group by (by)")
    col = _column_of(step)
    values = work.col(col)
    keys = list(zip(*(work.col(c) for c in by), strict=True))
    touched = set(step.rows.tolist())
    votes: dict[tuple[Any, ...], Counter[str]] = {}
    for r, key in enumerate(keys):
        if r not in touched and values[r] is not None:
            votes.setdefault(key, Counter())[str(values[r])] += 1

    def majority(r: int) -> str | None:
        counter = votes.get(keys[r])
        if not counter:
            return None
        ranked = counter.most_common(2)
        if len(ranked) == 2 and ranked[0][1] == ranked[1][1]:
            return None  # a tie: no majority to follow
        return ranked[0][0]

    for r in step.rows.tolist():
        if r in work.drop_rows or values[r] is None:
            continue
        new = majority(r)
        if new is None:
            why["no majority in the group"] += 1
            continue
        if new != values[r]:
            changes.append(Change(r, col, _text(values[r]), new, step.issue_id, "standardize_values"))
            values[r] = new


_ACTIONS: dict[str, Callable[[_Work, FixStep, list[Change], Counter[str]], None]] = {
    "trim_whitespace": _trim,
    "standardize_values": _standardize,
    "convert_unit": _convert_unit,
    "convert_dates": _convert_dates,
    "split_column": _split,
    "set_null": _set_null,
    "fill_value": _fill,
    "flag_for_review": _review,
    "keep": _keep,
    "drop_column": _drop_column,
    "drop_rows": _drop_rows,
}
