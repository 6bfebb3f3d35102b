"""The engine path's Athena side in the template: the workgroup, the Glue database and who may use them."""

from __future__ import annotations

import json

import pytest
from infra_helpers import Synth, actions_of

pytestmark = pytest.mark.infra


def _statements_with(synth: Synth, role: str, prefix: str) -> list[dict]:  # type: ignore[type-arg]
    return [s for s in synth.statements_of_role(role) if any(a.startswith(prefix) for a in actions_of(s))]


def test_the_engine_workgroup_encrypts_results_and_caps_each_statements_scan(synth: Synth) -> None:
    # Given the template's one Athena workgroup and one Glue database
    (workgroup,) = synth.of_type("AWS::Athena::WorkGroup").values()
    (database,) = synth.of_type("AWS::Glue::Database").values()
    config = workgroup["Properties"]["WorkGroupConfiguration"]
    # Then its settings bind every statement (encrypted results, a scan cutoff, metrics)
    assert config["EnforceWorkGroupConfiguration"] is True
    assert config["ResultConfiguration"]["EncryptionConfiguration"]["EncryptionOption"] == "SSE_S3"
    assert config["BytesScannedCutoffPerQuery"] == 10**12
    assert config["PublishCloudWatchMetricsEnabled"] is True
    # And Athena's own output under it expires (the results a run keeps are under the run's prefix)
    output = config["ResultConfiguration"]["OutputLocation"]
    rules = [
        r
        for b in synth.of_type("AWS::S3::Bucket").values()
        for r in b["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
    ]
    expiring = [r for r in rules if r.get("Prefix") and json.dumps(output).endswith(r["Prefix"] + '"]]}')]
    assert expiring and expiring[0]["ExpirationInDays"] == 7
    # And the state machine's substitutions name exactly them
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    subs = sm["Properties"]["DefinitionSubstitutions"]
    assert subs["EngineWorkGroup"] == workgroup["Properties"]["Name"]
    assert subs["EngineDatabase"] == database["Properties"]["DatabaseInput"]["Name"]


def test_only_the_state_machine_queries_and_only_the_profile_function_registers_tables(synth: Synth) -> None:
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    machine_role = sm["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    athena = _statements_with(synth, machine_role, "athena:")
    assert {a for s in athena for a in actions_of(s)} == {
        "athena:StartQueryExecution",
        "athena:GetQueryExecution",
        "athena:StopQueryExecution",
    }
    assert all("workgroup/" in json.dumps(s["Resource"]) for s in athena)
    profile_role = synth.role_of(synth.function_id("profile"))
    writes = {a for s in _statements_with(synth, profile_role, "glue:") for a in actions_of(s)}
    assert "glue:CreateTable" in writes and "glue:BatchDeleteTable" in writes
    for resource in synth.of_type("AWS::IAM::Policy").values():
        for s in resource["Properties"]["PolicyDocument"]["Statement"]:
            roles = json.dumps(resource["Properties"].get("Roles"))
            if "glue:CreateTable" in actions_of(s):
                assert profile_role in roles, roles
            if any(a.startswith("athena:") for a in actions_of(s)):
                assert machine_role in roles, roles
    # And the profile function knows the database by its environment
    env = synth.resources[synth.function_id("profile")]["Properties"]["Environment"]["Variables"]
    assert "ITERATE_ENGINE_DATABASE" in env


def test_the_functions_that_end_a_run_early_may_remove_its_tables_and_create_none(synth: Synth) -> None:
    # Given RecordFailure and the admission function (the execution-status rule: aborted, timed out)
    for name in ("record_failure", "admission"):
        role = synth.role_of(synth.function_id(name))
        glue = {a for s in _statements_with(synth, role, "glue:") for a in actions_of(s)}
        # Then they may list and delete tables in the engine database, never create one
        assert {"glue:GetTables", "glue:BatchDeleteTable"} <= glue, name
        assert "glue:CreateTable" not in glue
        resources = json.dumps([s["Resource"] for s in _statements_with(synth, role, "glue:")])
        assert "_engine/*" in resources and ":database/" in resources
        # And they know the database by their environment
        env = synth.resources[synth.function_id(name)]["Properties"]["Environment"]["Variables"]
        assert "ITERATE_ENGINE_DATABASE" in env
