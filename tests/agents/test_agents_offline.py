"""The offline understanding and follow-up agents, and the follow-up conversation the CLI and API drive."""

from __future__ import annotations

import pytest
from llm_fixtures import issue, make_profile

from iterate.agents import FollowupError, followup
from iterate.agents.offline.followup import FIX_ACTIONS, OfflineFollowupAgent, main_question
from iterate.agents.offline.understanding import OfflineUnderstandingAgent, describe_column, entity_of, words

pytestmark = pytest.mark.unit


def test_columns_are_described_from_their_names_types_and_patterns():
    profile = make_profile()
    result = OfflineUnderstandingAgent().understand(profile)
    by_name = {c.name: c for c in result.columns}
    assert by_name["zip"].description == "Postal code of the location; 5-digit US ZIP"
    assert by_name["customer_email"].description.startswith("Contact email address")
    assert by_name["order_id"].description.startswith("Identifier of each order")
    assert "from 1 to 9999" in by_name["amount"].description
    assert by_name["state"].sampleValues == ["NY", "CA", "ny", "Calif."]


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


def test_names_split_into_words_and_files_into_entities():
    assert words("customerEmail_2 address") == ["customer", "email", "2", "address"]
    assert entity_of(make_profile(name="data/companies.csv")) == "company"
    assert entity_of(make_profile(name="sales.xlsx")) == "sale"
    col = make_profile().columns[6].model_copy(update={"name": "zzq", "semanticType": "text"})
    assert describe_column(col, "order") == "zzq: free text"


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
    with pytest.raises(FollowupError, match="no question waiting"):
        followup(agent, i, [], "review")
