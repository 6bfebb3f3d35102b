"""Blanks the data itself explains are reported, not flagged; blanks at random in filled columns stay flagged."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.detect.findings import Finding
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def make_table(columns: dict[str, list[str]]) -> Table:
    arrow = pa.table({name: pa.array(v, pa.string()) for name, v in columns.items()})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"))


def flagged_gaps(findings: list[Finding], table: Table) -> set[tuple[int, str]]:
    return {
        (int(r), table.column_names[int(c)])
        for f in findings
        if f.flag and f.type == "missing_values"
        for r, c in zip(f.rows, f.cols, strict=True)
    }


def cars(seed: int = 1) -> dict[str, list[str]]:
    """47 petrol cars of a few makers and gearboxes, with their mpg and torque rpm."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {k: [] for k in ("mfr", "trsmn", "hp", "trq_rpm", "mpg_c", "mpg_h")}
    for _ in range(47):
        rows["mfr"].append(rng.choice(["Ferrari", "Porsche", "BMW", "Audi", "Aston Martin"]))
        rows["trsmn"].append(rng.choice(["7a", "8am", "6m", "7am"]))
        rows["hp"].append(str(rng.randint(300, 700)))
        rows["trq_rpm"].append(str(rng.choice([1500, 1750, 4000, 4500, 5250, 6000])))
        rows["mpg_c"].append(str(rng.randint(11, 22)))
        rows["mpg_h"].append(str(rng.randint(16, 30)))
    return rows


def test_a_record_of_another_kind_lacking_several_values_is_reported_once_and_not_flagged() -> None:
    # Given petrol cars and one electric car: its own maker and gearbox, no mpg and no torque rpm
    rows = cars()
    rows["mfr"][39], rows["trsmn"][39] = "Tesla", "1dd"
    rows["trq_rpm"][39] = rows["mpg_c"][39] = rows["mpg_h"][39] = ""
    table = make_table(rows)
    # When the table is examined
    findings = detect(table).findings
    # Then its blanks are not flagged one by one, and the record is told once
    assert flagged_gaps(findings, table) == set()
    once = [f for f in findings if f.key == "missing-row:trq_rpm:mpg_c:mpg_h"]
    assert len(once) == 1 and not once[0].flag and once[0].rows.tolist() == [39]


def test_an_ordinary_record_that_lost_several_values_keeps_them_flagged() -> None:
    # Given the same petrol cars where an ordinary one lost its mpg and torque rpm
    rows = cars()
    rows["trq_rpm"][12] = rows["mpg_c"][12] = rows["mpg_h"][12] = ""
    table = make_table(rows)
    # When the table is examined
    # Then the three blanks are gaps to fill
    assert flagged_gaps(detect(table).findings, table) == {(12, "trq_rpm"), (12, "mpg_c"), (12, "mpg_h")}


def test_a_blank_in_a_column_of_lists_is_an_empty_list() -> None:
    # Given films with their languages as lists, three of which have none (no dialogue)
    rng = random.Random(2)
    langs = [rng.choice(["en", "fr", "it", "fr,en", "en,fr", "es", "en,es", "de"]) for _ in range(900)]
    for r in (100, 400, 800):
        langs[r] = ""
    table = make_table({"title": [f"Film {i}" for i in range(900)], "languages": langs})
    findings = detect(table).findings
    # Then the blanks are reported, not flagged
    assert flagged_gaps(findings, table) == set()
    assert [f.stats.get("optional") for f in findings if f.type == "missing_values"] == ["list"]


def test_a_blank_web_address_is_reported_but_a_blank_name_is_flagged() -> None:
    # Given towns with a website each but four, and a name each but one
    n = 400
    site = [f"https://www.town{i}.ca" for i in range(n)]
    name = [f"Town {i}" for i in range(n)]
    for r in (43, 91, 126, 374):
        site[r] = ""
    name[7] = ""
    table = make_table({"name": name, "website": site, "size": [str(i % 7) for i in range(n)]})
    # When the table is examined
    # Then the towns without a website are not flagged; the town without a name is
    assert flagged_gaps(detect(table).findings, table) == {(7, "name")}


def test_a_change_from_zero_has_no_percentage_but_a_change_to_zero_does() -> None:
    # Given populations at two censuses and the change in between, computed as (after - before) / before
    rng = random.Random(3)
    before = [rng.randint(200, 90_000) for _ in range(300)]
    after = [int(b * rng.uniform(0.8, 1.3)) for b in before]
    before[84], after[84] = 0, 16  # a township empty at the first census
    before[85], after[85] = 10, 0  # a township emptied since
    change = [f"{(a - b) / b:.4f}" if b else "" for a, b in zip(after, before, strict=True)]
    change[85] = ""  # -100%, left blank by the source
    table = make_table(
        {"before": [str(b) for b in before], "after": [str(a) for a in after], "change": change}
    )
    findings = detect(table).findings
    # Then the blank over a zero base is explained and not flagged; the other is a gap
    assert flagged_gaps(findings, table) == {(85, "change")}
    undefined = [f for f in findings if f.key == "missing-undefined:change"]
    assert len(undefined) == 1 and undefined[0].rows.tolist() == [84] and not undefined[0].flag


def stations(sizes: dict[str, int], seed: int = 4) -> dict[str, list[str]]:
    """Stations of lines of the given sizes, in a shuffled order, each with its yearly passengers."""
    rng = random.Random(seed)
    lines = [line for line, size in sizes.items() for _ in range(size)]
    rng.shuffle(lines)
    return {
        "name": [f"Station {i}" for i in range(len(lines))],
        "line": lines,
        "passengers": [str(rng.randint(10**5, 10**7)) for _ in lines],
    }


def blank(rows: dict[str, list[str]], line: str, k: int) -> list[int]:
    at = [i for i, x in enumerate(rows["line"]) if x == line][:k]
    for r in at:
        rows["passengers"][r] = ""
    return at


def test_the_few_gaps_left_by_an_explanation_are_tested_again_against_it() -> None:
    # Given stations where half of a new line's stations have no count yet, and two of each of two lines
    # extended the same year
    sizes = {
        str(k): s for k, s in enumerate([14, 15, 17, 18, 13, 17, 29, 26, 23, 15, 12, 23, 23, 5, 4, 30, 30], 1)
    }
    rows = stations(sizes)
    blank(rows, "11", 6)
    blank(rows, "4", 2)
    blank(rows, "12", 2)
    table = make_table(rows)
    # When the table is examined
    # Then all the gaps are explained by the line, none flagged
    assert flagged_gaps(detect(table).findings, table) == set()


def test_gaps_mostly_at_random_stay_flagged_beside_a_small_pattern() -> None:
    # Given planes of many models where one small model lacks its year, and many planes lost theirs at random
    sizes = {f"M{k}": 30 + (k * 7) % 50 for k in range(60)} | {"X1": 8}
    rows = stations(sizes, seed=5)
    blank(rows, "X1", 8)
    rng = random.Random(6)
    lone = rng.sample([i for i, x in enumerate(rows["line"]) if x != "X1"], 40)
    for r in lone:
        rows["passengers"][r] = ""
    table = make_table(rows)
    # When the table is examined
    # Then the random gaps are flagged
    assert flagged_gaps(detect(table).findings, table) == {(r, "passengers") for r in lone}


def constants(seed: int = 7) -> dict[str, list[str]]:
    """Physical constants: measured ones with an uncertainty (and its significant figures), exact ones with
    neither; dimensionless ratios without a unit."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"name": [], "value": [], "uncert": [], "sf_uncert": [], "units": []}
    particles = ["electron", "proton", "neutron", "muon", "deuteron", "helion", "triton", "tau", "alpha"]
    for i in range(360):
        a, b = rng.sample(particles, 2)
        ratio = i % 4 == 0
        rows["name"].append(
            f"{a}-{b} mass ratio {i}"
            if ratio
            else f"{a} {rng.choice(['mass', 'energy', 'radius', 'moment'])} {i}"
        )
        rows["value"].append(f"{rng.uniform(1, 9):.6f}e{rng.randint(-30, 30)}")
        exact = rng.random() < 0.23
        rows["uncert"].append("" if exact else f"{rng.randint(1, 99)}e-{rng.randint(5, 40)}")
        rows["sf_uncert"].append("" if exact else str(rng.randint(1, 3)))
        rows["units"].append("" if ratio else rng.choice(["kg", "J", "m", "MeV", "J T^-1", "u"]))
    return rows


def test_columns_never_empty_one_without_the_other_are_one_pattern_of_missing_values() -> None:
    # Given constants whose uncertainty and its significant figures are both blank for the exact ones
    table = make_table(constants())
    # When the table is examined
    together = [f for f in detect(table).findings if f.type == "missing_together"]
    # Then they are one pattern, told as such, and each blank is flagged (issue 32: missing values that travel
    # together are still missing values; nothing in the table says these records have none to give)
    assert [f.columns for f in together] == [["uncert", "sf_uncert"]]
    # And each blank is evidence of a gap (the decision weighs it with the column's share of blanks)
    from iterate.detect.context import facts_for
    from iterate.detect.missing import detect_missing

    pattern = [f for f in detect_missing(facts_for(table, ""), table.n_rows) if f.type == "missing_together"]
    assert pattern[0].flag and pattern[0].llr is not None
    assert "never one without the others" in pattern[0].description


def test_blanks_crowded_into_records_whose_name_says_what_they_are_are_told_as_not_applying() -> None:
    # Given constants where every ratio has no unit (a quarter of the rows)
    table = make_table(constants())
    # When the table is examined
    units = [f for f in detect(table).findings if f.type == "missing_values" and f.columns == ["units"]]
    # Then the blanks are reported, not flagged, and tied to the word of the name that explains them
    assert len(units) == 1 and not units[0].flag
    assert units[0].stats["explained_by_words"]["column"] == "name"
    assert "ratio" in units[0].stats["explained_by_words"]["words"]
