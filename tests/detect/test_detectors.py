"""Every detector on planted errors: it finds the planted cells, and leaves clean twins of them alone."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from iterate.detect import detect
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


def make_table(columns: dict[str, list[str]]) -> Table:
    names = list(columns)
    arrow = pa.table({f"c{i}": pa.array(v, pa.string()) for i, v in enumerate(columns.values())})
    return Table.from_arrow(arrow, name="t", source=SourceInfo(path="t.csv", format="csv"), names=names)


def flagged(table: Table, issue_type: str | None = None) -> set[tuple[int, str]]:
    out = set()
    for f in detect(table).findings:
        if f.flag and (issue_type is None or f.type == issue_type):
            out |= {(int(r), table.column_names[int(c)]) for r, c in zip(f.rows, f.cols, strict=True)}
    return out


def findings_of(table: Table, issue_type: str):
    return [f for f in detect(table).findings if f.type == issue_type]


def entity_rows(n: int = 300, seed: int = 1) -> dict[str, list[str]]:
    """Rows of 30 stores, each with one city and zip, and a free order amount."""
    rng = random.Random(seed)
    stores = [
        (f"S{i:03d}", rng.choice(["Boston", "Denver", "Austin", "Seattle", "Portland", "Chicago"]))
        for i in range(30)
    ]
    zips = {
        "Boston": "02108",
        "Denver": "80202",
        "Austin": "73301",
        "Seattle": "98101",
        "Portland": "97201",
        "Chicago": "60614",
    }
    rows = {"store": [], "city": [], "zip": [], "amount": [], "status": []}
    for _ in range(n):
        store, city = rng.choice(stores)
        rows["store"].append(store)
        rows["city"].append(city)
        rows["zip"].append(zips[city])
        rows["amount"].append(f"{rng.uniform(10, 90):.2f}")
        rows["status"].append(rng.choice(["delivered", "delivered", "shipped", "cancelled"]))
    return rows


def test_placeholders_are_flagged_and_a_half_empty_column_is_its_own_convention():
    # Given a numeric column with a few blanks (the dataset's way to say missing) and some "N/A" placeholders,
    # and a column that is empty in half of its rows
    values = [str(i) for i in range(40)] + [""] * 5 + ["N/A"] * 5
    table = make_table({"ibu": values, "other": ["x"] * 25 + [""] * 25})
    # Then the placeholders are wrong values
    assert flagged(table, "disguised_missing") == {(r, "ibu") for r in range(45, 50)}
    # And the half-empty column is reported as its convention, with no flags
    other = [f for f in findings_of(table, "missing_values") if f.columns == ["other"]]
    assert len(other) == 1 and not other[0].flag and other[0].stats.get("convention")


def test_a_placeholder_another_column_explains_is_that_kind_of_records_convention_not_a_flag():
    # Given candidates for three offices where every statewide race writes its district as "N/A" (there is
    # none), House races write a number, one House candidate's district is "N/A", and blanks are the file's null
    rng = random.Random(7)
    office = [rng.choice(["House", "House", "House", "Senate", "Governor"]) for _ in range(400)]
    district = [str(rng.randrange(1, 20)) if o == "House" else "N/A" for o in office]
    lone = next(i for i, o in enumerate(office) if o == "House")
    district[lone] = "N/A"
    votes = [str(rng.randrange(100, 9000)) if i % 40 else "" for i in range(400)]
    table = make_table({"office": office, "district": district, "votes": votes})
    findings = detect(table).findings
    # Then the statewide rows' "N/A" is told as not applying to those offices, with no flags ...
    grouped = [f for f in findings if f.key == "missing-grouped:district"]
    assert len(grouped) == 1 and not grouped[0].flag
    assert "office" in grouped[0].stats["explained_by"]
    # ... and only the House candidate's "N/A" is a placeholder, listed by row for its proof
    disguised = [f for f in findings if f.type == "disguised_missing" and f.columns == ["district"]]
    assert len(disguised) == 1 and disguised[0].rows.tolist() == [lone]
    assert disguised[0].stats["rule"] == "missing" and disguised[0].stats["rows"] == [lone]


def test_a_placeholder_the_column_writes_for_most_of_its_gaps_is_flagged_where_a_group_crowds_too():
    # Given beers whose bitterness is "N/A" in 60 rows at random and in every beer of one brewery that
    # publishes none (a group of 20 rows), and blanks elsewhere in the file
    rng = random.Random(8)
    brewery = [f"b{rng.randrange(30)}" if i >= 20 else "quiet" for i in range(400)]
    ibu = [str(rng.randrange(5, 120)) for _ in range(400)]
    for i in list(range(20)) + rng.sample(range(20, 400), 60):
        ibu[i] = "N/A"
    abv = [f"0.0{rng.randrange(40, 90)}" if i % 50 else "" for i in range(400)]
    table = make_table({"brewery": brewery, "ibu": ibu, "abv": abv})
    findings = detect(table).findings
    assert any(f.key == "missing-grouped:ibu" and f.n_cells == 20 for f in findings)  # the brewery's gaps
    # Then "N/A" is the column's way to write a gap, and every one of them is a placeholder to rewrite
    disguised = [f for f in findings if f.type == "disguised_missing" and f.columns == ["ibu"]]
    assert len(disguised) == 1 and disguised[0].n_cells == 80 and "rule" not in disguised[0].stats


def test_a_gap_in_a_column_that_is_otherwise_filled_is_flagged():
    # Given 300 orders whose city is filled except in one row
    rows = entity_rows()
    rows["city"][17] = ""
    table = make_table(rows)
    # Then that cell is flagged as a missing value
    assert (17, "city") in flagged(table, "missing_values")


def test_gaps_in_a_table_where_no_column_groups_rows_are_still_judged():
    # Given two columns of all-different values with a few gaps (nothing can group the rows)
    n = 200
    table = make_table({"a": [f"a{i}" if i % 50 else "" for i in range(n)], "b": [f"b{i}" for i in range(n)]})
    # Then detection runs and the gaps are reported
    assert {f.columns[0] for f in findings_of(table, "missing_values")} == {"a"}


def test_values_missing_together_are_one_pattern_not_flagged_cells():
    # Given orders where cancelled ones have no ship date and no carrier, and one shipped order lost its carrier
    rng = random.Random(3)
    status = [rng.choice(["shipped", "shipped", "shipped", "cancelled"]) for _ in range(400)]
    shipped = [s == "shipped" for s in status]
    date = [f"2024-01-{rng.randrange(1, 29):02d}" if s else "" for s in shipped]
    carrier = [rng.choice(["UPS", "DHL", "FedEx"]) if s else "" for s in shipped]
    lone = next(i for i, s in enumerate(shipped) if s)
    carrier[lone] = ""
    table = make_table(
        {"status": status, "ship_date": date, "carrier": carrier, "n": [str(i) for i in range(400)]}
    )
    # Then the cancelled orders' gaps are one pattern (reported, not flagged) ...
    together = findings_of(table, "missing_together")
    assert len(together) == 1 and set(together[0].columns) == {"ship_date", "carrier"}
    assert not together[0].flag and together[0].n_rows == sum(1 for s in shipped if not s)
    # ... no cancelled order's cell is flagged, and the shipped order without a carrier is
    assert not {(r, c) for r, c in flagged(table) if not shipped[r]}
    assert (lone, "carrier") in flagged(table, "missing_values")


def test_a_placeholder_used_as_the_datasets_null_marker_is_not_flagged():
    # Given a dataset with no blanks that writes every missing value as "empty"
    table = make_table({"a": ["1", "2", "empty"] * 20, "b": ["x", "empty", "y"] * 20})
    # Then "empty" is its convention: no disguised-missing flags
    assert flagged(table, "disguised_missing") == set()
    assert detect(table).null_marker == "empty"


def test_values_breaking_a_column_pattern_are_flagged():
    rows = entity_rows()
    rows["phone"] = [f"555{i:07d}" for i in range(300)]
    rows["phone"][10] = "555x001234"
    rows["phone"][20] = "55500o1234"
    table = make_table(rows)
    assert {(10, "phone"), (20, "phone")} <= flagged(table)
    assert not any(c == "phone" and r not in (10, 20) for r, c in flagged(table))


def test_text_in_a_numeric_column_is_mixed_types():
    values = [str(i % 50) for i in range(200)]
    values[7] = "twelve"
    found = findings_of(make_table({"qty": values}), "mixed_types")
    assert [int(r) for f in found for r in f.rows] == [7]


def test_numbers_with_units_written_several_ways_are_all_flagged_but_a_consistent_unit_is_not():
    mixed = make_table({"ounces": ["12.0 oz", "12 oz.", "16.0 ounce", "12.0 OZ."] * 30})
    assert len(flagged(mixed, "unit_in_number")) == 120
    consistent = make_table({"score": [f"{i}%" for i in range(100)]})
    assert flagged(consistent) == set()


def test_a_minority_of_values_with_a_percent_sign_is_flagged():
    values = [f"0.0{i % 9 + 1}" for i in range(100)] + [f"0.0{i % 9 + 1}%" for i in range(30)]
    found = flagged(make_table({"abv": values}), "unit_in_number")
    assert found == {(r, "abv") for r in range(100, 130)}


def test_dates_in_a_second_format_are_flagged():
    values = [f"2026-0{m}-1{d}" for m in range(1, 10) for d in range(10)] * 2
    values[5] = "15/01/2026"
    values[50] = "03/31/2026"
    found = flagged(make_table({"d": values}))
    assert {(5, "d"), (50, "d")} <= found and len(found) == 2


def test_times_of_day_in_a_second_layout_are_flagged_as_times():
    # 7:10pm and 7:10 PM are one time written two ways; a minority of the second way is a format break
    values = [f"{h}:{m:02d}{'am' if m % 2 else 'pm'}" for h in range(1, 13) for m in range(0, 60, 3)]
    values[7], values[70] = "3:15 PM", "11:40 AM"
    found = findings_of(make_table({"t": values}), "format_violation")
    assert {(int(r), "t") for f in found for r in f.rows} == {(7, "t"), (70, "t")}
    assert "times" in found[0].describe(found[0]) and "day and month" not in found[0].describe(found[0])


def test_e_mail_addresses_are_judged_by_their_grammar_not_the_shape_of_their_local_part():
    # Given addresses mostly of letters, a few with digits or underscores, one broken
    first = ["ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ida", "jo", "kim", "lu"]
    last = ["smith", "jones", "lee", "kim", "diaz", "ng", "roy", "wu", "ford", "hart", "moss", "cole"]
    values = [f"{a}.{b}@example.com" for a in first for b in last]
    values[3], values[40], values[77] = "mbates88@example.com", "dan_k_wood@example.com", "eve@@example"
    found = flagged(make_table({"email": values}), "format_violation")
    # Then only the address that is not one is flagged
    assert found == {(77, "email")}


def test_rare_misspellings_of_a_frequent_value_are_flagged_with_the_expected_spelling():
    rows = entity_rows()
    rows["status"][3] = "delivred"
    rows["status"][4] = "Delivered"
    table = make_table(rows)
    found = findings_of(table, "inconsistent_category")
    expected = {int(r): e for f in found for r, e in zip(f.rows, f.expected or [], strict=True)}
    assert expected == {3: "delivered", 4: "delivered"}


def test_short_codes_of_a_dense_vocabulary_are_not_typos():
    # US states: NC, ND, NE, NH... sit one edit apart legitimately.
    states = ["NC"] * 40 + ["ND"] * 2 + ["NE"] * 30 + ["NH"] * 3 + ["NY"] * 50 + ["NJ"] * 20
    assert flagged(make_table({"state": states})) == set()


def test_different_names_sharing_words_are_not_typos():
    names = ["Uinta Brewing Company"] * 12 + ["Abita Brewing Company"] * 2 + ["Avery Brewing Company"] * 9
    assert flagged(make_table({"brewery": names + ["Other"] * 20})) == set()


def test_conflicting_values_for_the_same_entity_are_flagged_in_the_dependent_column():
    rows = entity_rows()
    victim = next(i for i, s in enumerate(rows["store"]) if s == rows["store"][0] and i > 0)
    rows["zip"][victim] = "99999" if rows["zip"][victim] != "99999" else "11111"
    table = make_table(rows)
    found = findings_of(table, "dependency_violation")
    assert [
        (int(r), table.column_names[int(c)]) for f in found for r, c in zip(f.rows, f.cols, strict=True)
    ] == [(victim, "zip")]


def test_a_value_glued_from_an_empty_neighbour_column_is_flagged_in_both_columns():
    cities = ["Gary", "Bend", "Austin", "Denver"] * 30
    states = ["IN", "OR", "TX", "CO"] * 30
    for r in (5, 9, 13):
        cities[r] = f"{cities[r]} {states[r]}"
        states[r] = ""
    found = flagged(make_table({"city": cities, "state": states}), "merged_columns")
    assert found == {(r, c) for r in (5, 9, 13) for c in ("city", "state")}


def test_exact_duplicate_rows_are_reported_as_rows_not_cells():
    rows = entity_rows(100)
    for name in rows:
        rows[name].append(rows[name][7])
    dup = findings_of(make_table(rows), "duplicate_rows")
    assert len(dup) == 1 and dup[0].rows.tolist() == [100] and not dup[0].flag


def test_encoding_damage_and_stray_spaces():
    names = ["José Silva", "Ana Costa", "Inès Martin", "Emma Kim"] * 10
    names[3] = "JosÃ© Silva"
    names[6] = " Ana Costa"
    table = make_table({"name": names})
    assert flagged(table, "encoding_damage") == {(3, "name")}
    assert flagged(table, "stray_whitespace") == {(6, "name")}
    enc = findings_of(table, "encoding_damage")[0]
    assert enc.expected == ["José Silva"]


def test_extreme_values_in_a_measure_are_outliers_but_codes_are_not():
    rng = np.random.default_rng(3)
    qty = [str(int(x)) for x in rng.integers(1, 6, 300)]
    qty[11] = "1000"
    zips = [str(int(x)) for x in rng.choice([10001, 10002, 99501, 60614], 300)]
    found = flagged(make_table({"qty": qty, "zip": zips}), "numeric_outlier")
    assert found == {(11, "qty")}


def test_constant_columns_are_reported_without_flags():
    found = findings_of(make_table({"a": ["x"] * 20, "b": [str(i) for i in range(20)]}), "constant_column")
    assert [f.columns for f in found] == [["a"]] and not found[0].flag


def test_clean_data_raises_no_cell_flags():
    assert flagged(make_table(entity_rows())) == set()


def test_issues_crowded_into_a_few_months_get_a_temporal_pattern():
    from iterate.issues import issues_from_findings
    from iterate.profile import profile_table

    # Given a year of orders where status typos only happen in March
    rng = random.Random(4)
    dates, status = [], []
    for i in range(1200):
        month = 1 + i % 12
        dates.append(f"2026-{month:02d}-{1 + rng.randrange(28):02d}")
        status.append("delivred" if i % 24 == 2 else rng.choice(["delivered", "shipped"]))
    table = make_table({"order_date": dates, "status": status})
    detection = detect(table)
    # When the issues are built
    issues = issues_from_findings(
        detection.findings, table, profile_table(table, null_marker=detection.null_marker)
    )
    # Then the typo issue says when it happened, with numbers computed from the rows
    typo = next(i for i in issues if i.type == "inconsistent_category")
    assert typo.temporalPattern is not None and "2026-03" in typo.temporalPattern
    assert typo.temporalPattern.startswith("100% of the affected rows")


def test_a_column_that_never_repeats_is_the_tables_key_not_an_issue():
    # Given one row per country: names and codes all different (issue 10: real tables' keys were reported)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    labels = [f"{a} {b}" for a in words for b in words][:60]
    table = make_table({"label": labels, "id": [f"ID{i:05d}" for i in range(60)]})
    assert findings_of(table, "all_unique_column") == []


def test_identical_rows_without_a_column_that_identifies_records_are_not_duplicates():
    # Given survey answers: five coded questions, many respondents answering alike
    rng = random.Random(4)
    rows = {f"q{k}": [str(rng.randrange(1, 4)) for _ in range(500)] for k in range(5)}
    # Then identical answer sets are not reported as duplicate records ...
    assert findings_of(make_table(rows), "duplicate_rows") == []
    # ... while with an order number beside them, a repeated order is
    rows["order"] = [f"O{i}" for i in range(500)]
    rows["order"][10] = rows["order"][9]
    for k in range(5):
        rows[f"q{k}"][10] = rows[f"q{k}"][9]
    assert [f.rows.tolist() for f in findings_of(make_table(rows), "duplicate_rows")] == [[10]]


def test_identical_rows_sharing_a_group_level_column_that_most_such_rows_do_not_share_are_not_duplicates():
    # Given legislators of multi-member districts: the district's covariate is unique per district, and
    # legislators of one district mostly differ on their own columns, a few agree on the yes/no ones
    rng = random.Random(7)
    district, party, answered = [], [], []
    for d in range(300):
        for _ in range(rng.choice([1, 1, 2, 3])):
            district.append(f"{d * 0.137:.3f}")
            party.append(rng.choice(["D", "R"]))
            answered.append(rng.choice(["0", "1"]))
    table = make_table({"district_index": district, "party": party, "answered": answered})
    # Then rows agreeing on everything are not reported as the same record twice
    assert findings_of(table, "duplicate_rows") == []


def test_the_same_record_in_other_case_is_a_near_duplicate_but_under_a_new_id_it_is_another_record():
    # Given people with unique ids and names; one entered again with different case and spaces, and another
    # whose name and details repeat under a new id
    n = 200
    rows = {
        "id": [f"id{i}" for i in range(n)],
        "name": [f"Person {i}" for i in range(n)],
        "city": ["Boston", "Austin"] * (n // 2),
        "tier": ["a", "b", "c", "d"] * (n // 4),
    }
    rows["id"][150], rows["name"][150] = "ID7 ", "PERSON 7 "
    rows["city"][150], rows["tier"][150] = rows["city"][7], rows["tier"][7]
    rows["id"][160], rows["name"][160] = "id-new", rows["name"][9]
    rows["city"][160], rows["tier"][160] = rows["city"][9], rows["tier"][9]
    # Then only the re-typed row is a near duplicate (a different id is a different record)
    near = findings_of(make_table(rows), "near_duplicate_rows")
    assert [f.rows.tolist() for f in near] == [[150]]


def test_rows_sharing_a_few_small_categories_are_not_near_duplicates():
    # Given unique ids and three small categories: many rows coincide on the categories by chance
    rng = random.Random(9)
    rows = {
        "id": [f"R{i:05d}" for i in range(2000)],
        "size": [rng.choice("SML") for _ in range(2000)],
        "color": [rng.choice(["red", "blue"]) for _ in range(2000)],
        "ok": [rng.choice(["yes", "no"]) for _ in range(2000)],
    }
    assert findings_of(make_table(rows), "near_duplicate_rows") == []


def test_a_placeholder_number_far_outside_the_range_is_disguised_missing():
    # Given ages between 18 and 80, and 9999 written where the age is unknown
    rng = random.Random(5)
    ages = [str(rng.randint(18, 80)) for _ in range(300)]
    for r in (3, 50, 51, 120, 200):
        ages[r] = "9999"
    found = findings_of(make_table({"age": ages}), "disguised_missing")
    assert [sorted(int(r) for r in f.rows) for f in found] == [[3, 50, 51, 120, 200]]
    assert found[0].stats["markers"] == ["9999"]


def test_a_legitimate_value_that_looks_like_a_placeholder_is_left_alone():
    # 99 among scores from 0 to 100 is a score, not a placeholder
    scores = [str(i % 101) for i in range(505)]
    assert findings_of(make_table({"score": scores}), "disguised_missing") == []


def test_a_bare_number_in_a_column_of_words_is_a_placeholder_but_not_in_a_column_of_codes():
    # Given a column of words with a few '0' typed for unknown, and a column of model codes holding '150'
    rng = random.Random(11)
    race = [rng.choice(["White", "Black", "Asian", "Other"]) for _ in range(400)]
    model = [rng.choice(["737-7H4", "A320-232", "CL-600", "MD-88", "EMB-145LR"]) for _ in range(400)]
    for r in (7, 90, 311):
        race[r] = "0"
    model[40] = "150"
    found = findings_of(make_table({"race": race, "model": model}), "disguised_missing")
    assert [(f.columns, sorted(int(r) for r in f.rows)) for f in found] == [(["race"], [7, 90, 311])]
    assert flagged(make_table({"race": race, "model": model})) >= {(7, "race"), (90, "race"), (311, "race")}


def test_a_value_from_another_columns_vocabulary_is_flagged_where_it_does_not_belong():
    # Given education levels and occupations; a few occupations hold an education level
    rng = random.Random(12)
    education = [rng.choice(["HS-grad", "Some-college", "Bachelors", "Masters"]) for _ in range(600)]
    occupation = [
        rng.choice(["Sales", "Craft-repair", "Exec-managerial", "Tech-support"]) for _ in range(600)
    ]
    for r in (5, 77, 400):
        occupation[r] = "Some college"
    table = make_table({"education": education, "occupation": occupation})
    found = [f for f in detect(table).findings if f.detector == "foreign"]
    assert [(f.columns, sorted(int(r) for r in f.rows)) for f in found] == [(["occupation"], [5, 77, 400])]
    assert found[0].stats["homes"] == ["education"]
    assert {(5, "occupation"), (77, "occupation"), (400, "occupation")} <= flagged(table)


def test_a_value_both_columns_use_often_is_not_foreign():
    # Given two status columns sharing their vocabulary, and a value common in both
    rng = random.Random(13)
    before = [rng.choice(["open", "closed", "pending"]) for _ in range(500)]
    after = [rng.choice(["open", "closed", "pending", "archived"]) for _ in range(500)]
    found = [
        f for f in detect(make_table({"before": before, "after": after})).findings if f.detector == "foreign"
    ]
    assert found == []


def test_dates_and_times_no_calendar_has_are_flagged_but_the_end_of_day_is_not():
    # Given a date column with 30 February and month 13, and a clock column with 24:30, 12:75 and 24:00
    rng = random.Random(14)
    dates = [f"2021-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" for _ in range(400)]
    times = [f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}" for _ in range(400)]
    dates[9], dates[10] = "2021-02-30", "2021-13-01"
    times[5], times[60], times[7], times[8] = "24:30", "24:30", "12:75", "24:00"
    found = [f for f in findings_of(make_table({"date": dates, "time": times}), "out_of_domain") if f.flag]
    assert {f.columns[0]: sorted(int(r) for r in f.rows) for f in found} == {
        "date": [9, 10],
        "time": [5, 7, 60],
    }


def test_durations_past_24_hours_are_not_impossible_times():
    # Given elapsed times written H:MM, most of them past 23:59
    rng = random.Random(15)
    spans = [f"{rng.randint(0, 60)}:{rng.randint(0, 59):02d}" for _ in range(400)]
    assert findings_of(make_table({"elapsed": spans}), "out_of_domain") == []


def zip_rows(seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pool = ["02108", "02139", "01002", "06510", "07030", "10001", "94105", "60614", "30301", "73301"]
    zips = [rng.choice(pool) for _ in range(500)]
    return zips, [str(pool.index(z)) for z in zips]


def test_zip_codes_stored_as_integers_have_lost_their_leading_zeros():
    # Given a zip column saved as numbers (Parquet/xlsx): every zip of New England lost its zero, and each
    # store's rows agree on the wrong value
    zips, store = zip_rows(16)
    typed = [str(int(z)) for z in zips]
    table = make_table({"zip": typed, "store": store})
    lost = {r for r, z in enumerate(typed) if len(z) < 5}
    assert {r for r, c in flagged(table) if c == "zip"} == lost


def test_four_digit_postal_codes_under_another_name_and_zero_padded_zips_are_left_alone():
    # Given the same zips written with their zeros, and postal codes of countries with four digits
    zips, store = zip_rows(17)
    postal = [z if z[0] != "0" else z[1:] for z in zips]
    assert flagged(make_table({"zip": zips, "store": store})) == set()
    assert flagged(make_table({"postal_code": postal, "store": store})) == set()


def test_one_organisation_in_several_forms():
    # Given makers where 'ACME MFG CO' is a rare slip for ACME, and AIRBUS / AIRBUS INDUSTRIE are both in use
    rng = random.Random(18)
    maker = [
        rng.choice(["ACME"] * 6 + ["AIRBUS", "AIRBUS INDUSTRIE", "Boeing", "Embraer"]) for _ in range(600)
    ]
    for r in (3, 40):
        maker[r] = "ACME MFG CO"
    found = {f.key: f for f in findings_of(make_table({"maker": maker}), "inconsistent_category")}
    assert sorted(int(r) for r in found["typos:maker"].rows) == [3, 40]
    assert found["typos:maker"].stats["canonical"] == {"ACME MFG CO": "ACME"}
    forms = found["forms:maker"]
    assert not forms.flag and set(forms.stats["canonical"].items()) <= {
        ("AIRBUS", "AIRBUS INDUSTRIE"),
        ("AIRBUS INDUSTRIE", "AIRBUS"),
    }


def test_names_that_differ_by_more_than_a_legal_form_are_different_organisations():
    # Given 'ACME' and 'ACME FOODS', 'Delta' and 'Delta Air' (distinct companies)
    rng = random.Random(19)
    maker = [rng.choice(["ACME", "ACME FOODS", "Delta", "Delta Air", "Zenith"]) for _ in range(500)]
    assert [f.key for f in findings_of(make_table({"maker": maker}), "inconsistent_category")] == []


def test_codes_one_letter_apart_are_other_codes_unless_the_keys_are_neighbours():
    # Given aircraft model codes: customer codes differ by one letter (737-7BQ, 737-76Q are other models),
    # while 737-8H4 typed as 737-8G4 (G beside H) is a slip
    rng = random.Random(20)
    models = [rng.choice(["737-7BD", "737-76N", "737-8H4", "A320-232", "MD-88"]) for _ in range(600)]
    models[10], models[11], models[12] = "737-7BQ", "737-76Q", "737-8G4"
    found = {
        v
        for f in findings_of(make_table({"model": models}), "inconsistent_category")
        for v in f.stats["bad_values"]
    }
    assert found == {"737-8G4"}


def test_a_digit_inside_a_sentence_breaks_no_pattern():
    # Given repeated field notes, one of which names a measurement with digits in a word
    rng = random.Random(21)
    notes = [
        rng.choice(["Nest never observed with full clutch.", "Adult not sampled.", ""]) for _ in range(300)
    ]
    notes[7] = "No delta15N data received from lab."
    assert findings_of(make_table({"Comments": notes}), "format_violation") == []


def hourly_rows(days: int = 20, seed: int = 4) -> dict[str, list[str]]:
    """An hourly series with some hours missing: a row counter, the hour of day and a timestamp in hours."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"instant": [], "hour": [], "stamp": [], "riders": []}
    for day in range(days):
        for hour in range(24):
            if rng.random() < 0.05:
                continue  # an hour with no record: a gap, not an error
            rows["instant"].append(str(len(rows["instant"]) + 1))
            rows["hour"].append(str(hour))
            rows["stamp"].append(f"{350000 + 24 * day + hour + 1 / 60:.4f}")
            rows["riders"].append(str(rng.randint(5, 400)))
    return rows


def test_values_pasted_into_a_sequence_are_flagged_and_its_gaps_and_restarts_are_not() -> None:
    # Given an hourly series (gaps where hours are missing, the hour of day back to 0 each midnight) into
    # which ordinary-looking numbers were pasted: two in the counter (one beside another), one in the hours
    rows = hourly_rows()
    rows["instant"][40] = "3249.28"
    rows["instant"][41] = "118"
    rows["instant"][200] = "17"
    rows["hour"][312] = "7"
    clean = hourly_rows()
    assert clean["hour"][310:315] == ["14", "15", "16", "17", "18"]
    # When detecting
    found = {cell for cell in flagged(make_table(rows)) if cell[1] in {"instant", "hour", "stamp"}}
    # Then exactly the pasted cells break their sequences
    assert found == {(40, "instant"), (41, "instant"), (200, "instant"), (312, "hour")}
    # and the clean series, gaps, restarts and all, has none
    assert not {c for c in flagged(make_table(clean)) if c[1] in {"instant", "hour", "stamp"}}


def test_a_row_the_sequence_does_not_run_through_is_not_a_break() -> None:
    # Given weekly dates written as YYYYMMDD (a step of 7 within a month, a jump at each new month) that
    # start a few days before a month ends, and an increasing but irregular column (sorted measurements)
    rows = {"date": [], "sorted": []}
    rng = random.Random(2)
    for month in range(1, 13):
        for day in (3, 10, 17, 24):
            rows["date"].append(f"1958{month:02d}{day:02d}")
    rows["date"].insert(0, "19571229")
    rows["sorted"] = [f"{v:.2f}" for v in sorted(rng.uniform(0, 100) for _ in rows["date"])]
    # When detecting, then neither is taken for a broken sequence
    assert not [f for f in detect(make_table(rows)).findings if f.detector == "sequence"]


def coded_rows(n: int = 600, seed: int = 5) -> dict[str, list[str]]:
    """Orders whose zip code (nearly every one distinct) starts with its state's two digits, and whose
    discount, when there is one, comes with a promotion code."""
    rng = random.Random(seed)
    states = {"02": "MA", "10": "NY", "60": "IL", "94": "CA", "98": "WA"}
    rows: dict[str, list[str]] = {"zip": [], "state": [], "discount": [], "promo": [], "amount": []}
    for i in range(n):
        prefix = rng.choice(list(states))
        rows["zip"].append(f"{prefix}{i:03d}")
        rows["state"].append(states[prefix])
        discounted = rng.random() < 0.4
        rows["discount"].append(f"{rng.uniform(1, 20):.2f}" if discounted else "0")
        rows["promo"].append("PROMO" if discounted else rng.choice(["STANDARD", "STANDARD", "LOYALTY"]))
        rows["amount"].append(f"{rng.uniform(10, 90):.2f}")
    return rows


def test_rules_on_part_of_a_value_and_under_a_condition_are_mined_and_their_breaks_found() -> None:
    from iterate.detect.context import dataset_null_marker, facts_for
    from iterate.detect.rules import detect_rule_violations

    # Given codes whose first digits determine another column, a number whose sign decides another, and a
    # few rows that break each rule
    rows = coded_rows()
    broken_state = [i for i in range(0, 600, 97) if rows["state"][i] != "WA"][:5]
    for i in broken_state:
        rows["state"][i] = "WA"
    broken_promo = [i for i in range(600) if rows["promo"][i] == "PROMO"][3:6]
    for i in broken_promo:
        rows["promo"][i] = "STANDARD"
    table = make_table(rows)
    facts = facts_for(table, dataset_null_marker(table))
    # When mining rules with support and confidence
    found = {f.key: f for f in detect_rule_violations(facts, table.n_rows, [])}
    # Then the zip prefix rule and the sign rule are found, with exactly the rows that break them
    by_prefix = found["rule:prefix2:zip:state"]
    assert sorted(by_prefix.rows.tolist()) == sorted(broken_state)
    assert {r["when"]: r["then"] for r in by_prefix.stats["rules"]} == {
        "02": "MA", "10": "NY", "60": "IL", "94": "CA", "98": "WA"
    }  # fmt: skip
    by_sign = found["rule:sign:discount:promo"]
    assert sorted(by_sign.rows.tolist()) == sorted(broken_promo)
    assert by_sign.stats["rules"][0]["when"] == ">0" and by_sign.stats["rules"][0]["then"] == "PROMO"
    # and a break weighs as much as the rule's exceptions are rare
    assert by_prefix.llr is not None and by_prefix.llr.min() > 4.0


def test_a_rule_with_common_exceptions_flags_nothing() -> None:
    # Given a prefix that mostly (94%), not always, goes with one value: a tendency, not a rule of the data
    rng = random.Random(8)
    rows = coded_rows(seed=9)
    for i in range(600):
        if rows["zip"][i].startswith("02") and rng.random() < 0.06:
            rows["state"][i] = "NH"
    # When detecting, then none of its exceptions is flagged
    assert not {c for c in flagged(make_table(rows)) if c[1] == "state"}


def test_descriptions_count_one_value_in_the_singular_and_explain_only_the_symbols_they_use() -> None:
    # Given a column of codes written as digits and one dash, with one value that breaks the pattern
    rows = {"code": [f"{i:03d}-{i * 7 % 1000:03d}" for i in range(200)]}
    rows["code"][50] = "05x-350"
    found = [f for f in detect(make_table(rows)).findings if f.detector == "shape"]
    # When described, then one value is "1 value ... does not", and the legend names digits, not letters
    assert len(found) == 1 and found[0].n_cells == 1
    text = found[0].description
    assert text.startswith("1 value in 'code' does not follow")
    assert "9 is a run of digits" in text and "run of letters" not in text


def test_a_counter_with_one_zero_led_slip_is_not_a_column_of_padded_codes():
    # Given ids 1..4000 in any order (1-4 digits by nature) where one id was mistyped with a leading zero
    rng = random.Random(21)
    ids = [str(i) for i in range(1, 4001)]
    rng.shuffle(ids)
    slip = next(r for r, v in enumerate(ids) if len(v) == 4)
    ids[slip] = "0" + ids[slip][1:]
    size = [rng.choice(["12", "16", "24"]) for _ in ids]
    table = make_table({"id": ids, "ounces": size})
    # Then no column of padded codes is read into it (no width rule)
    assert findings_of(table, "format_violation") == []
    # And the slip itself is evidence of a number written with a leading zero among numbers written without
    from iterate.detect.context import facts_for
    from iterate.detect.digits import detect_zero_led

    ids_facts = facts_for(table, "")[0]
    found = detect_zero_led(ids_facts, ids_facts.numeric)
    assert found is not None and [int(r) for r in found.rows] == [slip]


def test_padded_account_codes_that_lost_their_zeros_are_flagged():
    # Given six-digit account codes, about one in ten zero-led, where three were saved without their zeros
    rng = random.Random(22)
    codes = [f"{rng.randrange(0, 1_000_000):06d}" for _ in range(800)]
    lost = [r for r, c in enumerate(codes) if c.startswith("0")][:3]
    for r in lost:
        codes[r] = str(int(codes[r]))
    found = findings_of(make_table({"account": codes}), "format_violation")
    assert [sorted(int(r) for r in f.rows) for f in found if f.key == "width:account"] == [sorted(lost)]


def test_a_column_of_lists_of_numbers_is_a_column_of_codes_not_numbers_gone_wrong():
    # Given metro stations' lines: mostly one line number, some several ('1, 5, 8'), some 'bis' lines
    lines = [str(1 + i % 14) for i in range(240)]
    for r in range(0, 240, 9):
        lines[r] = f"{1 + r % 14}, {1 + (r + 3) % 14}"
    for r in (5, 50, 95, 140):
        lines[r] = "7bis"
    table = make_table({"lines": lines})
    # Then neither the lists nor the 'bis' lines are flagged as malformed numbers or broken patterns
    assert flagged(table, "mixed_types") == set() and flagged(table, "format_violation") == set()
