"""Missing values written the dataset's way, and disguised ones (placeholders that pose as values)."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration
from iterate.detect.context import ColumnFacts, as_written
from iterate.detect.findings import Finding, cells
from iterate.detect.stats import poisson_tail
from iterate.detect.undefined import numbers_of, undefined_finding, undefined_formula
from iterate.grouping import unique

MIN_GROUP_ROWS = 3  # a group needs this many rows before its gaps explain a column's
# Gaps left after a column explained some are re-tested against that column's groups, leniently: a group
# holding at least this many of them, with a chance of at most RETEST_TAIL (no correction for the groups).
MIN_RETEST_ROWS = 2
RETEST_TAIL = 0.05
MAX_ROWS_LISTED = 50_000  # rows a finding lists for code to recount


def _missing_rows(facts: list[ColumnFacts]) -> dict[int, np.ndarray]:
    """Per column with any missing value (blank or a missing-value token): the rows where it is missing."""
    out: dict[int, np.ndarray] = {}
    for f in facts:
        if (f.is_missing & (f.counts > 0)).any():
            out[f.index] = f.is_missing[f.column.codes]
    return out


def _partners(rows: dict[int, np.ndarray], n_rows: int, cal: Calibration) -> dict[int, set[int]]:
    """Columns whose missing values travel together: when one is missing, the other is too (for at least
    half of the rarer one's gaps), far more often than chance would pair them (a binomial z-score).

    The co-occurrence of every pair is one product of the missing-value matrix with itself, in row blocks.
    """
    partners: dict[int, set[int]] = {c: set() for c in rows}
    cols = list(rows)
    if len(cols) < 2:
        return partners
    both = np.zeros((len(cols), len(cols)))
    for start in range(0, n_rows, 200_000):
        block = np.stack([rows[c][start : start + 200_000] for c in cols], axis=1).astype(np.float32)
        both += block.T @ block
    counts = np.diag(both).copy()
    # Every pair i < j at once (a table of 500 columns with gaps has 125,000 pairs), in the same float64
    # arithmetic as one pair at a time; the pairs are then taken in that order, i first.
    i, j = np.triu_indices(len(cols), k=1)
    together = both[i, j]
    rarer, other = np.minimum(counts[i], counts[j]), np.maximum(counts[i], counts[j])
    p = other / n_rows
    expected = rarer * p
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (together - expected) / np.sqrt(np.maximum(expected * (1 - p), 1e-9))
    kept = (together >= 2) & (together >= cal.comissing_share * rarer) & (z >= cal.comissing_z)
    for a, b in zip(i[kept].tolist(), j[kept].tolist(), strict=True):
        partners[cols[a]].add(cols[b])
        partners[cols[b]].add(cols[a])
    return partners


def _explained(
    f: ColumnFacts,
    missing_rows: np.ndarray,
    groupers: list[ColumnFacts],
    stacked: tuple[np.ndarray, np.ndarray] | None,
    n_rows: int,
    cal: Calibration,
) -> tuple[np.ndarray, list[str]]:
    """Gaps that another column explains: rows of groups (a measure, a light wind) that lack the value far more
    often than the column does.

    `groupers` are the columns that can group rows (some values repeated), `stacked` their row codes and each
    row's group size (one row per grouper) when small enough to hold. Returns the explained rows (mask) and
    the columns.
    """
    explained = np.zeros(n_rows, dtype=bool)
    by: list[str] = []
    gaps_at = np.flatnonzero(missing_rows)
    if gaps_at.size < MIN_GROUP_ROWS or not groupers:
        return explained, by  # too few gaps for any group to be mostly gaps, or no column groups rows
    rate = gaps_at.size / n_rows
    if stacked is not None:
        at_gaps, sizes = stacked[0][:, gaps_at], stacked[1][:, gaps_at]
    else:
        at_gaps = np.stack([g.column.codes[gaps_at] for g in groupers])
        sizes = np.stack([g.counts[g.column.codes[gaps_at]] for g in groupers])
    # Every (grouper, group) the gaps fall in, counted in one pass: a group holds far more gaps than gaps at
    # random would leave in it (a Poisson tail, corrected for the number of groups tried in that grouper),
    # and at least a few. The wind direction is missing when the wind is light, a measure has no score.
    span = np.int64(n_rows + 1)
    keys = (np.arange(len(groupers), dtype=np.int64)[:, None] * span + at_gaps).ravel()
    uniq, first, gaps = unique(keys, return_index=True, return_counts=True)
    which = uniq // span
    tried = np.bincount(which, minlength=len(groupers))
    tail = poisson_tail(gaps, sizes.ravel()[first] * rate)
    hot = (gaps >= MIN_GROUP_ROWS) & (tail * tried[which] < cal.split_tail)
    # A gap "explained" by a gap of another column is the missing-together pattern, reported as such.
    codes_hot = uniq % span
    for k in np.unique(which[hot]).tolist():
        on = hot & (which == k)
        hot[on] = ~groupers[k].is_missing[codes_hot[on]]
    for k in np.unique(which[hot]).tolist():
        g = groupers[k]
        if g.index == f.index:
            continue
        groups = uniq[hot & (which == k)] % span
        explained |= missing_rows & np.isin(g.column.codes, groups)
        by.append(g.name)
    # Where the groups explain most of the column's gaps, the few left are tested again against the same
    # columns: the cause is known to run through their groups, so a group holding a few of the rest beyond
    # chance shares it (the stations of two more lines opened in the year counted, like those of the line
    # that explained the first gaps). Gaps mostly at random, with a small pattern among them, are not.
    for name in by:
        g = next(x for x in groupers if x.name == name)
        left = missing_rows & ~explained
        if left.sum() < MIN_RETEST_ROWS or left.sum() > explained.sum():
            break
        inside = np.isin(g.column.codes, np.unique(g.column.codes[explained]))
        rate_left = left.sum() / max(n_rows - int(inside.sum()), 1)
        codes_left = g.column.codes[left]
        groups, gaps = np.unique(codes_left, return_counts=True)
        tail = poisson_tail(gaps, g.counts[groups] * rate_left)
        again = groups[(gaps >= MIN_RETEST_ROWS) & (tail < RETEST_TAIL) & ~g.is_missing[groups]]
        explained |= left & np.isin(g.column.codes, again)
    return explained, by


def _clusters(partners: dict[int, set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    out = []
    for start in sorted(partners):
        if start in seen or not partners[start]:
            continue
        stack, group = [start], []
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            group.append(c)
            stack.extend(partners[c] - seen)
        out.append(sorted(group))
    return out


def detect_missing(facts: list[ColumnFacts], n_rows: int, cal: Calibration = DEFAULT) -> list[Finding]:
    """Missing values: gaps to fill, patterns of the record, and columns that are empty by convention.

    - A value missing at random in a column that is otherwise filled is a cell to fix: flagged, with evidence
      log((1 - m) / m) + bonus (m: the column's missing share).
    - Values missing together across related columns (a cancelled order has no ship date, carrier or
      delivery date) describe the record: one issue for the pattern, no flags.
    - A column at least half empty writes "none" by leaving it empty: reported, not flagged.
    """
    rows = _missing_rows(facts)
    partners = _partners(rows, n_rows, cal)
    groupers = [g for g in facts if 2 <= g.column.n_unique <= n_rows / MIN_GROUP_ROWS]
    stacked = None
    if groupers and len(groupers) * n_rows <= 20_000_000:
        # Filled row by row: stacking the int64 codes first held three times the memory at once.
        codes = np.empty((len(groupers), n_rows), dtype=np.int32)
        sizes = np.empty((len(groupers), n_rows), dtype=np.int32)
        for k, g in enumerate(groupers):
            codes[k] = g.column.codes
            np.take(g.counts, g.column.codes, out=sizes[k], mode="clip")
        stacked = (codes, sizes)
    out: list[Finding] = []
    grouped: list[tuple[ColumnFacts, np.ndarray, list[str]]] = []
    # Gaps the table itself explains as undefined (a ratio over a zero) are taken out first.
    undefined: dict[int, tuple[np.ndarray, str, str]] = {}
    numbers: dict[int, np.ndarray] = {}
    # Only columns of numbers compute a ratio, and only columns that hold a zero can divide by one: found
    # once per table, so that cost follows the columns, not the columns times the columns.
    numeric = [g for g in facts if g.column.n_unique >= 2 and g.numeric.numeric]
    with_zero = [g for g in numeric if (numbers_of(g, numbers) == 0).any()]
    for f in facts:
        if f.index in rows and not partners.get(f.index) and with_zero and f.numeric.numeric:
            found = undefined_formula(f, np.flatnonzero(rows[f.index]), numeric, with_zero, n_rows, numbers)
            if found is not None and found[0].size:
                undefined[f.index] = found
    odd_rows, odd_columns, odd_count = _atypical_rows(
        {c: _without(m, undefined[c][0]) if c in undefined else m for c, m in rows.items()},
        partners,
        facts,
        n_rows,
        cal,
    )
    # Per column, the gaps a pattern may not flag: those another column's groups explain (a kind of record
    # the field does not apply to), those of records of another kind, and all of a mostly empty column's.
    exclude: dict[int, np.ndarray] = {}
    for f in facts:
        if f.index not in rows:
            continue
        missing_rows = rows[f.index]
        n_missing = int(missing_rows.sum())
        if n_missing == n_rows:
            continue  # an empty column is reported as constant
        share = n_missing / n_rows
        marker = f.is_null_marker
        together = np.zeros(n_rows, dtype=bool)
        for b in partners.get(f.index, ()):
            together |= rows[b]
        together &= missing_rows
        kept_out = (
            np.zeros(n_rows, dtype=bool) if share < cal.missing_convention_share else missing_rows.copy()
        )
        if f.index in odd_columns:
            together |= odd_rows & missing_rows  # one record lacking several values at once: reported once
            kept_out |= odd_rows & missing_rows
        if share < cal.missing_convention_share:
            by_group, explainers = _explained(f, missing_rows, groupers, stacked, n_rows, cal)
            if explainers:
                together |= by_group
                kept_out |= by_group
                grouped.append((f, by_group, explainers))
        exclude[f.index] = kept_out
        placeholder = f.is_missing & ~marker & (f.counts > 0)
        if placeholder.any() and share < cal.missing_convention_share:
            # A placeholder in the rows another column's groups explain ('N/A' for the district of every
            # Senate candidate) is that kind of record's convention: told with the group, not flagged.
            told = _placeholder_finding(f, placeholder, kept_out)
            if told is not None:
                out.append(told)
        if share >= cal.missing_convention_share:
            out.append(_convention_finding(f, n_rows, share))
            continue
        rows_all = f.column.rows_of(np.flatnonzero(marker & (f.counts > 0)))
        rows_loose = rows_all[~together[rows_all]]
        if f.index in undefined:
            out.append(undefined_finding(f, *undefined[f.index]))
            rows_loose = rows_loose[~np.isin(rows_loose, undefined[f.index][0])]
        if rows_loose.size:
            partial = rows_loose.size < rows_all.size  # some gaps belong to a pattern: list the others
            # "Otherwise filled": the column's gaps outside the record-level patterns, among those rows.
            loose_share = rows_loose.size / max(n_rows - int(together.sum()), 1)
            out.append(
                _gap_finding(
                    f,
                    rows_loose,
                    loose_share,
                    sorted(partners.get(f.index, ())),
                    facts,
                    cal,
                    partial,
                    optional_kind(f),
                )
            )
    for cluster in _clusters(partners):
        pattern_rows = np.flatnonzero(np.sum([rows[c] for c in cluster], axis=0) >= 2)
        if pattern_rows.size:
            whole = all(np.array_equal(rows[c], rows[cluster[0]]) for c in cluster[1:])
            out.append(
                _pattern_finding([facts[c] for c in cluster], pattern_rows, n_rows, whole, rows, exclude, cal)
            )
    for f, mask, explainers in grouped:
        out.append(_explained_finding(f, np.flatnonzero(mask), explainers, n_rows))
    if odd_columns:
        out.append(_atypical_finding([facts[c] for c in odd_columns], np.flatnonzero(odd_rows), odd_count))
    return out


def _without(mask: np.ndarray, rows: np.ndarray) -> np.ndarray:
    out = mask.copy()
    out[rows] = False
    return out


def _atypical_rows(
    rows: dict[int, np.ndarray],
    partners: dict[int, set[int]],
    facts: list[ColumnFacts],
    n_rows: int,
    cal: Calibration,
) -> tuple[np.ndarray, list[int], int]:
    """Records of another kind: rows lacking so many values of otherwise filled columns at once that gaps at
    random would leave that many on some row of the table with a chance below `split_tail`, and that hold a
    value no other row has in a column whose values repeat (the Tesla among petrol cars: its maker and its
    one-speed gearbox are its own, and it has no mpg in town, none on the highway, no torque rpm). The
    values do not apply to such a record. A row of an ordinary kind that lost several readings at once
    (an hour of weather at the usual station) is a gap to fill: its cells stay flagged. Columns whose gaps
    travel together are a pattern already.

    Returns the rows (mask), the columns missing on them, and the least number of gaps that makes a row
    atypical (every row with that many gaps among those columns and a value of its own is one of them).
    """
    none: tuple[np.ndarray, list[int], int] = (np.zeros(n_rows, dtype=bool), [], 0)
    cols = [
        c
        for c, m in rows.items()
        if not partners.get(c) and 0 < int(m.sum()) < cal.missing_convention_share * n_rows
    ]
    if len(cols) < 2:
        return none
    # The number of gaps on a row if each column's gaps fell at random (a Poisson-binomial law).
    law = np.ones(1)
    for c in cols:
        p = float(rows[c].sum()) / n_rows
        law = np.convolve(law, [1.0 - p, p])
    tail = np.cumsum(law[::-1])[::-1]  # tail[k]: the chance that a row has k gaps or more
    rare = np.flatnonzero((tail * n_rows < cal.split_tail) & (np.arange(tail.size) >= 2))
    if rare.size == 0:
        return none
    least = int(rare[0])
    count = np.zeros(n_rows, dtype=np.int32)
    for c in cols:
        count += rows[c]
    hit = count >= least
    if not hit.any():
        return none
    # A value of its own in a vocabulary (a column whose values typically fill several rows).
    vocabularies = [g for g in facts if g.typical_count >= cal.rare_min_typical and g.index not in rows]
    for r in np.flatnonzero(hit).tolist():
        hit[r] = any(g.counts[g.column.codes[r]] == 1 for g in vocabularies)
    if not hit.any():
        return none
    return hit, [c for c in cols if (rows[c] & hit).any()], least


def _atypical_finding(cluster: list[ColumnFacts], rows: np.ndarray, least: int) -> Finding:
    names = [f.name for f in cluster]
    shown = ", ".join(f"'{n}'" for n in names)
    markers = sorted({m for f in cluster for m in as_written(f, f.is_missing)})
    if rows.size == 1:
        lacking = [f.name for f in cluster]  # every column listed is missing on the one row
        listed = ", ".join(f"'{n}'" for n in lacking[:-1]) + f" and '{lacking[-1]}'"
        which = f"Row {int(rows[0]):,} lacks {listed} at once"
    else:
        which = f"{rows.size:,} rows each lack {least} or more of {shown} at once"
    return Finding(
        type="missing_together",
        columns=names,
        rows=rows,
        cols=np.full(rows.size, -1),
        title=f"A record lacking several values at once ({', '.join(names)})",
        description=(
            f"{which}, columns otherwise filled: gaps at random would almost never fall together on one row. "
            "Such a record is usually of another kind, to which these values do not apply (an electric car "
            "has no mpg), or one whose part was not recorded; its cells are not flagged one by one."
        ),
        suggested_action="Check what sets this record apart; if the values do not apply to it, document it, "
        "otherwise complete them at the source.",
        category="smart_fixes",
        detector="missing",
        stats={
            "columns": names,
            "markers": markers,
            "min_missing": least,
            "rule": "missing_row",
            "rows": rows.tolist(),
            "missing_markers": sorted({m for f in cluster for m in f.markers}),
        },
        flag=False,
        row_level=True,
        key="missing-row:" + ":".join(names),
    )


MIN_NOTE_WORDS = 6  # free text whose values typically hold this many words is a note a record may leave out
_URL = r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)\S+$"
_EMAIL = r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$"


def optional_kind(f: ColumnFacts) -> str | None:
    """What makes a blank in this column a value of its own rather than a gap: 'list' (a column of lists:
    blank is the empty list, a film without dialogue has no language), 'link' (web addresses or e-mails:
    not every record has one), 'text' (notes and comments, values of several words that rarely repeat);
    None for any other column."""
    from iterate.detect.lists import list_delimiter

    ids = np.flatnonzero(f.present & (f.counts > 0))
    if ids.size == 0:
        return None
    if list_delimiter(f) is not None:
        return "list"
    values = f.column.dictionary.take(pa.array(ids))
    weights = f.counts[ids]
    for pattern in (_URL, _EMAIL):
        hit = np.asarray(
            pc.match_substring_regex(pc.utf8_trim_whitespace(values), pattern=pattern), dtype=bool
        )
        if weights[hit].sum() >= 0.9 * weights.sum():
            return "link"
    if not f.free_text:
        return None
    # Notes and comments, not names: a name of three words (a beer, a film) is no optional note.
    _, words = f._head_words
    return "text" if words.size and float(np.median(words)) >= MIN_NOTE_WORDS else None


def gap_llr(share: float, cal: Calibration = DEFAULT) -> float:
    """Evidence that a gap in a column missing `share` of its rows is a slip to fix.

    log((1 - m) / m), plus a bonus for "otherwise filled" that fades as the column empties and is gone where
    emptiness becomes the column's convention (missing_convention_share): a column 42% empty is an optional
    field far more often than a column with 42% of its cells lost.
    """
    fading = max(0.0, 1.0 - share / cal.missing_convention_share)
    return math.log((1 - share) / share) + cal.missing_bonus * fading


def _gap_finding(
    f: ColumnFacts,
    rows: np.ndarray,
    share: float,
    partners: list[int],
    facts: list[ColumnFacts],
    cal: Calibration,
    partial: bool,
    optional: str | None = None,
) -> Finding:
    r, c = cells(rows, f.index)
    marker = repr(f.null_marker) if f.null_marker else "blank"
    name = f.name
    partner_names = [facts[p].name for p in partners]

    def describe(fd: Finding) -> str:
        alone = (
            f" (rows where {', '.join(repr(p) for p in partner_names)} are missing too are a pattern of the "
            "record, reported on their own)"
            if partner_names
            else ""
        )
        head = (
            f"{fd.n_cells:,} rows have no value in '{name}' (written as {marker}), a column filled in "
            f"{1 - share:.1%} of rows{alone}."
        )
        if optional is None:
            return head + " These records are incomplete."
        return head + " " + OPTIONAL_WORDING[optional].format(name=name)

    return Finding(
        type="missing_values",
        columns=[name],
        rows=r,
        cols=c,
        title=f"Missing values in {name}",
        description="",
        describe=describe,
        suggested_action="Complete these values from the source where possible; otherwise decide whether the "
        "rows can be used without them.",
        category="smart_fixes",
        detector="missing",
        stat_name="share of the column's rows that are missing",
        stat=np.full(r.size, share),
        llr=np.full(r.size, gap_llr(share, cal)),
        stats={
            "column": name,
            "markers": as_written(f, f.is_null_marker),
            "partners": partner_names,
            "missing_markers": f.markers,
        }
        | ({"rule": "missing", "rows": rows.tolist()} if partial else {})
        | ({"optional": optional} if optional else {}),
        key=f"missing:{name}",
        value_level=not partial,
        flag=optional is None,
    )


OPTIONAL_WORDING = {
    "list": "'{name}' holds lists: an empty value is an empty list, which a record may rightly have (a film "
    "without dialogue has no language). Check these records have nothing to list; the cells are not flagged.",
    "link": "'{name}' holds web or e-mail addresses, which not every record has: check these have none; the "
    "cells are not flagged.",
    "text": "'{name}' is free text, which a record may leave empty: the cells are not flagged.",
}


def _explained_finding(f: ColumnFacts, rows: np.ndarray, explainers: list[str], n_rows: int) -> Finding:
    name = f.name
    shown = ", ".join(f"'{e}'" for e in explainers[:3])
    return Finding(
        type="missing_values",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, f.index),
        title=f"{name} is missing for whole groups of records",
        description=(
            f"{rows.size:,} rows ({rows.size / n_rows:.1%}) lack '{name}', and they crowd into a few groups of "
            f"{shown}, far more than gaps at random would: the value depends on those records (it does not "
            "apply to them, or their source does not provide it). The cells are not flagged one by one."
        ),
        suggested_action=f"Check with the source whether '{name}' applies to these groups; document the gap "
        "if it is expected.",
        category="smart_fixes",
        detector="missing",
        stats={
            "column": name,
            "markers": as_written(f, f.is_missing),
            "explained_by": explainers,
            "rule": "missing",
            "rows": rows.tolist(),
            "missing_markers": f.markers,
        },
        flag=False,
        key=f"missing-grouped:{name}",
    )


def _placeholder_finding(f: ColumnFacts, placeholder: np.ndarray, explained: np.ndarray) -> Finding | None:
    """Placeholders (`N/A`, `?`) where the rest of the dataset writes a missing value its own way (blank).

    `explained` (a row mask) holds the gaps a pattern of the record or another column's groups account for.
    Where it holds most of the placeholders' rows, the token is the way those records say "does not apply"
    ('N/A' for the district of every statewide race): only the others are listed, and None is returned when
    there are none. Where it holds fewer, the token is the column's way of writing a gap, and every one is."""
    every = f.column.rows_of(np.flatnonzero(placeholder))
    told = explained[every]
    at = every[~told] if 2 * int(told.sum()) > every.size else every
    if not at.size:
        return None
    rows, cols = cells(at, f.index)
    shown_ids = np.zeros(placeholder.size, dtype=bool)
    shown_ids[f.column.codes[at]] = True
    tokens = as_written(f, shown_ids)
    # Some of the placeholders' rows are explained: the proof re-checks the listed rows, not every cell
    # holding the tokens.
    listed = (
        {"rule": "missing", "rows": at.tolist(), "missing_markers": tokens} if at.size < every.size else {}
    )
    shown = ", ".join(repr(t) for t in tokens[:5])
    written = repr(f.null_marker) if f.null_marker else "a blank"
    name = f.name

    def describe(fd: Finding) -> str:
        return (
            f"{fd.n_cells:,} cells in '{name}' hold a placeholder ({shown}) instead of a value, while the rest of "
            f"the dataset writes a missing value as {written}. Tools will read these as text."
        )

    return Finding(
        type="disguised_missing",
        columns=[name],
        rows=rows,
        cols=cols,
        title=f"Placeholders posing as values in {name}",
        description="",
        describe=describe,
        suggested_action="Replace the placeholders with a real missing value (empty) so that counts, averages "
        "and type detection treat them as missing.",
        category="quick_fixes",
        detector="placeholders",
        stats={"column": name, "markers": tokens} | listed,
        expected=[f.null_marker] * rows.size,
        key=f"disguised:{name}",
    )


def unflagged_gaps(
    f: ColumnFacts, rows: np.ndarray, n_rows: int, facts: list[ColumnFacts] | None = None
) -> Finding:
    """The gaps of a column that the decision did not flag (too many to be slips in a clean table): a fact.

    When words of a names column crowd the gaps (the constants whose name says 'ratio' or 'factor' have no
    unit), the fact says so: the value does not apply to those records, most likely."""
    name = f.name
    words = _words_explaining(f, rows, facts or [], n_rows)
    if words is not None:
        column, hot, covered = words
        shown = ", ".join(f"'{w}'" for w in hot[:5])
        told = (
            f"{rows.size:,} of {n_rows:,} rows ({rows.size / n_rows:.1%}) have no value in '{name}', and "
            f"{covered:,} of them are rows whose '{column}' holds {shown}, where '{name}' is missing far more "
            "often than chance: the value does not apply to those records, most likely (they are of a kind "
            "that has none). Check that the others have none either."
        )
    else:
        told = (
            f"{rows.size:,} of {n_rows:,} rows ({rows.size / n_rows:.1%}) have no value in '{name}'. They are "
            "too many, in a table this clean, to be called slips one by one: decide whether these records "
            "can be completed."
        )
    return Finding(
        type="missing_values",
        columns=[name],
        rows=rows,
        cols=np.full(rows.size, f.index),
        title=f"Missing values in {name}",
        description=told,
        suggested_action="Complete these values from the source where possible; otherwise decide whether the "
        "rows can be used without them.",
        category="smart_fixes",
        detector="missing",
        stats={
            "column": name,
            "rule": "missing",
            "rows": rows[:MAX_ROWS_LISTED].tolist(),
            "missing_markers": f.markers,
        }
        | ({"explained_by_words": {"column": words[0], "words": words[1][:20]}} if words else {}),
        flag=False,
        key=f"missing:{name}",
    )


MIN_WORD_ROWS = 3  # a word must name this many records before it can explain their gaps
_WORDS = r"[^\W\d_]{3,}"


def _words_explaining(
    f: ColumnFacts, gaps: np.ndarray, facts: list[ColumnFacts], n_rows: int
) -> tuple[str, list[str], int] | None:
    """The names column and its words that explain most of a column's gaps: rows whose name holds the word
    lack the value far more often than the column's gaps at random would (a Poisson tail, corrected for the
    words tried). Returns the column, the words (most gaps first) and how many gaps they cover, or None."""
    if gaps.size < MIN_WORD_ROWS:
        return None
    missing = np.zeros(n_rows, dtype=bool)
    missing[gaps] = True
    rate = gaps.size / n_rows
    best: tuple[str, list[str], int] | None = None
    for g in facts:
        if g.index == f.index or not g.pairwise_ok or g.typical_count > 2:
            continue  # names: nearly every record its own
        ids = np.flatnonzero(g.present & (g.counts > 0))
        if ids.size < 0.5 * n_rows or not g.has_letter[ids].all():
            continue
        holders: dict[str, list[int]] = {}
        for i, text in zip(ids.tolist(), g.column.texts(ids), strict=True):
            for w in set(re.findall(_WORDS, text.casefold())):
                holders.setdefault(w, []).append(i)
        tried = [
            (w, np.isin(g.column.codes, held))
            for w, held in holders.items()
            if sum(g.counts[held]) >= MIN_WORD_ROWS
        ]
        if not tried:
            continue
        sizes = np.array([int(m.sum()) for _, m in tried])
        hits = np.array([int((m & missing).sum()) for _, m in tried])
        tail = poisson_tail(hits, sizes * rate) * len(tried)
        hot = [
            (int(h), w)
            for (w, _), h, t in zip(tried, hits, tail, strict=True)
            if t < DEFAULT.split_tail and h >= MIN_WORD_ROWS
        ]
        if not hot:
            continue
        covered = np.zeros(n_rows, dtype=bool)
        for _, w in hot:
            covered |= next(m for x, m in tried if x == w)
        n_covered = int((covered & missing).sum())
        if 2 * n_covered >= gaps.size and (best is None or n_covered > best[2]):
            best = (g.name, [w for _, w in sorted(hot, key=lambda hw: (-hw[0], hw[1]))], n_covered)
    return best


def _convention_finding(f: ColumnFacts, n_rows: int, share: float) -> Finding:
    rows, cols = cells(f.column.rows_of(np.flatnonzero(f.is_missing & (f.counts > 0))), f.index)
    name = f.name
    return Finding(
        type="missing_values",
        columns=[name],
        rows=rows,
        cols=cols,
        title=f"{name} is mostly empty",
        description=(
            f"'{name}' has no value in {rows.size:,} of {n_rows:,} rows ({share:.1%}): the column is filled only "
            "when there is something to record, which is how it writes 'none'."
        ),
        suggested_action="Nothing to fix if empty means 'none' here; document it, or fill the column at the "
        "source if it should always hold a value.",
        category="quick_fixes",
        detector="missing",
        stats={"column": name, "markers": as_written(f, f.is_missing), "convention": True},
        flag=False,
        key=f"missing:{name}",
    )


def unflagged_pattern(flagged: Finding, facts: list[ColumnFacts], n_rows: int) -> Finding:
    """A pattern of gaps the decision flagged no cell of, reported as a fact about the records (unflagged)."""
    by_name = {f.name: f for f in facts}
    cluster = [by_name[c] for c in flagged.columns]
    # Counted again from the columns: the finding's listed rows stop at MAX_ROWS_LISTED.
    missing = _missing_rows(cluster)
    rows = np.flatnonzero(np.sum([missing[f.index] for f in cluster if f.index in missing], axis=0) >= 2)
    return _pattern_finding(cluster, rows, n_rows, bool(flagged.stats.get("whole")))


def _pattern_finding(
    cluster: list[ColumnFacts],
    rows: np.ndarray,
    n_rows: int,
    whole: bool = False,
    missing: dict[int, np.ndarray] | None = None,
    exclude: dict[int, np.ndarray] | None = None,
    cal: Calibration = DEFAULT,
) -> Finding:
    """Columns whose gaps travel together: missing values all the same (a source that reports no times for a
    record lost them all), each blank cell flagged where its column is otherwise filled, as one issue with
    the pattern in its text. Not flagged: the gaps of a mostly empty column, and those `exclude` keeps out
    (another column's groups explain them, records of another kind). `whole`: the columns are missing on
    exactly the same rows, never one without the others (one part of the record, present or absent as a
    whole); said in the text. Without `missing`, the pattern is reported as a fact, nothing flagged."""
    names = [f.name for f in cluster]
    shown = ", ".join(f"'{n}'" for n in names)
    markers = sorted({m for f in cluster for m in as_written(f, f.is_missing)})
    if missing is not None:
        r_parts, c_parts, llr_parts = [], [], []
        on = np.zeros(n_rows, dtype=bool)
        on[rows] = True
        for f in cluster:
            gaps = missing[f.index] & on
            if exclude is not None and f.index in exclude:
                gaps &= ~exclude[f.index]
            at = np.flatnonzero(gaps)
            if at.size:
                share = float(missing[f.index].sum()) / n_rows
                r_parts.append(at)
                c_parts.append(np.full(at.size, f.index))
                llr_parts.append(np.full(at.size, gap_llr(share, cal)))
        if r_parts:
            r = np.concatenate(r_parts)
            together = "all missing, never one without the others" if whole else "missing together"
            pattern = (
                f"In {rows.size:,} rows ({rows.size / n_rows:.1%}) two or more of {shown} are {together}, "
                "far more often than chance: the records lack that part as a whole (a source that did not report "
                "it, a step that did not happen)."
            )
            return Finding(
                type="missing_together",
                columns=names,
                rows=r,
                cols=np.concatenate(c_parts),
                title=f"Values missing together in {', '.join(names)}",
                description=pattern,
                # What is flagged is told from what the decision kept: the same count as the rows.
                describe=lambda fd: (
                    f"{pattern} {fd.n_cells:,} of their blanks, in {fd.unique_rows().size:,} rows, are flagged: "
                    "those where the column is otherwise filled."
                ),
                suggested_action="Complete these records at the source (they lack the same part); if the gap "
                "is expected for them, record why in a column of its own.",
                category="smart_fixes",
                detector="missing",
                # The rows listed are the flagged ones (the decision rewrites them); the proof re-checks that
                # each lacks two or more of the columns (ROWS_RULE's `missing_row`).
                stats={
                    "columns": names,
                    "markers": markers,
                    "missing_markers": markers,
                    "min_missing": 2,
                    "whole": whole,
                    "rule": "missing_row",
                    "rows": rows[:MAX_ROWS_LISTED].tolist(),
                },
                llr=np.concatenate(llr_parts),
                value_level=False,
                key="missing-together:" + ":".join(names),
            )
    if whole:
        told = (
            f"In {rows.size:,} rows ({rows.size / n_rows:.1%}) {shown} are all empty, and none of them is ever "
            "empty without the others: one part of the record that these records do not have (a kind of record "
            "it does not apply to, or a step that did not happen). The cells are not flagged one by one."
        )
    else:
        told = (
            f"In {rows.size:,} rows ({rows.size / n_rows:.1%}) two or more of {shown} are missing together, far "
            "more often than chance: these records lack that part as a whole (a kind of record, or a step that "
            "did not happen), so the cells are not flagged one by one."
        )
    return Finding(
        type="missing_together",
        columns=names,
        rows=rows,
        cols=np.full(rows.size, -1),
        title=f"Values missing together in {', '.join(names)}",
        description=told,
        suggested_action="Check what these records have in common; if the gap is expected for them, document "
        "it, otherwise complete them at the source.",
        category="smart_fixes",
        detector="missing",
        stats={"columns": names, "markers": markers, "min_missing": 2}
        | ({"convention": True} if whole else {}),
        flag=False,
        row_level=True,
        key="missing-together:" + ":".join(names),
    )


def detect_sentinels(f: ColumnFacts) -> Finding | None:
    """Placeholder numbers and dates (9999, -1, 1900-01-01) standing in for missing: a spike far outside the
    range of every other value. The profiler's rule decides; only columns holding such a value pay for it."""
    hit = f.is_placeholder_text
    if not (hit & f.present & (f.counts > 0)).any():
        return None
    from iterate.profile.sketch import disguised_sentinels
    from iterate.profile.types import infer_semantic_type

    inference = infer_semantic_type(f.column, missing=f.is_missing)
    sentinel = disguised_sentinels(inference, f.counts) & (f.counts > 0)
    if not sentinel.any():
        return None
    ids = np.flatnonzero(sentinel)
    rows, cols = cells(f.column.rows_of(ids), f.index)
    markers = sorted({v.strip() for v in f.column.texts(ids)})
    shown = ", ".join(repr(m) for m in markers[:5])
    return Finding(
        type="disguised_missing",
        columns=[f.name],
        rows=rows,
        cols=cols,
        title=f"Placeholder values standing in for missing in {f.name}",
        description="",
        describe=lambda fd: (
            f"{fd.n_cells:,} cells in '{f.name}' hold {shown}, a value repeated far more often than others and "
            "far outside the range of the rest of the column: the usual sign of a placeholder for 'unknown'. "
            "Averages and ranges computed on this column are distorted by it."
        ),
        suggested_action="Replace the placeholder with a real missing value (empty), after checking with the "
        "source system that it means 'unknown'.",
        category="smart_fixes",
        detector="sentinels",
        stats={"column": f.name, "markers": markers},
        expected=[f.null_marker] * rows.size,
        key=f"sentinel:{f.name}",
    )
