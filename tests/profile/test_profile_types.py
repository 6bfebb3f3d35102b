"""Semantic type inference on crafted columns: each type, date formats, codes that look like numbers."""

import numpy as np
import pytest

from iterate.profile import ColumnSketch, infer_semantic_type
from iterate.table import Column

pytestmark = pytest.mark.unit


def infer(values: list[str], name: str = "col"):
    import pyarrow as pa

    return infer_semantic_type(Column(name, 0, pa.array(values, pa.string())))


def repeat(values: list[str], times: int) -> list[str]:
    return [v for v in values for _ in range(times)]


@pytest.mark.parametrize(
    ("values", "name", "semantic", "data_type", "fmt"),
    [
        ([str(i) for i in range(-50, 150)], "score", "integer", "numeric", None),
        ([f"{i * 1.25:.2f}" for i in range(200)], "price", "decimal", "numeric", None),
        (repeat(["true", "false"], 50), "active", "boolean", "boolean", "true/false"),
        (repeat(["Y", "N", "y"], 30), "flag", "boolean", "boolean", "y/n"),
        (
            [f"2023-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 28)],
            "day",
            "date",
            "date",
            "%Y-%m-%d",
        ),
        (
            [f"2023-01-{d:02d} {h:02d}:15:00" for d in range(1, 28) for h in range(0, 24, 3)],
            "ts",
            "datetime",
            "date",
            "%Y-%m-%d %H:%M:%S",
        ),
        ([f"Mar {d}, 2021" for d in range(1, 29)], "when", "date", "date", "%b %d, %Y"),
        (repeat(["red", "green", "blue", "yellow"], 50), "colour", "categorical", "categorical", None),
        (
            [f"the parcel number {i} arrived late and damaged" for i in range(100)],
            "comment",
            "text",
            "string",
            None,
        ),
        ([f"user{i}@example.com" for i in range(100)], "contact", "email", "string", None),
        ([f"(555) 201-{i:04d}" for i in range(100)], "tel", "phone", "string", None),
        ([f"https://example.com/p/{i}" for i in range(100)], "link", "url", "string", None),
        ([f"{i}.5 kg" for i in range(100)], "weight", "quantity", "numeric", "kg"),
        ([f"${i},{i:03d}.99" for i in range(1, 100)], "amount", "currency", "numeric", "$"),
        ([f"{i}%" for i in range(100)], "rate", "percent", "numeric", "%"),
        ([f"SKU-{i:05d}X" for i in range(300)], "sku", "identifier", "string", None),
        (["", " ", "N/A"] * 10, "nothing", "empty", "string", None),
    ],
)
def test_given_a_crafted_column_when_inferred_then_its_semantic_type_and_format_are_found(
    values, name, semantic, data_type, fmt
):
    # Given a column of one kind of value / When its type is inferred
    result = infer(values, name)
    # Then the semantic type, coarse data type and format match
    assert (result.semantic_type, result.data_type, result.format) == (semantic, data_type, fmt)
    assert result.confidence == pytest.approx(1.0)


def test_given_day_over_12_in_first_part_when_inferred_then_day_first_format():
    # Given dates whose first part exceeds 12 in some rows (only day-first reads them)
    values = [f"{d:02d}/{m:02d}/2022" for m in range(1, 13) for d in range(1, 29)]
    # When / Then
    assert infer(values, "d").format == "%d/%m/%Y"


def test_given_day_over_12_in_second_part_when_inferred_then_month_first_format():
    values = [f"{m:02d}/{d:02d}/2022" for m in range(1, 13) for d in range(1, 29)]
    assert infer(values, "d").format == "%m/%d/%Y"


def test_given_a_few_dates_in_other_formats_when_inferred_then_they_do_not_conform_but_are_counted():
    # Given a column of ISO dates with some day-first dates and an impossible date mixed in
    values = [f"2022-05-{d:02d}" for d in range(1, 29)] * 4 + ["17/05/2022", "18/05/2022", "2022-02-30"]
    # When
    result = infer(values, "d")
    # Then the dominant format wins, and exactly the odd ones are flagged
    assert result.format == "%Y-%m-%d"
    uniques = Column("d", 0, __import__("pyarrow").array(values)).uniques
    flagged = sorted(uniques[i] for i in result.nonconforming)
    assert flagged == ["17/05/2022", "18/05/2022", "2022-02-30"]
    assert result.date_formats == {"%Y-%m-%d": 112, "%d/%m/%Y": 2}


def test_given_zip_codes_with_leading_zeros_when_inferred_then_postal_code_not_integer():
    # Given US zip codes, some with a leading zero (01907) that a number would lose
    values = ["01907", "02139", "10001", "94105", "60601", "30301"] * 20
    # When
    result = infer(values, "location")
    # Then it is a postal code, and nothing is parsed as a number
    assert result.semantic_type == "postal_code"
    assert result.numbers is None


def test_given_numeric_codes_with_leading_zeros_when_inferred_then_identifier():
    values = [f"{i:08d}" for i in range(0, 4000, 7)]
    assert infer(values, "account").semantic_type == "identifier"


def test_given_mostly_kg_with_some_lb_when_inferred_then_lb_values_do_not_conform():
    # Given weights in kg with a few in lb and one bare number
    values = [f"{i}.0 kg" for i in range(90)] + ["3.0 lb", "4.5 lb", "12"]
    result = infer(values, "weight")
    # Then kg is the unit, and the lb and unit-less values are the non-conforming ones
    assert result.format == "kg"
    assert result.nonconforming.size == 3


def test_given_missing_tokens_when_inferred_then_they_are_missing_and_conform():
    values = [str(i) for i in range(100)] + ["N/A", "", "null"]
    result = infer(values)
    assert result.semantic_type == "integer"
    assert int(result.missing.sum()) == 3
    assert result.nonconforming.size == 0


def test_given_a_large_column_when_inferred_then_the_mask_covers_every_distinct_value():
    # Given more distinct values than the sample size, with rare bad values at the very end
    values = [f"user{i}@example.com" for i in range(30_000)] + ["not an email"] * 2
    sketch = ColumnSketch.from_values("email", 0, values)
    result = sketch.infer()
    # Then the type is decided on a sample but the bad value is still found
    assert result.semantic_type == "email"
    assert len(result.conforms) == 30_001
    assert list(np.flatnonzero(~result.conforms)) == [30_000]


def test_given_digit_only_numbers_in_a_phone_column_when_inferred_then_phone_not_integer():
    values = [f"25{i:08d}" for i in range(0, 10**8, 10**6)]
    assert infer(values, "phone").semantic_type == "phone"
    assert infer(values, "reading").semantic_type == "integer"


def test_given_unit_spelling_variants_when_inferred_then_one_unit_and_only_extra_text_fails():
    values = ["12.0 oz."] * 30 + ["12.0 ounce"] * 20 + ["16 OZ"] * 20 + ["12.0 oz. Alumi-Tek"] * 5
    result = infer(values, "ounces")
    assert (result.semantic_type, result.format) == ("quantity", "oz")
    assert result.confidence == pytest.approx(70 / 75)


def test_given_mostly_bare_numbers_with_some_percent_signs_when_inferred_then_decimal_with_percent_odd():
    values = [f"0.0{i}" for i in range(1, 9)] * 10 + ["0.05%", "0.06%"] * 10
    result = infer(values, "abv")
    assert result.semantic_type == "decimal"
    assert result.confidence == pytest.approx(80 / 100)


def test_given_many_distinct_sentences_and_frequent_short_ones_when_inferred_then_text():
    # Given 500 two-word notes repeated 100 times each and 60,000 distinct five-word notes: most rows are
    # long, but a sample of distinct values is dominated by the frequent short ones unless re-weighted
    short = [f"w{i} ok" for i in range(500)] * 100
    long = [f"note {i} was left here" for i in range(60_000)]
    sketch = ColumnSketch.from_values("notes", 0, short + long)
    assert sketch.infer().semantic_type == "text"
