"""Arithmetic between numeric columns (iterate.detect.arithmetic): found, judged, and recounted by the template."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iterate.agents.offline.investigation import template_code
from iterate.detect.arithmetic import detect_arithmetic, find_relations, formula
from iterate.detect.context import facts_for
from iterate.io import read_parquet_text, read_table, write_parquet_text
from iterate.issues import issues_from_findings
from iterate.sandbox import check_policy

pytestmark = pytest.mark.unit


def _sales(n: int = 400, seed: int = 5) -> tuple[list[str], list[list[str]]]:
    """Sales lines: quantity x unit price = cost (two decimals), tax 5% of it, total = cost + tax; and a
    count of visits = new + returning (integers)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        qty, price = int(rng.integers(1, 11)), round(float(rng.uniform(10, 100)), 2)
        cost = round(qty * price, 4)
        tax = round(cost * 0.05, 4)
        new, back = int(rng.integers(0, 500)), int(rng.integers(0, 900))
        rows.append(
            [
                f"L{i}",
                str(qty),
                f"{price:.2f}",
                f"{cost:.4f}",
                f"{tax:.4f}",
                f"{cost + tax:.4f}",
                str(new),
                str(back),
                str(new + back),
            ]
        )
    return ["line", "qty", "price", "cost", "tax", "total", "new", "returning", "visits"], rows


def _facts(tmp_path: Path, header: list[str], rows: list[list[str]]):
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    table = read_table(path)
    return table, facts_for(table, "")


def test_relations_are_found_with_their_constant_and_rounding(tmp_path: Path) -> None:
    header, rows = _sales()
    _, facts = _facts(tmp_path, header, rows)
    relations, _, _ = find_relations(facts, len(rows))
    by_index = {f.index: f for f in facts}
    said = {formula(r, by_index): r for r in relations}
    # Then the counts add up exactly, and the money holds within its rounding (the factor read off the rows)
    visits = [
        r
        for s, r in said.items()
        if {"'visits'", "'new'", "'returning'"}
        <= set(s.replace("=", " ").replace("+", " ").replace("-", " ").split())
    ]
    assert len(visits) == 1 and visits[0].exact and visits[0].holds == 1.0
    cost = [r for s, r in said.items() if "'qty'" in s and "'price'" in s and "'cost'" in s]
    assert len(cost) == 1 and cost[0].exact and cost[0].form in ("*", "/")  # the quantity is a count
    tax = [r for r in relations if {by_index[c].name for c in r.columns} == {"tax", "cost"}]
    assert (
        len(tax) == 1
        and tax[0].form == "k"
        and abs(tax[0].k - (0.05 if by_index[tax[0].target].name == "tax" else 20)) < 1e-6
    )


def test_a_row_breaking_the_arithmetic_points_at_the_column_no_other_relation_clears(tmp_path: Path) -> None:
    header, rows = _sales()
    rows[17][5] = f"{float(rows[17][5]) + 3.1:.4f}"  # a total off by 3.10: cost and tax still agree
    rows[40][8] = str(int(rows[40][8]) + 10)  # visits off by ten: only its one relation breaks
    table, facts = _facts(tmp_path, header, rows)
    found = {f.columns[0]: f for f in detect_arithmetic(facts, table.n_rows)}
    # The total is the one suspect of row 17 (cost and tax hold in their other relations)
    assert 17 in set(found["total"].rows.tolist())
    assert all(17 not in set(found[c].rows.tolist()) for c in ("cost", "tax", "qty", "price") if c in found)
    # Visits = new + returning is alone: its three columns share the evidence on row 40
    for c in ("visits", "new", "returning"):
        at = list(found[c].rows).index(40)
        assert found[c].features["suspects"][at] == pytest.approx(np.log(3))
    total_at = list(found["total"].rows).index(17)
    assert found["total"].llr is not None and found["total"].llr[total_at] > found["visits"].llr[0]
    # And nothing else is listed
    assert {r for f in found.values() for r in f.rows.tolist()} == {17, 40}


def test_shuffled_columns_hold_no_arithmetic(tmp_path: Path) -> None:
    header, rows = _sales()
    rng = np.random.default_rng(1)
    columns = list(zip(*rows, strict=True))
    shuffled = [list(c) if i == 0 else [c[k] for k in rng.permutation(len(c))] for i, c in enumerate(columns)]
    _, facts = _facts(tmp_path, header, [list(r) for r in zip(*shuffled, strict=True)])
    relations, _, _ = find_relations(facts, len(rows))
    assert relations == []


def run(code: str, df: Any) -> Any:
    scope: dict[str, Any] = {"df": df, "result": None}
    exec(code, scope)
    return json.loads(json.dumps(scope["result"]))


def test_the_template_recounts_the_listed_rows_and_refuses_rows_that_hold(tmp_path: Path) -> None:
    header, rows = _sales()
    rows[17][5] = f"{float(rows[17][5]) + 3.1:.4f}"
    rows[40][8] = str(int(rows[40][8]) + 10)
    rows[41][3] = (
        f"{float(rows[41][3]):,.4f}" if float(rows[41][3]) >= 1000 else rows[41][3]
    )  # 1,234.5600 reads
    table, facts = _facts(tmp_path, header, rows)
    issues = issues_from_findings(detect_arithmetic(facts, table.n_rows), table, None)
    assert issues
    df = read_parquet_text(write_parquet_text(table, tmp_path / "data.parquet"))
    for issue in issues:
        assert issue.evidence is not None
        listed = list(issue.evidence.stats["rows"])
        code = template_code(issue)
        assert check_policy(code) == []
        got = run(code, df.copy())
        assert got["rows_holding"] == got["rows_listed"] == len(listed)
        stats = dict(issue.evidence.stats, rows=[*listed, 1, 2, 3])
        padded = issue.model_copy(update={"evidence": issue.evidence.model_copy(update={"stats": stats})})
        assert run(template_code(padded), df.copy())["rows_holding"] == len(listed)


def test_a_column_whose_solved_value_falls_off_its_grid_is_cleared(tmp_path: Path) -> None:
    # Given a quantity mistyped (7 for 3): cost = qty x price, tax and total still agree with the cost
    header, rows = _sales()
    # (a row whose cost is no multiple of 7 cents, so the price solved from it cannot be written in cents, and
    # large enough that the solved price is still among the column's prices: only its cents clear it)
    row = next(
        i for i, r in enumerate(rows) if r[1] == "3" and round(float(r[3]) * 100) % 7 and float(r[3]) / 7 > 11
    )
    rows[row][1] = "7"
    table, facts = _facts(tmp_path, header, rows)
    found = {f.columns[0]: f for f in detect_arithmetic(facts, table.n_rows)}
    # Then the quantity is the one suspect: the price solved from the cost (cost / 7) is no price in cents
    assert row in set(found["qty"].rows.tolist())
    at = list(found["qty"].rows).index(row)
    assert found["qty"].features["suspects"][at] == 0.0
    assert "price" not in found or row not in set(found["price"].rows.tolist())
