"""Numbers written unlike their column's convention: one issue per column, a quick fix that rewrites them.

Issue 32's product decision: a cell written unlike its column's convention is flagged (at low severity), however
often its value repeats: a whole number written as a decimal (`7.0` among `7`), a thousands separator among plain
numbers (`12,500` among `12500`) or a plain number among separated ones. The evidence is the share of the column
that keeps the convention, read like any rule a share of the column follows; the fitted decision adds its
own weight for it (`llr:convention`, `has:convention`) and for the share itself (`x:convention:share`). It is
part of the evidence's own reading (not fitted-only): cells of one value then share one prior and one decision,
so a value's cells are never split between issues and its proof recounts exactly what the issue claims.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import Finding, value_finding
from iterate.detect.numeric import GROUPED, NumericModel, _bools, _values
from iterate.wording import agree, plural

FLOATY = r"^[-+]?\d+\.0+$"
THOUSAND = 1000.0  # a separator can only be written from here on


def _text(f: ColumnFacts, m: NumericModel) -> pa.Array:
    return pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(m.ids, pa.int64())))


def _finding(
    f: ColumnFacts,
    m: NumericModel,
    odd: np.ndarray,
    share: float,
    cal: Calibration,
    *,
    rule: str,
    title: str,
    told: str,
    action: str,
    rewrite: Callable[[str], str],
    **extra: object,
) -> Finding:
    ids = m.ids[odd]
    bad = _values(f, ids)
    llr = share_llr(share, cal.shape_bonus)
    logit = math.log(min(max(share, 1e-6), 1 - 1e-6) / max(1 - share, 1e-6))
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'is', 'are')} {told} ({shown}), while "
            f"{share:.1%} of the column's numbers are written the other way."
        )

    return value_finding(
        f,
        ids,
        np.full(ids.size, llr),
        np.full(ids.size, share),
        {"share": np.full(ids.size, logit)},
        type="format_violation",
        columns=[name],
        title=title,
        description="",
        describe=describe,
        suggested_action=action,
        category="quick_fixes",
        detector="convention",
        stat_name="share of the column's numbers written the column's way",
        stats={
            "column": name,
            "rule": rule,
            "bad_values": bad,
            "canonical": {v: rewrite(v.strip()) for v in bad},
            **extra,
        },
        key=f"{rule}:{name}",
        damage="format",
    )


def detect_float_written_integers(
    f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT
) -> Finding | None:
    """Whole numbers written as floats (`2320935.0`) in a column that writes its numbers as integers: a
    conversion that went through floating point on the way (and may have lost digits on the way too)."""
    if not m.numeric:
        return None
    ok = m.is_number
    whole = ok & (m.decimals == 0)
    share = float(m.weights[whole].sum() / max(m.weights[ok].sum(), 1))
    if share < cal.parse_min_share:
        return None
    floaty = ok & _bools(pc.match_substring_regex(_text(f, m), FLOATY))
    if not floaty.any():
        return None
    return _finding(
        f,
        m,
        floaty,
        share,
        cal,
        rule="integer_written",
        title=f"Whole numbers written as decimals in {f.name}",
        told="whole numbers written as decimals",
        action="Write these as integers (drop the '.0'), and check at the source that the conversion did not "
        "change the value.",
        rewrite=lambda v: v.split(".")[0],
    )


def detect_thousands_separators(
    f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT
) -> Finding | None:
    """Among the column's numbers of four digits or more, the minority written with (or without) a thousands
    separator when the majority is written the other way."""
    if not m.numeric:
        return None
    big = m.is_number & (np.abs(np.nan_to_num(m.numbers)) >= THOUSAND)
    if not big.any():
        return None
    grouped = big & _bools(pc.match_substring_regex(_text(f, m), GROUPED))
    plain = big & ~grouped
    if not grouped.any() or not plain.any():
        return None
    n_grouped, n_plain = float(m.weights[grouped].sum()), float(m.weights[plain].sum())
    odd, share = (grouped, n_plain) if n_plain >= n_grouped else (plain, n_grouped)
    share /= n_grouped + n_plain
    if share <= cal.parse_min_share:  # a column split evenly has no convention to break
        return None
    with_sep = odd is grouped
    return _finding(
        f,
        m,
        odd,
        share,
        cal,
        rule="thousands_written",
        title=f"Thousands separators written two ways in {f.name}",
        told="written with a thousands separator" if with_sep else "written without the thousands separator",
        action="Write every number the column's way ("
        + ("drop the separator" if with_sep else "add the separator")
        + "), so that tools read them alike.",
        rewrite=(lambda v: v.replace(",", "")) if with_sep else _separated,
        separated=with_sep,
    )


def _separated(v: str) -> str:
    """`12500.5` → `12,500.5`: the integer part grouped by thousands, the rest as written."""
    sign, digits, rest = re.match(r"^([-+]?)(\d+)(.*)$", v).groups()  # type: ignore[union-attr]
    return f"{sign}{int(digits):,}{rest}"
