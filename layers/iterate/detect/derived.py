"""Derived columns: a column built from two others (`state_average` = state + "_" + measure_code).

Where the rule holds, a value is judged by it: a value equal to the concatenation of its row's sources is
right however rare it is; a value that breaks the rule while both sources look right is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.findings import Finding, cells
from iterate.profile._bytes import string_buffers

SAMPLE = 2000
MIN_HOLDS = 0.9  # the rule must hold on this share of rows
SEPARATORS = ("", "_", "-", " ", "/", ":", "|", ".", ", ", ",")


@dataclass
class Derivation:
    target: int
    left: int
    sep: str
    right: int
    holds: np.ndarray  # per row: the target equals left + sep + right


def _values(f: ColumnFacts, rows: np.ndarray) -> list[str]:
    return f.column.texts(f.column.codes[rows])


def find_derivations(facts: list[ColumnFacts], n_rows: int) -> list[Derivation]:
    if n_rows < 20:
        return []
    rng = np.random.default_rng(11)
    sample = np.arange(n_rows) if n_rows <= SAMPLE else np.sort(rng.choice(n_rows, SAMPLE, replace=False))
    cols = [f for f in facts if f.column.n_unique >= 2 and f.n_present >= 0.5 * n_rows]
    if len(cols) < 3:
        return []
    # Cheap vectorised screens before any per-row string work: a target starts with its left source's first
    # byte, ends with its right source's last one, and is longer than either (bytes of UTF-8: a necessary
    # condition all the same).
    first = np.empty((len(cols), sample.size), dtype=np.int16)
    last = np.empty_like(first)
    mean_len = np.empty(len(cols))
    for pos, f in enumerate(cols):
        offsets, data = string_buffers(f.column.dictionary.take(pa.array(f.column.codes[sample])))
        lengths = np.diff(offsets)
        mean_len[pos] = lengths.mean()
        if data.size == 0:
            first[pos] = last[pos] = -1
            continue
        filled = lengths > 0
        first[pos] = np.where(filled, data[np.minimum(offsets[:-1], data.size - 1)], -1)
        last[pos] = np.where(filled, data[np.maximum(offsets[1:] - 1, 0)], -1)
    text: dict[int, list[str]] = {}

    def values_of(f: ColumnFacts) -> list[str]:
        if f.index not in text:
            text[f.index] = _values(f, sample)
        return text[f.index]

    def like(bytes_: np.ndarray, t_pos: int, among: np.ndarray) -> np.ndarray:
        """Columns (of `among`) whose byte is the target's on MIN_HOLDS of the rows: the share computed as
        `.mean(axis=1)` computes it (the same count over the same size), without a matrix of floats."""
        found = np.zeros(len(cols), dtype=bool)
        found[among] = np.count_nonzero(bytes_[among] == bytes_[t_pos], axis=1) / sample.size >= MIN_HOLDS
        return found

    out = []
    for t_pos, target in enumerate(cols):
        # Only a shorter column can be a source: the others are not compared at all.
        shorter = mean_len < mean_len[t_pos]
        right_ok = {cols[p].index for p in np.flatnonzero(like(last, t_pos, shorter)) if p != t_pos}
        if not right_ok:
            continue
        starts_like = like(first, t_pos, shorter)
        tv = values_of(target)
        for l_pos in np.flatnonzero(starts_like):
            left = cols[int(l_pos)]
            if left.index == target.index:
                continue
            lv = values_of(left)
            starts = sum(1 for t, a in zip(tv, lv, strict=True) if a and t.startswith(a) and len(t) > len(a))
            if starts < MIN_HOLDS * len(tv):
                continue
            rests = [t[len(a) :] for t, a in zip(tv, lv, strict=True)]
            for right in cols:
                if right.index in (target.index, left.index) or right.index not in right_ok:
                    continue
                rv = values_of(right)
                for sep in SEPARATORS:
                    hits = sum(1 for r, b in zip(rests, rv, strict=True) if b and r == sep + b)
                    if hits >= MIN_HOLDS * len(tv):
                        full = _holds(target, left, sep, right)
                        if full.mean() >= MIN_HOLDS:
                            out.append(Derivation(target.index, left.index, sep, right.index, full))
                        break
    return out


def _holds(target: ColumnFacts, left: ColumnFacts, sep: str, right: ColumnFacts) -> np.ndarray:
    """Per row, whether target == left + sep + right (computed on distinct triples, not rows)."""
    triples = np.stack([target.column.codes, left.column.codes, right.column.codes], axis=1)
    uniq, inverse = np.unique(triples, axis=0, return_inverse=True)
    tu, lu, ru = target.column.uniques, left.column.uniques, right.column.uniques
    ok = np.array([tu[t] == lu[a] + sep + ru[b] for t, a, b in uniq], dtype=bool)
    return ok[inverse.reshape(-1)]


def _describer(
    target: ColumnFacts, left: ColumnFacts, right: ColumnFacts, d: Derivation
) -> Callable[[Finding], str]:
    def describe(fd: Finding) -> str:
        return (
            f"'{target.name}' is built as {left.name} + '{d.sep}' + {right.name} in "
            f"{d.holds.mean():.1%} of rows, but {fd.n_rows:,} rows break that rule although their "
            f"'{left.name}' and '{right.name}' look right (e.g. '{target.column.value(int(fd.rows[0]))}' "
            f"where '{(fd.expected or [''])[0]}' was expected)."
        )

    return describe


def detect_derived(
    facts: list[ColumnFacts],
    n_rows: int,
    suspect: dict[int, np.ndarray],
    derivations: list[Derivation] | None = None,
) -> tuple[list[Finding], list[Derivation]]:
    """Rows breaking a derivation whose sources are not themselves suspected wrong (`suspect`: per column,
    a boolean row mask of cells other detectors flagged). `derivations`: found beforehand (they need no
    other detector), else found here."""
    if derivations is None:
        derivations = find_derivations(facts, n_rows)
    findings = []
    for d in derivations:
        target, left, right = facts[d.target], facts[d.left], facts[d.right]
        broken = ~d.holds & ~target.is_missing[target.column.codes]
        excused = np.zeros(n_rows, dtype=bool)
        for src in (d.left, d.right):
            if src in suspect:
                excused |= suspect[src]
        excused &= broken
        if excused.sum() > 5000:
            continue  # too many suspect sources for the rule to say anything
        rows = np.flatnonzero(broken & ~excused)
        if rows.size == 0:
            continue
        r, c = cells(rows, target.index)
        lu, ru = left.column.uniques, right.column.uniques
        expected = [lu[int(left.column.codes[i])] + d.sep + ru[int(right.column.codes[i])] for i in rows]
        findings.append(
            Finding(
                type="dependency_violation",
                columns=[target.name],
                rows=r,
                cols=c,
                title=f"{target.name} does not match {left.name} and {right.name}",
                description="",
                describe=_describer(target, left, right, d),
                suggested_action=f"Rebuild '{target.name}' from '{left.name}' and '{right.name}'.",
                category="quick_fixes",
                detector="derived",
                stats={
                    "column": target.name,
                    "left": left.name,
                    "right": right.name,
                    "separator": d.sep,
                    "missing_markers": missing_markers(target.null_marker),
                    "excused_rows": np.flatnonzero(excused).tolist(),
                },
                expected=expected,
                key=f"derived:{target.name}",
                value_level=False,
            )
        )
    return findings, derivations
