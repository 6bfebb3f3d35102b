"""GenerateCode and RecordAttempt over moto: who wrote an attempt's code follows it into the investigation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from awsenv import BUCKET, FakeContext, load_handler, object_created_event

from iterate.contracts import CodeInvestigation, DatasetProfile, Issue

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]

CSV = b"id,state,amount\n1,CA,10\n2,calif.,12\n3,CA,11\n4,NY,\n5,NY,13\n6,NY,14\n"


def invoke(name: str, event: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = load_handler(name).lambda_handler(event, FakeContext(f"iterate-{name}"))
    return result


class WritesCode:
    """An LLM investigation agent (what Claude is to the loop): counts blank amounts."""

    source = "llm"
    code = "m = df['amount'].str.strip() == ''\nresult = {'affected_rows': int(m.sum()), 'affected_cells': int(m.sum())}"

    def __init__(self) -> None:
        self.calls = 0
        self.shown: list[CodeInvestigation] = []

    def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[CodeInvestigation]) -> str:
        self.calls += 1
        self.shown = list(attempts)
        return self.code


def analysed_run(aws: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Given an upload profiled, understood and analysed by the offline agents."""
    key = "uploads/alice/d1/orders.csv"
    version = aws["s3"].put_object(Bucket=BUCKET, Key=key, Body=CSV)["VersionId"]
    run = invoke("profile", {"trigger": object_created_event(BUCKET, key, version), "executionId": "x"})[
        "run"
    ]
    invoke("understand", {"run": run})
    items_key = invoke("analyze", {"run": run})["itemsKey"]  # the Map's items travel in S3, not the state
    issue_ids = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=items_key)["Body"].read())
    return run, issue_ids


def deps_with(agent: Any) -> Any:
    from iterate.agents import build_agents
    from iterate.aws.deps import build_deps

    def agents_factory(settings: Any) -> Any:
        agents = build_agents(settings)
        agents.investigation = agent
        return agents

    deps = build_deps()
    deps.agents_factory = agents_factory
    return deps


def investigate_once(run: dict[str, Any], issue_id: str, deps: Any) -> tuple[dict[str, Any], Any]:
    """GenerateCode, the sandbox function on its request, RecordAttempt: one turn of the Map's loop."""
    from iterate.aws import investigation
    from iterate.aws.payloads import GenerateCodeInput, RecordAttemptInput

    generated = investigation.generate_code(
        GenerateCodeInput(action="generate", run=run, issueId=issue_id),  # type: ignore[arg-type]
        deps,
    )
    assert not generated.stop and generated.sandboxRequest is not None
    result = invoke("sandbox", generated.sandboxRequest.model_dump(mode="json"))
    recorded = investigation.record_attempt(
        RecordAttemptInput.model_validate(
            {
                "action": "record",
                "run": run,
                "issueId": issue_id,
                "attempt": generated.attempt,
                "sandboxResult": result,
            }
        ),
        deps,
    )
    return result, recorded


def test_code_an_llm_wrote_is_recorded_as_llm_code_not_as_a_template(aws: dict[str, Any]) -> None:
    import json

    run, issue_ids = analysed_run(aws)
    agent = WritesCode()
    # When the investigation agent (an LLM) writes the code and the sandbox runs it
    _, recorded = investigate_once(run, issue_ids[0], deps_with(agent))
    # Then the kept investigation says an LLM wrote it: its numbers are not trusted as a template's would be
    assert agent.calls == 1 and recorded.finished
    kept = json.loads(
        aws["s3"]
        .get_object(Bucket=BUCKET, Key=f"{run['prefix']}investigations/{issue_ids[0]}.json")["Body"]
        .read()
    )
    assert kept["code"] == WritesCode.code and kept["source"] == "llm"


def _issue(aws: dict[str, Any], run: dict[str, Any], issue_id: str) -> tuple[Issue, DatasetProfile]:
    import json

    def read(name: str) -> Any:
        return json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=run["prefix"] + name)["Body"].read())

    issue = next(i for i in read("issues.json")["issues"] if i["id"] == issue_id)
    return Issue.model_validate(issue), DatasetProfile.model_validate(read("profile.json"))


def test_a_stored_proof_that_disagrees_is_kept_as_the_agents_first_attempt(aws: dict[str, Any]) -> None:
    import json

    from iterate.library import stored_entry
    from iterate.library.aws import AwsScriptLibrary

    # Given an analysed run, and a proof an earlier run stored for its first issue that counts 99 rows
    run, issue_ids = analysed_run(aws)
    issue, profile = _issue(aws, run, issue_ids[0])
    stale = "result = {'affected_rows': 99, 'affected_cells': 99}"
    proof = CodeInvestigation(code=stale, success=True, output={"affected_rows": 99}, source="llm")
    entry = stored_entry(
        issue.model_copy(update={"investigation": proof, "status": "confirmed"}),
        profile,
        owner="alice",
        dataset_id="d1",
        run_id="r-earlier",
    )
    assert entry is not None
    AwsScriptLibrary(aws["s3"], BUCKET, aws["table"]).save(entry, stale)
    agent = WritesCode()
    deps = deps_with(agent)
    # When the Map's loop turns once: GenerateCode offers the stored code, the sandbox runs it
    result, recorded = investigate_once(run, issue_ids[0], deps)
    # Then the agent was not asked, the attempt disagreed with the detector, and the loop goes on
    assert agent.calls == 0 and result["code"] == stale
    assert not recorded.finished and not recorded.success
    state = json.loads(
        aws["s3"]
        .get_object(Bucket=BUCKET, Key=f"{run['prefix']}investigations/{issue_ids[0]}.attempts.json")["Body"]
        .read()
    )
    (start,) = state["attempts"]
    assert start["reused"]["runId"] == "r-earlier" and "no longer proves" in start["error"]
    # And on the next turn the agent writes code, starting from that attempt, which used none of its own
    _, recorded = investigate_once(run, issue_ids[0], deps)
    assert agent.calls == 1 and recorded.attempts == 2
    assert [a.code for a in agent.shown] == [stale] and agent.shown[0].reused is not None


def test_a_templates_sandbox_request_names_the_columns_it_reads(aws: dict[str, Any]) -> None:
    from iterate.aws import investigation
    from iterate.aws.deps import build_deps
    from iterate.aws.payloads import GenerateCodeInput
    from iterate.investigate.loop import needed_columns

    run, issue_ids = analysed_run(aws)
    issue, _ = _issue(aws, run, issue_ids[0])
    # When the offline agent (templates) writes the first attempt's code
    generated = investigation.generate_code(
        GenerateCodeInput(action="generate", run=run, issueId=issue_ids[0]),  # type: ignore[arg-type]
        build_deps(),
    )
    # Then the sandbox is asked to fetch and load only the issue's columns, and the proof holds on them
    assert generated.sandboxRequest is not None
    assert generated.sandboxRequest.dataset.columns == list(needed_columns(issue) or [])
    assert generated.sandboxRequest.dataset.columns
    result = CodeInvestigation.model_validate(
        invoke("sandbox", generated.sandboxRequest.model_dump(mode="json"))
    )
    assert result.success, result.error


def test_code_an_llm_wrote_is_sent_with_the_columns_it_names(aws: dict[str, Any]) -> None:
    from iterate.aws import investigation
    from iterate.aws.payloads import GenerateCodeInput

    run, issue_ids = analysed_run(aws)
    # When an LLM writes code that reads df['amount'] only
    llm = investigation.generate_code(
        GenerateCodeInput(action="generate", run=run, issueId=issue_ids[0]),  # type: ignore[arg-type]
        deps_with(WritesCode()),
    )
    # Then the sandbox is asked to fetch and load that column only, and the code runs on it
    assert llm.sandboxRequest is not None and llm.sandboxRequest.dataset.columns == ["amount"]
    result = CodeInvestigation.model_validate(invoke("sandbox", llm.sandboxRequest.model_dump(mode="json")))
    assert result.success, result.error
    whole = CodeInvestigation.model_validate(
        invoke(
            "sandbox",
            llm.sandboxRequest.model_copy(
                update={"dataset": llm.sandboxRequest.dataset.model_copy(update={"columns": None})}
            ).model_dump(mode="json"),
        )
    )
    assert result.output == whole.output


class ReadsEveryColumn(WritesCode):
    code = "blank = (df == '').any(axis=1)\nresult = {'affected_rows': int(blank.sum())}"


def test_code_an_llm_wrote_that_may_read_any_column_gets_the_whole_dataset(aws: dict[str, Any]) -> None:
    from iterate.aws import investigation
    from iterate.aws.payloads import GenerateCodeInput

    run, issue_ids = analysed_run(aws)
    # When an LLM writes code that compares the whole frame / Then the sandbox gets every column
    llm = investigation.generate_code(
        GenerateCodeInput(action="generate", run=run, issueId=issue_ids[0]),  # type: ignore[arg-type]
        deps_with(ReadsEveryColumn()),
    )
    assert llm.sandboxRequest is not None and llm.sandboxRequest.dataset.columns is None
