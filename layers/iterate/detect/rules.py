"""Rules that hold on part of a value or under a condition, mined from the table with support and confidence.

Whole-value dependencies (iterate.detect.dependencies) judge rows that share a value. Two kinds of rule
escape them, because the rows that obey them share no whole value:
- part of a value: the first characters of a code determine another column (the first digits of a zip code
  its state, a tail number's prefix its operator), where the codes themselves are nearly all distinct;
- a condition on a number: "if amount > 0 then status = 'paid'", "where children = 0, child_allowance = 0".

Each such condition is a *facet* of a column (a prefix of length 1-3 of a code, the sign of a number). A rule
"where facet = g, Y = b" is kept when it has support (at least MIN_SUPPORT rows, and 1% of the table, meet the
condition), confidence (at least MIN_CONFIDENCE of them hold b) and says something (outside the condition Y
differs from b in at least MIN_OUTSIDE of the rows). A row that meets the condition but holds another Y
breaks the rule: its evidence is as strong as the rule's exceptions are rare, -log(exception rate). That is
deliberately no more: the exceptions are at most that common among right values, and a rule with
legitimate exceptions (a tail-number prefix that mostly, not always, means a turbofan) is common in real
tables. The decision flags a break where the column's estimated error rate or another signal on the cell
agrees (a rare value, a typo), not on the rule alone.

Rules are found on a sample of rows and measured on every row; the `conditional` rule of the rows template
recounts them in code from the same facets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from iterate.detect.context import ColumnFacts, missing_markers
from iterate.detect.dependencies import MAX_ROWS_LISTED
from iterate.detect.discovery import SAMPLE_ROWS, Dependency, present_codes
from iterate.detect.findings import Finding, cells
from iterate.detect.numeric import NUMBER
from iterate.detect.sequence import regular_step, row_numbers

MIN_SUPPORT = 20
MIN_CONFIDENCE = 0.95
MIN_OUTSIDE = 0.1
MAX_CLASSES = 50  # a rule's conclusion is a category: Y has at most this many distinct values
MIN_SIGN_SHARE = 0.05  # a sign facet needs two signs each held by this share of the rows
CODE = r"^[A-Za-z0-9]{3,}$"  # values a prefix facet reads: codes of letters and digits, no spaces
MIN_CODE_SHARE = 0.9
MAX_PREFIX = 3
SIGNS = ("<0", "=0", ">0")
# Pairs examined per table, the first columns first, as the dependency search does: at most MAX_FACETS
# conditions against MAX_TARGETS columns (on a 500-column table, all of them would cost half a second).
MAX_FACETS = 20
MAX_TARGETS = 80


@dataclass
class Facet:
    """A condition on part of one column: per row, the facet's class (-1: the row has none)."""

    source: int
    kind: str  # "prefix" or "sign"
    length: int  # prefix length (0 for sign)
    codes: np.ndarray
    labels: list[str]

    def describe(self, name: str, label: str) -> str:
        if self.kind == "prefix":
            return f"'{name}' starts with '{label}'"
        return f"'{name}' {label.replace('<0', '< 0').replace('=0', '= 0').replace('>0', '> 0')}"

    def params(self, name: str) -> dict[str, object]:
        out: dict[str, object] = {"column": name, "kind": self.kind}
        if self.kind == "prefix":
            out.update(length=self.length, code_regex=CODE)
        else:
            out.update(number_regex=NUMBER)
        return out


def _prefix_facets(f: ColumnFacts, n_rows: int) -> list[Facet]:
    """Prefixes of a column of distinct codes (values rarely repeat, so the whole value groups no rows)."""
    if f.typical_count >= 3 or f.n_present < MIN_SUPPORT or f.column.n_unique < MIN_SUPPORT:
        return []
    # A row counter is a position, not a code: its prefixes are ranges of rows ('5' is rows 5, 50-59, 500-599).
    if f.numeric.numeric and regular_step(row_numbers(f, f.numeric)) is not None:
        return []
    text = pc.utf8_trim_whitespace(f.column.dictionary)
    code = np.asarray(pc.fill_null(pc.match_substring_regex(text, CODE), False), dtype=bool) & f.present
    if f.counts[code].sum() < MIN_CODE_SHARE * f.n_present:
        return []
    out = []
    for k in range(1, MAX_PREFIX + 1):
        prefix = pc.utf8_slice_codeunits(text, 0, k)
        encoded = pc.dictionary_encode(prefix)
        per_value = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        per_value = np.where(code, per_value, -1)
        labels = [str(v) for v in encoded.dictionary.to_pylist()]
        if not 2 <= np.unique(per_value[per_value >= 0]).size <= n_rows / MIN_SUPPORT:
            continue
        out.append(Facet(f.index, "prefix", k, per_value[f.column.codes], labels))
    return out


def _sign_facet(f: ColumnFacts) -> Facet | None:
    m = f.numeric
    if not m.numeric or m.share < MIN_CODE_SHARE:
        return None
    values = row_numbers(f, m)
    sign = np.full(values.size, -1, dtype=np.int64)
    ok = np.isfinite(values)
    sign[ok] = (np.sign(values[ok]) + 1).astype(np.int64)
    held = np.bincount(sign[ok], minlength=3)
    if (held >= MIN_SIGN_SHARE * values.size).sum() < 2:
        return None
    return Facet(f.index, "sign", 0, sign, list(SIGNS))


@dataclass
class Rule:
    facet: Facet
    rhs: int
    when: list[int]  # facet classes the rule speaks for
    then: list[int]  # Y's code under each
    support: list[int]
    confidence: list[float]


def _mine(facet: Facet, fy: ColumnFacts, y: np.ndarray, sample: np.ndarray | None) -> Rule | None:
    x = facet.codes if sample is None else facet.codes[sample]
    ys = y if sample is None else y[sample]
    use = (x >= 0) & (ys >= 0)
    if use.sum() < MIN_SUPPORT:
        return None
    n_x, n_y = len(facet.labels), fy.column.n_unique
    table = np.bincount(x[use] * n_y + ys[use], minlength=n_x * n_y).reshape(n_x, n_y)
    support = table.sum(axis=1)
    best = table.argmax(axis=1)
    top = table[np.arange(n_x), best]
    y_totals = table.sum(axis=0)
    total = int(support.sum())
    when, then, sup, conf = [], [], [], []
    for g in np.flatnonzero(support >= max(MIN_SUPPORT, 0.01 * total)).tolist():
        confidence = top[g] / support[g]
        outside = total - support[g]
        if confidence < MIN_CONFIDENCE or outside < MIN_SUPPORT:
            continue
        differs = (outside - (y_totals[best[g]] - top[g])) / outside
        if differs < MIN_OUTSIDE:
            continue
        when.append(g)
        then.append(int(best[g]))
        sup.append(int(support[g]))
        conf.append(float(confidence))
    return Rule(facet, fy.index, when, then, sup, conf) if when else None


def detect_rule_violations(
    facts: list[ColumnFacts], n_rows: int, deps: list[Dependency], *, seed: int = 11
) -> list[Finding]:
    """Rows that meet a rule's condition but break its conclusion, one finding per (facet, Y)."""
    if n_rows < 2 * MIN_SUPPORT:
        return []
    determines = {(d.lhs, d.rhs) for d in deps}
    facets: list[Facet] = []
    for f in facts:
        if f.column.n_unique <= 1:
            continue
        facets += _prefix_facets(f, n_rows)
        sign = _sign_facet(f) if f.column.n_unique >= 3 else None
        if sign is not None:
            facets.append(sign)
        if len(facets) >= MAX_FACETS:
            facets = facets[:MAX_FACETS]
            break
    if not facets:
        return []
    targets = [f for f in facts if 2 <= f.n_present_unique <= MAX_CLASSES and f.n_present >= MIN_SUPPORT]
    targets = targets[:MAX_TARGETS]
    rng = np.random.default_rng(seed)
    sample = None if n_rows <= SAMPLE_ROWS else np.sort(rng.choice(n_rows, SAMPLE_ROWS, replace=False))
    y_codes = {fy.index: present_codes(fy) for fy in targets}
    out: list[Finding] = []
    for facet in facets:
        for fy in targets:
            if fy.index == facet.source or (facet.source, fy.index) in determines:
                continue
            rule = _mine(facet, fy, y_codes[fy.index], sample)
            if rule is not None:
                found = _violations(rule, facts, y_codes[fy.index])
                if found is not None:
                    out.append(found)
    return out


def _violations(rule: Rule, facts: list[ColumnFacts], y: np.ndarray) -> Finding | None:
    facet, fy = rule.facet, facts[rule.rhs]
    x = facet.codes
    expected = np.full(len(facet.labels), -1, dtype=np.int64)
    expected[rule.when] = rule.then
    want = expected[np.maximum(x, 0)]
    broken = (x >= 0) & (want >= 0) & (y >= 0) & (y != want)
    if not broken.any():
        return None
    # Measured on every row: the rule's exception rate over all its conditions (Laplace-smoothed) sets the
    # evidence, as a dependency's rate of lone deviations does: exceptions are at most that common among
    # right values.
    rate = (int(broken.sum()) + 1.0) / (int(((x >= 0) & (want >= 0) & (y >= 0)).sum()) + 2.0)
    rows = np.flatnonzero(broken)
    llr = np.full(rows.size, -np.log(rate))
    source = facts[facet.source].name
    name = fy.name
    rules = [
        {"when": facet.labels[g], "then": fy.column.texts([b])[0], "support": s, "confidence": round(c, 4)}
        for g, b, s, c in zip(rule.when, rule.then, rule.support, rule.confidence, strict=True)
    ]
    first = rules[0]

    def describe(fd: Finding) -> str:
        r = int(fd.rows[0])
        shown = "; ".join(
            f"where {facet.describe(source, str(x['when']))}, '{name}' is '{x['then']}' in "
            f"{float(str(x['confidence'])):.1%} of {int(str(x['support'])):,} rows"
            for x in rules[:3]
        )
        return (
            f"{shown}. {fd.n_cells:,} rows meet the condition but hold another '{name}' (e.g. row {r}: "
            f"'{source}' = '{facts[facet.source].column.value(r)}', '{name}' = '{fy.column.value(r)}'). "
            "Either the value or the condition is wrong in these rows, or the rule has exceptions."
        )

    r, c = cells(rows, fy.index)
    return Finding(
        type="dependency_violation",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Values of {name} that break a rule on {source}",
        description="",
        describe=describe,
        suggested_action=f"Check '{name}' in these rows: rows like them hold '{first['then']}'. Correct the "
        f"value, or '{source}' if that is the wrong one.",
        category="smart_fixes",
        detector="rules",
        stats={
            "column": name,
            "rule": "conditional",
            "facet": facet.params(source),
            "rules": rules,
            "missing_markers": missing_markers(fy.null_marker),
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
        },
        key=f"rule:{facet.kind}{facet.length or ''}:{source}:{name}",
        llr=llr,
        stat=np.full(rows.size, 1.0 - rate),
        stat_name="confidence of the rule the row breaks",
        value_level=False,
        vouchable=False,
    )


__all__ = ["Facet", "Rule", "detect_rule_violations"]
