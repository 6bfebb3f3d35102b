"""Semantic type inference on a column's distinct values, weighted by how many rows hold each one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.profile._bytes import word_counts
from iterate.profile.missing import missing_like
from iterate.profile.parse import (
    COMMA_NUMBER,
    COMPACT_DATE,
    CURRENCY_CODES,
    CURRENCY_SYMBOLS,
    INTEGER,
    PLAIN_NUMBER,
    TIME_FORMATS,
    DateFormatGuess,
    NumberInfo,
    comma_to_point,
    decimal_convention,
    guess_date_format,
    parse_dates,
    parse_numbers,
)

# A type wins when this share of the non-missing rows fits it; the rest are the column's non-conforming values.
MIN_SHARE = 0.8
# Compact dates (`20230115`) are also 8-digit numbers: nearly every row must be a date in a plausible range.
COMPACT_DATE_SHARE = 0.95
# Numbers with decimal commas (`3,5`) need this share of rows proving the convention (bare integers fit both).
COMMA_PROOF_SHARE = 0.2
# Above this many distinct values the type is chosen on a sample of them (then checked on all of them).
SAMPLE_UNIQUES = 5_000
CATEGORICAL_MAX_DISTINCT = 1_000
CATEGORICAL_MAX_RATIO = 0.2

SEMANTIC_TYPES = (
    "integer", "decimal", "boolean", "date", "datetime", "categorical", "text", "identifier", "email",
    "phone", "postal_code", "url", "quantity", "currency", "percent", "empty",
)  # fmt: skip
DATA_TYPES = {
    "integer": "numeric", "decimal": "numeric", "quantity": "numeric", "currency": "numeric",
    "percent": "numeric", "date": "date", "datetime": "date", "boolean": "boolean",
    "categorical": "categorical",
}  # fmt: skip

EMAIL = r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$"
URL = r"(?i)^(https?|ftp)://[^\s/?#]+\.[^\s/?#]+\S*$|^www\.[^\s/]+\.[A-Za-z]{2,}\S*$"
# Country code, area code (maybe in parentheses), then 2-4 and 3-4 digit groups: 6 to 15 digits in all.
PHONE = r"^\+?\d{0,3}[\s.-]?(\(\d{1,4}\)|\d{1,4})[\s.-]?\d{2,4}[\s.-]?\d{3,4}$"
POSTAL = {
    "us": r"^\d{5}(-\d{4})?$",
    "uk": r"(?i)^[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}$",
    "ca": r"(?i)^[A-Z]\d[A-Z] ?\d[A-Z]\d$",
    "nl": r"^\d{4} ?[A-Za-z]{2}$",
}
BOOLEAN_PAIRS = (("true", "false"), ("yes", "no"), ("y", "n"), ("t", "f"), ("1", "0"), ("on", "off"))
_BOOL_TOKENS = {t for pair in BOOLEAN_PAIRS for t in pair}

_NAME_HINTS = {
    "phone": re.compile(r"phone|tel|mobile|cell|fax", re.I),
    "postal_code": re.compile(r"zip|postal|postcode|plz", re.I),
    "identifier": re.compile(r"(^|[_\s-])(id|key|code|no|number|num|ref|sku|uuid)$|id$", re.I),
    "date": re.compile(r"date|day|dt$|time|when|period|month|year|birth|dob", re.I),
}


class ColumnLike(Protocol):
    """What inference needs: the distinct values, rows per distinct value, and the column's name."""

    @property
    def name(self) -> str: ...
    @property
    def dictionary(self) -> pa.Array: ...
    @property
    def counts(self) -> np.ndarray: ...


@dataclass
class TypeInference:
    """A column's inferred type; arrays are indexed by the column's dictionary position (distinct value).

    `conforms` is True for values that fit the type and for missing values (so `~conforms` is exactly the
    values a detector may call out as not fitting); `missing` marks blank and missing-like tokens.
    """

    semantic_type: str
    data_type: str
    format: str | None
    confidence: float  # share of non-missing rows whose value conforms
    conforms: np.ndarray
    missing: np.ndarray
    numbers: np.ndarray | None = None  # parsed numbers (NaN where none), for numeric types
    number_info: NumberInfo | None = None
    dates: np.ndarray | None = None  # parsed datetime64[s] (NaT where none), for date types
    date_formats: dict[str, int] = field(default_factory=dict)  # rows per recognised date format

    @property
    def nonconforming(self) -> np.ndarray:
        """Dictionary positions of present values that do not fit the inferred type."""
        return np.flatnonzero(~self.conforms)


def _match(values: pa.Array, regex: str) -> np.ndarray:
    return np.asarray(pc.match_substring_regex(values, regex).to_numpy(zero_copy_only=False), dtype=bool)


def kth_largest(c: np.ndarray, k: int) -> int:
    """The k-th largest of non-negative integer counts; a histogram of small counts answers in linear time."""
    top = int(c.max())
    if top > 4 * len(c):
        return int(np.partition(c, len(c) - k)[len(c) - k])
    above = np.cumsum(np.bincount(c, minlength=top + 1)[::-1])  # above[j]: values with count >= top - j
    return top - int(np.searchsorted(above, k))


def _sample_positions(counts: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values to decide the type on, with the rows each stands for.

    All present values when few; else the most frequent ones (their own rows) plus an even stride over all
    present values, the stride weighted so it stands for every row not held by the frequent ones.
    """
    idx = np.flatnonzero(present)
    if len(idx) <= SAMPLE_UNIQUES:
        return idx, np.take(counts, idx).astype(np.float64)
    c = np.take(counts, idx)
    k = SAMPLE_UNIQUES // 10
    kth = kth_largest(c, k)
    # Frequent values: those above the k-th count (ties at the k-th are left to the stride).
    top = idx[c > kth]
    stride = idx[:: max(1, len(idx) // (SAMPLE_UNIQUES - len(top)))]
    if len(top):
        stride = stride[~np.isin(stride, top)]
    top_rows = float(np.take(counts, top).sum())
    stride_rows = float(np.take(counts, stride).sum())
    scale = (float(c.sum()) - top_rows) / max(1.0, stride_rows)
    positions = np.concatenate([top, stride])
    weights = np.concatenate([np.take(counts, top), np.take(counts, stride) * scale]).astype(np.float64)
    order = np.argsort(positions, kind="stable")
    return positions[order], weights[order]


def _share(mask: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum()
    return float(weights[mask].sum() / total) if total else 0.0


def _result(
    semantic: str,
    fmt: str | None,
    conforms_present: np.ndarray,
    missing: np.ndarray,
    counts: np.ndarray,
    **extra: object,
) -> TypeInference:
    conforms = conforms_present | missing
    present_rows = counts[~missing].sum()
    confidence = float(counts[conforms & ~missing].sum() / present_rows) if present_rows else 1.0
    return TypeInference(
        semantic_type=semantic,
        data_type=DATA_TYPES.get(semantic, "string"),
        format=fmt,
        confidence=confidence,
        conforms=conforms,
        missing=missing,
        **extra,  # type: ignore[arg-type]
    )


def _boolean(folded: list[str], weights: np.ndarray) -> str | None:
    """The dominant spelling pair when (nearly) every row is a boolean token, e.g. `true/false`."""
    rows = {pair: 0 for pair in BOOLEAN_PAIRS}
    in_tokens = 0
    for v, w in zip(folded, weights.tolist(), strict=True):
        if v in _BOOL_TOKENS:
            in_tokens += w
            for pair in BOOLEAN_PAIRS:
                if v in pair:
                    rows[pair] += w
    total = int(weights.sum())
    if not total or in_tokens < 0.95 * total:
        return None
    pair = max(BOOLEAN_PAIRS, key=lambda p: rows[p])
    if pair == ("1", "0") and not ({"1", "0"} <= set(folded)):
        return None  # a column of 1s (or 0s) alone is a number, not a flag
    # A 0/1 column is only boolean when nothing else is there; otherwise it is a small integer.
    return "/".join(pair) if rows[pair] >= MIN_SHARE * total else None


def infer_semantic_type(column: ColumnLike, *, missing: np.ndarray | None = None) -> TypeInference:
    """Infer the semantic type of a column from its distinct values weighted by their row counts.

    Missing-like values (blank, `N/A`, `null`...) are left out of the decision. Large dictionaries are
    decided on a sample of distinct values; the conformity mask is always computed on all of them.
    """
    dictionary = column.dictionary
    counts = np.asarray(column.counts, dtype=np.int64)
    name = column.name or ""
    if missing is None:
        missing = missing_like(dictionary)
    present = ~missing
    n_present_rows = int(counts[present].sum())
    if n_present_rows == 0:
        return _result("empty", None, np.zeros(len(dictionary), bool), missing, counts)

    sample, s_w = _sample_positions(counts, present)
    s_vals = pc.utf8_trim_whitespace(pc.take(dictionary, pa.array(sample)))

    # Booleans: few distinct values, all of them boolean tokens.
    if len(sample) <= 12:
        folded = pc.utf8_lower(s_vals).to_pylist()
        pair = _boolean(folded, s_w)
        if pair is not None:
            full = pc.utf8_lower(pc.utf8_trim_whitespace(dictionary))
            ok = np.asarray(pc.is_in(full, value_set=pa.array(pair.split("/"))).to_numpy(False), bool)
            return _result("boolean", pair, ok & present, missing, counts)

    # Dates and datetimes in a dominant format (every date has a digit: a cheap gate for text columns).
    if _share(_match(s_vals, r"\d"), s_w) >= MIN_SHARE:
        guess = guess_date_format(s_vals, s_w)
        compact_ok = guess.format != COMPACT_DATE or _compact_dates(name, guess, s_w)
        if guess.format is not None and guess.share >= MIN_SHARE and compact_ok:
            return _date_result(dictionary, counts, missing, guess.format)

    # Numbers with decimal commas (`3,5`, `1.234,56`), when the values prove that convention.
    commas = _match(s_vals, ",").any() and _share(_match(s_vals, COMMA_NUMBER), s_w) >= MIN_SHARE
    if commas and decimal_convention(s_vals, s_w, COMMA_PROOF_SHARE) == "comma":
        return _comma_number_result(dictionary, counts, missing)

    # Numbers, plain or written with %, currency or a unit.
    plain = _match(s_vals, PLAIN_NUMBER)
    plain_share = _share(plain, s_w)
    if plain_share >= MIN_SHARE:
        return _plain_number_result(name, dictionary, counts, missing, s_vals, s_w)
    numbers, info = parse_numbers(s_vals)
    parsed = ~np.isnan(numbers)
    if _share(parsed, s_w) >= MIN_SHARE:
        suffix = info.suffix_counts(s_w)
        if suffix:
            marker, rows = max(suffix.items(), key=lambda kv: kv[1])
            if rows >= 0.5 * s_w.sum():
                return _marked_number_result(dictionary, counts, missing, marker)
        if plain_share >= 0.5:
            # Mostly bare numbers, some written with a unit or % (`0.05` vs `5%`): those do not conform.
            return _plain_number_result(name, dictionary, counts, missing, s_vals, s_w)

    # Text shapes with a recognisable syntax.
    for semantic, regex in (("email", EMAIL), ("url", URL)):
        if _share(_match(s_vals, regex), s_w) >= MIN_SHARE:
            return _result(semantic, None, _match(dictionary, regex) & present, missing, counts)
    if _share(_match(s_vals, PHONE), s_w) >= MIN_SHARE:
        return _result("phone", None, _match(dictionary, PHONE) & present, missing, counts)
    for region, regex in POSTAL.items():
        if region != "us" and _share(_match(s_vals, regex), s_w) >= MIN_SHARE:
            return _result("postal_code", region, _match(dictionary, regex) & present, missing, counts)

    return _string_result(name, dictionary, counts, missing, s_vals, s_w)


def _compact_dates(name: str, guess: DateFormatGuess, s_w: np.ndarray) -> bool:
    """8-digit values read as `%Y%m%d` dates: nearly all rows are dates, and the name does not call it an id."""
    dated = sum(guess.format_rows.values())
    if dated < COMPACT_DATE_SHARE * float(s_w.sum()):
        return False
    return not _NAME_HINTS["identifier"].search(name) or bool(_NAME_HINTS["date"].search(name))


def _comma_number_result(dictionary: pa.Array, counts: np.ndarray, missing: np.ndarray) -> TypeInference:
    """Numbers written with decimal commas (bare integers too); values with a decimal point do not conform."""
    text, ok = comma_to_point(dictionary)
    numbers, info = parse_numbers(text)
    ok &= ~missing & ~np.isnan(numbers)
    has_comma = _match(dictionary, ",") & ok
    semantic = "decimal" if has_comma.any() else "integer"
    return _result(semantic, "decimal_comma", ok, missing, counts, numbers=numbers, number_info=info)


def _date_result(dictionary: pa.Array, counts: np.ndarray, missing: np.ndarray, fmt: str) -> TypeInference:
    present = ~missing
    dates = parse_dates(dictionary, fmt)
    ok = ~np.isnat(dates) & present
    # Values in another recognised format are non-conforming but still dates: parse them for the statistics.
    formats: dict[str, int] = {fmt: int(counts[ok].sum())}
    other = np.flatnonzero(present & ~ok)
    if len(other):
        rest = pc.take(dictionary, pa.array(other))
        guess = guess_date_format(pc.utf8_trim_whitespace(rest), counts[other])
        for f2 in guess.format_rows:
            if f2 == fmt:
                continue
            parsed = parse_dates(rest, f2)
            hit = ~np.isnat(parsed) & np.isnat(dates[other])
            if hit.any():
                dates[other[hit]] = parsed[hit]
                formats[f2] = formats.get(f2, 0) + int(counts[other[hit]].sum())
    semantic = "datetime" if fmt in TIME_FORMATS else "date"
    return _result(semantic, fmt, ok, missing, counts, dates=dates, date_formats=formats)


def _plain_number_result(
    name: str,
    dictionary: pa.Array,
    counts: np.ndarray,
    missing: np.ndarray,
    s_vals: pa.Array,
    s_w: np.ndarray,
) -> TypeInference:
    present = ~missing
    is_int = _match(s_vals, INTEGER)
    # Digits with leading zeros are codes (zip `01907`, account `00042`): reading them as numbers loses data.
    lead_zero = _match(s_vals, r"^0\d")
    us_zip = _match(s_vals, POSTAL["us"])
    zip_hint = bool(_NAME_HINTS["postal_code"].search(name))
    if _share(is_int, s_w) >= MIN_SHARE and (_share(lead_zero, s_w) > 0.001 or zip_hint):
        if _share(us_zip, s_w) >= MIN_SHARE and (zip_hint or _fixed_length(s_vals, s_w)):
            ok = _match(dictionary, POSTAL["us"])
            return _result("postal_code", "us", ok & present, missing, counts)
        return _result("identifier", None, present.copy(), missing, counts)
    digits_only = r"^\+?\d{7,15}$"
    if _NAME_HINTS["phone"].search(name) and _share(_match(s_vals, digits_only), s_w) >= MIN_SHARE:
        ok = _match(dictionary, digits_only) | _match(dictionary, PHONE)
        return _result("phone", None, ok & present, missing, counts)
    numbers, info = parse_numbers(dictionary)
    plain = info.plain & present
    # Integer or decimal is decided among the bare numbers (marked ones like `5%` are judged apart).
    s_plain = _match(s_vals, PLAIN_NUMBER)
    if _share(is_int[s_plain], s_w[s_plain]) >= MIN_SHARE:
        unique_share = float((counts[present] == 1).sum() / max(1, counts[present].sum()))
        if _NAME_HINTS["identifier"].search(name) and unique_share > 0.9:
            return _result("identifier", None, present.copy(), missing, counts)
        ok = _match(dictionary, INTEGER) & present
        return _result("integer", None, ok, missing, counts, numbers=numbers, number_info=info)
    return _result("decimal", None, plain, missing, counts, numbers=numbers, number_info=info)


def _fixed_length(values: pa.Array, weights: np.ndarray) -> bool:
    lengths = np.asarray(pc.utf8_length(values).to_numpy(zero_copy_only=False))
    if len(lengths) == 0:
        return False
    top = np.bincount(lengths, weights=weights).argmax()
    return _share(lengths == top, weights) >= 0.99


def _marked_number_result(
    dictionary: pa.Array, counts: np.ndarray, missing: np.ndarray, marker: str
) -> TypeInference:
    """Numbers written with one dominant marker: `%`, a currency, or a unit; others do not conform."""
    numbers, info = parse_numbers(dictionary)
    ok = ~np.isnan(numbers) & ~missing & info.is_marker(marker)
    if marker == "%":
        semantic = "percent"
    elif marker.upper() in {c.upper() for c in CURRENCY_CODES} or marker in CURRENCY_SYMBOLS:
        semantic = "currency"
    else:
        semantic = "quantity"
    return _result(semantic, marker, ok, missing, counts, numbers=numbers, number_info=info)


def _string_result(
    name: str,
    dictionary: pa.Array,
    counts: np.ndarray,
    missing: np.ndarray,
    s_vals: pa.Array,
    s_w: np.ndarray,
) -> TypeInference:
    present = ~missing
    n_distinct = int(present.sum())
    n_rows = int(counts[present].sum())
    words = word_counts(s_vals).astype(np.float64)
    lengths = np.asarray(pc.utf8_length(s_vals).to_numpy(zero_copy_only=False), dtype=np.float64)
    mean_words = float((words * s_w).sum() / s_w.sum())
    mean_len = float((lengths * s_w).sum() / s_w.sum())
    unique_share = float((counts[present] == 1).sum() / max(1, n_rows))
    all_ok = present.copy()
    if n_distinct <= CATEGORICAL_MAX_DISTINCT and n_distinct <= CATEGORICAL_MAX_RATIO * n_rows:
        return _result("categorical", None, all_ok, missing, counts)
    if mean_words >= 2.5 or mean_len >= 40:
        return _result("text", None, all_ok, missing, counts)
    if unique_share >= 0.5 or (_NAME_HINTS["identifier"].search(name) and mean_words <= 1.05):
        return _result("identifier", None, all_ok, missing, counts)
    # Few values repeated: 5% of rows in a big table, or a handful in a small one.
    if n_distinct <= 0.05 * n_rows or (n_distinct <= 50 and n_distinct <= 0.5 * n_rows):
        return _result("categorical", None, all_ok, missing, counts)
    return _result("text", None, all_ok, missing, counts)
