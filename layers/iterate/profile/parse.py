"""Tolerant vectorised parsing of numbers (thousands separators, %, currency, units) and dates (by format)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PLAIN_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
INTEGER = r"^[+-]?\d+$"
CURRENCY_SYMBOLS = "$€£¥₹"
CURRENCY_CODES = frozenset(
    {"usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "inr", "cny", "sek", "nok", "dkk"}
)
_NUMBER_PARTS = (
    r"^(?P<sign>[+-]?)\s*(?P<cur>[$€£¥₹]?)\s*(?P<sign2>[+-]?)"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)(?P<exp>[eE][+-]?\d+)?"
    r"\s*(?P<suffix>%|[A-Za-zµ°€$£¥₹/²³]{1,12}\.?)?$"
)


UNIT_ALIASES = {
    "ounce": "oz", "ounces": "oz", "lbs": "lb", "pound": "lb", "pounds": "lb", "kgs": "kg", "kilo": "kg",
    "kilogram": "kg", "kilograms": "kg", "gram": "g", "grams": "g", "gr": "g", "litre": "l", "liter": "l",
    "litres": "l", "liters": "l", "ltr": "l", "millilitre": "ml", "milliliter": "ml", "mls": "ml",
    "meter": "m", "metre": "m", "meters": "m", "metres": "m", "inch": "in", "inches": "in", "feet": "ft",
    "foot": "ft", "pct": "%", "percent": "%", "hrs": "h", "hr": "h", "hour": "h", "hours": "h",
    "min": "min", "mins": "min", "minutes": "min", "sec": "s", "secs": "s", "seconds": "s",
}  # fmt: skip
_ALIAS_FROM = pa.array(list(UNIT_ALIASES), pa.string())
_ALIAS_TO = pa.array(list(UNIT_ALIASES.values()), pa.string())


@dataclass
class NumberInfo:
    """What `parse_numbers` saw, per input value: how it was written around the number."""

    plain: np.ndarray  # bool: a bare number like `12`, `-3.5`, `1e3`
    percent: np.ndarray  # bool: written with `%`
    currency: pa.Array  # string or null: currency symbol or code, e.g. `$`, `EUR`
    unit: pa.Array  # string or null: any other suffix, e.g. `kg`, `oz`
    thousands: np.ndarray  # bool: written with `,` thousands separators

    @property
    def unit_key(self) -> pa.Array:
        """The unit folded to one spelling (`OZ.`, `ounce` → `oz`), so spelling variants count as one unit."""
        folded = pc.utf8_rtrim(pc.utf8_lower(self.unit), characters=".")
        alias = pc.take(_ALIAS_TO, pc.index_in(folded, value_set=_ALIAS_FROM))
        return pc.coalesce(alias, folded)

    @property
    def marker(self) -> pa.Array:
        """Per value: `%`, its currency, or its unit key (null for bare numbers and non-numbers)."""
        pct = pc.if_else(pa.array(self.percent), "%", pa.scalar(None, pa.string()))
        return pc.coalesce(pct, self.currency, self.unit_key)

    def suffix_counts(self, weights: np.ndarray | None = None) -> dict[str, int]:
        """Rows (or values, without weights) per marker (`%`, currency, unit) among the parsed values."""
        enc = pc.dictionary_encode(self.marker)
        codes = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        keep = codes >= 0
        if not keep.any():
            return {}
        w = np.ones(len(codes)) if weights is None else np.asarray(weights, dtype=np.float64)
        rows = np.bincount(codes[keep], weights=w[keep], minlength=len(enc.dictionary))
        return {k: int(r) for k, r in zip(enc.dictionary.to_pylist(), rows.tolist(), strict=True) if r > 0}

    def is_marker(self, marker: str) -> np.ndarray:
        """Per value: written with this marker (`%`, a currency, a unit key)."""
        return np.asarray(
            pc.fill_null(pc.equal(self.marker, marker), False).to_numpy(zero_copy_only=False), bool
        )


def _to_float(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _bools(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _scatter(n: int, positions: np.ndarray, sub: pa.Array) -> pa.Array:
    """A length-n string array holding sub[j] at positions[j] and null elsewhere (no Python loop)."""
    where = np.full(n, len(sub), dtype=np.int64)
    where[positions] = np.arange(len(sub))
    return pc.take(pa.concat_arrays([sub.cast(pa.string()), pa.nulls(1, pa.string())]), pa.array(where))


_CODES = pa.array(sorted(CURRENCY_CODES), pa.string())
_SYMBOLS = pa.array(list(CURRENCY_SYMBOLS), pa.string())


def parse_numbers(values: pa.Array | list[str]) -> tuple[np.ndarray, NumberInfo]:
    """Numbers in text → float64 (NaN where not a number) and how each was written.

    Tolerates surrounding spaces, a sign, thousands separators (`1,234.5`), a leading currency symbol (`$12`),
    a trailing `%`, a currency code or a unit (`12 USD`, `12.5 kg`). Percentages keep their written scale
    (`15%` → 15.0). Decimal commas (`12,5`) are not numbers here: they are ambiguous with thousands separators.
    """
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    n = len(arr)
    out = np.full(n, np.nan)
    percent = np.zeros(n, dtype=bool)
    thousands = np.zeros(n, dtype=bool)
    nulls = pa.nulls(n, pa.string())
    currency, unit = nulls, nulls
    if n == 0:
        return out, NumberInfo(np.zeros(0, bool), percent, currency, unit, thousands)
    text = pc.utf8_trim_whitespace(arr)
    plain = _bools(pc.match_substring_regex(text, PLAIN_NUMBER))
    idx = np.flatnonzero(plain)
    if len(idx):
        out[idx] = _to_float(pc.take(text, pa.array(idx)))
    rest = np.flatnonzero(~plain & _bools(pc.match_substring_regex(text, r"\d")))
    if len(rest):
        parts = pc.extract_regex(pc.take(text, pa.array(rest)), _NUMBER_PARTS)
        matched = _bools(pc.is_valid(parts))
        ok = rest[matched]
        if len(ok):
            parts = parts.filter(pa.array(matched))
            num = pc.struct_field(parts, "num")
            text_num = pc.binary_join_element_wise(
                pc.replace_substring(num, ",", ""), pc.struct_field(parts, "exp"), ""
            )
            magnitude = _to_float(text_num)
            signs = pc.binary_join_element_wise(
                pc.struct_field(parts, "sign"), pc.struct_field(parts, "sign2"), ""
            )
            neg = _bools(pc.equal(pc.utf8_length(pc.replace_substring(signs, "+", "")), 1))
            out[ok] = np.where(neg, -magnitude, magnitude)
            thousands[ok] = _bools(pc.match_substring(num, ","))
            cur = pc.struct_field(parts, "cur")
            suffix = pc.struct_field(parts, "suffix")
            is_pct = _bools(pc.equal(suffix, "%"))
            percent[ok] = is_pct
            folded = pc.utf8_rtrim(pc.utf8_lower(suffix), characters=".")
            is_code = _bools(pc.is_in(folded, value_set=_CODES))
            is_sym = _bools(pc.is_in(suffix, value_set=_SYMBOLS))
            null = pa.scalar(None, pa.string())
            from_suffix = pc.if_else(
                pa.array(is_code), pc.utf8_upper(folded), pc.if_else(pa.array(is_sym), suffix, null)
            )
            has_cur = _bools(pc.not_equal(cur, ""))
            cur_sub = pc.if_else(pa.array(has_cur), cur, from_suffix)
            is_unit = ~is_pct & ~is_code & ~is_sym & _bools(pc.not_equal(suffix, ""))
            unit_sub = pc.if_else(pa.array(is_unit), suffix, null)
            currency = _scatter(n, ok, cur_sub)
            unit = _scatter(n, ok, unit_sub)
    # 1e999 overflows to infinity: not a number a profile can hold (JSON has no Infinity).
    out[~np.isfinite(out)] = np.nan
    return out, NumberInfo(plain, percent, currency, unit, thousands)


# Decimal commas (`3,5`, `1.234,56`) against decimal points (`3.5`, `1,234.56`). A value in the comma
# convention, or a bare integer:
COMMA_NUMBER = r"^[+-]?(?:\d{1,3}(?:\.\d{3})+|\d+)(?:,\d+)?$"
# Values that only one convention can read (`1,234` and `1.234` are ambiguous: they prove neither).
COMMA_PROOF = (
    r"^[+-]?(?:\d+,(?:\d{1,2}|\d{4,})|(?:0|\d{4,}),\d{3}|\d{1,3}(?:\.\d{3})+,\d+|\d{1,3}(?:\.\d{3}){2,})$"
)
POINT_PROOF = (
    r"^[+-]?(?:\d*\.(?:\d{1,2}|\d{4,})|(?:0|\d{4,})?\.\d{3}|\d{1,3}(?:,\d{3})+\.\d+|\d{1,3}(?:,\d{3}){2,})$"
)
# One convention wins over the other when the values proving it hold this many times the other's rows.
CONVENTION_MARGIN = 2.0


def decimal_convention(values: pa.Array, weights: np.ndarray, min_share: float = 0.0) -> str | None:
    """`comma` or `point`: the decimal separator the values prove, when they prove one clearly and some value
    is written with a decimal comma (None otherwise: no decimal comma, a tie, or the winner's proof holds
    less than `min_share` of the rows)."""
    text = pc.utf8_trim_whitespace(values)
    comma = float(weights[_bools(pc.match_substring_regex(text, COMMA_PROOF))].sum())
    if comma == 0:
        return None
    point = float(weights[_bools(pc.match_substring_regex(text, POINT_PROOF))].sum())
    floor = min_share * float(weights.sum())
    if comma >= CONVENTION_MARGIN * point and comma >= floor:
        return "comma"
    if point >= CONVENTION_MARGIN * comma and point >= floor:
        return "point"
    return None


def comma_to_point(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Numbers in the decimal-comma convention rewritten with a decimal point (`1.234,5` → `1234.5`), and
    which values were (trimmed; others are returned as they are)."""
    text = pc.utf8_trim_whitespace(values)
    ok = _bools(pc.match_substring_regex(text, COMMA_NUMBER))
    point = pc.replace_substring(pc.replace_substring(text, ".", ""), ",", ".")
    return pc.if_else(pa.array(ok), point, text), ok


# Date formats we recognise, each with the regex that picks its candidates. Day/month order is settled by
# the values themselves (see `resolve_day_month`).
@dataclass(frozen=True)
class DateFormat:
    regex: str
    formats: tuple[str, ...]  # one, or (month-first, day-first) when the shape cannot tell them apart
    has_time: bool = False


_AMPM = r"\d{1,2}:\d{2}(:\d{2})? ?[AaPp]\.?[Mm]\.?"
DATE_FORMATS: tuple[DateFormat, ...] = (
    DateFormat(r"^\d{4}-\d{2}-\d{2}$", ("%Y-%m-%d",)),
    DateFormat(r"^\d{4}/\d{1,2}/\d{1,2}$", ("%Y/%m/%d",)),
    DateFormat(r"^\d{4}\.\d{2}\.\d{2}$", ("%Y.%m.%d",)),
    DateFormat(r"^\d{1,2}/\d{1,2}/\d{4}$", ("%m/%d/%Y", "%d/%m/%Y")),
    DateFormat(r"^\d{1,2}-\d{1,2}-\d{4}$", ("%m-%d-%Y", "%d-%m-%Y")),
    DateFormat(r"^\d{1,2}\.\d{1,2}\.\d{4}$", ("%d.%m.%Y",)),
    DateFormat(r"^\d{1,2}/\d{1,2}/\d{2}$", ("%m/%d/%y", "%d/%m/%y")),
    DateFormat(r"^\d{1,2} [A-Za-z]{3} \d{4}$", ("%d %b %Y",)),
    DateFormat(r"^\d{1,2}-[A-Za-z]{3}-\d{4}$", ("%d-%b-%Y",)),
    DateFormat(r"^[A-Za-z]{3} \d{1,2}, \d{4}$", ("%b %d, %Y",)),
    DateFormat(r"^[A-Za-z]{4,9} \d{1,2}, \d{4}$", ("%B %d, %Y",)),
    DateFormat(r"^\d{1,2} [A-Za-z]{4,9} \d{4}$", ("%d %B %Y",)),
    DateFormat(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$", ("%Y-%m-%dT%H:%M:%S",), True),
    DateFormat(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", ("%Y-%m-%dT%H:%M:%SZ",), True),
    DateFormat(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$", ("%Y-%m-%d %H:%M:%S",), True),
    DateFormat(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}$", ("%Y-%m-%d %H:%M",), True),
    DateFormat(r"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}(:\d{2})?$", ("%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M"), True),
    # 12-hour clock: `07:10 PM`, `7:10pm`, `7:10 p.m.` (seconds, when written, are dropped like above).
    DateFormat(rf"^\d{{1,2}}/\d{{1,2}}/\d{{4}} {_AMPM}$", ("%m/%d/%Y %I:%M %p", "%d/%m/%Y %I:%M %p"), True),
    DateFormat(rf"^\d{{4}}-\d{{2}}-\d{{2}} {_AMPM}$", ("%Y-%m-%d %I:%M %p",), True),
    DateFormat(rf"^{_AMPM}$", ("%I:%M %p",), True),
    # Compact `20230115`: also an 8-digit number, so only values that are dates in a plausible range count
    # (see `guess_date_format`), and the type inference asks for more than for other formats.
    DateFormat(r"^\d{8}$", ("%Y%m%d",)),
)
_ANY_DATE = "|".join(f"(?:{d.regex})" for d in DATE_FORMATS)
# Formats whose values carry a time of day.
TIME_FORMATS = frozenset(f for d in DATE_FORMATS if d.has_time for f in d.formats)
# Formats holding a time of day alone (parsed onto 1900-01-01).
TIME_ONLY_FORMATS = frozenset({"%I:%M %p"})
COMPACT_DATE = "%Y%m%d"
# Compact dates outside these years are taken for numbers.
COMPACT_YEARS = (1900, 2100)


def date_family(fmt: str) -> DateFormat | None:
    """The recognised family a strptime format belongs to (None for formats we do not list)."""
    for d in DATE_FORMATS:
        if fmt in d.formats:
            return d
    return None


def _strptime_format(fmt: str, values: pa.Array) -> tuple[str, pa.Array]:
    """Arrow's strptime lacks optional seconds and `T`: adapt the format or the values to what it accepts."""
    if fmt == "%Y-%m-%d %H:%M":
        return fmt, pc.replace_substring(values, "T", " ")
    if fmt in ("%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M"):
        return fmt, pc.replace_substring_regex(values, r"(\d{1,2}:\d{2}):\d{2}$", r"\1")
    if "%p" in fmt:
        # `7:10:05 p.m.` → `7:10 PM`: no seconds, one space, the marker without dots.
        text = pc.utf8_upper(
            pc.replace_substring_regex(values, r"(\d{1,2}:\d{2})(:\d{2})? ?([AaPp])\.?[Mm]\.?$", r"\1 \3M")
        )
        return fmt, text
    return fmt, values


_FIXED_WIDTH = {"%Y": 4, "%m": 2, "%d": 2, "%H": 2, "%M": 2, "%S": 2, "%y": 2}


def _fixed_layout(fmt: str) -> tuple[int, int] | None:
    """(width, offset of the day) when every field of the format has a fixed width, e.g. `%Y-%m-%d`."""
    width, day, i = 0, -1, 0
    while i < len(fmt):
        if fmt[i] == "%":
            code = fmt[i : i + 2]
            if code not in _FIXED_WIDTH:
                return None
            if code == "%d":
                day = width
            width += _FIXED_WIDTH[code]
            i += 2
        else:
            width += 1
            i += 1
    return (width, day) if day >= 0 else None


def parse_dates(values: pa.Array | list[str], fmt: str) -> np.ndarray:
    """Text in one strptime format → datetime64[s] (NaT where the value does not parse in that format)."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    if len(arr) == 0:
        return np.zeros(0, dtype="datetime64[s]")
    fmt2, text = _strptime_format(fmt, pc.utf8_trim_whitespace(arr))
    family = date_family(fmt)
    # Fixed width only when the family's values are zero-padded (`5/3/2020` is fine for `%d/%m/%Y`).
    layout = _fixed_layout(fmt2) if family is not None and "{1," not in family.regex else None
    null = pa.scalar(None, pa.string())
    # strptime accepts one-digit fields and some trailing text: a fixed-width format checks the length
    # (cheap), any other the format family's regex.
    if layout is not None:
        text = pc.if_else(pc.equal(pc.binary_length(text), layout[0]), text, null)
    elif family is not None:
        text = pc.if_else(pc.match_substring_regex(text, family.regex.replace("[ T]", " ")), text, null)
    parsed = pc.strptime(text, format=fmt2, unit="s", error_is_null=True)
    secs = pc.cast(parsed, pa.int64())
    valid = np.asarray(pc.is_valid(secs).to_numpy(zero_copy_only=False), dtype=bool)
    # Arrow rolls an impossible day over (Feb 30 → Mar 1): such values land on day 1-3 of a month, so only
    # those are checked against the day written in the text.
    early = np.flatnonzero(
        valid & np.asarray(pc.fill_null(pc.less_equal(pc.day(parsed), 3), False), dtype=bool)
    )
    if len(early):
        take = pa.array(early)
        sub = pc.take(text, take)
        if layout is not None:
            written = pc.cast(pc.utf8_slice_codeunits(sub, layout[1], layout[1] + 2), pa.int64())
            same = pc.equal(written, pc.day(pc.take(parsed, take)))
        else:
            back = pc.strftime(pc.take(parsed, take), format=fmt2)
            strip = r"(^|[^0-9])0(\d)"
            same = pc.equal(
                pc.utf8_lower(pc.replace_substring_regex(back, strip, r"\1\2")),
                pc.utf8_lower(pc.replace_substring_regex(sub, strip, r"\1\2")),
            )
        valid[early] = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)
    raw = np.asarray(pc.fill_null(secs, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    out = raw.astype("datetime64[s]")
    out[~valid] = np.datetime64("NaT")
    return out


@dataclass
class DateFormatGuess:
    """The dominant date format of a set of values, and how many rows each recognised format covers."""

    format: str | None
    share: float  # rows in the dominant format / rows considered
    format_rows: dict[str, int] = field(default_factory=dict)


def _matches(values: pa.Array, regex: str) -> np.ndarray:
    return np.asarray(pc.match_substring_regex(values, regex).to_numpy(zero_copy_only=False), dtype=bool)


def resolve_day_month(values: pa.Array, weights: np.ndarray, family: DateFormat) -> str:
    """Month-first or day-first: a first part above 12 proves day-first, a second part above 12 month-first.

    When both kinds of proof exist the one covering more rows wins; with no proof, month-first (the format
    listed first) is assumed and the two readings agree on every value anyway.
    """
    if len(family.formats) == 1:
        return family.formats[0]
    parts = pc.extract_regex(values, r"^(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})")
    a = _to_float(pc.struct_field(parts, "a"))
    b = _to_float(pc.struct_field(parts, "b"))
    day_first = float(weights[a > 12].sum())
    month_first = float(weights[b > 12].sum())
    return family.formats[1] if day_first > month_first else family.formats[0]


def guess_date_format(values: pa.Array, weights: np.ndarray) -> DateFormatGuess:
    """Which recognised date format most rows use (values: distinct non-missing texts, weights: their rows)."""
    total = float(weights.sum())
    if total == 0 or len(values) == 0:
        return DateFormatGuess(None, 0.0)
    text = pc.utf8_trim_whitespace(values)
    rows: dict[str, int] = {}
    best: tuple[float, str | None] = (0.0, None)
    # One pass with every family at once first: most columns are not dates and stop here.
    any_date = _matches(text, _ANY_DATE)
    if not any_date.any():
        return DateFormatGuess(None, 0.0)
    text, weights = text.filter(pa.array(any_date)), weights[any_date]
    for family in DATE_FORMATS:
        m = _matches(text, family.regex)
        if not m.any():
            continue
        sub = text.filter(pa.array(m))
        w = weights[m]
        if len(family.formats) == 2:
            # Values with a first part above 12 are day-first, a second part above 12 month-first.
            parts = pc.extract_regex(sub, r"^(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})")
            a = _to_float(pc.struct_field(parts, "a"))
            b = _to_float(pc.struct_field(parts, "b"))
            chosen = resolve_day_month(sub, w, family)
            other = family.formats[1] if chosen == family.formats[0] else family.formats[0]
            proves_other = (a > 12) if other == family.formats[1] else (b > 12)
            rows[chosen] = rows.get(chosen, 0) + int(w[~proves_other].sum())
            if proves_other.any():
                rows[other] = rows.get(other, 0) + int(w[proves_other].sum())
        elif family.formats[0] == COMPACT_DATE:
            # 8-digit numbers count only when they are dates in a plausible range.
            years = parse_dates(sub, COMPACT_DATE).astype("datetime64[Y]").astype(np.int64) + 1970
            fit = (years >= COMPACT_YEARS[0]) & (years < COMPACT_YEARS[1])
            if fit.any():
                rows[COMPACT_DATE] = rows.get(COMPACT_DATE, 0) + int(w[fit].sum())
        else:
            rows[family.formats[0]] = rows.get(family.formats[0], 0) + int(w.sum())
    for fmt, r in rows.items():
        if r > best[0]:
            best = (float(r), fmt)
    return DateFormatGuess(best[1], best[0] / total, rows)


# What each strftime directive matches in a value, as the profile reads dates: day, month and 24-hour fields
# take one or two digits like strptime (`5/11/2026` is %d/%m/%Y), minutes and seconds two, the 12-hour marker
# `PM`, `pm` or `p.m.` (parse_dates normalises those). The one table for every regex built from a format.
STRFTIME_FIELDS = {
    "%Y": r"\d{4}",
    "%y": r"\d{2}",
    "%m": r"\d{1,2}",
    "%d": r"\d{1,2}",
    "%H": r"\d{1,2}",
    "%I": r"\d{1,2}",
    "%M": r"\d{2}",
    "%S": r"\d{2}",
    "%f": r"\d{1,6}",
    "%j": r"\d{1,3}",
    "%p": r"[AaPp]\.?[Mm]\.?",
    "%b": "[A-Za-z]{3}",
    "%B": "[A-Za-z]{3,9}",
}


def strftime_to_regex(fmt: str) -> str | None:
    """The regex of the values written in a strftime format, as the profile reads them (one or two digits for
    day, month and hour), used to check conformity without parsing and by exported date checks; None when the
    format holds a directive outside STRFTIME_FIELDS."""
    out = []
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            part = STRFTIME_FIELDS.get(fmt[i : i + 2])
            if part is None:
                return None
            out.append(part)
            i += 2
        else:
            out.append(re.escape(fmt[i]))
            i += 1
    return "^" + "".join(out) + "$"
