"""Evidence added for issue 32: co-occurrence, numbers against their context, text left escaped, stray symbols,
gaps that travel together, codes a family of columns shares, and answers that look like placeholders.

These check the evidence each detector gives (its candidates and their log-likelihood ratios), not the fitted
decision's verdict on it: the fit may weigh a detector differently after every `make calibrate`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from iterate.detect.context import facts_for
from iterate.detect.cooccur import detect_cooccurrence
from iterate.detect.frequency import detect_foreign_values
from iterate.detect.missing import detect_missing
from iterate.detect.numcontext import detect_numeric_context
from iterate.detect.text import detect_escaped, detect_stray_symbols
from iterate.io import read_table

pytestmark = pytest.mark.unit


def _facts(tmp_path: Path, header: list[str], rows: list[list[str]]):
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    table = read_table(path)
    return facts_for(table, ""), table.n_rows


def _cities(rng: np.random.Generator, n: int) -> list[list[str]]:
    states = {"Boston": "MA", "Austin": "TX", "Denver": "CO", "Miami": "FL", "Tulsa": "OK"}
    cities = list(states)
    rows = []
    for _ in range(n):
        c = cities[int(rng.integers(len(cities)))]
        rows.append([c, states[c], str(int(rng.integers(1, 100)))])
    return rows


def test_a_value_swapped_in_from_another_row_is_unlikely_beside_its_row(tmp_path: Path) -> None:
    # Given cities and their states, one state swapped in from another row
    rows = _cities(np.random.default_rng(1), 300)
    swapped = next(r for r, row in enumerate(rows) if row[1] == "MA")
    rows[swapped][1] = "TX"
    facts, n = _facts(tmp_path, ["city", "state", "qty"], rows)
    # When co-occurrence is weighed
    found = {f.columns[0]: f for f in detect_cooccurrence(facts, n)}
    # Then the swapped state is a candidate with evidence against it
    state = found["state"]
    at = list(state.rows).index(swapped)
    assert state.llr is not None and state.llr[at] > 2.0
    assert state.stats["context"][0] == "city"


def test_columns_shuffled_apart_give_no_co_occurrence_evidence(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    rows = _cities(rng, 300)
    states = [r[1] for r in rows]
    rng.shuffle(states)
    for r, s in zip(rows, states, strict=True):
        r[1] = s
    facts, n = _facts(tmp_path, ["city", "state", "qty"], rows)
    assert detect_cooccurrence(facts, n) == []


def test_a_number_far_from_its_group_is_evidence_and_not_once_the_groups_are_shuffled(tmp_path: Path) -> None:
    # Given populations of five countries, each over 40 years, one with a digit dropped
    rng = np.random.default_rng(3)
    rows = []
    for country, base in [("A", 5e6), ("B", 8e7), ("C", 3e5), ("D", 1.2e7), ("E", 4e8)]:
        for year in range(1980, 2020):
            rows.append(
                [country, str(year), str(int(base * (1 + 0.01 * (year - 1980)) * rng.uniform(0.98, 1.02)))]
            )
    rows[45][2] = rows[45][2][:-1]  # B's 1985 population, a digit lost
    facts, n = _facts(tmp_path, ["country", "year", "population"], rows)
    found = [f for f in detect_numeric_context(facts, n) if f.columns == ["population"]]
    assert found and 45 in set(found[0].rows.tolist())
    # When the countries are shuffled apart from the numbers, the groups explain nothing
    labels = [r[0] for r in rows]
    rng.shuffle(labels)
    for r, label in zip(rows, labels, strict=True):
        r[0] = label
    facts, n = _facts(tmp_path, ["country", "year", "population"], rows)
    assert all(
        45 not in set(f.rows.tolist())
        for f in detect_numeric_context(facts, n)
        if f.stats["context"] == ["country"]
    )


def test_text_left_escaped_is_decoded_in_the_expected_values(tmp_path: Path) -> None:
    rows = [[f"Show {i}"] for i in range(60)] + [["Tom &amp; Jerry"], ["Pe\\u00f1a"], ['\\"Ace\\"']]
    facts, _ = _facts(tmp_path, ["title"], rows)
    found = detect_escaped(facts[0])
    assert found is not None
    assert found.stats["canonical"] == {
        "Tom &amp; Jerry": "Tom & Jerry",
        "Pe\\u00f1a": "Peña",
        '\\"Ace\\"': '"Ace"',
    }
    assert found.damage_kind == "wrong"


def test_a_symbol_the_column_seldom_writes_is_evidence_with_its_place(tmp_path: Path) -> None:
    rows = [[f"Model{i % 30}"] for i in range(300)] + [["Civic*"], ["O''Brien"]]
    facts, _ = _facts(tmp_path, ["model"], rows)
    found = detect_stray_symbols(facts[0])
    assert found is not None
    values = [facts[0].column.value(int(r)) for r in found.rows]
    assert sorted(values) == ["Civic*", "O''Brien"]
    edge = dict(zip(values, found.features["edge"].tolist(), strict=True))
    doubled = dict(zip(values, found.features["doubled"].tolist(), strict=True))
    assert edge == {"Civic*": 1.0, "O''Brien": 0.0} and doubled["O''Brien"] == 1.0
    # `*` is a symbol proper although Unicode files it as punctuation
    assert doubled["Civic*"] == 1.0


def test_a_mark_added_to_a_value_the_column_writes_bare_is_told_apart(tmp_path: Path) -> None:
    # Given model names, 'tsx' written 40 times and once as 'tsx*'; 'town&country' a name of its own
    rows = [[f"Model{i % 30}"] for i in range(300)] + [["tsx"]] * 40 + [["tsx*"], ["town&country"]]
    facts, _ = _facts(tmp_path, ["model"], rows)
    found = detect_stray_symbols(facts[0])
    assert found is not None
    values = [facts[0].column.value(int(r)) for r in found.rows]
    bare = dict(zip(values, np.expm1(found.features["bare"]).round().tolist(), strict=True))
    # Then the mark on 'tsx*' is added to a value written bare 40 times; '&' is part of its name
    assert bare == {"tsx*": 40.0, "town&country": 0.0}


def test_gaps_that_travel_together_are_flagged_as_one_issue(tmp_path: Path) -> None:
    # Given departure and arrival times that a few records lack together (a source that reported none)
    rng = np.random.default_rng(4)
    rows = [[str(i), f"{int(rng.integers(6, 22))}:00", f"{int(rng.integers(6, 22))}:30"] for i in range(400)]
    for r in (10, 50, 90, 130, 170, 210):
        rows[r][1] = rows[r][2] = ""
    facts, n = _facts(tmp_path, ["id", "dep", "arr"], rows)
    found = [f for f in detect_missing(facts, n) if f.type == "missing_together"]
    # Then one finding flags each blank cell, the pattern in its text
    assert len(found) == 1 and found[0].flag
    assert sorted(set(found[0].rows.tolist())) == [10, 50, 90, 130, 170, 210]
    assert found[0].n_cells == 12 and "all missing" in found[0].description


def test_a_code_a_family_of_columns_shares_is_not_foreign(tmp_path: Path) -> None:
    # Given checkbox columns that write an unticked option 'Not selected', one of them mostly ticked
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(400):
        rows.append(
            [
                "Sports" if rng.random() < 0.5 else "Not selected",
                "Music" if rng.random() < 0.5 else "Not selected",
                "Reading" if rng.random() < 0.96 else "Not selected",
            ]
        )
    facts, _ = _facts(tmp_path, ["q1", "q2", "q3"], rows)
    assert detect_foreign_values(facts) == []


def test_an_answer_that_reads_like_a_placeholder_is_an_answer(tmp_path: Path) -> None:
    # Given a survey question answered 'Canned', 'Homemade' or 'None', blank for those who skipped it
    rng = np.random.default_rng(6)
    answers = rng.choice(["Canned", "Homemade", "None", ""], size=500, p=[0.45, 0.3, 0.15, 0.1])
    facts, n = _facts(tmp_path, ["sauce", "id"], [[a, str(i)] for i, a in enumerate(answers)])
    found = [f for f in detect_missing(facts, n) if f.key.startswith("disguised")]
    assert found == []
