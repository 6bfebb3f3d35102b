"""Type inference on columns written in less common conventions: compact dates, 12-hour clocks, decimal commas."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from iterate.profile import ColumnSketch, infer_semantic_type
from iterate.profile.parse import decimal_convention, parse_dates
from iterate.table import Column

pytestmark = pytest.mark.unit


def infer(values: list[str], name: str = "col"):
    return infer_semantic_type(Column(name, 0, pa.array(values, pa.string())))


def iso_dates(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [
        f"20{rng.randrange(10, 24)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}" for _ in range(n)
    ]


def clock(n: int, seed: int = 2, marker: tuple[str, str] = ("AM", "PM")) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.randrange(1, 13)}:{rng.randrange(60):02d} {rng.choice(marker)}" for _ in range(n)]


def decimals(n: int, seed: int = 3, comma: bool = True) -> list[str]:
    rng = random.Random(seed)
    out = [f"{rng.uniform(0, 50):.2f}" for _ in range(n)]
    return [v.replace(".", ",") for v in out] if comma else out


def test_compact_dates_are_dates_with_statistics():
    values = [d.replace("-", "") for d in iso_dates(300)]
    inf = infer(values, "created")
    assert (inf.semantic_type, inf.format) == ("date", "%Y%m%d")
    assert inf.confidence == 1.0
    assert inf.dates is not None and not np.isnat(inf.dates).any()
    profile = ColumnSketch.from_values("created", 0, values).finalize("")
    assert (
        profile.dates is not None and profile.dates.min >= "2010-01-01" and profile.dates.max < "2024-01-01"
    )


def test_a_few_compact_dates_in_an_iso_column_are_nonconforming_dates():
    values = iso_dates(290) + [d.replace("-", "") for d in iso_dates(10, seed=9)]
    inf = infer(values, "created")
    assert (inf.semantic_type, inf.format) == ("date", "%Y-%m-%d")
    assert inf.confidence == pytest.approx(290 / 300)
    assert inf.date_formats.get("%Y%m%d") == 10  # still read as dates for the statistics


@pytest.mark.parametrize(
    ("values", "name"),
    [
        ([str(20230001 + i) for i in range(300)], "col"),  # sequential ids that start like a year
        ([str(random.Random(4).randrange(10_000_000, 99_999_999)) for _ in range(300)], "col"),
        ([str(random.Random(5).randrange(19_000_101, 20_991_231)) for _ in range(300)], "amount"),
        ([d.replace("-", "") for d in iso_dates(300)], "order_id"),  # valid dates, but named as an id
        ([d.replace("-", "") for d in iso_dates(280)] + [str(30_000_000 + i) for i in range(20)], "col"),
    ],
)
def test_eight_digit_numbers_and_ids_are_not_dates(values, name):
    assert infer(values, name).semantic_type not in {"date", "datetime"}


def test_parse_dates_compact_checks_the_calendar_and_the_width():
    out = parse_dates(["20230115", "20230230", "2023011", "20231301"], "%Y%m%d")
    assert str(out[0]) == "2023-01-15T00:00:00"
    assert np.isnat(out[1:]).all()


@pytest.mark.parametrize(
    ("values", "fmt"),
    [
        (clock(300), "%I:%M %p"),
        (clock(300, marker=("a.m.", "p.m.")), "%I:%M %p"),
        (clock(300, marker=("am", "pm")), "%I:%M %p"),
        ([f"{m:02d}/{d:02d}/2011 {h:02d}:{mi:02d} {p}" for m in range(1, 13) for d in (2, 14, 27)
          for h, mi, p in ((7, 10, "PM"), (11, 5, "AM"))], "%m/%d/%Y %I:%M %p"),
        ([f"2011-03-{d:02d} {h}:{mi:02d}:{s:02d} {p}" for d in range(1, 28) for h, mi, s, p in
          ((7, 10, 0, "pm"), (12, 59, 30, "am"))], "%Y-%m-%d %I:%M %p"),
    ],
)  # fmt: skip
def test_twelve_hour_clocks_are_datetimes(values, fmt):
    inf = infer(values, "when")
    assert (inf.semantic_type, inf.format) == ("datetime", fmt)
    assert inf.confidence == 1.0


def test_twelve_hour_clock_reads_noon_midnight_and_dotted_markers():
    out = parse_dates(["7:10 AM", "12:02 pm", "12:30 a.m.", "7:10:33 P.M.", "13:10 PM", "7:10PM"], "%I:%M %p")
    hours = [None if np.isnat(x) else int(str(x)[11:13]) for x in out]
    assert hours == [7, 12, 0, 19, None, 19]


def test_time_of_day_statistics_show_times_and_no_sentinel():
    values = clock(300) + ["10:00 AM"] * 50
    profile = ColumnSketch.from_values("when", 0, values).finalize("")
    assert profile.semanticType == "datetime"
    assert profile.dates is not None and ":" in profile.dates.min and "1900" not in profile.dates.min
    assert profile.disguisedMissing == 0


def test_decimal_commas_are_decimals_with_statistics():
    values = decimals(300)
    inf = infer(values, "price")
    assert (inf.semantic_type, inf.format) == ("decimal", "decimal_comma")
    assert inf.confidence == 1.0
    profile = ColumnSketch.from_values("price", 0, values).finalize("")
    assert profile.numeric is not None and profile.numeric.min >= 0 and profile.numeric.max <= 50
    expect = np.mean([float(v.replace(",", ".")) for v in values])
    assert profile.numeric.mean == pytest.approx(expect)


def test_decimal_commas_with_dot_thousands_and_integers():
    rng = random.Random(6)
    values = [f"{rng.uniform(1000, 99999):,.2f}".translate(str.maketrans(",.", ".,")) for _ in range(250)]
    values += ["512,5", "7", "1.234", "12"] * 10
    column = Column("amount", 0, pa.array(values, pa.string()))
    inf = infer_semantic_type(column)
    assert (inf.semantic_type, inf.format) == ("decimal", "decimal_comma")
    assert inf.confidence == 1.0
    assert inf.numbers is not None
    read = dict(zip(column.dictionary.to_pylist(), inf.numbers.tolist(), strict=True))
    assert (read["512,5"], read["7"], read["1.234"]) == (512.5, 7.0, 1234.0)


def test_a_few_decimal_points_in_a_decimal_comma_column_do_not_conform():
    values = decimals(270) + decimals(30, seed=8, comma=False)
    inf = infer(values, "price")
    assert (inf.semantic_type, inf.format) == ("decimal", "decimal_comma")
    assert inf.confidence == pytest.approx(270 / 300)


@pytest.mark.parametrize(
    ("values", "semantic", "fmt"),
    [
        ([f"{i:,}" for i in range(1000, 100_000, 331)], None, None),  # thousands separators: unchanged
        (decimals(290, comma=False) + decimals(10, seed=8), "decimal", None),  # a few commas among points
        ([str(i) for i in range(300)] + ["12,5"] * 5, "integer", None),  # a rare comma among integers
    ],
)
def test_decimal_points_and_thousands_are_not_taken_for_decimal_commas(values, semantic, fmt):
    inf = infer(values, "x")
    assert inf.format != "decimal_comma"
    if semantic is not None:
        assert (inf.semantic_type, inf.format) == (semantic, fmt)


def test_decimal_convention_needs_proof():
    w = np.ones(4)
    assert decimal_convention(pa.array(["1,234", "2,345", "1.234", "7"]), w) is None  # all ambiguous
    assert decimal_convention(pa.array(["3,5", "2,25", "1.234", "7"]), w) == "comma"
    assert decimal_convention(pa.array(["3.5", "2.25", "1,5", "1,234"]), w) == "point"
    assert decimal_convention(pa.array(["3.5", "2,25", "1,5", "1.25"]), w) is None  # a tie
