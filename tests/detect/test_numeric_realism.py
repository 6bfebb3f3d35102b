"""Numeric detectors on real data's shapes: real zeros, heavy and bounded tails, values below a soft floor,
longitudes across the antimeridian, codes and lists written with digits. Each test pairs the real shape,
which must stay quiet, with the error the detector exists for, which must still be found."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.detect.context import dataset_null_marker, facts_for
from iterate.detect.digits import detect_precision
from iterate.detect.frequency import detect_repeated_placeholder
from iterate.detect.numeric import detect_numeric_outliers
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def make_table(columns: dict[str, list[str]]) -> Table:
    names = list(columns)
    arrow = pa.table({f"c{i}": pa.array(v, pa.string()) for i, v in enumerate(columns.values())})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"), names=names)


def flagged_values(
    table: Table, column: str, issue_type: str | None = None, detector: str | None = None
) -> set[str]:
    out: set[str] = set()
    for f in detect(table).findings:
        if not f.flag or (issue_type is not None and f.type != issue_type):
            continue
        if detector is not None and f.detector != detector:
            continue
        for r, c in zip(f.rows, f.cols, strict=True):
            if table.column_names[int(c)] == column:
                out.add(str(table.columns[int(c)].value(int(r))))
    return out


def test_a_zero_repeated_by_a_sibling_measurement_of_the_same_row_is_a_real_zero() -> None:
    # Given populations of 3,000 towns in two censuses (the second tracks the first), one town empty in both
    rng = np.random.default_rng(4)
    first = np.round(np.exp(rng.normal(8.5, 1.5, 3000))).astype(int) + 100
    second = np.round(first * rng.uniform(0.9, 1.15, 3000)).astype(int)
    first[17], second[17] = 0, 0
    table = make_table({"pop_2001": [str(v) for v in first], "pop_2011": [str(v) for v in second]})
    # When detection runs
    # Then neither zero is called an outlier: the town is empty in every measurement of it
    assert "0" not in flagged_values(table, "pop_2001", "numeric_outlier")
    assert "0" not in flagged_values(table, "pop_2011", "numeric_outlier")


def test_a_zero_shared_with_a_column_measuring_something_else_is_still_an_outlier() -> None:
    # Given listings of 3,000 months (hundreds to thousands) and months of inventory (unrelated to size),
    # with one failed report written as 0 in both
    rng = np.random.default_rng(5)
    listings = np.round(np.exp(rng.normal(7.0, 1.0, 3000))).astype(int) + 30
    inventory = np.round(rng.uniform(2.0, 12.0, 3000), 1)
    listings[40], inventory[40] = 0, 0.0
    table = make_table({"listings": [str(v) for v in listings], "inventory": [f"{v:g}" for v in inventory]})
    # When detection runs
    # Then the listings' zero is still far outside the bulk: the other column does not rank the rows alike
    assert "0" in flagged_values(table, "listings", "numeric_outlier")


def test_numbers_in_scientific_notation_keep_the_shape_of_a_numeric_column() -> None:
    # Given growth rates written as decimals, with the smallest written as R writes them (3e-4, -4e-4) and
    # a few typed with a doubled point
    rng = np.random.default_rng(6)
    rates = [f"{v:.4f}" for v in rng.normal(0.02, 0.06, 600)]
    rates[10:16] = ["3e-4", "-4e-4", "1e-4", "7e-4", "1.6e+07", "18e16"]
    rates[100:103] = ["0..12", "0.0.5", "1..3"]
    table = make_table({"growth": rates})
    # When detection runs
    shapes = flagged_values(table, "growth", detector="shape")
    # Then scientific notation is a number like the others, and the malformed values are still found
    assert not shapes & {"3e-4", "-4e-4", "1e-4", "7e-4", "1.6e+07", "18e16"}
    assert {"0..12", "0.0.5", "1..3"} <= flagged_values(table, "growth")


def test_a_column_that_writes_its_tiny_values_in_scientific_notation_has_no_second_format() -> None:
    # Given colour coordinates, the near-zero ones written 5.3e-12 by the program that computed them
    rng = np.random.default_rng(7)
    values = [f"{v:.6f}" for v in rng.normal(0, 40, 500)]
    values[::25] = [f"{v:.14e}" for v in rng.uniform(-9, -1, 20) * 1e-12]
    values[3:200:33] = [f"{v:.14e}" for v in rng.uniform(1, 9, 6) * 1e-12]
    table = make_table({"u": values})
    # When detection runs
    # Then no value breaks the column's pattern: the positive ones are as much numbers as the negative ones
    assert not flagged_values(table, "u", detector="shape") & set(values[::25] + values[3:200:33])


def test_a_value_just_below_zero_in_a_widely_spread_column_is_not_a_broken_sign() -> None:
    # Given airport altitudes in feet (many at sea level, most in the hundreds or thousands), two airports
    # below sea level and three typed with a stray minus, far below
    rng = np.random.default_rng(8)
    alt = np.round(np.exp(rng.normal(6.0, 1.6, 6000))).astype(int)
    alt[:240] = 0
    alt[100], alt[200] = -54, -42
    alt[300], alt[400], alt[500] = -4200, -3900, -5100
    table = make_table({"alt": [str(v) for v in alt]})
    # When detection runs
    found = flagged_values(table, "alt", "numeric_outlier")
    # Then the airports near sea level stay, the far negative is found
    assert not found & {"-54", "-42"}
    assert {"-4200", "-3900", "-5100"} <= found


def test_a_column_with_many_negatives_has_no_sign_to_break() -> None:
    # Given yearly growth rates of 400 towns, a third of them shrinking, and one typed 100 times too big
    rng = np.random.default_rng(9)
    rates = rng.normal(0.02, 0.06, 400)
    values = [f"{v:.4f}" for v in rates]
    values[7] = "4.2500"
    table = make_table({"growth": values})
    # When detection runs
    findings = [f for f in detect(table).findings if f.type == "numeric_outlier"]
    # Then only the far value is flagged, and nothing is said of a sign the column does not keep
    assert [f.stats["bad_values"] for f in findings] == [["4.2500"]]
    assert not findings[0].stats["nonnegative"]
    assert "negative" not in findings[0].description


def test_the_zero_at_the_centre_of_a_signed_column_is_a_value_not_a_placeholder() -> None:
    # Given colour coordinates spread around zero, every grey at exactly 0, and a column of prices where
    # one value was copied over a hundred records
    rng = np.random.default_rng(10)
    u = [f"{v:.10f}" for v in rng.normal(0, 3000, 600)]
    u[::6] = ["0"] * 100
    price = [f"{v:.10f}" for v in np.exp(rng.normal(3, 1, 600))]
    price[::6] = ["19.9900000000"] * 100
    table = make_table({"u": u, "price": price})
    # When the repeated-value detector looks at each column
    facts = facts_for(table, dataset_null_marker(table))
    found = {f.name: detect_repeated_placeholder(f) for f in facts}
    # Then the greys' zero stands, the copied price is a placeholder
    assert found["u"] is None
    assert found["price"] is not None and found["price"].stats["markers"] == ["19.9900000000"]


def test_a_count_with_a_kind_written_after_it_is_a_code_not_a_number_with_units() -> None:
    # Given gearboxes written as gears and kind (7a automatic, 6m manual, 8am automated manual, 7dd dual
    # clutch), and weights written with ounces in several ways beside bare numbers
    rng = np.random.default_rng(11)
    gears = [
        f"{g}{k}"
        for g, k in zip(rng.integers(5, 9, 300), rng.choice(["a", "m", "am", "dd"], 300), strict=True)
    ]
    weights = [
        f"{w}{u}"
        for w, u in zip(rng.integers(8, 24, 300), rng.choice(["", " oz", " ounce"], 300), strict=True)
    ]
    table = make_table({"trsmn": gears, "weight": weights})
    # When detection runs
    # Then the gearbox codes are no numbers with units; the weights' units still are
    assert not flagged_values(table, "trsmn", "unit_in_number")
    assert flagged_values(table, "weight", "unit_in_number")


def test_postcodes_of_several_countries_are_a_code_not_numbers_gone_wrong() -> None:
    # Given postcodes of people in the US (five digits, some with leading zeros), Poland (99-999) and
    # Canada (A9A 9A9)
    rng = np.random.default_rng(12)
    us = [f"{v:05d}" for v in rng.integers(1000, 99999, 140)]
    poland = [
        f"{a:02d}-{b:03d}" for a, b in zip(rng.integers(0, 99, 30), rng.integers(0, 999, 30), strict=True)
    ]
    letters = "ABCEGHJKLMNPRSTVXY"
    canada = [
        f"{rng.choice(list(letters))}{rng.integers(10)}{rng.choice(list(letters))} "
        f"{rng.integers(10)}{rng.choice(list(letters))}{rng.integers(10)}"
        for _ in range(30)
    ]
    table = make_table({"postcode": us + poland + canada})
    # When detection runs
    # Then none of them is a malformed number
    assert not flagged_values(table, "postcode", detector="parse")


def test_zip_codes_with_a_letter_typed_for_a_digit_are_still_numbers_gone_wrong() -> None:
    # Given US zip codes with leading zeros, a few with a digit typed as x
    rng = np.random.default_rng(13)
    zips = [f"{v:05d}" for v in rng.integers(1000, 99999, 400)]
    slips = ["0x108", "3x10x", "359x8", "x6784", "021x4", "3590x"]
    zips[::60] = slips + zips[360::60][: len(zips[::60]) - len(slips)]
    table = make_table({"zip": zips})
    # When detection runs
    # Then the slips are found
    assert set(slips) <= flagged_values(table, "zip")


def test_longitudes_are_far_apart_around_the_globe_not_along_the_number_line() -> None:
    # Given 1,443 airports of the US mainland, Alaska and Hawaii, the Aleutian ones across the antimeridian
    # (174.1 E, 179.3 E), and two put in China by a slip (112.457, 117.759)
    rng = np.random.default_rng(14)
    bands = [(-172, -150, 185), (-150, -130, 73), (-130, -110, 249), (-110, -90, 308), (-90, -67, 628)]
    lon = [f"{v:.5f}" for lo, hi, n in bands for v in rng.uniform(lo, hi, n)]
    lon += ["174.11362", "179.3", "-176.646", "112.457", "117.759"]
    table = make_table({"lon": lon})
    facts = facts_for(table, dataset_null_marker(table))
    # When the outlier detector judges the column
    found = detect_numeric_outliers(facts[0], facts[0].numeric)
    # Then the Aleutians lie close to Alaska, the slips far away (evidence pointing to a wrong value)
    assert found is not None
    column = table.columns[0]
    pointing = {column.value(int(r)) for r, e in zip(found.rows, found.llr, strict=True) if e > 0}
    assert {"112.457", "117.759"} <= pointing
    assert not {"174.11362", "179.3", "-176.646"} & pointing


def _white_shares(rng: np.random.Generator) -> list[str]:
    """Shares of white residents in 440 counties: most above 95%, a tail of cities down to 57% and a
    reservation at 11%."""
    gaps = np.exp(rng.normal(0.7, 1.1, 437))  # percentage points short of 100
    shares = np.r_[100 - np.clip(gaps, 0.1, 40), [57.4, 62.8, 10.7]]
    return [f"{v:.4f}" for v in shares]


def test_shares_crowding_against_their_whole_are_judged_on_their_log_odds() -> None:
    # Given the shares of white residents in 440 counties
    values = _white_shares(np.random.default_rng(15))
    table = make_table({"percwhite": values})
    facts = facts_for(table, dataset_null_marker(table))
    # When the outlier detector judges the column
    found = detect_numeric_outliers(facts[0], facts[0].numeric)
    # Then the cities and the reservation are the column's tail, and its bulk ends at 100
    assert found is None or not {"57.4000", "62.8000"} & set(found.stats["bad_values"])
    if found is not None:
        assert found.stats["high"] <= 100.0


def test_a_share_beyond_its_whole_is_an_outlier() -> None:
    # Given the same shares with two typed with a slipped point (980.3, 9,730 per mille)
    values = _white_shares(np.random.default_rng(15))
    values[5], values[6] = "980.3000", "973.0000"
    table = make_table({"percwhite": values})
    facts = facts_for(table, dataset_null_marker(table))
    # When the outlier detector judges the column
    found = detect_numeric_outliers(facts[0], facts[0].numeric)
    # Then those two are found, and not the real tail
    assert found is not None
    assert {"980.3000", "973.0000"} <= set(found.stats["bad_values"])
    assert not {"57.4000", "62.8000"} & set(found.stats["bad_values"])


def test_a_column_in_scientific_notation_is_precise_in_significant_digits() -> None:
    # Given physical constants spanning 1e-27 to 1e5, written to 9-12 significant digits (some with
    # binary round-off: 1.6021766340000001e-19), and a column of ratios written to two decimals with
    # noise pasted over a few
    rng = np.random.default_rng(16)
    mantissas = rng.uniform(1, 9.99, 300)
    digits = rng.integers(8, 12, 300)
    powers = rng.integers(-27, 6, 300)
    constants = [f"{m:.{d}f}e{p}" for m, d, p in zip(mantissas, digits, powers, strict=True)]
    constants[:3] = ["1.6021766340000001e-19", "5.48579909065e-4", "0.00662361823751"]
    ratios = [f"{v:.2f}" for v in rng.uniform(0, 1, 300)]
    ratios[:4] = ["0.453009067", "1.063097957", "0.37356077", "0.082916527"]
    table = make_table({"value": constants, "ratio": ratios})
    facts = facts_for(table, dataset_null_marker(table))
    # When the precision detector judges each column
    found = {f.name: detect_precision(f, f.numeric) for f in facts}
    # Then no constant is noise (round-off is formatting), and the pasted ratios are
    assert found["value"] is None
    assert found["ratio"] is not None
    assert set(ratios[:4]) <= set(found["ratio"].stats["bad_values"])


def test_the_real_extremes_of_a_smoothly_heavy_tail_are_its_tail_not_outliers() -> None:
    # Given an index over 20,000 people whose tail thins out smoothly (a Student t: most near 10, one in a
    # hundred beyond 30), 6% of them at 0, its largest values at 47.8, 48.3 and 58.6
    rng = np.random.default_rng(17)
    index = np.clip(10.6 + 4.4 * rng.standard_t(4, 20_000), 0.5, 45)
    index[rng.choice(20_000, 1300, replace=False)] = 0
    values = [f"{v:.1f}" for v in index] + ["47.8", "48.3", "58.6"]
    table = make_table({"disea": values})
    facts = facts_for(table, dataset_null_marker(table))
    # When the outlier detector judges the column
    found = detect_numeric_outliers(facts[0], facts[0].numeric)
    # Then the bulk reaches as far as its tail does, and the extremes carry only weak evidence
    assert found is not None and found.stats["high"] > 45
    assert found.llr is not None
    on = np.isin(found.rows, [len(values) - 1])
    assert float(found.llr[on].max()) < 2.0


def test_values_ten_times_too_big_make_a_shoulder_not_a_heavy_tail() -> None:
    # Given riders per hour (a bulk spread evenly around 150) with 3% of them typed ten times too big
    rng = np.random.default_rng(18)
    riders = rng.normal(150, 40, 5_000).round().astype(int)
    slipped = rng.choice(5_000, 150, replace=False)
    riders[slipped] *= 10
    table = make_table({"riders": [str(v) for v in riders]})
    facts = facts_for(table, dataset_null_marker(table))
    # When the outlier detector judges the column
    found = detect_numeric_outliers(facts[0], facts[0].numeric)
    # Then the slipped values are still far outside the bulk
    assert found is not None
    flagged = set(found.stats["bad_values"])
    assert sum(str(v) in flagged for v in riders[slipped]) >= 0.9 * slipped.size
