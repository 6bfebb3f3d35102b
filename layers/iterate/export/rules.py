"""Checks for other tools, derived from a run's profile and its confirmed issues (one neutral list, rendered per tool).

A check either encodes confirmed issues (the parameters each issue was proven with, a regex, the values proven
wrong, the outliers' range, a dependency, become the check it fails) or states a profile fact the data meets
today (completeness, keys, ranges, vocabularies, shapes, dependencies). Only the first kind, with the file's
schema and its columns' types, is a failure (`level="fail"`): a gate built from today's file must not fail on
next month's first larger price or new product, so what the profile merely observed is a warning, with a
tolerance (a range widened by a margin, a share of values allowed to miss). `Check.issues` names the issues a
failure encodes: on the analysed file exactly those failures fail; on a corrected file every failure passes.
Issues someone accepted (`iterate accept`) let the gate pass, so no failure encodes them.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from iterate.contracts import AnalysisResult, ColumnProfile, DatasetProfile, Issue
from iterate.export import regex as rx
from iterate.profile.parse import strftime_to_regex
from iterate.profile.shapes import shape_regex

Kind = Literal[
    "columns",  # the table has exactly these columns, in this order
    "not_null",
    "number",  # every value reads as a number (params: integer)
    "between",  # every value is a number within [low, high]
    "in_set",  # every value is one of `values`
    "not_in_set",  # no value is one of `values`
    "regex",  # every value fully matches `regex` (Python flavour)
    "not_regex",  # no value contains a match of `regex`
    "date",  # every value is a date written with strftime `format`
    "unique",  # the combination of `columns` identifies a row
    "dependency",  # columns[0] determines columns[1] (params: pairs, the majority value of each group)
]

Level = Literal["fail", "warn"]
# Low cardinality: a column whose values repeat enough to be a vocabulary.
MAX_SET = 50
MIN_REPEAT = 3
# A dependency is exported with its value pairs only up to this many groups.
MAX_PAIRS = 2000
NUMERIC_TYPES = frozenset({"integer", "decimal"})
# A range the profile measured is widened by this share of its span (at least this share of its larger end)
# before it becomes a warning: next month's first larger price is not an alarm.
RANGE_MARGIN = 0.5
# A vocabulary's warning tolerates this share of values not seen today (GX `mostly`), a new product among them.
NEW_VALUES_SHARE = 0.01
# Issue types whose flagged values are wrong wherever they appear (not wrong in their row only).
VALUE_TYPES = frozenset(
    {"inconsistent_category", "encoding_damage", "stray_whitespace", "disguised_missing", "format_violation",
     "mixed_types", "out_of_domain", "unit_in_number"}
)  # fmt: skip
# Issues that describe records or the file, not a value a rule can refuse.
NOT_A_RULE = {
    "missing_together": "blanks that come together describe the record (a cancelled order has no ship date)",
    "near_duplicate_rows": "near duplicates are judged across normalised values; no engine has that check",
    "merged_columns": "a column glued into its neighbour is a layout problem, not a value rule",
    "constant_column": "a constant column is a fact about the column, not a rule its values break",
    "all_unique_column": "a column of unique values is a fact, not a rule its values break",
    "ragged_rows": "ragged rows were repaired while reading; no check on the loaded table sees them",
    "blank_header": "header problems were repaired while reading",
    "duplicate_header": "header problems were repaired while reading",
}


@dataclass(frozen=True)
class Check:
    id: str
    kind: Kind
    columns: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    issues: tuple[str, ...] = ()
    why: str = ""
    level: Level = "fail"  # "fail": a gate fails on it; "warn": a profile observation, reported only

    @property
    def column(self) -> str:
        return self.columns[0]


@dataclass
class RuleSet:
    """The checks for one table, and the confirmed issues no check encodes (with the reason)."""

    dataset: str
    columns: list[ColumnProfile]
    checks: list[Check]
    skipped: dict[str, str]
    null_values: list[str]

    def numeric(self, column: str) -> str | None:
        """`integer` / `decimal` for a column exported as numbers (the kind its failure check requires), else
        None."""
        for c in self.checks:
            if c.kind == "number" and c.column == column and c.level == "fail":
                return "integer" if c.params.get("integer") else "decimal"
        return None


def _stats(issue: Issue) -> dict[str, Any]:
    return issue.evidence.stats if issue.evidence else {}


def _column(issue: Issue) -> str | None:
    col = _stats(issue).get("column")
    if isinstance(col, str):
        return col
    return issue.affectedColumns[0] if len(issue.affectedColumns) == 1 else None


def _bad_values(issue: Issue) -> list[str]:
    st = _stats(issue)
    vals = st.get("bad_values") or []
    return [v for v in vals if isinstance(v, str)]


def _canonical(issue: Issue) -> dict[str, str]:
    can = _stats(issue).get("canonical") or {}
    return {k: v for k, v in can.items() if isinstance(k, str) and isinstance(v, str)}


def _is_numeric(col: ColumnProfile) -> bool:
    return col.semanticType in NUMERIC_TYPES and col.numeric is not None and col.format is None


def _complete_values(col: ColumnProfile) -> list[str] | None:
    """Every distinct value of a low-cardinality column (the profile's top values hold them all), else None."""
    present = col.count
    if col.distinct == 0 or col.distinct > MAX_SET or col.distinct * MIN_REPEAT > present:
        return None
    if len(col.topValues) < col.distinct or sum(v.count for v in col.topValues) < present:
        return None
    return [v.value for v in col.topValues]


def _single_shape(col: ColumnProfile) -> str | None:
    if col.patternsEstimated or len(col.patterns) != 1 or col.patterns[0].count != col.count:
        return None
    return col.patterns[0].value


def _dependency_pairs(
    run_dir: Path | None, profile: DatasetProfile, lhs: str, rhs: str
) -> tuple[list[list[str]] | None, bool | None]:
    """(the majority `rhs` value of each `lhs` group in the run's data, missing values left out; whether some
    group holds two `rhs` values): (None, None) without the data."""
    if run_dir is None or not (run_dir / "data.parquet").exists():
        return None, None
    import pyarrow.parquet as pq

    names = [c.name for c in profile.columns]
    table = pq.read_table(run_dir / "data.parquet")
    if table.num_columns != len(names):
        return None, None
    li, ri = names.index(lhs), names.index(rhs)
    left = table.column(li).to_pylist()
    right = table.column(ri).to_pylist()
    nulls = {"", profile.nullMarker}
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for a, b in zip(left, right, strict=True):
        if a is None or b is None or a in nulls or b in nulls:
            continue
        groups[a][b] += 1
    broken = any(len(cnt) > 1 for cnt in groups.values())
    if not groups or len(groups) > MAX_PAIRS:
        return None, broken
    return [[a, cnt.most_common(1)[0][0]] for a, cnt in sorted(groups.items())], broken


class _Builder:
    def __init__(self, profile: DatasetProfile, issues: list[Issue], run_dir: Path | None):
        self.profile = profile
        self.run_dir = run_dir
        self.cols = {c.name: c for c in profile.columns}
        self.checks: list[Check] = []
        self.encoded: set[str] = set()
        self.skipped: dict[str, str] = {}
        self.expected_blanks: dict[str, int] = {}
        self.issues = issues
        self.by_column: dict[str, list[Issue]] = defaultdict(list)
        for i in issues:
            col = _column(i)
            if col is not None and col in self.cols:
                self.by_column[col].append(i)

    def add(
        self,
        kind: Kind,
        columns: Iterable[str],
        why: str,
        issues: Iterable[Issue] = (),
        level: Level | None = None,
        **params: Any,
    ) -> None:
        """A check; a failure when it encodes issues (or `level` says so), else a warning."""
        cols = tuple(columns)
        ids = tuple(dict.fromkeys(i.id for i in issues))
        self.encoded.update(ids)
        n = sum(1 for c in self.checks if c.kind == kind and c.columns == cols)
        cid = f"{kind}:{','.join(cols)}" + (f"#{n + 1}" if n else "")
        self.checks.append(Check(cid, kind, cols, params, ids, why, level or ("fail" if ids else "warn")))

    def of(self, col: str, *types: str, rule: str | None = None) -> list[Issue]:
        return [
            i
            for i in self.by_column.get(col, [])
            if i.type in types and (rule is None or _stats(i).get("rule") == rule)
        ]


def derive(profile: DatasetProfile, analysis: AnalysisResult, run_dir: Path | None = None) -> RuleSet:
    """The checks of one run: profile facts and the confirmed issues' proven parameters."""
    confirmed = [i for i in analysis.issues if i.status == "confirmed" and i.accepted is None]
    b = _Builder(profile, confirmed, run_dir)
    b.expected_blanks = dict(analysis.run.expectedBlanks) if analysis.run is not None else {}
    names = [c.name for c in profile.columns]
    b.add("columns", names, f"the file has these {len(names)} columns", level="fail")

    dup_issues = [i for i in confirmed if i.type == "duplicate_rows"]
    for col in profile.columns:
        _column_checks(b, col, dup_issues)

    # Keys: a candidate key stays a key once exact duplicate rows are removed.
    for key in profile.candidateKeys:
        if not key or any(k not in b.cols for k in key):
            continue
        complete = all(b.cols[k].missing == 0 for k in key)
        if not complete:
            continue
        dupes = len(key) == 1 and b.cols[key[0]].distinct < b.cols[key[0]].count
        if dupes and not dup_issues:
            continue
        b.add("unique", key, f"candidate key {' + '.join(key)}", dup_issues if dupes else ())
    if dup_issues or profile.duplicates.exactRows == 0:
        b.add("unique", names, "no row repeats another exactly", dup_issues)

    _dependencies(b)
    _fallbacks(b)
    for i in analysis.issues:
        if i.status == "confirmed" and i.accepted is not None:
            b.skipped[i.id] = "accepted (iterate accept): the gate lets it pass, so no check fails on it"
    return RuleSet(
        dataset=profile.name,
        columns=list(profile.columns),
        checks=b.checks,
        skipped=b.skipped,
        null_values=sorted({"", profile.nullMarker}),
    )


def _column_checks(b: _Builder, col: ColumnProfile, dup_issues: list[Issue]) -> None:
    name = col.name
    missing_issues = [
        i for i in b.of(name, "missing_values") if not _stats(i).get("convention") and col.count > 0
    ]
    if col.count == 0:
        return
    if col.missing == 0:
        b.add("not_null", [name], "no value is missing today")
    elif not missing_issues and b.expected_blanks.get(name):
        # Blanks the user's own fix left (cleared values): expected, up to today's share of the column.
        filled = col.count / (col.count + col.missing)
        b.add(
            "not_null",
            [name],
            f"blanks only where a fix cleared values ({b.expected_blanks[name]:,} today)",
            mostly=math.floor(filled * 100) / 100,
        )
    elif missing_issues:
        b.add("not_null", [name], "blanks in an otherwise filled column", missing_issues)
        # A marker the tools do not read as missing (`-` where the dataset's null is blank) is refused by value.
        nulls = {"", b.profile.nullMarker}
        others = sorted({m for i in missing_issues for m in _markers(i)} - nulls)
        if others:
            b.add("not_in_set", [name], "markers of a missing value", missing_issues, values=others)
    markers = sorted(
        {
            m
            for i in b.of(name, "disguised_missing")
            for m in (_stats(i).get("markers") or [])
            if isinstance(m, str)
        }
    )
    disguised = b.of(name, "disguised_missing")
    if markers:
        b.add("not_in_set", [name], "placeholders posing as values", disguised, values=markers)

    if _is_numeric(col) and col.numeric is not None:
        # Any value that does not read as this column's kind of number breaks the type (and so the range).
        type_issues = [
            i
            for i in b.of(name, "mixed_types", "unit_in_number", "format_violation")
            if i.type == "unit_in_number" or _stats(i).get("rule") in ("number", "integer_written")
        ]
        # A placeholder or marker written as text (`N/A` among numbers) is not a number either.
        nulls = {"", b.profile.nullMarker}
        type_issues += [
            i
            for i in b.by_column.get(name, [])
            if i not in type_issues
            and any(not re.fullmatch(rx.DECIMAL, v) for v in _bad_values(i) + _markers(i) if v not in nulls)
        ]
        # A number is the column's type (a failure); whole numbers only is what today's values show (a
        # warning), unless an issue proved the column writes whole numbers.
        integer = col.semanticType == "integer"
        proven_integer = any(_stats(i).get("rule") == "integer_written" for i in type_issues)
        b.add("number", [name], "a number in every row", type_issues, level="fail", integer=proven_integer)
        if integer and not proven_integer:
            b.add("number", [name], "whole numbers today", integer=True)
        _ranges(b, col, b.of(name, "numeric_outlier"))
        return

    # Text columns: vocabulary, formats, whitespace, encoding.
    value_issues = [
        i for i in b.by_column.get(name, []) if _bad_values(i) and i.type not in ("numeric_outlier",)
    ]
    bad = {v for i in value_issues for v in _bad_values(i)} | set(markers)
    values = _complete_values(col)
    if values is not None:
        # The vocabulary seen today is a warning (next month may bring a new product); the values proven wrong
        # are the failure, and are never listed as allowed.
        allowed = [v for v in values if v not in bad]
        targets = [t for i in value_issues for t in _canonical(i).values()]
        allowed += [t for t in dict.fromkeys(targets) if t not in allowed and t not in bad]
        hit = [i for i in [*value_issues, *disguised] if set(_bad_values(i) + _markers(i)) & set(values)]
        if allowed:
            b.add(
                "in_set",
                [name],
                f"its {len(allowed)} values today",
                values=allowed,
                mostly=1 - NEW_VALUES_SHARE,
            )
        wrong = sorted({v for i in hit for v in _bad_values(i) + _markers(i)} & set(values) - set(markers))
        if wrong:
            b.add("not_in_set", [name], "the values proven wrong", hit, values=wrong)

    dates = b.of(name, "format_violation")
    main = next((_stats(i).get("main_format") for i in dates if _stats(i).get("main_format")), None)
    if col.semanticType in ("date", "datetime") and col.dates is not None:
        fmt = main
        if fmt is None and len(col.dates.formats) == 1 and col.dates.formats[0].count == col.count:
            fmt = col.dates.formats[0].value
        if isinstance(fmt, str) and strftime_to_regex(fmt) is not None:
            date_issues = [i for i in dates if _stats(i).get("main_format")]
            impossible = [i for i in b.of(name, "out_of_domain") if _stats(i).get("rule") == "date"]
            b.add(
                "date",
                [name],
                f"dates written {fmt}",
                [*date_issues, *impossible],
                level="fail",  # the column's type
                format=fmt,
                parse_issues=[i.id for i in impossible],
            )

    shape_issues = [
        i for i in b.of(name, "format_violation") if isinstance(_stats(i).get("expected_regex"), str)
    ]
    for i in shape_issues:
        regex = _stats(i)["expected_regex"]
        if rx.is_python_regex(regex):
            b.add("regex", [name], "the pattern its values were proven against", [i], regex=regex)
    width = [i for i in b.by_column.get(name, []) if _stats(i).get("rule") == "width"]
    for i in width:
        w = _stats(i).get("width")
        if isinstance(w, int) and w > 0:
            b.add("regex", [name], f"codes of {w} digits", [i], regex=rf"^\d{{{w}}}$")
    if not shape_issues and not width and col.semanticType not in ("date", "datetime"):
        shape = _single_shape(col)
        if shape is not None and any(ch not in "a " for ch in shape):
            b.add(
                "regex",
                [name],
                f"every value has the shape {shape!r} today",
                regex=shape_regex([shape], words=False),
            )

    for i in b.of(name, "stray_whitespace"):
        b.add("regex", [name], "no spaces at either end", [i], regex=rx.TRIMMED)
    for i in b.of(name, "encoding_damage"):
        from iterate.detect.text import MOJIBAKE

        b.add("not_regex", [name], "no garbled characters", [i], regex=_mojibake_python(MOJIBAKE))


def tidy(value: float) -> float:
    """`value` without binary noise (0.1 + 0.2 -> 0.3): 12 significant digits, as every export writes it."""
    return float(f"{value:.12g}")


def widened(low: float, high: float, integer: bool) -> tuple[float, float]:
    """[low, high] widened by RANGE_MARGIN of its span (or of its larger end when flat), to round numbers
    (two significant digits of the margin; whole numbers for an integer column), never across zero."""
    margin = RANGE_MARGIN * ((high - low) or max(abs(low), abs(high), 1.0))
    step = 10.0 ** (math.floor(math.log10(margin)) - 1)
    if integer:
        step = max(step, 1.0)
    wide_low = tidy(math.floor((low - margin) / step) * step)
    wide_high = tidy(math.ceil((high + margin) / step) * step)
    if low >= 0 > wide_low:
        wide_low = 0.0
    if high <= 0 < wide_high:
        wide_high = 0.0
    return wide_low, wide_high


def _ranges(b: _Builder, col: ColumnProfile, outliers: list[Issue]) -> None:
    """A numeric column's ranges: a failure for no value as far out as the proven outliers (values beyond the
    nearest of them on either side), and a warning outside the usual range, widened."""
    assert col.numeric is not None
    name, integer = col.name, col.semanticType == "integer"
    bad = {v for i in outliers for v in _bad_values(i)}
    kept = _numbers_kept(b, name, bad) if outliers else []
    low, high = (min(kept), max(kept)) if kept else (col.numeric.min, col.numeric.max)
    if outliers and kept:
        values = sorted({float(v) for v in bad if re.fullmatch(rx.DECIMAL, v)})
        below = [v for v in values if v < low]
        above = [v for v in values if v > high]
        if values and len(below) + len(above) == len(values):
            # Strict bounds at the proven outliers nearest the kept values: they and anything further fail.
            b.add(
                "between",
                [name],
                "no value as far out as the outliers proven wrong",
                outliers,
                low=tidy(max(below)) if below else None,
                high=tidy(min(above)) if above else None,
                strict=True,
            )
    elif outliers:  # no data to tell them apart from the kept values: the range they were proven against
        lows = [float(_stats(i)["low"]) for i in outliers if isinstance(_stats(i).get("low"), int | float)]
        highs = [float(_stats(i)["high"]) for i in outliers if isinstance(_stats(i).get("high"), int | float)]
        if lows and highs:
            b.add(
                "between",
                [name],
                "the range its outliers were proven against",
                outliers,
                low=tidy(max(lows)),
                high=tidy(min(highs)),
            )
            return
    wide_low, wide_high = widened(low, high, integer)
    b.add(
        "between",
        [name],
        f"within today's range {_num(low)} to {_num(high)}, widened",
        low=wide_low,
        high=wide_high,
    )


def _num(value: float) -> str:
    text = f"{value:.12g}"
    return text if "e" not in text else repr(tidy(value))


def _numbers_kept(b: _Builder, name: str, bad: set[str]) -> list[float]:
    """The numbers of a column in the run's data, its proven outliers left out (empty without the data)."""
    if b.run_dir is None or not (b.run_dir / "data.parquet").exists():
        return []
    import pyarrow.parquet as pq

    table = pq.read_table(b.run_dir / "data.parquet")
    names = [c.name for c in b.profile.columns]
    if table.num_columns != len(names):
        return []
    out = []
    for v in set(table.column(names.index(name)).to_pylist()):
        if isinstance(v, str) and v not in bad and re.fullmatch(rx.DECIMAL, v):
            out.append(float(v))
    return out


def _markers(issue: Issue) -> list[str]:
    return [m for m in (_stats(issue).get("markers") or []) if isinstance(m, str)]


def _mojibake_python(pattern: str) -> str:
    """The detector's RE2 pattern (\\x{80}) in the flavour rules are written in (\\u0080)."""
    return re.sub(r"\\x\{([0-9A-Fa-f]+)\}", lambda m: f"\\u{int(m.group(1), 16):04x}", pattern)


def _dependencies(b: _Builder) -> None:
    seen: set[tuple[str, str]] = set()
    for i in b.issues:
        if i.type != "dependency_violation":
            continue
        st = _stats(i)
        pairs: list[tuple[str, str]] = []
        if st.get("rule") == "consensus" and isinstance(st.get("rhs"), str):
            # A list of names is several columns that determine rhs together (not exported); a column read
            # with others there does not determine rhs alone either.
            dets = st.get("determinants") or []
            within = {c for lhs in dets if isinstance(lhs, list) for c in lhs}
            pairs = [(lhs, st["rhs"]) for lhs in dets if isinstance(lhs, str) and lhs not in within]
        elif st.get("rule") == "determinant" and isinstance(st.get("lhs"), str):
            pairs = [(st["lhs"], rhs) for rhs in st.get("dependents") or [] if isinstance(rhs, str)]
        for lhs, rhs in pairs:
            if lhs in b.cols and rhs in b.cols and (lhs, rhs) not in seen:
                seen.add((lhs, rhs))
                values, broken = _dependency_pairs(b.run_dir, b.profile, lhs, rhs)
                if broken is False:
                    # The issue's rows break the dependency on the other determinants, not on this one.
                    b.add("dependency", [lhs, rhs], f"{lhs} determines {rhs} in every row", pairs=values)
                else:
                    b.add("dependency", [lhs, rhs], f"{lhs} determines {rhs}", [i], pairs=values)
    for fd in b.profile.functionalDependencies:
        if len(fd.lhs) != 1 or fd.violatingRows != 0 or (fd.lhs[0], fd.rhs) in seen:
            continue
        lhs, rhs = fd.lhs[0], fd.rhs
        if lhs not in b.cols or rhs not in b.cols or b.cols[lhs].distinct > MAX_PAIRS:
            continue
        if [lhs] in b.profile.candidateKeys:
            continue  # a key determines everything: nothing to learn
        values, _ = _dependency_pairs(b.run_dir, b.profile, lhs, rhs)
        b.add("dependency", [lhs, rhs], f"{lhs} determines {rhs} in every row", pairs=values)


def _fallbacks(b: _Builder) -> None:
    """Issues no rule above encodes: their proven wrong values are refused one by one, or they are listed."""
    for i in b.issues:
        if i.id in b.encoded:
            continue
        if i.type in NOT_A_RULE:
            b.skipped[i.id] = NOT_A_RULE[i.type]
            continue
        st = _stats(i)
        if i.type == "missing_values" and st.get("convention"):
            b.skipped[i.id] = "a mostly empty column is its convention, not a rule"
            continue
        col = _column(i)
        values = _bad_values(i)
        if col is not None and col in b.cols and values and b.cols[col].semanticType not in NUMERIC_TYPES:
            b.add("not_in_set", [col], "the values proven wrong", [i], values=sorted(set(values)))
            continue
        b.skipped[i.id] = f"no rule for a {i.type} issue ({st.get('rule') or 'no proven parameters'})"
