"""Spellings: what is a slip of the keyboard and what is another value (short codes, case, lists, names)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def make_table(columns: dict[str, list[str]]) -> Table:
    arrow = pa.table({name: pa.array(v, pa.string()) for name, v in columns.items()})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))


def spelling_flags(table: Table) -> dict[str, set[str]]:
    """Per column, the values flagged as inconsistent spellings."""
    out: dict[str, set[str]] = {}
    for f in detect(table).findings:
        if f.flag and f.type == "inconsistent_category":
            for r, c in zip(f.rows.tolist(), f.cols.tolist(), strict=True):
                name = table.column_names[c]
                out.setdefault(name, set()).add(table.columns[c].value(r))
    return out


def ids(n: int) -> list[str]:
    return [f"K{i:05d}" for i in range(n)]


def test_one_letter_codes_are_other_codes_not_slips_of_the_common_one() -> None:
    # Given a daylight-saving code per airport: A for most, U (unknown) and N (none) for some
    rng = random.Random(1)
    dst = [rng.choice("A" * 60 + "U" * 2 + "N") for _ in range(1500)]
    # When the table is examined
    found = spelling_flags(make_table({"faa": ids(1500), "dst": dst}))
    # Then U and N are codes of their own: no code is one substitution away from another by mistake
    assert "dst" not in found


def test_a_two_letter_code_that_lost_or_swapped_a_letter_is_still_a_slip() -> None:
    # Given a state column written IL, where a few rows dropped a letter (L) or swapped two (LI)
    state = ["IL"] * 900 + ["L"] * 6 + ["LI"] * 5
    # When the table is examined
    found = spelling_flags(make_table({"id": ids(len(state)), "state": state}))
    # Then both are slips of IL: they keep IL's letters
    assert found.get("state") == {"L", "LI"}


def test_units_that_differ_only_by_case_are_different_units() -> None:
    # Given a unit column written in the case the units require (S is the siemens, s the second)
    rng = random.Random(2)
    units = [
        rng.choice(["J", "J", "K", "kg", "kg", "m", "m", "s", "s", "s", "Hz", "eV", "mol"])
        for _ in range(400)
    ]
    units[17] = "S"
    # When the table is examined
    found = spelling_flags(make_table({"id": ids(400), "units": units}))
    # Then the siemens is not taken for a misspelt second
    assert "units" not in found


def test_a_value_in_another_case_is_a_variant_where_the_column_writes_one_case() -> None:
    # Given city names written in capitals, one of them in small letters
    rng = random.Random(3)
    city = [rng.choice(["CHICAGO", "CHICAGO", "EVANSTON", "SKOKIE", "OAK PARK"]) for _ in range(400)]
    city[5] = "chicago"
    # When the table is examined
    found = spelling_flags(make_table({"id": ids(400), "city": city}))
    # Then the small-letter spelling is a variant of the usual one
    assert found.get("city") == {"chicago"}


def lists_table() -> dict[str, list[str]]:
    """Films with their countries of origin: one code, or a co-production's codes separated by commas."""
    rng = random.Random(4)
    single = ["US", "FR", "GB", "IT", "JP", "DE", "ES", "SE"]
    pairs = ["IT,FR", "FR,IT", "GB,US", "FR,DE", "US,GB"]
    countries = [rng.choice(single * 3 + pairs) for _ in range(600)]
    return {"title": [f"Film {i}" for i in range(600)], "countries": countries}


def test_a_list_of_other_items_is_not_a_misspelt_list() -> None:
    # Given co-productions that are rare as whole lists but made of common codes (IT,BR beside IT,FR)
    rows = lists_table()
    rows["countries"][10], rows["countries"][11], rows["countries"][12] = "IT,BR", "AT,FR", "IT,FR,CO"
    rows["countries"][13] = "BR"
    # When the table is examined
    found = spelling_flags(make_table(rows))
    # Then none of them is a typo: a list is compared item by item
    assert "countries" not in found


def test_a_misspelt_item_inside_a_list_is_a_typo_with_the_list_respelled() -> None:
    # Given languages as lists, one of which misspells a common language inside a list
    rng = random.Random(5)
    langs = [
        rng.choice(["english", "french", "english,french", "german", "french,english", "german,english"])
        for _ in range(600)
    ]
    langs[20] = "french,englsh"
    # When the table is examined
    found = [
        f
        for f in detect(make_table({"id": ids(600), "languages": langs})).findings
        if f.flag and f.type == "inconsistent_category"
    ]
    # Then the list with the misspelt item is flagged, and the expected value respells only that item
    assert [(f.rows.tolist(), f.expected) for f in found] == [([20], ["french,english"])]


def businesses(n: int = 2000, seed: int = 6) -> list[str]:
    rng = random.Random(seed)
    names = [
        "TACO KING",
        "JAVA HUT",
        "HOLIDAY INN EXPRESS",
        "GREAT ALASKA PIZZA",
        "MOOSE TOOTH",
        "SNOW CITY CAFE",
    ]
    return [rng.choice(names) for _ in range(n)]


def test_a_numbered_unit_or_a_separately_run_part_of_a_business_is_not_a_slip() -> None:
    # Given inspections of businesses, among them the fifth Taco King, a hotel's spa and Java the Hut
    names = businesses()
    for r in range(0, 16):
        names[r * 7] = "TACO KING V"
    names[500], names[501] = "HOLIDAY INN EXPRESS - SPA", "HOLIDAY INN EXPRESS - SPA"
    names[600], names[601] = "JAVA THE HUT", "JAVA THE HUT"
    # When the table is examined
    table = make_table({"id": ids(len(names)), "business": names})
    findings = [f for f in detect(table).findings if f.type == "inconsistent_category"]
    # Then none of them is a typo or a form of its namesake, flagged or not
    assert findings == []


def test_a_legal_form_or_the_at_the_edges_of_a_name_is_one_name_in_two_forms() -> None:
    # Given a rare 'MOOSE TOOTH INC' and 'SNOW CITY CAFE, THE' beside the usual names
    names = businesses()
    names[40], names[41] = "MOOSE TOOTH INC", "SNOW CITY CAFE, THE"
    # When the table is examined
    found = spelling_flags(make_table({"id": ids(len(names)), "business": names}))
    # Then both are the same businesses written in another form
    assert found.get("business") == {"MOOSE TOOTH INC", "SNOW CITY CAFE, THE"}
