"""Frequency: values far rarer than the column's values usually are, and values repeated far more.

In a column whose values each fill many rows (a license per business, a code per category), a value seen
once is unusual; alone it proves little (real rare values exist), so its evidence is capped low and it
counts when another signal agrees (a broken dependency, a far-off number). In a column where nearly every
value is unique, one value filling hundreds of rows is a placeholder or a bulk copy.
"""

from __future__ import annotations

import re

import numpy as np

from iterate.detect.calibration import DEFAULT, Calibration, repeat_discount, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import MAX_LISTED, Finding, value_finding
from iterate.wording import agree, plural


def detect_rare_values(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """Values held by far fewer rows than the column's values typically are (weak evidence on its own)."""
    typical = f.typical_count
    if typical < cal.rare_min_typical or f.n_present < 20:
        return None
    present = f.present & (f.counts > 0)
    ratio = typical / np.maximum(f.counts, 1)
    rare = present & (ratio >= cal.rare_min_ratio)
    if not rare.any():
        return None
    ids = np.flatnonzero(rare)
    llr = np.minimum(np.log(ratio[ids] / cal.rare_min_ratio) + cal.rare_base_llr, cal.rare_max_llr)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'is', 'are')} held by very few rows, "
            "while the column's values are "
            f"typically held by {typical:g}; other evidence agrees that they are wrong (e.g. {shown})."
        )

    return value_finding(
        f,
        ids,
        llr,
        f.counts[ids].astype(np.float64),
        type="inconsistent_category",
        columns=[name],
        title=f"Rare values in {name}",
        description="",
        describe=describe,
        suggested_action="Check these values against the source; map them to the column's usual values or "
        "set them to missing when they cannot be recovered.",
        category="smart_fixes",
        detector="frequency",
        stat_name="rows holding the value",
        stats={
            "column": name,
            "rule": "rare",
            "typical_count": typical,
            "min_ratio": cal.rare_min_ratio,
            "bad_values": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
        },
        key=f"rare:{name}",
    )


SIGNED_SHARE = 0.1  # a column of numbers is signed when at least this share of its rows is on each side of 0


def _signed_centre(f: ColumnFacts, ids: np.ndarray) -> np.ndarray:
    """Per dictionary id: the number at the centre of a column of signed numbers (the rows holding it
    straddle the column's median, with many rows below zero and many above). The zero of colour coordinates
    (every grey), of a change or of a balance is the column's natural middle, not a placeholder: a
    placeholder stands apart from the values it stands in for."""
    m = f.numeric
    out = np.zeros(ids.size, dtype=bool)
    if not m.numeric:
        return out
    ok = m.is_number
    x, w = m.numbers[ok], m.weights[ok].astype(np.float64)
    total = float(w.sum())
    if total <= 0 or min(w[x < 0].sum(), w[x > 0].sum()) < SIGNED_SHARE * total:
        return out
    below = np.array([float(w[x < v].sum()) for v in m.numbers[np.searchsorted(m.ids, ids)]])
    held = f.counts[ids].astype(np.float64)
    number = m.numbers[np.searchsorted(m.ids, ids)]
    return ~np.isnan(number) & (below <= 0.5 * total) & (below + held >= 0.5 * total)


def detect_repeated_placeholder(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """One value filling far more rows than any other in a column of nearly unique values (bulk copy)."""
    present = f.present & (f.counts > 0)
    if f.n_present < 50 or f.typical_count > 1:
        return None
    counts = f.counts[present]
    ids = np.flatnonzero(present)
    # Among nearly unique values, how many rows would the most repeated one fill by chance? A handful.
    expected = max(2.0, float(np.quantile(counts, 0.99)))
    hit = counts >= cal.placeholder_repeat_ratio * expected
    if hit.any():
        hit &= ~_signed_centre(f, ids)
    if not hit.any():
        return None
    ids = ids[hit]
    llr = np.minimum(np.log(counts[hit] / expected) + 2.0, cal.placeholder_llr)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["markers"][:3])
        return (
            f"{fd.n_cells:,} rows of '{name}' hold {shown}, in a column where nearly every other value appears "
            "once: a placeholder or a value copied over many records."
        )

    return value_finding(
        f,
        ids,
        llr,
        f.counts[ids].astype(np.float64),
        type="disguised_missing",
        columns=[name],
        title=f"One value repeated across many rows of {name}",
        description="",
        describe=describe,
        suggested_action="Check whether this value stands for 'unknown' or was copied in bulk; replace it with "
        "the real values or with a missing value.",
        category="smart_fixes",
        detector="placeholders",
        stat_name="rows holding the value",
        stats={
            "column": name,
            "markers": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
            "rule": "repeated",
        },
        key=f"repeated:{name}",
    )


def detect_number_in_words(f: ColumnFacts, cal: Calibration = DEFAULT) -> Finding | None:
    """A bare number (0, -1, 99) in a column of words: a placeholder typed where the value was unknown.

    Judged among the column's values: the more of the column's rows hold words (letters, no digits) and the
    fewer hold bare
    numbers, the stronger; a number the column repeats as often as its words is part of its vocabulary.
    """
    present = f.present & (f.counts > 0)
    if f.n_present < 20 or f.typical_count < cal.rare_min_typical:
        return None  # a vocabulary: a column of names may hold numbers ('1492' is a beer)
    ids = np.flatnonzero(present)
    bare = f.numeric.is_number
    bare_ids = f.numeric.ids[bare]
    if bare_ids.size == 0:
        return None
    # Words, not codes: a column of models ('737-7H4') may hold a bare number ('150' is a Cessna).
    worded = float(f.counts[ids[f.has_letter[ids] & ~f.has_digit[ids]]].sum()) / f.n_present
    if worded < cal.parse_min_share:
        return None
    llr = share_llr(worded, cal.parse_bonus) - repeat_discount(f.counts[bare_ids], f.typical_count, cal)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["markers"][:4])
        return (
            f"{fd.n_cells:,} cells in '{name}' hold a bare number ({shown}) in a column of words "
            f"({worded:.1%} of its rows): the usual sign of a placeholder typed for 'unknown'."
        )

    return value_finding(
        f,
        bare_ids,
        np.broadcast_to(llr, bare_ids.shape).astype(np.float64),
        f.counts[bare_ids].astype(np.float64),
        type="disguised_missing",
        columns=[name],
        title=f"Numbers standing in for values in {name}",
        description="",
        describe=describe,
        suggested_action="Check these with the source: replace each with the real value, or with a missing "
        "value where it stands for 'unknown'.",
        category="smart_fixes",
        detector="placeholders",
        stat_name="rows holding the number",
        stats={
            "column": name,
            "markers": sorted(set(f.column.texts(bare_ids)))[:MAX_LISTED],
        },
        key=f"number-in-words:{name}",
    )


def detect_foreign_values(facts: list[ColumnFacts], cal: Calibration = DEFAULT) -> list[Finding]:
    """Values of another column's vocabulary in a column that otherwise never uses them ('Some college' among
    occupations): rare here, common there and far more often there, and the two vocabularies share nothing
    else. A value common in two other columns or more is a code a family of columns shares (a survey's 'Not
    selected'), at home in any of them. Values are compared case- and punctuation-blind ('Some-college' is
    'some college')."""
    texts: dict[int, list[str]] = {}  # column -> normalised text per unique value with letters
    totals: dict[int, dict[str, int]] = {}  # column -> normalised text -> rows
    by_col = {f.index: f for f in facts}
    for f in facts:
        if not f.pairwise_ok or f.typical_count < cal.rare_min_typical:
            continue  # a vocabulary: values that repeat
        ids = np.flatnonzero(f.present & (f.counts > 0) & f.has_letter)
        norm = [" ".join(re.split(r"[\W_]+", f.column.uniques[int(i)].casefold())).strip() for i in ids]
        texts[f.index] = norm
        total: dict[str, int] = {}
        for i, t in zip(ids.tolist(), norm, strict=True):
            total[t] = total.get(t, 0) + int(f.counts[i])
        totals[f.index] = total
    homes_of: dict[str, list[int]] = {}
    for b, total in totals.items():
        for t, n in total.items():
            if n * cal.rare_min_ratio >= by_col[b].typical_count:
                homes_of.setdefault(t, []).append(b)  # one of b's usual values, not a rarity of its own
    out: list[Finding] = []
    for a, norm in texts.items():
        fa, own = by_col[a], totals[a]
        ids = np.flatnonzero(fa.present & (fa.counts > 0) & fa.has_letter)
        hits: list[int] = []
        homes: set[int] = set()
        for i, t in zip(ids.tolist(), norm, strict=True):
            here = own[t]
            if here * cal.rare_min_ratio > fa.typical_count:
                continue  # common here: part of this column's vocabulary
            elsewhere = [b for b in homes_of.get(t, []) if b != a]
            if len(elsewhere) >= 2:
                continue  # a code a family of columns shares ('Not selected', 'Other'): at home anywhere
            for b in elsewhere:
                if totals[b][t] < cal.rare_min_ratio * here:
                    continue
                if len(own.keys() & totals[b].keys()) <= 1:  # the two vocabularies are otherwise apart
                    hits.append(i)
                    homes.add(b)
                    break
        if hits:
            out.append(
                _foreign_finding(fa, np.array(sorted(hits)), [by_col[b].name for b in sorted(homes)], cal)
            )
    return out


def _foreign_finding(f: ColumnFacts, ids: np.ndarray, homes: list[str], cal: Calibration) -> Finding:
    name = f.name
    shown = ", ".join(f"'{h}'" for h in homes[:3])

    def describe(fd: Finding) -> str:
        values = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' ({values}) {agree(fd.n_cells, 'belongs', 'belong')} to "
            f"the vocabulary of {shown}, where they are "
            f"common, and nowhere else in '{name}': a value typed into the wrong column."
        )

    return value_finding(
        f,
        ids,
        np.full(ids.size, cal.foreign_value_llr),
        f.counts[ids].astype(np.float64),
        type="inconsistent_category",
        columns=[name],
        title=f"Values of another column in {name}",
        description="",
        describe=describe,
        suggested_action=f"Check these rows: the value probably belongs in {shown}; restore the right '{name}'.",
        category="smart_fixes",
        detector="foreign",
        stat_name="rows holding the value",
        stats={
            "column": name,
            "rule": "listed",
            "bad_values": sorted(set(f.column.texts(ids)))[:MAX_LISTED],
            "homes": homes,
        },
        key=f"foreign:{name}",
    )
