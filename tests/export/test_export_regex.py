"""Regexes written once (Python flavour) and translated for RE2 (DuckDB) and Java (Glue)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from iterate.detect.formats import _LAYOUTS, _WORD_RUN, DATE_FORMATS
from iterate.export import regex as rx
from iterate.profile.parse import parse_dates, strftime_to_regex
from iterate.profile.shapes import shape_of, shape_regex

# Values of many shapes: words, codes, numbers, punctuation, non-ASCII letters and digits, odd whitespace.
SHAPE_VALUES = [
    "ab-12", "Éa-12", "ab cd-12", "ab-12-3", "ab", "ab cd", "ab  cd", "ab\tcd", "12", "-12", "12.5", "1,234.5",
    "a1", "AB-٣٤", "x_y", "ab-", "-12-ab", "ab-12\n", " ab-12", "São Paulo", "O'Brien", "12 kg", "",
]  # fmt: skip
DATE_VALUES = [
    "2026-11-05", "2026-5-1", "2026-13-01", "2026-02-30", "5/11/2026", "05/11/2026", "31/12/2026", "12/31/2026",
    "5/11/26", "05.11.2026", "2026/11/5", "20261105", "5 Nov 2026", "Nov 5, 2026", "November 5, 2026",
    "2026-11-05T13:45:00", "2026-11-05 13:45:00", "2026-11-05 13:45", "11/05/2026 13:45", "11/05/2026 1:45 PM",
    "1:45 pm", "13:45", "5/11/2026x", "", "2026-11-05 ",
]  # fmt: skip


def test_flavours_spell_unicode_classes_and_the_end_anchor_per_engine() -> None:
    shape = shape_regex(["a-9"], words=False)
    assert re.fullmatch(rx.flavour(shape, "python"), "Éa-12")
    assert not re.search(rx.flavour(shape, "python"), "ab-12\n")  # `$` would let a trailing newline through
    assert rx.flavour(shape, "re2") == r"^(?:\p{L}+\-\p{Nd}+)\z"
    assert rx.flavour(shape, "java") == r"^(?:\p{L}+\-\p{Nd}+)\z"
    assert rx.flavour(r"a\\d$", "re2") == r"a\\d\z"  # an escaped backslash is not a digit class
    assert rx.flavour(r"[\u0080-\u00bf]", "re2") == r"[\x{0080}-\x{00bf}]"
    assert rx.flavour(r"[\u0080-\u00bf]", "java") == r"[\u0080-\u00bf]"


@pytest.mark.parametrize("shape", sorted({shape_of(v) for v in SHAPE_VALUES if v}))
def test_a_shape_check_accepts_exactly_the_values_of_that_shape(shape: str) -> None:
    # The export's "every value has the shape" check (the profile's shapes: `a` is one run of letters) ...
    exported = rx.flavour(shape_regex([shape], words=False), "python")
    for v in SHAPE_VALUES:
        assert bool(re.fullmatch(exported, v)) == (shape_of(v) == shape), (shape, v)
    # ... and the format detector's pattern (coarse shapes: `a` is a run of words) use the one function
    coarse = _WORD_RUN.sub("a", shape)
    detector = rx.flavour(shape_regex([coarse], words=True), "python")
    for v in SHAPE_VALUES:
        assert bool(re.fullmatch(detector, v)) == (_WORD_RUN.sub("a", shape_of(v)) == coarse), (coarse, v)


@pytest.mark.parametrize("k", range(len(DATE_FORMATS)))
def test_an_exported_date_check_accepts_exactly_the_dates_the_detector_counts_in_the_format(k: int) -> None:
    import pandas as pd

    fmt = DATE_FORMATS[k]
    regex = strftime_to_regex(fmt)
    assert regex is not None and regex == _LAYOUTS[k]  # one translation for the detector and the export
    for v in DATE_VALUES:
        # the exported check (GX's strftime check, Soda's regex + TRY_STRPTIME): the layout, and a parse
        try:
            parses = bool(re.fullmatch(regex, v)) and datetime.strptime(v, fmt) is not None
        except ValueError:
            parses = False
        # the detector: the layout (case-free), then pandas with the format
        laid = re.fullmatch(_LAYOUTS[k], v, flags=re.IGNORECASE) is not None
        counted = laid and pd.notna(pd.to_datetime(pd.Series([v]), format=fmt, errors="coerce")[0])
        assert parses == counted, (fmt, v)


def test_dates_with_one_digit_days_and_months_conform_as_the_profile_reads_them() -> None:
    # 5/11/2026 is %d/%m/%Y for the profile (strptime takes one or two digits): so for the exported check
    regex = strftime_to_regex("%d/%m/%Y") or ""
    for v in ("5/11/2026", "05/11/2026", "5/1/2026"):
        assert re.fullmatch(regex, v) and not pd_nat(parse_dates([v], "%d/%m/%Y")[0]), v
    assert not re.fullmatch(regex, "5/11/26") and not re.fullmatch(regex, "2026-11-05")
    assert strftime_to_regex("%Y-%m-%d") == r"^\d{4}\-\d{1,2}\-\d{1,2}$"
    assert strftime_to_regex("%Q") is None


def pd_nat(value: object) -> bool:
    import numpy as np

    return bool(np.isnat(value))


def test_numbers_and_trimmed_text() -> None:
    assert [bool(re.fullmatch(rx.DECIMAL, v)) for v in ("1", "-2.5", ".5", "1e3", "$1", "1,5", "")] == [
        True, True, True, True, False, False, False,
    ]  # fmt: skip
    assert [bool(re.fullmatch(rx.TRIMMED, v)) for v in ("a", "a b", " a", "a ", "a\n")] == [
        True, True, False, False, False,
    ]  # fmt: skip
