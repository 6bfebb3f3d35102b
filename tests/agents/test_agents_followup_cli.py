"""`iterate followup RUN_DIR ISSUE_ID [--answer KEY]` from the command line."""

from __future__ import annotations

import json

import pytest
from llm_fixtures import issue

from iterate.cli.main import main

pytestmark = pytest.mark.unit


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    i = issue(
        "cat-state",
        "inconsistent_category",
        "state",
        12,
        100,
        stats={"column": "state", "canonical": {"ny": "NY"}},
    )
    body = {
        "mode": "offline",
        "issues": [i.model_dump(mode="json")],
        "summary": "s",
        "completedAt": "2026-11-22T00:00:00Z",
    }
    (tmp_path / "analysis.json").write_text(json.dumps(body))
    # the cells the run flagged for it: what `iterate fix` (and so the follow-up) applies a fix to
    (tmp_path / "flags.csv").write_text("row,column,issue_id,score\n3,state,cat-state,1.0\n")
    return tmp_path


def test_the_question_then_the_answer_then_the_fix_action(run_dir, capsys):
    # When the owner asks about an issue
    assert main(["followup", str(run_dir), "cat-state"]) == 0
    out = capsys.readouterr().out
    # Then the question and its options are printed
    assert "spells the same value in different ways" in out and "[standardize]" in out and "[keep]" in out
    # When they answer
    assert main(["followup", str(run_dir), "cat-state", "--answer", "standardize"]) == 0
    out = capsys.readouterr().out
    # Then the resulting fix action is printed and the turn is recorded
    assert out.startswith("Fix action: standardize_values")
    assert '"mapping": {"ny": "NY"}' in out
    saved = json.loads((run_dir / "followups" / "cat-state.json").read_text())
    assert [t["answer"] for t in saved["turns"]] == ["standardize"]
    assert saved["action"]["action"] == "standardize_values"


def test_json_output_for_programs(run_dir, capsys):
    assert main(["followup", str(run_dir), "cat-state", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)
    assert step["question"]["options"][0]["key"] == "standardize" and step["action"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope"], "no issue 'nope'"),
        (["cat-state", "--answer", "burn"], "answer must be one of: standardize, review, keep"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(run_dir, capsys, argv, message):
    assert main(["followup", str(run_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_missing_run_directory_says_what_to_do(tmp_path, capsys):
    assert main(["followup", str(tmp_path / "missing"), "x"]) == 2
    assert "run `iterate analyze FILE" in capsys.readouterr().err


def test_with_a_key_claude_asks_and_its_action_is_applied(run_dir, capsys, fake):
    import argparse

    from fake_anthropic import tool_reply

    from iterate.cli.followup_cmd import run
    from iterate.settings import Settings

    # Given Claude proposing a question about the issue's own column
    fake.add(
        tool_reply(
            "ask_question",
            {
                "prompt": "Map 'ny' to 'NY' everywhere in state?",
                "options": [{"key": "map", "label": "Yes"}, {"key": "keep", "label": "No"}],
                "examples": "row 0: 'bad-0'",
                "onResponse": {
                    "map": {
                        "action": "standardize_values",
                        "parameters": {"column": "state", "mapping": {"ny": "NY"}},
                    },
                    "keep": {"action": "keep", "parameters": {}},
                },
            },
        )
    )
    settings = Settings(anthropic_api_key="test-key", anthropic_base_url=fake.url, model="claude-sonnet-5-5")

    def args(answer=None):
        return argparse.Namespace(run_dir=run_dir, issue_id="cat-state", answer=answer, json=False)

    # When the owner asks, Then Claude's question is shown
    assert run(args(), settings=settings) == 0
    assert "Map 'ny' to 'NY'" in capsys.readouterr().out
    # When they answer, Then the action comes from the recorded question, without another call
    assert run(args("map"), settings=settings) == 0
    assert capsys.readouterr().out.startswith("Fix action: standardize_values")
    assert len(fake.requests) == 1
