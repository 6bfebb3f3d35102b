"""How a numeric column writes its digits: numbers written with more decimals than the column ever uses (noise
pasted in as `0.453009067` among `0.24`), codes that lost their leading zeros or their width (`2134` among
five-digit zips), numbers led by a zero the column never writes, and decimals cut short.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.detect.calibration import DEFAULT, Calibration, repeat_discount, share_llr
from iterate.detect.context import ColumnFacts
from iterate.detect.findings import Finding, value_finding
from iterate.detect.numeric import ZIP_NAME, ZIP_WIDTH, NumericModel, _bools, _values, weighted_quantile
from iterate.wording import agree, plural


def _written_decimals(numbers: np.ndarray, decimals: np.ndarray) -> np.ndarray:
    """Decimals once binary floating-point noise is rounded away: `6.904679999999999` is 6.90468 (5), not 15."""
    out = decimals.copy()
    for i in np.flatnonzero(decimals >= 8):
        short = f"{float(f'{numbers[i]:.12g}'):.12g}"
        if "e" not in short:
            out[i] = len(short.split(".")[1]) if "." in short else 0
    return out


SCIENTIFIC_SHARE = 0.05  # rows written in scientific notation from which a column's precision is its digits


def _written_digits(numbers: np.ndarray) -> np.ndarray:
    """Significant digits once binary floating-point noise is rounded away: `1.6021766340000001e-19` is
    1.602176634e-19 (10), `5.48579909065e-4` keeps its 12."""
    out = np.zeros(numbers.size, dtype=np.int64)
    for i in np.flatnonzero(~np.isnan(numbers)):
        mantissa = f"{numbers[i]:.11e}".split("e")[0].lstrip("-").replace(".", "").rstrip("0")
        out[i] = max(len(mantissa), 1)
    return out


def detect_precision(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Numbers written with far more decimals than the column writes (`0.453009067` among `0.24`).

    Binary floating-point noise (`6.904679999999999`) is formatting, not a changed value: decimals are counted
    once it is rounded away.
    """
    if not m.numeric:
        return None
    ok = m.is_number
    # A column that writes numbers in scientific notation spans magnitudes (constants from 1e-74 to 1e50):
    # its precision is its significant digits, which decimals do not count.
    text = f.column.dictionary.take(pa.array(m.ids, pa.int64()))
    scientific = ok & _bools(pc.match_substring_regex(text, r"[0-9][eE][-+]?[0-9]"))
    digits = m.convention == "point" and float(m.weights[scientific].sum()) >= SCIENTIFIC_SHARE * float(
        m.weights[ok].sum()
    )
    written = _written_digits(m.numbers) if digits else _written_decimals(m.numbers, m.decimals)
    # A zero has no digits to show: a column of computed shares that writes "0" for most rows (no playoff
    # games) writes its other values with all their decimals. The precision is read off the other values.
    nonzero = ok & (m.numbers != 0)
    typical = (
        weighted_quantile(written[nonzero].astype(np.float64), m.weights[nonzero].astype(np.float64), 0.5)
        if nonzero.any()
        else m.typical(written)
    )
    excess = written - typical
    hit = ok & (excess >= cal.precision_gap)
    if not hit.any():
        return None
    llr = np.minimum(
        (excess[hit] - cal.precision_gap + 1) * cal.precision_llr_per_digit, cal.precision_max_llr
    )
    # A long value the column repeats is the column's own (a computed constant, a code), not pasted noise.
    llr = llr - repeat_discount(m.weights[hit], f.typical_count, cal)
    ids = m.ids[hit]
    bound = int(typical + cal.precision_gap)
    name = f.name

    unit = "significant digits" if digits else "decimals"

    def describe(fd: Finding) -> str:
        return (
            f"{plural(fd.n_cells, 'number')} in '{name}' {agree(fd.n_cells, 'is', 'are')} written with {bound} or "
            f"more {unit}, while the column "
            f"usually writes {int(typical)}; for example "
            + ", ".join(repr(v) for v in fd.stats["bad_values"][:3])
            + ". Values like these are usually noise or a computation pasted over the recorded value."
        )

    return value_finding(
        f,
        ids,
        llr,
        written[hit].astype(np.float64),
        type="format_violation",
        columns=[name],
        title=f"Numbers with unusual precision in {name}",
        description="",
        describe=describe,
        suggested_action="Check these values against the source: the recorded value was probably replaced. "
        "Restore it, or round to the column's precision if the extra digits are only formatting.",
        category="smart_fixes",
        detector="precision",
        stat_name=f"{unit} written",
        stats={"column": name, "rule": "digits", "min_digits": bound, "bad_values": _values(f, ids)}
        if digits
        else {"column": name, "rule": "decimals", "min_decimals": bound, "bad_values": _values(f, ids)},
        key=f"precision:{name}",
    )


# A semantic hint a user's data allows: a column called perc..., pct, percent, share, proportion or fraction
# holds shares of a whole, between 0 and 100 (or 1).


def detect_code_width(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Codes written with another number of digits than the column's (`211` among years, `3523` among zips)."""
    width = m.code_width
    if width is None:
        return None
    ok = m.is_number
    counts = np.bincount(m.widths[ok], weights=m.weights[ok])
    share = float(counts[width] / m.weights.sum())
    bad = ok & (m.widths != width)
    # A second width that many rows use is part of the code (zip+4, short and long account numbers); but a
    # US zip code is five digits, so in a column named zip 3 and 4 digits are lost leading zeros however many.
    usual = counts[m.widths[bad]] >= 0.1 * counts[width] if bad.any() else np.zeros(0, bool)
    zips = width == ZIP_WIDTH and ZIP_NAME.search(f.name) is not None
    if zips:
        usual &= ~np.isin(m.widths[bad], (3, 4))
    bad[np.flatnonzero(bad)[usual]] = False
    if not bad.any():
        return None
    ids = m.ids[bad]
    llr = share_llr(share, cal.shape_bonus) - repeat_discount(m.weights[bad], f.typical_count, cal)
    if zips:  # a lost zero repeats as often as its zip code does: repetition does not make it right
        llr = np.where(np.isin(m.widths[bad], (3, 4)), share_llr(share, cal.shape_bonus), llr)
    name = f.name

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'value')} in '{name}' {agree(fd.n_cells, 'is', 'are')} not {width} digits long, "
            f"while {share:.1%} of the column's "
            f"rows are; for example {shown}. "
            + (
                "A US zip code has five digits: shorter ones lost their leading zeros (often when the file "
                "was saved with the column as numbers)."
                if zips
                else "A code with a digit lost or added no longer matches its record."
            )
        )

    return value_finding(
        f,
        ids,
        llr,
        m.widths[bad].astype(np.float64),
        type="format_violation",
        columns=[name],
        title=f"Codes of the wrong length in {name}",
        description="",
        describe=describe,
        suggested_action="Correct these codes at the source (a lost leading zero can be restored by padding "
        f"to {width} digits); codes that cannot be recovered should be set to missing.",
        category="smart_fixes",
        detector="parse",
        stat_name="digits written",
        stats={"column": name, "rule": "width", "width": width, "bad_values": _values(f, ids)},
        vouchable=not zips,
        key=f"width:{name}",
    )


def detect_zero_led(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Whole numbers written with a leading zero (`0123`) in a column that writes its numbers without one:
    the same number written unlike the column (a code column padded by its convention is judged by its
    width instead, see detect_code_width)."""
    if not m.numeric or m.code_width is not None:
        return None
    ok = m.is_number & (m.decimals == 0)
    text = pc.utf8_trim_whitespace(f.column.dictionary.take(pa.array(m.ids, pa.int64())))
    led = ok & _bools(pc.match_substring_regex(text, r"^[-+]?0\d"))
    if not led.any():
        return None
    whole = float(m.weights[ok].sum())
    share = 1.0 - float(m.weights[led].sum()) / max(whole, 1.0)
    if share < cal.parse_min_share:
        return None  # padding is as common as not: a convention of its own
    ids = m.ids[led]
    llr = share_llr(share, cal.shape_bonus) - repeat_discount(m.weights[led], f.typical_count, cal)
    name = f.name
    values = _values(f, ids)
    stripped = {v: v.strip().lstrip("+").lstrip("0") or "0" for v in values}

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'number')} in '{name}' {agree(fd.n_cells, 'is', 'are')} written with a leading "
            f"zero ({shown}), while {share:.1%} of the column's whole numbers are written without one."
        )

    return value_finding(
        f,
        ids,
        llr,
        np.full(ids.size, share),
        type="format_violation",
        columns=[name],
        title=f"Numbers with a leading zero in {name}",
        description="",
        describe=describe,
        suggested_action="Write these numbers without the leading zero, as the rest of the column does (if the "
        "column holds codes whose zeros matter, pad the others instead).",
        category="quick_fixes",
        detector="zeroled",
        stat_name="share of the column's whole numbers written without a leading zero",
        stats={"column": name, "rule": "zero_led", "bad_values": values, "canonical": stripped},
        key=f"zeroled:{name}",
        damage="format",
    )


def detect_short_decimals(f: ColumnFacts, m: NumericModel, cal: Calibration = DEFAULT) -> Finding | None:
    """Numbers written with fewer decimals than a column that writes every number with the same number of
    decimals (`1.5175` among `1.51750`, `12.5` among `12.50`): the same number with its trailing zeros
    dropped, written unlike the column (a quick fix pads them back)."""
    if not m.numeric or m.convention != "point":
        return None
    ok = m.is_number & (m.digits >= 0)
    w = m.weights[ok].astype(np.float64)
    if w.sum() < 20:
        return None
    decimals = m.decimals[ok]
    counts = np.bincount(decimals, weights=w)
    k = int(counts.argmax())
    share = float(counts[k] / w.sum())
    if k == 0 or share < cal.parse_min_share:
        return None  # whole numbers, or no one number of decimals the column keeps to
    text = f.column.dictionary.take(pa.array(m.ids[ok], pa.int64()))
    plain = _bools(pc.match_substring_regex(pc.utf8_trim_whitespace(text), r"^[-+]?[0-9]*[.]?[0-9]+$"))
    short = plain & (decimals < k)
    if not short.any():
        return None
    ids = m.ids[ok][short]
    llr = share_llr(share, cal.shape_bonus) - repeat_discount(m.weights[ok][short], f.typical_count, cal)
    name = f.name
    values = _values(f, ids)
    padded = {}
    for v in values:
        t = v.strip()
        whole, _, frac = t.partition(".")
        padded[v] = f"{whole}.{frac.ljust(k, '0')}"

    def describe(fd: Finding) -> str:
        shown = ", ".join(repr(v) for v in fd.stats["bad_values"][:4])
        return (
            f"{plural(fd.n_cells, 'number')} in '{name}' {agree(fd.n_cells, 'is', 'are')} written with fewer than "
            f"{k} decimals ({shown}), while {share:.1%} of the column's rows write exactly {k}: trailing zeros "
            "dropped on the way."
        )

    return value_finding(
        f,
        ids,
        llr,
        np.full(ids.size, share),
        type="format_violation",
        columns=[name],
        title=f"Numbers with fewer decimals than {name} writes",
        description="",
        describe=describe,
        suggested_action=f"Write these numbers with {k} decimals, as the rest of the column does.",
        category="quick_fixes",
        detector="decimals",
        stat_name="share of the column's rows written with the column's number of decimals",
        stats={
            "column": name,
            "rule": "short_decimals",
            "decimals": k,
            "bad_values": values,
            "canonical": padded,
        },
        key=f"shortdec:{name}",
        damage="format",
    )
