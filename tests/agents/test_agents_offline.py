"""The offline understanding and follow-up agents, and the follow-up conversation the CLI and API drive."""

from __future__ import annotations

import pytest
from llm_fixtures import issue, make_profile

from iterate.agents import FollowupError, followup
from iterate.agents.offline.followup import FIX_ACTIONS, OfflineFollowupAgent, main_question
from iterate.agents.offline.understanding import OfflineUnderstandingAgent, describe_column, words
from iterate.contracts import FunctionalDependency

pytestmark = pytest.mark.unit


def test_columns_are_described_from_what_their_values_show():
    profile = make_profile()
    result = OfflineUnderstandingAgent().understand(profile)
    by_name = {c.name: c for c in result.columns}
    assert by_name["zip"].description == (
        "Postal codes such as 10001, 94105, 60601; 36 distinct values, about 139 rows each; missing in <0.1% of rows."
    )
    assert by_name["customer_email"].description.startswith("E-mail addresses such as customer_email-value-0")
    assert by_name["amount"].description.startswith("Decimal numbers from 1 to 9,999 (median 99)")
    assert by_name["state"].sampleValues == ["NY", "CA", "ny", "Calif."]


def test_a_column_is_not_given_a_meaning_from_its_name_alone():
    # Given columns whose names suggest a meaning their values do not show: an id that repeats, a "region"
    profile = make_profile()
    repeated = profile.columns[3].model_copy(
        update={"name": "customer_id", "distinct": 180, "count": 1503, "missing": 0, "disguisedMissing": 0}
    )
    region = profile.columns[3].model_copy(
        update={"name": "Region", "distinct": 1, "count": 344, "missing": 0, "disguisedMissing": 0}
    )
    # Then neither is called the identifier of each record, nor the region of an address
    assert (
        describe_column(repeated, profile)
        == "Labels such as NY, CA, ny; 180 distinct values, about 8 rows each."
    )
    assert describe_column(region, profile) == "Always 'NY'."
    described = " ".join(c.description for c in OfflineUnderstandingAgent().understand(profile).columns)
    assert "Identifier of each" not in described and "of the address" not in described


def test_the_dataset_is_described_by_its_size_and_key_not_a_guessed_entity():
    result = OfflineUnderstandingAgent().understand(make_profile(name="dirty.csv"))
    assert result.summary.description.startswith("The table 'dirty.csv': 5,000 rows × 7 columns.")
    assert "dirty records" not in result.summary.description and "one dirty" not in result.suggested_context


def test_observations_are_computed_from_the_profile():
    profile = make_profile()
    obs = OfflineUnderstandingAgent().understand(profile).summary.observations
    with_gaps = sum(1 for c in profile.columns if c.missing + c.disguisedMissing)
    worst = max(profile.columns, key=lambda c: c.missing + c.disguisedMissing)
    share = (worst.missing + worst.disguisedMissing) / profile.rowCount
    assert obs[0] == (
        f"{with_gaps} of {profile.columnCount} columns have missing values; most in '{worst.name}' ({share:.1%})."
    )
    assert f"{profile.duplicates.exactRows} rows repeat an earlier row exactly." in obs
    assert "Each row is identified by 'order_id'." in obs


def test_determines_is_said_only_of_dependencies_a_key_can_explain():
    # Given a price that happens to go with one product, and a customer id that sets the e-mail
    profile = make_profile()
    cols = {c.name: c for c in profile.columns}
    price = cols["amount"].model_copy(update={"name": "unit_price", "distinct": 16})
    product = cols["state"].model_copy(update={"name": "product", "distinct": 8})
    customer = cols["state"].model_copy(update={"name": "customer_id", "distinct": 180})
    email = cols["customer_email"].model_copy(update={"name": "email", "distinct": 180})
    profile = profile.model_copy(
        update={
            "columns": [price, product, customer, email],
            "functionalDependencies": [
                FunctionalDependency(lhs=["unit_price"], rhs="product", confidence=1.0, violatingRows=0),
                FunctionalDependency(lhs=["customer_id"], rhs="email", confidence=0.995, violatingRows=8),
            ],
        }
    )
    obs = OfflineUnderstandingAgent().understand(profile).summary.observations
    # Then the key's dependency is a rule, the price's only a pattern of this data
    assert "'customer_id' determines 'email' (99.5% of rows agree)." in obs
    assert "Each 'unit_price' value goes with one 'product' in this data (100% of rows)." in obs
    assert not any("'unit_price' determines" in o or "determined by" in o for o in obs)


def test_how_values_repeat_is_said_in_words_that_fit_the_numbers():
    col = make_profile().columns[3]
    spread = [
        describe_column(
            col.model_copy(update={"count": n, "distinct": d, "missing": 0, "disguisedMissing": 0})
        )
        for n, d in ((200, 200), (200, 195), (200, 188), (200, 50))
    ]
    assert [s.split("; ", 1)[1] for s in spread] == [
        "a different value in every filled row.",
        "nearly a different value per row (195 distinct in 200).",
        "most values in a single row (188 distinct in 200).",
        "50 distinct values, about 4 rows each.",
    ]


def test_names_split_into_words():
    assert words("customerEmail_2 address") == ["customer", "email", "2", "address"]
    col = make_profile().columns[6].model_copy(update={"name": "zzq", "semanticType": "text"})
    assert describe_column(col).startswith("Free text such as notes-value-0")


@pytest.mark.parametrize(
    "kind",
    [
        "inconsistent_category",
        "encoding_damage",
        "stray_whitespace",
        "missing_values",
        "disguised_missing",
        "numeric_outlier",
        "unit_in_number",
        "format_violation",
        "mixed_types",
        "out_of_domain",
        "duplicate_rows",
        "near_duplicate_rows",
        "dependency_violation",
        "merged_columns",
        "constant_column",
        "all_unique_column",
        "a_brand_new_llm_hypothesis",
    ],
)
def test_every_issue_type_gets_2_to_4_options_each_mapped_to_a_known_action(kind):
    q = main_question(
        issue("i1", kind, "state", 12, 100, stats={"column": "state", "canonical": {"ny": "NY"}})
    )
    assert 2 <= len(q.options) <= 4
    assert q.onResponse is not None and set(q.onResponse) == {o.key for o in q.options}
    assert all(a.action in FIX_ACTIONS for a in q.onResponse.values())


def test_an_inconsistent_category_standardizes_with_the_detectors_canonical_map():
    i = issue(
        "i1",
        "inconsistent_category",
        "state",
        12,
        100,
        stats={"column": "state", "canonical": {"ny": "NY", "Calif.": "CA"}},
    )
    q = OfflineFollowupAgent().next_question(i, [])
    action = q.onResponse["standardize"]
    assert action.action == "standardize_values"
    assert action.parameters == {"column": "state", "mapping": {"ny": "NY", "Calif.": "CA"}}
    assert "row 0: 'bad-0'" in (q.examples or "")


def test_the_conversation_goes_one_question_at_a_time_to_a_fix_action():
    agent = OfflineFollowupAgent()
    i = issue("i2", "missing_values", "zip", 40, 1000, stats={"column": "zip", "markers": ["N/A", "-"]})
    # Given a new conversation, When it starts, Then the first question is asked and recorded as pending
    step = followup(agent, i, [])
    assert step.question is not None and "'N/A'" in step.question.prompt and len(step.history) == 1
    # And asking again without answering repeats the same question
    assert followup(agent, i, step.history).question == step.question
    # When the owner picks "fill", Then the next question is about the fill value
    step = followup(agent, i, step.history, "fill")
    assert step.question is not None and step.question.prompt.startswith("Which value")
    assert [t.answer for t in step.history] == ["fill", None]
    # When they answer it, Then the conversation ends with a concrete fix action
    step = followup(agent, i, step.history, "unknown")
    assert step.question is None
    assert step.action is not None and step.action.action == "fill_value"
    assert step.action.parameters == {"column": "zip", "value": "Unknown"}
    # And the ended conversation keeps returning that action
    assert followup(agent, i, step.history).action == step.action


def test_an_answer_that_is_not_an_option_is_refused():
    agent = OfflineFollowupAgent()
    i = issue("i3", "numeric_outlier", "amount", 3, 1000, stats={"column": "amount", "low": 0, "high": 500})
    step = followup(agent, i, [])
    with pytest.raises(FollowupError, match="one of: review, null, drop, keep"):
        followup(agent, i, step.history, "burn_it")
    with pytest.raises(FollowupError, match="one of: review, null, drop, keep"):
        followup(agent, i, [], "burn_it")  # from a cold start too


def test_an_answer_from_a_cold_start_and_a_changed_answer():
    agent = OfflineFollowupAgent()
    i = issue("i4", "numeric_outlier", "amount", 3, 1000, stats={"column": "amount", "low": 0, "high": 500})
    # Given no question asked yet, When the user answers the first question straight away
    step = followup(agent, i, [], "null")
    # Then it is answered and the action follows
    assert [t.answer for t in step.history] == ["null"]
    assert step.action is not None and step.action.action == "set_null"
    # When they change their mind after the conversation ended, Then the new answer replaces the old one
    step = followup(agent, i, step.history, "review")
    assert [t.answer for t in step.history] == ["review"] and step.action is not None
    assert step.action.action == "flag_for_review"


def test_a_changed_answer_on_a_two_level_conversation_restarts_from_the_first_question():
    agent = OfflineFollowupAgent()
    i = issue("i5", "missing_values", "zip", 3, 1000, stats={"column": "zip", "markers": ["N/A"]})
    step = followup(agent, i, [], "fill")
    step = followup(agent, i, step.history, "unknown")
    assert step.action is not None and step.action.action == "fill_value"
    # "most_frequent" is an option of the last question: it replaces "unknown"
    step = followup(agent, i, step.history, "most_frequent")
    assert [t.answer for t in step.history] == ["fill", "most_frequent"]
    # "drop" is only an option of the first question: the conversation starts again with it
    step = followup(agent, i, step.history, "drop")
    assert [t.answer for t in step.history] == ["drop"] and step.action is not None
    assert step.action.action == "drop_rows"


def test_a_misspelled_word_is_asked_about_as_a_word_and_fixed_with_the_columns_spelling():
    agent = OfflineFollowupAgent()
    stats = {
        "column": "name",
        "rule": "word_slip",
        "bad_values": ["Monroe Reigonal", "Ohio Reigonal"],
        "slips": {
            "Monroe Reigonal": ["Reigonal", "Regional", "swap"],
            "Ohio Reigonal": ["Reigonal", "Regional", "swap"],
        },
        "canonical": {"Monroe Reigonal": "Monroe Regional", "Ohio Reigonal": "Ohio Regional"},
    }
    i = issue("words-name", "inconsistent_category", "name", 2, 1000, stats=stats)
    # When the conversation starts, Then the question names the word and its usual spelling
    step = followup(agent, i, [])
    assert step.question is not None
    assert "misspelled word" in step.question.prompt and "'Reigonal' for 'Regional'" in step.question.prompt
    assert "spells the same value" not in step.question.prompt
    assert step.question.prompt.count("'Reigonal'") == 1  # one slip, named once
    # And accepting replaces each value by its respelled form
    step = followup(agent, i, step.history, "standardize")
    assert step.action is not None and step.action.action == "standardize_values"
    assert step.action.parameters == {"column": "name", "mapping": stats["canonical"]}
