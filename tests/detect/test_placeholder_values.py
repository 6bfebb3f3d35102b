"""Missing-value tokens that are values: a country's code, a film's title. Real placeholders stay placeholders."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

COUNTRIES = [
    ("Namibia", "NA", "NAM"),
    ("Nepal", "NP", "NPL"),
    ("France", "FR", "FRA"),
    ("Germany", "DE", "DEU"),
    ("Italy", "IT", "ITA"),
    ("Spain", "ES", "ESP"),
    ("Japan", "JP", "JPN"),
    ("Kenya", "KE", "KEN"),
    ("Peru", "PE", "PER"),
    ("Chile", "CL", "CHL"),
]


def make_table(columns: dict[str, list[str]]) -> Table:
    arrow = pa.table({name: pa.array(v, pa.string()) for name, v in columns.items()})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))


def about(table: Table, column: str) -> list[str]:
    """The types of the findings that concern a column."""
    return [f.type for f in detect(table).findings if column in f.columns]


def populations(seed: int = 1) -> dict[str, list[str]]:
    """Country-years: name, two- and three-letter codes, year and population (a few populations unknown)."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"name": [], "code2": [], "code3": [], "year": [], "population": []}
    for name, two, three in COUNTRIES:
        for year in range(1990, 2020):
            rows["name"].append(name)
            rows["code2"].append(two)
            rows["code3"].append(three)
            rows["year"].append(str(year))
            rows["population"].append("" if rng.random() < 0.01 else str(rng.randint(10**6, 10**8)))
    return rows


def test_a_code_that_reads_as_a_missing_value_is_the_code_of_its_entity() -> None:
    # Given country-years where Namibia's two-letter code is NA, as ISO writes it, in all its rows and only there
    table = make_table(populations())
    # When the table is examined
    # Then NA is neither a placeholder nor a gap: it is a code like the others
    assert about(table, "code2") == []


def test_a_missing_value_token_spread_over_many_entities_is_still_a_placeholder() -> None:
    # Given the same table where NA stands in for unknown codes of several countries
    rows = populations()
    for r in (35, 70, 130, 200, 260):
        rows["code2"][r] = "NA"
    rows["code2"] = [c if n != "Namibia" else "NM" for c, n in zip(rows["code2"], rows["name"], strict=True)]
    # When the table is examined
    # Then NA is a placeholder posing as a value
    assert "disguised_missing" in about(make_table(rows), "code2")


def films(n: int = 400, seed: int = 2) -> dict[str, list[str]]:
    rng = random.Random(seed)
    words = ["Night", "River", "Lovers", "King", "Summer", "Bandit", "Mother", "Stranger", "Road", "Garden"]
    titles = [f"The {rng.choice(words)} of {rng.choice(words)} {i}" for i in range(n)]
    return {"title": titles, "year": [str(rng.randint(1946, 2020)) for _ in range(n)]}


def test_a_title_that_is_a_word_for_missing_is_a_title() -> None:
    # Given film titles, all different, one of which is 'Missing' (Costa-Gavras, 1982)
    rows = films()
    rows["title"][120] = "Missing"
    # When the table is examined
    # Then the film is not taken for a placeholder
    assert about(make_table(rows), "title") == []


def test_a_placeholder_symbol_among_titles_is_still_a_placeholder() -> None:
    # Given the same titles, one of which is 'N/A'
    rows = films()
    rows["title"][120] = "N/A"
    rows["year"][7] = ""  # the dataset writes a missing value as a blank
    # When the table is examined
    # Then 'N/A' is a placeholder posing as a title
    assert "disguised_missing" in about(make_table(rows), "title")
