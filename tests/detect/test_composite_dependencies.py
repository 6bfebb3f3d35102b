"""Dependencies on two columns together (a team's city is its stadium's city, neither alone determines it), and
a value pasted as the odd faction into many entities: found, judged, recounted, reported and exported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iterate.agents.offline.investigation import template_code
from iterate.cli.main import main as iterate_main
from iterate.contracts import Issue
from iterate.detect import detect
from iterate.detect.calibration import DEFAULT
from iterate.detect.context import facts_for
from iterate.detect.dependencies import detect_dependency_violations, pasted_value
from iterate.detect.discovery import Dependency, _refines, compact_codes, discover
from iterate.export import load_run
from iterate.export.rules import derive
from iterate.investigate.loop import needed_columns
from iterate.io import read_parquet_text, write_parquet_text
from iterate.issues import issues_from_findings
from iterate.report.facts import value_text
from iterate.sandbox import check_policy
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit

TEAMS = 16


def table_of(cols: dict[str, list[str]]) -> Table:
    return Table.from_arrow(pa.table(cols), name="t", source=SourceInfo(path="t.csv", format="csv"))


def league(seed: int = 1, rows_per_team: int = 200) -> dict[str, list[str]]:
    """Team i plays most games at its own stadium S{i} in city C{i}, the rest at S{i+1} in city D{i}: neither
    the team (two cities) nor the stadium (two teams' cities) determines the city, the two together do."""
    rng = np.random.default_rng(seed)
    team, stadium, city, season = [], [], [], []
    for i in range(TEAMS):
        for _ in range(rows_per_team):
            home = rng.random() < 0.7
            team.append(f"T{i}")
            stadium.append(f"S{i}" if home else f"S{(i + 1) % TEAMS}")
            city.append(f"C{i}" if home else f"D{i}")
            season.append(str(2000 + int(rng.integers(0, 12))))
    return {"team": team, "stadium": stadium, "city": city, "season": season}


def names(table: Table, d: Dependency) -> tuple[list[str], str]:
    return [table.column_names[c] for c in d.determinants], table.column_names[d.rhs]


def listed(table: Table, column: str) -> set[int]:
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    return {int(r) for f in findings if f.columns == [column] for r in f.rows}


def flagged(table: Table, column: str) -> set[int]:
    return {
        int(r)
        for f in detect(table).findings
        if f.flag
        for r, c in zip(f.rows, f.cols, strict=True)
        if table.column_names[int(c)] == column
    }


def pasted_league() -> tuple[dict[str, list[str]], set[int]]:
    """The league with city C0 (team T0's home city) pasted into 10-30% of the rows of eight other groups."""
    cols = league()
    rng = np.random.default_rng(5)
    planted: set[int] = set()
    for i, share in zip(range(2, 10), [0.1, 0.15, 0.2, 0.25, 0.3, 0.12, 0.18, 0.22], strict=True):
        rows = [
            r
            for r in range(len(cols["team"]))
            if cols["team"][r] == f"T{i}" and cols["stadium"][r] == f"S{i}"
        ]
        hit = rng.choice(rows, int(share * len(rows)), replace=False)
        for r in hit.tolist():
            cols["city"][r] = "C0"
            planted.add(r)
    return cols, planted


def misfiled_league() -> tuple[dict[str, list[str]], set[int]]:
    """The league with a few rows of a team filed under the city of the team five places on (the same wrong
    city within a group): each column alone sees only a second value of a group that has two."""
    cols = league()
    rng = np.random.default_rng(3)
    planted = {int(r) for r in rng.choice(len(cols["city"]), 40, replace=False)}
    for r in planted:
        cols["city"][r] = f"C{(int(cols['team'][r][1:]) + 5) % TEAMS}"
    return cols, planted


def dependency_issue(table: Table, column: str) -> Issue:
    """The issue made of the dependency finding on `column`."""
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    chosen = [f for f in findings if f.columns == [column] and f.stats.get("rule") == "consensus"]
    return issues_from_findings(chosen, table, None)[0]


def test_two_columns_that_determine_a_third_together_are_found() -> None:
    # Given the league: team -> city and stadium -> city each hold for most rows only
    table = table_of(league())
    # When dependencies are discovered
    deps = discover(facts_for(table, ""), table.n_rows)
    # Then (team, stadium) -> city is one of them
    assert (["team", "stadium"], "city") in [names(table, d) for d in deps if d.more]


def test_a_column_that_determines_y_alone_leaves_the_pair_nothing_to_add() -> None:
    # Given a city determined by the stadium alone (and a team that also tells part of it)
    cols = league()
    cols["city"] = [f"C{s[1:]}" for s in cols["stadium"]]
    table = table_of(cols)
    # Then no pair is kept for the city
    deps = discover(facts_for(table, ""), table.n_rows)
    assert not [d for d in deps if d.more and table.column_names[d.rhs] == "city"]


def test_a_pair_that_is_nearly_a_row_key_proves_nothing() -> None:
    # Given two columns whose combinations are nearly unique, and a y that follows them in the few repeats
    rng = np.random.default_rng(2)
    a = rng.integers(0, 60, 2000)
    b = rng.integers(0, 60, 2000)
    x, n_x = compact_codes(a * 60 + b)
    y = compact_codes(x % 7)[0]
    # Then the pair does not refine anything: most rows sit in groups too small to judge
    assert not _refines(x, y, n_x, 7, [compact_codes(a)[0], compact_codes(b)[0]])


def test_a_value_pasted_into_many_groups_as_their_odd_faction_is_flagged() -> None:
    # Given C0 pasted into 10-30% of eight (team, stadium) groups: factions large enough to pass for a second
    # value of each group, were it not the same value every time
    cols, planted = pasted_league()
    table = table_of(cols)
    # Then the rows are listed and flagged, and nothing else in the city
    assert listed(table, "city") == planted
    assert flagged(table, "city") == planted


def test_second_values_spread_over_many_values_are_legitimate() -> None:
    # Given players who each play several seasons: a player's second and third seasons are their own
    rng = np.random.default_rng(4)
    player, season = [], []
    for p in range(150):
        years = rng.choice(np.arange(1990, 2020), 3, replace=False)
        for _ in range(20):
            player.append(f"P{p}")
            season.append(str(int(rng.choice(years, p=[0.7, 0.2, 0.1]))))
    table = table_of({"player": player, "season": season})
    facts = facts_for(table, "")
    # Then the seasons are not taken for a paste
    assert pasted_value(facts[0], facts[1], DEFAULT) is None


def test_a_two_valued_column_always_splits_into_its_other_value() -> None:
    # Given occupations whose incomes are mostly low, and a few always high: every split group's faction is
    # the other income, by necessity
    rng = np.random.default_rng(6)
    job, income = [], []
    for j in range(30):
        high = 1.0 if j < 6 else 0.15
        for _ in range(100):
            job.append(f"J{j}")
            income.append(">50K" if rng.random() < high else "<=50K")
    table = table_of({"job": job, "income": income})
    facts = facts_for(table, "")
    # Then the other income is not a paste
    assert pasted_value(facts[0], facts[1], DEFAULT) is None


def test_records_of_another_kind_that_other_determinants_tell_apart_are_not_a_paste() -> None:
    # Given flipper lengths shared by two of three species, the rarer one a minority in many lengths, and the
    # island that tells the species apart
    rng = np.random.default_rng(8)
    flipper, species, island = [], [], []
    for length in range(180, 200):
        for _ in range(30):
            rare = rng.random() < 0.25
            flipper.append(str(length))
            species.append("Chinstrap" if rare else "Adelie")
            island.append("Dream" if rare else str(rng.choice(["Torgersen", "Biscoe"])))
    for length in range(200, 206):  # a few lengths where the rare species is the usual one
        for _ in range(30):
            flipper.append(str(length))
            species.append("Chinstrap")
            island.append("Dream")
    for length in range(210, 230):  # and a third species, on its own island
        for _ in range(30):
            flipper.append(str(length))
            species.append("Gentoo")
            island.append("Biscoe")
    table = table_of({"flipper": flipper, "species": species, "island": island})
    facts = facts_for(table, "")
    # When the species' other determinant (the island) is asked
    alone = pasted_value(facts[0], facts[1], DEFAULT)
    told_apart = pasted_value(facts[0], facts[1], DEFAULT, None, [facts[2]])
    # Then the pattern alone looks like a paste, and the island says it is not
    assert alone is not None
    assert told_apart is None


def run(code: str, df: Any) -> Any:
    scope: dict[str, Any] = {"df": df, "result": None}
    exec(code, scope)
    return json.loads(json.dumps(scope["result"]))


@pytest.mark.parametrize("made", [misfiled_league, pasted_league])
def test_the_template_recounts_the_rows_of_a_pair_dependency(made: Any, tmp_path: Path) -> None:
    # Given the issue made of the city finding of a league, whose determinants hold the pair
    cols, planted = made()
    table = table_of(cols)
    issue = dependency_issue(table, "city")
    assert issue.evidence is not None
    assert ["team", "stadium"] in issue.evidence.stats["determinants"]
    rows = list(issue.evidence.stats["rows"])
    assert set(rows) == planted
    # (the sandbox is given every column a pair names, even with the pair alone as determinant)
    alone = dict(issue.evidence.stats, determinants=[["team", "stadium"]])
    pair_only = issue.model_copy(update={"evidence": issue.evidence.model_copy(update={"stats": alone})})
    assert {"team", "stadium", "city"} <= set(needed_columns(pair_only) or ())
    df = read_parquet_text(write_parquet_text(table, tmp_path / "data.parquet"))
    # When its template runs as written
    code = template_code(issue)
    assert check_policy(code) == []
    got = run(code, df.copy())
    # Then it confirms every row the detector listed
    assert got["rows_holding"] == got["rows_listed"] == len(rows) == issue.affectedRows
    # And with the pair alone as determinant, rows of groups that keep to one city are not confirmed
    broken = {(cols["team"][r], cols["stadium"][r]) for r in planted}
    quiet = [r for r in range(len(cols["team"])) if (cols["team"][r], cols["stadium"][r]) not in broken][:5]
    padded_stats = dict(alone, rows=[*rows, *quiet])
    padded = issue.model_copy(update={"evidence": issue.evidence.model_copy(update={"stats": padded_stats})})
    assert run(template_code(padded), df.copy())["rows_holding"] == len(rows)


def test_the_report_and_the_description_name_the_columns_read_together() -> None:
    # Given the misfiled league's city finding
    cols, _ = misfiled_league()
    table = table_of(cols)
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    finding = next(f for f in findings if f.columns == ["city"])
    # Then its description says the two columns determine the city together, and the facts table shows them
    # joined
    assert "team and stadium together" in finding.describe(finding)
    assert value_text("determinants", finding.stats["determinants"]).startswith("team + stadium")


def test_the_export_claims_no_single_column_of_a_pair_determines_y(tmp_path: Path) -> None:
    # Given the pasted league analysed end to end
    cols, _ = pasted_league()
    csv = tmp_path / "league.csv"
    lines = [",".join(cols)] + [",".join(row) for row in zip(*cols.values(), strict=True)]
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    assert iterate_main(["analyze", str(csv), "--out", str(run_dir), "--quiet"]) == 0
    profile, analysis = load_run(run_dir)
    assert any(
        i.evidence is not None and ["team", "stadium"] in (i.evidence.stats.get("determinants") or [])
        for i in analysis.issues
    )
    # When its rules are derived
    rules = derive(profile, analysis, run_dir)
    # Then neither the team nor the stadium is said to determine the city
    claimed = {tuple(c.columns) for c in rules.checks if c.kind == "dependency"}
    assert ("team", "city") not in claimed and ("stadium", "city") not in claimed


def test_the_description_says_which_value_was_pasted_across_entities() -> None:
    # Given the pasted league's city finding
    cols, _ = pasted_league()
    table = table_of(cols)
    findings, _, _ = detect_dependency_violations(facts_for(table, ""), table.n_rows)
    finding = next(f for f in findings if f.columns == ["city"])
    # Then it says the value is the odd one of eight groups, and shows it among the facts
    assert "'C0' is the odd value in 8 groups" in finding.describe(finding)
    assert finding.stats["pasted"] == {"C0": 8}
    assert value_text("pasted", finding.stats["pasted"]) == "C0: 8"
