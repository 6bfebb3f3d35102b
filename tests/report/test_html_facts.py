"""report.html statistics and outputs: fields in words, shares as percentages, no raw floats or field names."""

from __future__ import annotations

import re

import pytest

from iterate.contracts import ValueCount
from iterate.report import render_html
from iterate.report.facts import label, singular_counts, value_text
from iterate.report.html import shape_legend

pytestmark = pytest.mark.unit

RAW_SHARE = 0.978709248170326


def one_issue(build, *, stats=None, output=None, description=None):
    analysis, profile, understanding = build(issues=1, rows=1503)
    issue = analysis.issues[0]
    ev = issue.evidence.model_copy(update={"stats": stats or issue.evidence.stats})
    inv = issue.investigation.model_copy(
        update={"output": output, "success": True, "error": None, "stopped": None}
    )
    update = {"evidence": ev, "investigation": inv}
    if description:
        update["description"] = description
    analysis.issues[0] = issue.model_copy(update=update)
    return render_html(analysis, profile, understanding)


def test_statistics_and_outputs_name_their_fields_in_words_and_write_shares_as_percentages(build):
    # Given a dependency issue whose statistics and proof output use the engine's field names and raw floats
    stats = {"rhs": "product", "determinants": ["unit_price"], "numeric_share": RAW_SHARE, "title": "t"}
    output = {"affected_rows": 1471, "share": RAW_SHARE, "lhs": ["unit_price"], "conflicting_groups": 3}
    page = one_issue(build, stats=stats, output=output)
    # Then the tables say what each field is, and every share is a percentage
    for text in (
        "Determined column",
        "Determining column(s)",
        "Groups with conflicting values",
        "Share of rows",
    ):
        assert f"<th>{text}</th>" in page, text
    assert "<td>97.9%</td>" in page
    assert not re.search(r"<th>(rhs|lhs|conflicting_groups|share|title)</th>", page)
    # and no float is printed raw: the full JSON output is kept to 4 significant digits
    assert str(RAW_SHARE) not in page and "0.9787" in page


def test_nested_detector_evidence_is_flattened_into_words():
    evidence = {
        "scoreRange": [0.9942, 0.9942],
        "statisticRange": [2.9362, 3.1439],
        "alsoSeenBy": {"frequency": 40},
    }
    assert value_text("scoreRange", evidence["scoreRange"]) == "0.9942"
    assert value_text("statisticRange", evidence["statisticRange"]) == "2.936 to 3.144"
    assert value_text("alsoSeenBy", evidence["alsoSeenBy"]) == "frequency: 40"
    assert label("someNewField") == "Some new field" and label("new_field_name") == "New field name"
    assert (
        value_text("flagged", False) == "no"
        and value_text("rule", "consensus") == "agrees with its group's usual value"
    )


def test_a_lone_one_takes_the_singular():
    assert singular_counts("1 values in 'x' (1 rows), 21 values, 1,001 rows, 11 cells") == (
        "1 value in 'x' (1 row), 21 values, 1,001 rows, 11 cells"
    )


def test_descriptions_say_1_value_not_1_values(build):
    page = one_issue(build, description="1 values in 'customer_name' contain damaged characters (1 rows).")
    assert "1 value in &#x27;customer_name&#x27; contain damaged characters (1 row)." in page
    assert "1 values" not in page and "1 rows" not in page


def test_a_shape_legend_names_only_the_symbols_its_shapes_use(build):
    assert shape_legend(["(9) 9-9"]) == "9 = a run of digits"
    assert shape_legend(["a-9", "a"]) == "9 = a run of digits, a = a run of letters"
    analysis, profile, understanding = build(columns=2)
    profile.columns[1].patterns = [
        ValueCount(value="(9) 9-9", count=1498),
        ValueCount(value="9-9-9", count=5),
    ]
    page = render_html(analysis, profile, understanding)
    shapes = re.search(r"Shapes: (.*?)</div>", page.split('id="col-')[2]).group(1)
    assert "(9 = a run of digits)" in shapes and "letters" not in shapes


def test_the_dependency_table_says_determines_only_where_a_key_sets_the_value(build):
    from iterate.contracts import FunctionalDependency

    analysis, profile, understanding = build(columns=4)
    price, product, customer, email = profile.columns
    profile.columns = [
        price.model_copy(update={"name": "unit_price", "semanticType": "decimal", "distinct": 16}),
        product.model_copy(update={"name": "product", "semanticType": "categorical", "distinct": 8}),
        customer.model_copy(update={"name": "customer_id", "semanticType": "categorical", "distinct": 180}),
        email.model_copy(update={"name": "email", "semanticType": "email", "distinct": 180}),
    ]
    profile.functionalDependencies = [
        FunctionalDependency(lhs=["unit_price"], rhs="product", confidence=1.0, violatingRows=0),
        FunctionalDependency(lhs=["customer_id"], rhs="email", confidence=0.994677, violatingRows=8),
    ]
    page = render_html(analysis, profile, understanding)
    rows = re.findall(
        r"<tr><td>([^<]*)</td><td class='num'>([^<]*)</td><td class='num'>([^<]*)</td></tr>", page
    )
    assert ("each &#x27;unit_price&#x27; value goes with one &#x27;product&#x27;", "100%", "0") in rows
    assert ("&#x27;customer_id&#x27; determines &#x27;email&#x27;", "99.5%", "8") in rows
