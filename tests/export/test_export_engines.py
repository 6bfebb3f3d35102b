"""The exported rules run by the real engines: on the dirty orders file exactly the checks that encode confirmed
issues fail; on the hand-corrected file every check passes (GX Core and Soda Core + DuckDB, from PyPI)."""

from __future__ import annotations

from pathlib import Path

import engines
import matrix
import orders
import pytest
from dqdl_grammar import Composite, Rule, parse

from iterate.export import derive, load_run, render

FORMATS_RUN = ("gx", "soda")


def test_every_confirmed_issue_of_the_orders_file_is_exported(orders_run: tuple[Path, ...]) -> None:
    # Given the dirty orders file analysed by the real engine
    run_dir = orders_run[0]
    rules = matrix.rules_of(run_dir)
    _, analysis = load_run(run_dir)
    confirmed = {i.id for i in analysis.issues if i.status == "confirmed"}
    # Then every planted problem was confirmed (the lower-case 'tea' as a case variant, 'Cofee' as a typo, the
    # pasted customer id by the columns its id should determine), and each one is encoded by at least one
    # check, in every format
    assert confirmed == {
        "dates-order_date",
        "impossible-dates-order_date",
        "missing-email",
        "shape-phone",
        "typos-category",
        "case-category",
        "whitespace-status",
        "outliers-quantity",
        "parse-quantity",
        "parse-unit_price",
        "fd-key-customer_id",
        "duplicates-exact",
    }
    assert rules.skipped == {}
    impossible = {i.id for i in analysis.issues if i.type == "out_of_domain"}
    assert len(impossible) == 1
    for fmt in ("gx", "soda"):
        rendered = render(rules, fmt)
        assert {i for c in rendered.checks for i in c.issues} == confirmed, fmt
        assert rendered.skipped == {}, fmt
    # DQDL matches a date's shape but has no rule that parses it: impossible days are said not to be exported
    rendered = render(rules, "dqdl")
    assert {i for c in rendered.checks for i in c.issues} == confirmed - impossible
    assert set(rendered.skipped) == impossible


@pytest.mark.engines
@pytest.mark.parametrize("engine", [*FORMATS_RUN, "soda-typed"])
def test_the_real_engine_fails_exactly_the_exported_issues(engine: str, orders_run: tuple[Path, ...]) -> None:
    run_dir, dirty, clean, work = orders_run
    # When the exported rules run in the real engine on the dirty file and on its corrected twin (soda-typed:
    # on a warehouse table DuckDB typed itself, numbers as numbers and dates as dates)
    rows, errors = matrix.matrix(engine, run_dir, dirty, clean, work / engine, engine=engine)
    print(f"\n{engines.versions()}\n{matrix.markdown(engine, rows)}")
    # Then the engine ran every check without an error
    assert errors == []
    assert all(r.dirty in ("pass", "fail", "warn") and r.clean in ("pass", "fail", "warn") for r in rows), (
        rows
    )
    # And only failure-level checks can fail; warnings are the profile's observations
    assert {r.check for r in rows if "fail" in (r.dirty, r.clean)} <= {
        r.check for r in rows if r.level == "fail"
    }
    # And on the dirty file exactly the checks that encode confirmed issues fail
    assert {r.check for r in rows if r.dirty == "fail"} == {r.check for r in rows if r.issues}
    # And on the corrected file every check passes, warnings included
    assert [r.check for r in rows if r.clean != "pass"] == []
    assert sum(1 for r in rows if r.issues) >= 15


@pytest.mark.engines
@pytest.mark.parametrize("engine", [*FORMATS_RUN, "soda-typed"])
def test_a_gate_built_today_holds_next_month(engine: str, orders_run: tuple[Path, ...]) -> None:
    # Given the checks exported from today's dirty file, and next month's file: today's rows corrected, plus
    # new orders with a price larger than any today, a quantity above today's largest, and a new product
    run_dir, _, _, work = orders_run
    rows = orders.clean_rows()
    new = []
    for n, row in enumerate(rows[:30]):
        extra = dict(row, order_id=f"ORD-{20001 + n}", order_date=f"2026-01-{n % 28 + 1:02d}")
        if n % 3 == 0:
            extra |= {"product": "Cold Brew Kit", "category": "Equipment", "unit_price": "89.00"}
        if n % 5 == 0:
            extra["quantity"] = "7"
        new.append(extra)
    next_month = orders.write(work / f"orders_next_{engine}.csv", rows + new)
    # When the real engine runs them
    checks, (outcome,), errors = matrix.run_checks(run_dir, engine, [next_month], work / f"next-{engine}")
    assert errors == []
    # Then no failure-level check fails; what is new shows as warnings (the wider prices, the new product)
    failed = [c.id for c in checks if outcome[c.id] == "fail"]
    assert failed == []
    assert {c.id for c in checks if outcome[c.id] == "warn"} >= {"in_set:product"}
    assert all(outcome[c.id] in ("pass", "warn") for c in checks)


def test_profile_observations_are_warnings_and_proven_issues_failures(orders_run: tuple[Path, ...]) -> None:
    rules = matrix.rules_of(orders_run[0])
    by_id = {c.id: c for c in rules.checks}
    # Every check that encodes an issue is a failure; a check without one is a warning unless it states the
    # schema or a column's type
    for c in rules.checks:
        if c.issues:
            assert c.level == "fail", c
        elif c.kind not in ("columns", "number", "date"):
            assert c.level == "warn", c
    # The measured range of a clean column is widened to round numbers, without float noise
    price = next(c for c in rules.checks if c.kind == "between" and c.column == "unit_price")
    assert price.level == "warn" and price.params["low"] == 0 and price.params["high"] >= 39.9 * 1.2
    assert repr(price.params["high"]) == repr(float(f"{price.params['high']:.3g}"))
    # The outliers fail from the nearest proven one outwards; the usual range is a warning
    proven = next(c for c in rules.checks if c.kind == "between" and c.column == "quantity" and c.issues)
    assert proven.params["strict"] and proven.params["high"] == 500 and proven.params["low"] is None
    # The category vocabulary lists no value proven wrong; those values are a failure of their own
    assert set(by_id["in_set:category"].params["values"]) == {"Accessories", "Coffee", "Equipment", "Tea"}
    wrong = next(c for c in rules.checks if c.kind == "not_in_set" and c.column == "category")
    assert wrong.level == "fail" and set(wrong.params["values"]) == {"Cofee", "tea"}


def test_the_dqdl_ruleset_parses_against_the_documented_grammar(orders_run: tuple[Path, ...]) -> None:
    rules = matrix.rules_of(orders_run[0])
    rendered = render(rules, "dqdl")
    parsed = parse(rendered.text)
    # One DQDL rule per exported check, in order, naming the check's columns
    assert len(parsed) == len(rendered.checks)
    kinds = {
        "columns": "ColumnCount",
        "not_null": "ColumnValues",
        "number": "ColumnValues",
        "in_set": "ColumnValues",
        "regex": "ColumnValues",
        "date": "ColumnValues",
        "between": "ColumnValues",
    }
    for check, rule in zip(rendered.checks, parsed, strict=True):
        first = rule.rules[0] if isinstance(rule, Composite) else rule
        assert isinstance(first, Rule)
        if check.kind in kinds:
            assert first.type == kinds[check.kind]
            if check.kind != "columns":
                assert first.params == [check.column]
        elif check.kind in ("unique", "dependency"):
            assert first.type in ("IsUnique", "CustomSql")
    in_set = next(
        r
        for c, r in zip(rendered.checks, parsed, strict=True)
        if c.kind == "in_set" and c.column == "category"
    )
    assert isinstance(in_set, Rule) and in_set.condition is not None
    assert in_set.condition[0] == "in" and sorted(in_set.condition[1]) == [
        "Accessories",
        "Coffee",
        "Equipment",
        "Tea",
    ]


def test_a_missing_marker_the_tools_do_not_read_as_null_is_refused_by_value(
    orders_run: tuple[Path, ...],
) -> None:
    # Given the email issue proven with a marker other than the dataset's null ("N/A")
    profile, analysis = load_run(orders_run[0])
    issue = next(i for i in analysis.issues if i.id == "missing-email")
    assert issue.evidence is not None
    issue.evidence.stats["markers"] = ["N/A", "-"]
    # Then the export refuses "-" by value besides the completeness check, both naming the issue
    checks = [c for c in derive(profile, analysis).checks if issue.id in c.issues]
    assert {(c.kind, tuple(c.params.get("values", ()))) for c in checks} == {
        ("not_null", ()),
        ("not_in_set", ("-",)),
    }
