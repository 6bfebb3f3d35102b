"""The synthesized template: roles, substitutions, event pattern, authorizers, storage hardening, arm64."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from infra_helpers import REPO, Synth, actions_of

pytestmark = pytest.mark.infra

LLM_FUNCTIONS = {"understand", "analyze", "investigate", "followup"}


def _topic(synth: Synth, display_name: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, t)
        for k, t in synth.of_type("AWS::SNS::Topic").items()
        if t["Properties"]["DisplayName"] == display_name
    ]
    return found


def _topic_policy(synth: Synth, topic_id: str) -> dict[str, Any]:
    (policy,) = [
        p
        for p in synth.of_type("AWS::SNS::TopicPolicy").values()
        if {"Ref": topic_id} in p["Properties"]["Topics"]
    ]
    return policy


def _upload_rule(synth: Synth) -> dict[str, Any]:
    (rule,) = [
        r
        for r in synth.of_type("AWS::Events::Rule").values()
        if r["Properties"]["EventPattern"]["source"] == ["aws.s3"]
    ]
    return rule


def _function_names() -> list[str]:
    from infra.constructs.functions import FUNCTION_SPECS

    return [s.name for s in FUNCTION_SPECS]


def _services(statement: dict[str, Any]) -> set[str]:
    """The AWS services a policy statement names as principals (CDK merges statements that differ only there)."""
    named = (
        (statement.get("Principal") or {}).get("Service", [])
        if isinstance(statement.get("Principal"), dict)
        else []
    )
    return {named} if isinstance(named, str) else set(named)


def _refs(value: Any) -> set[str]:
    """Every logical id a CloudFormation value points at (Ref / GetAtt), however deeply nested."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value:
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for v in value.values():
            found |= _refs(v)
    elif isinstance(value, list):
        for v in value:
            found |= _refs(v)
    return found


def test_sandbox_role_holds_no_s3_dynamodb_or_secrets_actions(synth: Synth) -> None:
    # Given the sandbox function's own role
    role = synth.role_of(synth.function_id("sandbox"))
    # When every statement that applies to it is collected
    actions = [a for s in synth.statements_of_role(role) for a in actions_of(s)]
    managed = json.dumps(synth.resources[role]["Properties"].get("ManagedPolicyArns", []))
    # Then it can manage its VPC network interfaces and nothing that reaches data, state or secrets
    assert not [
        a for a in actions if a.split(":")[0] in {"s3", "dynamodb", "secretsmanager", "kms", "states"}
    ]
    assert "*" not in actions
    assert "AWSLambdaVPCAccessExecutionRole" in managed or any(a.startswith("ec2:") for a in actions)
    # and its environment names neither the table, the bucket nor the secret
    env = synth.resources[synth.function_id("sandbox")]["Properties"]["Environment"]["Variables"]
    assert not {"ITERATE_TABLE", "ITERATE_BUCKET", "ITERATE_ANTHROPIC_SECRET_ARN"} & env.keys()


def test_only_the_llm_functions_can_read_the_anthropic_secret(synth: Synth) -> None:
    # Given the one Secrets Manager secret
    (secret_id,) = synth.of_type("AWS::SecretsManager::Secret")
    # When each function's role is checked for GetSecretValue on it
    readers = set()
    for name in _function_names():
        statements = synth.statements_of_role(synth.role_of(synth.function_id(name)))
        if any(
            "secretsmanager:GetSecretValue" in actions_of(s) and secret_id in _refs(s["Resource"])
            for s in statements
        ):
            readers.add(name)
    # Then exactly the agent functions can, and only they are told where the secret is
    assert readers == LLM_FUNCTIONS
    for name in _function_names():
        env = synth.resources[synth.function_id(name)]["Properties"]["Environment"]["Variables"]
        assert ("ITERATE_ANTHROPIC_SECRET_ARN" in env) == (name in LLM_FUNCTIONS), name
        assert "ANTHROPIC_API_KEY" not in env  # the key itself never sits in an environment variable
    # And no other role in the stack (state machine, scheduler, API Gateway…) can read it either
    llm_roles = {synth.role_of(synth.function_id(n)) for n in LLM_FUNCTIONS}
    for policy in synth.of_type("AWS::IAM::Policy").values():
        roles = {r["Ref"] for r in policy["Properties"].get("Roles", [])}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(a.startswith("secretsmanager:") for a in actions_of(s)):
                assert roles <= llm_roles


def test_every_asl_placeholder_is_substituted_with_the_right_function(synth: Synth) -> None:
    # Given the ASL file the runtime engineer owns and the definition CDK put in the template
    asl = json.loads((REPO / "statemachine" / "analysis.asl.json").read_text())
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    definition = sm["Properties"]["DefinitionString"]
    subs = sm["Properties"]["DefinitionSubstitutions"]
    # When the placeholders are collected
    used = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", definition))
    # Then the definition is the file but for the Map's concurrency (the stack's setting: the sandbox
    # concurrency, at most 10), and every placeholder has a substitution, none unused
    deployed = json.loads(definition)
    assert deployed["States"]["InvestigateEach"].pop("MaxConcurrency") == 10
    assert deployed.pop("TimeoutSeconds") == 6 * 3600  # iterate:run_timeout_hours
    asl["States"]["InvestigateEach"].pop("MaxConcurrency")
    assert deployed == asl
    assert used and used == set(subs)
    # and each `<Name>FunctionArn` points at the function built from functions/<name>/
    for placeholder, value in subs.items():
        m = re.fullmatch(r"([A-Za-z]+)FunctionArn", placeholder)
        if m:
            name = re.sub(r"(?<!^)([A-Z])", r"_\1", m.group(1)).lower()
            assert value == {"Fn::GetAtt": [synth.function_id(name), "Arn"]}, placeholder


def test_state_machine_role_can_invoke_exactly_the_pipeline_functions(synth: Synth) -> None:
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    role = sm["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoked = set()
    for s in synth.statements_of_role(role):
        if "lambda:InvokeFunction" in actions_of(s):
            invoked |= _refs(s["Resource"])
    pipeline = {
        synth.function_id(n)
        for n in _function_names()
        if n not in {"api", "followup", "fix", "fix_worker", "admission"}
    }
    assert invoked == pipeline


def test_upload_rule_hands_uploads_only_to_the_admission_function(synth: Synth) -> None:
    # Given the rule on S3 events (the other rule routes Iterate's own regression events)
    (rule,) = [
        r
        for r in synth.of_type("AWS::Events::Rule").values()
        if r["Properties"]["EventPattern"]["source"] == ["aws.s3"]
    ]
    props = rule["Properties"]
    (bucket_id,) = [
        k
        for k, v in synth.of_type("AWS::S3::Bucket").items()
        if "NotificationConfiguration" in v["Properties"]
    ]
    # Then it matches S3 Object Created in the data bucket under uploads/ only
    pattern = props["EventPattern"]
    assert pattern["source"] == ["aws.s3"]
    assert pattern["detail-type"] == ["Object Created"]
    assert pattern["detail"]["bucket"]["name"] == [{"Ref": bucket_id}]
    assert pattern["detail"]["object"]["key"] == [{"prefix": "uploads/"}]
    # and the bucket actually sends its events to EventBridge (natively, no custom resource)
    bucket = synth.resources[bucket_id]["Properties"]
    assert bucket["NotificationConfiguration"]["EventBridgeConfiguration"]["EventBridgeEnabled"] is True
    # and its one target is the admission function (which queues the run), with a DLQ
    (target,) = props["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [synth.function_id("admission"), "Arn"]}
    assert _refs(target["DeadLetterConfig"]) <= set(synth.of_type("AWS::SQS::Queue"))
    # and the input transformer keeps the event's own shape with the object version
    transformer = target["InputTransformer"]
    assert "$.detail.object.version-id" in transformer["InputPathsMap"].values()
    template = transformer["InputTemplate"]
    assert '"detail-type":"Object Created"' in template
    assert '"version-id"' in template


def test_upload_event_input_parses_with_the_runtime_model(synth: Synth) -> None:
    # Given the rule's input transformer and a real S3 Object Created event
    rule = _upload_rule(synth)
    transformer = rule["Properties"]["Targets"][0]["InputTransformer"]
    event = {
        "id": "e-1",
        "detail-type": "Object Created",
        "source": "aws.s3",
        "time": "2026-11-22T00:00:00Z",
        "detail": {
            "bucket": {"name": "data-bucket"},
            "object": {
                "key": "uploads/u1/d1/orders.csv",
                "size": 12,
                "etag": "abc",
                "version-id": "v1",
                "sequencer": "00",
            },
            "requester": "123",
            "source-ip-address": "1.2.3.4",
        },
    }
    # When EventBridge's substitution is applied (strings quoted in the template, numbers bare)
    rendered = transformer["InputTemplate"]
    for name, path in transformer["InputPathsMap"].items():
        value: Any = event
        for part in path.removeprefix("$.").split("."):
            value = value[part]
        rendered = rendered.replace(f"<{name}>", json.dumps(value))
    execution_input = json.loads(rendered)
    # Then the runtime's own parser accepts it and finds the object version
    from iterate.aws.payloads import ObjectCreatedEvent

    upload = ObjectCreatedEvent.model_validate(execution_input).upload()
    assert (upload.bucket, upload.key, upload.versionId) == ("data-bucket", "uploads/u1/d1/orders.csv", "v1")
    assert "requester" not in json.dumps(execution_input)


def _api_paths(synth: Synth) -> dict[str, str]:
    """Resource logical id → full path, rebuilt from ParentId/PathPart."""
    (api_id,) = synth.of_type("AWS::ApiGateway::RestApi")
    resources = synth.of_type("AWS::ApiGateway::Resource")
    paths: dict[str, str] = {}

    def path_of(rid: str) -> str:
        if rid not in paths:
            props = resources[rid]["Properties"]
            parent = props["ParentId"]
            prefix = (
                "" if "Fn::GetAtt" in parent and parent["Fn::GetAtt"][0] == api_id else path_of(parent["Ref"])
            )
            paths[rid] = f"{prefix}/{props['PathPart']}"
        return paths[rid]

    for rid in resources:
        path_of(rid)
    return paths


def test_every_api_method_requires_the_cognito_authorizer(synth: Synth) -> None:
    # Given every method of the REST API
    (authorizer_id, authorizer) = next(iter(synth.of_type("AWS::ApiGateway::Authorizer").items()))
    assert authorizer["Properties"]["Type"] == "COGNITO_USER_POOLS"
    methods = synth.of_type("AWS::ApiGateway::Method")
    assert methods
    # Then each one is authorized by the user pool and validated
    for mid, method in methods.items():
        props = method["Properties"]
        assert props["AuthorizationType"] == "COGNITO_USER_POOLS", mid
        assert props["AuthorizerId"] == {"Ref": authorizer_id}, mid
        assert "RequestValidatorId" in props, mid


def test_api_has_every_route_of_the_issue_with_body_models(synth: Synth) -> None:
    # Given the routes the issue asks for (path parameters named as in the exported OpenAPI document)
    wanted = {
        ("POST", "/datasets"), ("GET", "/datasets"), ("GET", "/datasets/{dataset_id}"),
        ("POST", "/datasets/{dataset_id}/runs"), ("GET", "/runs/{run_id}"), ("DELETE", "/runs/{run_id}"),
        ("GET", "/runs/{run_id}/issues"), ("GET", "/runs/{run_id}/report"),
        ("POST", "/issues/{issue_ref}/followup"), ("PUT", "/datasets/{dataset_id}/schedule"),
        ("DELETE", "/datasets/{dataset_id}/schedule"), ("GET", "/datasets/{dataset_id}/runs"),
        ("POST", "/runs/{run_id}/fixes"), ("GET", "/datasets/{dataset_id}/versions"),
        ("GET", "/datasets/{dataset_id}/history"), ("POST", "/datasets/{dataset_id}/accepted"),
        ("GET", "/datasets/{dataset_id}/accepted"), ("DELETE", "/datasets/{dataset_id}/accepted/{acceptance_id}"),
        ("DELETE", "/datasets/{dataset_id}"), ("GET", "/runs/{run_id}/fixes/{fix_id}"),
    }  # fmt: skip
    paths = _api_paths(synth)
    methods = {
        (m["Properties"]["HttpMethod"], paths[m["Properties"]["ResourceId"]["Ref"]]): m["Properties"]
        for m in synth.of_type("AWS::ApiGateway::Method").values()
    }
    # Then each exists, bodies are checked against a model, and follow-ups reach the followup function
    assert wanted <= methods.keys()
    for verb in ("POST", "PUT"):
        for (v, path), props in methods.items():
            if v == verb:
                assert props.get("RequestModels", {}).get("application/json"), (v, path)
    # and the list routes take their page parameters, the run start its Idempotency-Key, none required
    for path in (
        "/datasets", "/datasets/{dataset_id}/runs", "/runs/{run_id}/issues", "/datasets/{dataset_id}/history",
        "/datasets/{dataset_id}/accepted", "/datasets/{dataset_id}/versions",
    ):  # fmt: skip
        params = methods[("GET", path)]["RequestParameters"]
        assert params["method.request.querystring.limit"] is False, path
        assert params["method.request.querystring.nextToken"] is False, path
    start = methods[("POST", "/datasets/{dataset_id}/runs")]["RequestParameters"]
    assert start["method.request.header.idempotency-key"] is False
    followup = methods[("POST", "/issues/{issue_ref}/followup")]["Integration"]["Uri"]
    assert synth.function_id("followup") in _refs(followup)
    assert synth.function_id("api") in _refs(methods[("GET", "/runs/{run_id}")]["Integration"]["Uri"])
    fixes = methods[("POST", "/runs/{run_id}/fixes")]["Integration"]["Uri"]
    assert synth.function_id("fix") in _refs(fixes)
    fix_status = methods[("GET", "/runs/{run_id}/fixes/{fix_id}")]["Integration"]["Uri"]
    assert synth.function_id("fix") in _refs(fix_status)
    assert synth.function_id("api") in _refs(
        methods[("DELETE", "/datasets/{dataset_id}")]["Integration"]["Uri"]
    )


def test_bucket_is_encrypted_versioned_private_tls_only_and_has_lifecycle_rules(synth: Synth) -> None:
    for bucket_id, bucket in synth.of_type("AWS::S3::Bucket").items():
        props = bucket["Properties"]
        # Then every bucket is encrypted, versioned and blocks public access
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"], bucket_id
        assert props["VersioningConfiguration"]["Status"] == "Enabled", bucket_id
        assert all(props["PublicAccessBlockConfiguration"].values()), bucket_id
        assert len(props["PublicAccessBlockConfiguration"]) == 4
        assert props["LifecycleConfiguration"]["Rules"], bucket_id
        # and its policy denies any request not made over TLS
        policies = [
            p["Properties"]["PolicyDocument"]["Statement"]
            for p in synth.of_type("AWS::S3::BucketPolicy").values()
            if p["Properties"]["Bucket"] == {"Ref": bucket_id}
        ]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for statements in policies
            for s in statements
        ), bucket_id


def test_no_function_but_the_api_may_write_uploads_and_only_the_api_deletes_a_datasets_objects(
    synth: Synth,
) -> None:
    writers = set()
    deletes: dict[str, list[str]] = {}
    for name in _function_names():
        for s in synth.statements_of_role(synth.role_of(synth.function_id(name))):
            acts = actions_of(s)
            assert not [a for a in acts if a in {"s3:*", "*"}], name
            if [a for a in acts if a.startswith("s3:Delete") or a == "s3:ListBucketVersions"]:
                deletes.setdefault(name, []).append(json.dumps(s))
            if "s3:PutObject" in acts and "/uploads/" in json.dumps(s["Resource"]):
                writers.add(name)
    assert writers == {"api"}  # it presigns the caller's upload; the pipeline never rewrites an input
    # And only the API (DELETE /datasets/{id}) deletes, every version, under exactly the prefixes a dataset
    # stores under, and lists versions only there: what tests/api/test_delete_dataset.py sees it call
    assert set(deletes) == {"api"}
    api = [
        s
        for s in synth.statements_of_role(synth.role_of(synth.function_id("api")))
        if any(a.startswith("s3:Delete") or a == "s3:ListBucketVersions" for a in actions_of(s))
    ]
    removed = set()
    for s in api:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        for action in (a for a in actions_of(s) if a.startswith("s3:Delete")):
            removed |= {(action, json.dumps(r).split("/")[-2]) for r in resources}
    prefixes = ("uploads", "artifacts", "versions", "library")
    assert removed == {(a, p) for a in ("s3:DeleteObject", "s3:DeleteObjectVersion") for p in prefixes}
    (listing,) = [s for s in api if "s3:ListBucketVersions" in actions_of(s)]
    assert actions_of(listing) == ["s3:ListBucketVersions"]
    assert listing["Condition"] == {
        "StringLike": {"s3:prefix": ["uploads/*", "artifacts/*", "versions/*", "library/*"]}
    }


def test_only_investigate_reads_and_only_report_writes_the_script_library(synth: Synth) -> None:
    # Given every function's role statements on library/ (the stored proofs' code)
    readers, writers = set(), set()
    for name in _function_names():
        for s in synth.statements_of_role(synth.role_of(synth.function_id(name))):
            if "/library/" not in json.dumps(s["Resource"]):
                continue
            acts = actions_of(s)
            if "s3:GetObject" in acts:
                readers.add(name)
            if "s3:PutObject" in acts:
                writers.add(name)
    # Then the function that offers stored proofs reads them and only the report step stores them
    assert readers == {"investigate"}
    assert writers == {"report"}
    # and the sandbox, which runs them, holds no S3 action at all (its code arrives in the payload)
    assert "sandbox" not in readers | writers


def test_table_has_owner_keys_gsi1_for_runs_by_dataset_pitr_and_ttl(synth: Synth) -> None:
    (table,) = synth.of_type("AWS::DynamoDB::Table").values()
    props = table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ]
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    (gsi,) = props["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "GSI1"
    assert [k["AttributeName"] for k in gsi["KeySchema"]] == ["GSI1PK", "GSI1SK"]
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_every_iterate_function_is_arm64_python312_with_handler_and_layers(synth: Synth) -> None:
    for name in _function_names():
        props = synth.resources[synth.function_id(name)]["Properties"]
        assert props["Architectures"] == ["arm64"], name
        assert props["Runtime"] == "python3.12", name
        assert props["Handler"] == "handler.lambda_handler", name
        assert 1 <= len(props["Layers"]) <= 5, name
        tracing = props.get("TracingConfig", {}).get("Mode")
        assert (tracing == "Active") == (name != "sandbox"), name  # the sandbox role holds no X-Ray rights
    for layer in synth.of_type("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_sandbox_runs_in_isolated_subnets_behind_a_read_only_s3_endpoint(synth: Synth) -> None:
    props = synth.resources[synth.function_id("sandbox")]["Properties"]
    # Then the sandbox is in the VPC, capped in concurrency and time
    subnets = _refs(props["VpcConfig"]["SubnetIds"])
    assert subnets and subnets <= set(synth.of_type("AWS::EC2::Subnet"))
    assert props["ReservedConcurrentExecutions"] == 13
    assert props["Timeout"] <= 60
    # and its /tmp holds the largest dataset it agrees to download whole (code that reads every column)
    from iterate.sandbox.remote import MAX_DATASET_BYTES

    assert props["EphemeralStorage"]["Size"] * 2**20 >= MAX_DATASET_BYTES
    # and nothing in the stack gives that VPC a way to the internet
    for kind in ("AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EgressOnlyInternetGateway"):
        assert not synth.of_type(kind), kind
    assert not [r for r in synth.of_type("AWS::EC2::Route").values() if "GatewayId" in r["Properties"]]
    # and the S3 endpoint only lets GetObject through on the artifacts prefix, and PutObject on the result
    # objects of investigations (a result too large for the state, through its presigned PUT)
    (endpoint,) = synth.of_type("AWS::EC2::VPCEndpoint").values()
    read, write = endpoint["Properties"]["PolicyDocument"]["Statement"]
    assert read["Effect"] == write["Effect"] == "Allow"
    assert (read["Action"], write["Action"]) == ("s3:GetObject", "s3:PutObject")
    (bucket_id,) = [
        k
        for k, v in synth.of_type("AWS::S3::Bucket").items()
        if "NotificationConfiguration" in v["Properties"]
    ]
    arn = {"Fn::GetAtt": [bucket_id, "Arn"]}
    assert read["Resource"] == {"Fn::Join": ["", [arn, "/artifacts/*"]]}
    assert write["Resource"] == {"Fn::Join": ["", [arn, "/artifacts/*/investigations/*.result.json"]]}


def _render(value: Any, refs: dict[str, str]) -> str:
    """A CloudFormation string value with its Refs and Fn::Joins filled in from `refs` (logical id -> value)."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return refs[value["Ref"]]
    sep, parts = value["Fn::Join"]
    return str(sep).join(_render(p, refs) for p in parts)


def test_the_sandbox_credentials_can_make_no_ec2_call_outside_lambdas_own(synth: Synth) -> None:
    # Given the sandbox function, its role, and the network-interface rights Lambda needs on that role
    fid = synth.function_id("sandbox")
    statements = synth.statements_of_role(synth.role_of(fid))
    allowed_ec2 = {
        a for s in statements if s["Effect"] == "Allow" for a in actions_of(s) if a.startswith("ec2:")
    }
    assert "ec2:CreateNetworkInterface" in allowed_ec2
    # When the Deny statements on that role are collected
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    # Then every EC2 action is denied to calls made with the credentials Lambda hands the function's code
    # (they carry lambda:SourceFunctionArn; Lambda's own ENI calls with the role do not)
    assert actions_of(deny) == ["ec2:*"] and deny["Resource"] == "*"
    (operator,) = deny["Condition"]
    assert operator == "ArnLike"
    arn = {"Fn::GetAtt": [fid, "Arn"]}
    assert deny["Condition"]["ArnLike"] == {
        "lambda:SourceFunctionArn": [arn, {"Fn::Join": ["", [arn, ":*"]]}]
    }
    # and the Deny sits in a policy of its own, which the function does not wait for (no dependency cycle)
    (policy_id,) = [
        k
        for k, p in synth.of_type("AWS::IAM::Policy").items()
        if deny in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert policy_id not in synth.resources[fid].get("DependsOn", [])


def test_the_sandbox_vpcs_resolver_answers_only_the_buckets_name(
    synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the VPC the sandbox function runs in
    props = synth.resources[synth.function_id("sandbox")]["Properties"]
    (vpc_id,) = {
        synth.resources[s]["Properties"]["VpcId"]["Ref"] for s in _refs(props["VpcConfig"]["SubnetIds"])
    }
    # When the DNS firewall rule groups associated with it are read
    (association,) = [
        a
        for a in synth.of_type("AWS::Route53Resolver::FirewallRuleGroupAssociation").values()
        if a["Properties"]["VpcId"] == {"Ref": vpc_id}
    ]
    group_id = association["Properties"]["FirewallRuleGroupId"]["Fn::GetAtt"][0]
    rules = sorted(synth.resources[group_id]["Properties"]["FirewallRules"], key=lambda r: r["Priority"])
    domain_lists = {r["Priority"]: r["FirewallDomainListId"]["Fn::GetAtt"][0] for r in rules}
    lists = {prio: synth.resources[dl]["Properties"]["Domains"] for prio, dl in domain_lists.items()}
    allow, block = rules
    # Then the last rule answers NXDOMAIN for every name
    assert (block["Action"], block["BlockResponse"], lists[block["Priority"]]) == ("BLOCK", "NXDOMAIN", ["*"])
    # and the one rule before it allows exactly one name: the data bucket's, as S3 resolves it (its CNAMEs
    # trusted)
    assert allow["Action"] == "ALLOW" and allow["Priority"] < block["Priority"]
    assert allow["FirewallDomainRedirectionAction"] == "TRUST_REDIRECTION_DOMAIN"
    (allowed,) = lists[allow["Priority"]]
    (bucket_id,) = [
        k
        for k, v in synth.of_type("AWS::S3::Bucket").items()
        if "NotificationConfiguration" in v["Properties"]
    ]
    refs = {bucket_id: "iterate-data-bucket", "AWS::Region": "eu-west-1", "AWS::URLSuffix": "amazonaws.com"}
    # which is the host of the presigned URLs the sandbox is handed (iterate.aws.clients' S3 client)
    from iterate.aws import clients

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clients.reset()
    try:
        url = clients.client("s3").generate_presigned_url(
            "get_object", Params={"Bucket": "iterate-data-bucket", "Key": "artifacts/o/d/r/data.parquet"}
        )
    finally:
        clients.reset()
    host = urlparse(url).hostname
    assert _render(allowed, refs) == host == "iterate-data-bucket.s3.eu-west-1.amazonaws.com"


def test_the_sandbox_has_no_tenant_isolation_its_state_machine_invoke_could_not_name(synth: Synth) -> None:
    # A function with TenancyConfig refuses every invoke without a tenant id, and RunInSandbox invokes it
    # through Step Functions' Lambda integration (the function ARN as the Task's Resource), which passes none
    asl = json.loads((REPO / "statemachine" / "analysis.asl.json").read_text())
    assert '"Resource": "${SandboxFunctionArn}"' in json.dumps(asl)
    assert "TenancyConfig" not in synth.resources[synth.function_id("sandbox")]["Properties"]


def test_sandbox_output_and_inline_result_caps_keep_every_state_under_256_kib(synth: Synth) -> None:
    from iterate.aws.payloads import MAX_SANDBOX_CODE_BYTES, STATE_LIMIT_BYTES

    env = synth.resources[synth.function_id("sandbox")]["Properties"]["Environment"]["Variables"]
    output_cap = int(env["ITERATE_SANDBOX_MAX_OUTPUT_BYTES"])
    inline_cap = int(env["ITERATE_SANDBOX_INLINE_RESULT_BYTES"])
    # The code's output is refused past a cap below Step Functions' limit
    assert 0 < output_cap < STATE_LIMIT_BYTES == 262_144
    # and what the loop's state can hold at most (code, inline result, run and URLs) stays under it
    assert MAX_SANDBOX_CODE_BYTES + inline_cap + 16 * 1024 < STATE_LIMIT_BYTES


def test_state_machine_reads_the_map_items_from_the_artifacts_prefix_only(synth: Synth) -> None:
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    role = sm["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    s3 = [s for s in synth.statements_of_role(role) if any(a.startswith("s3:") for a in actions_of(s))]
    assert actions_of(s3[0]) == ["s3:GetObject"]
    assert json.dumps(s3[0]["Resource"]).startswith('[{"Fn::Join": ["", [{"Fn::GetAtt": ["StorageData')
    assert all(r["Fn::Join"][1][1].startswith("/artifacts/") for r in s3[0]["Resource"])
    # Beside the Maps' reads, Athena's (RunEngineQuery acts with this role): it writes only the engine's results
    # under the artifacts prefix and never touches uploads/
    for s in s3[1:]:
        resources = json.dumps(s["Resource"])
        assert "uploads" not in resources
        if "s3:PutObject" in actions_of(s):
            assert (
                resources.count("/artifacts/") == 2
                and "engine/results/" in resources
                and "_athena/" in resources
            )


def test_anthropic_secret_starts_as_a_placeholder_the_functions_read_as_no_key(synth: Synth) -> None:
    from iterate.aws.secrets import SECRET_PLACEHOLDER, key_from_secret

    (secret,) = synth.of_type("AWS::SecretsManager::Secret").values()
    # No generated random value (a fresh stack would run in LLM mode with a key Anthropic refuses)
    assert "GenerateSecretString" not in secret["Properties"]
    assert secret["Properties"]["SecretString"] == SECRET_PLACEHOLDER
    # and what it holds reads as "no key": the agents run offline until the real key is put there
    assert key_from_secret(secret["Properties"]["SecretString"])[0] is None


def test_function_environment_follows_the_runtime_contract(synth: Synth) -> None:
    from infra.runtime import TABLE_ACCESS

    env = {
        n: synth.resources[synth.function_id(n)]["Properties"]["Environment"]["Variables"]
        for n in _function_names()
    }
    for name, variables in env.items():
        assert variables["POWERTOOLS_SERVICE_NAME"] == "iterate"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Iterate"
        if name != "sandbox":
            assert "ITERATE_BUCKET" in variables, name
            # The table's name only where the function uses the table (the chunk function does not)
            assert ("ITERATE_TABLE" in variables) == bool(TABLE_ACCESS[name]), name
        assert ("ITERATE_EVENT_BUS" in variables) == (name in {"report", "record_failure"}), name
    assert {"ITERATE_STATE_MACHINE_ARN", "ITERATE_SCHEDULER_ROLE_ARN", "ITERATE_SCHEDULE_GROUP"} <= env[
        "api"
    ].keys()
    assert "ITERATE_SANDBOX_TIMEOUT_S" in env["sandbox"]
    sandbox_memory = synth.resources[synth.function_id("sandbox")]["Properties"]["MemorySize"]
    assert 0 < int(env["sandbox"]["ITERATE_SANDBOX_MEMORY_MB"]) < sandbox_memory
    assert (
        int(env["sandbox"]["ITERATE_SANDBOX_TIMEOUT_S"])
        < synth.resources[synth.function_id("sandbox")]["Properties"]["Timeout"]
    )


def test_every_acknowledged_cdk_nag_finding_has_a_written_reason(synth: Synth) -> None:
    # Given the acknowledgments cdk-nag wrote into the template (synth itself failed on any unacknowledged one)
    acks = {
        (rule["id"], rule["reason"])
        for resource in synth.resources.values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        if rule["id"].startswith("AwsSolutions-")
    }
    # Then there are some, and each one says why in a sentence
    assert acks
    for rule, reason in acks:
        assert len(reason.split()) >= 6, (rule, reason)


def test_cfn_lint_reports_no_errors(synth: Synth) -> None:
    # When cfn-lint checks the synthesized template
    template = synth.outdir / "Iterate.template.json"
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", str(template)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = [line for line in proc.stdout.splitlines() if line.strip()]
    errors = [f for f in findings if ":E" in f or (f.split(":")[-2:-1] and f.split(":")[-2].startswith("E"))]
    print("cfn-lint warnings/info:", *[f for f in findings if f not in errors], sep="\n  ")
    # Then there are no errors (exit code bit 2), warnings are listed above
    assert proc.returncode & 2 == 0 and not errors, "\n".join(errors) or proc.stderr
    assert proc.returncode & 1 == 0, proc.stderr  # 1 = cfn-lint itself failed


def test_every_function_in_the_stack_has_its_handler_in_the_repo() -> None:
    from infra.constructs.functions import FUNCTION_SPECS

    missing = [s.name for s in FUNCTION_SPECS if not (REPO / "functions" / s.name / "handler.py").is_file()]
    assert not missing, (
        f"functions/<name>/handler.py missing for: {missing} (real synth fails until they land)"
    )


def test_each_function_can_write_only_its_own_log_group(synth: Synth) -> None:
    for name in _function_names():
        fid = synth.function_id(name)
        own = _refs(synth.resources[fid]["Properties"]["LoggingConfig"]["LogGroup"])
        writable = set()
        for s in synth.statements_of_role(synth.role_of(fid)):
            if "logs:PutLogEvents" in actions_of(s):
                writable |= _refs(s["Resource"])
        assert own and writable == own, name


def test_gateway_body_models_are_exactly_the_api_schemas(synth: Synth) -> None:
    # Given the runtime's exported OpenAPI document and the request models in the template
    components = json.loads((REPO / "docs" / "openapi.json").read_text())["components"]["schemas"]
    models = {
        m["Properties"]["Name"]: m["Properties"]["Schema"]
        for m in synth.of_type("AWS::ApiGateway::Model").values()
    }
    # Then each model is its component schema (required fields, patterns, no extra properties), declared as
    # draft 4, so the gateway answers 400 for what the API's pydantic models would refuse
    assert {"CreateDatasetRequest", "StartRunBody", "ScheduleRequest", "FollowupRequest"} <= models.keys()
    for name, schema in models.items():
        assert schema.pop("$schema") == "http://json-schema.org/draft-04/schema#"
        assert schema == components[name], name
        assert schema.get("additionalProperties") is False, name


def _alarm_metrics(alarm: dict[str, Any]) -> set[tuple[str, str]]:
    """(namespace, metric) of an alarm, whether on one metric or a math expression over several."""
    props = alarm["Properties"]
    if "MetricName" in props:
        return {(props["Namespace"], props["MetricName"])}
    return {
        (m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"])
        for m in props.get("Metrics", [])
        if "MetricStat" in m
    }


def test_every_alarm_notifies_the_encrypted_alarm_topic(synth: Synth) -> None:
    # Given the alarm topic and every alarm
    (topic_id, topic) = _topic(synth, "Iterate alarms")
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    assert alarms
    # Then each alarm and its recovery go to the topic
    for alarm_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}], alarm_id
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic_id}], alarm_id
    # And the topic is encrypted with a rotated key CloudWatch may use, and refuses plain HTTP
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = synth.resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    assert any(
        "cloudwatch.amazonaws.com" in _services(s) and "kms:GenerateDataKey*" in actions_of(s)
        for s in key["KeyPolicy"]["Statement"]
    )
    policy = _topic_policy(synth, topic_id)
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )
    # And without an address in the context nobody is subscribed (the topic is there to subscribe to)
    assert not synth.of_type("AWS::SNS::Subscription")


def test_alarms_cover_api_errors_latency_throttles_map_failures_and_the_table(synth: Synth) -> None:
    alarms = synth.of_type("AWS::CloudWatch::Alarm").values()
    watched = set().union(*(_alarm_metrics(a) for a in alarms))
    # Then the API's 5xx and latency, Step Functions throttles, every function's throttles, failed Map
    # children and the table's errors and throttles each have an alarm
    assert {
        ("AWS/ApiGateway", "5XXError"),
        ("AWS/ApiGateway", "Latency"),
        ("AWS/States", "ExecutionThrottled"),
        ("AWS/States", "ExecutionsFailed"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/Lambda", "Errors"),
        ("AWS/DynamoDB", "SystemErrors"),
        ("AWS/DynamoDB", "ThrottledRequests"),
        ("AWS/DynamoDB", "UserErrors"),
    } <= watched
    throttled = {
        _refs(a["Properties"]["Dimensions"]).pop()
        for a in alarms
        if a["Properties"].get("MetricName") == "Throttles"
    }
    assert throttled == {synth.function_id(n) for n in _function_names()}
    # And the Map alarm watches the child executions, named after the Map's label in the ASL
    asl = json.loads((REPO / "statemachine" / "analysis.asl.json").read_text())
    label = asl["States"]["InvestigateEach"]["Label"]
    (children,) = [
        a["Properties"]
        for a in alarms
        if a["Properties"].get("MetricName") == "ExecutionsFailed"
        and "/" + label in json.dumps(a["Properties"]["Dimensions"])
    ]
    assert children["Namespace"] == "AWS/States"


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The app synthesized with deployment context: an alarm address and a smaller sandbox concurrency."""
    from infra.app import STACK_NAME, build_app

    outdir = tmp_path_factory.mktemp("cdk.out.configured")
    context = {
        "iterate:alarm_email": "ops@example.com",
        "iterate:sandbox_reserved_concurrency": 4,
        "iterate:regression_email": "data-team@example.com",
        "iterate:min_schedule_minutes": 15,
        "iterate:max_cells": "200000000",  # as `cdk -c` passes it: a string
        "iterate:max_file_bytes": 3 * 2**30,
        "iterate:profile_memory_mb": 8192,
    }
    app, _stack = build_app(outdir=outdir, placeholder_assets=True, context=context)
    app.synth()
    return Synth(outdir=outdir, template=json.loads((outdir / f"{STACK_NAME}.template.json").read_text()))


def test_context_sets_the_alarm_address_and_the_sandbox_concurrency(configured: Synth) -> None:
    # Given an alarm address and a sandbox concurrency of 4 in the context
    topic_id, _ = _topic(configured, "Iterate alarms")
    (subscription,) = [
        s
        for s in configured.of_type("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic_id}
    ]
    # Then the topic e-mails that address
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ops@example.com"
    assert subscription["Properties"]["TopicArn"] == {"Ref": topic_id}
    # And the sandbox reserves 4, and one run's Map never runs more investigations at once than that
    sandbox = configured.resources[configured.function_id("sandbox")]["Properties"]
    assert sandbox["ReservedConcurrentExecutions"] == 4
    (sm,) = configured.of_type("AWS::StepFunctions::StateMachine").values()
    assert (
        json.loads(sm["Properties"]["DefinitionString"])["States"]["InvestigateEach"]["MaxConcurrency"] == 4
    )


def test_context_raises_the_input_limits_with_the_memory_that_holds_them(
    configured: Synth, synth: Synth
) -> None:
    # Given larger inputs allowed in the context, and more memory for the profile function
    for name in ("api", "profile", "chunk", "fix_worker"):
        env = configured.resources[configured.function_id(name)]["Properties"]["Environment"]["Variables"]
        # Then every function that sizes or reads an input holds the same limits
        assert env["ITERATE_MAX_CELLS"] == "200000000" and env["ITERATE_MAX_FILE_BYTES"] == str(3 * 2**30), (
            name
        )
    sandbox = configured.resources[configured.function_id("sandbox")]["Properties"]["Environment"][
        "Variables"
    ]
    assert "ITERATE_MAX_CELLS" not in sandbox  # it reads no input file: nothing to size
    # And the profile function (which merges and profiles the whole table) gets the memory asked for
    assert configured.resources[configured.function_id("profile")]["Properties"]["MemorySize"] == 8192
    # While without that context the engine's defaults hold and the profile function keeps 4 GB
    default = synth.resources[synth.function_id("profile")]["Properties"]
    assert "ITERATE_MAX_CELLS" not in default["Environment"]["Variables"] and default["MemorySize"] == 4096


def test_the_profile_functions_memory_stays_within_lambdas_range() -> None:
    from pydantic import ValidationError

    from infra.stack import StackConfig

    with pytest.raises(ValidationError):
        StackConfig(profile_memory_mb=20480)
    with pytest.raises(ValidationError):
        StackConfig(max_cells=0)


def test_each_function_holds_exactly_the_table_actions_its_code_makes(synth: Synth) -> None:
    from infra.runtime import TABLE_ACCESS, transaction_writes

    (table_id,) = synth.of_type("AWS::DynamoDB::Table")
    table_arn = {"Fn::GetAtt": [table_id, "Arn"]}
    index_arn = {"Fn::Join": ["", [table_arn, "/index/GSI1"]]}
    for name in _function_names():
        granted: set[str] = set()
        for s in synth.statements_of_role(synth.role_of(synth.function_id(name))):
            for action in actions_of(s):
                if not action.startswith("dynamodb:"):
                    continue
                resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
                for resource in resources:
                    # Only the table and its one index, each named exactly: no index/* or table/* wildcard
                    assert resource in (table_arn, index_arn), (name, resource)
                    suffix = ":GSI1" if resource == index_arn else ""
                    granted.add(action.removeprefix("dynamodb:") + suffix)
        # Then each role holds what infra/runtime.py lists (checked against real calls in tests/statemachine)
        # and nothing reads the whole table; IAM has no TransactWriteItems action: a transaction's writes are
        # granted as what they are (the run slots' transactions put, update and delete; the fix worker's, a
        # run's intake, put and update)
        expected = {a for a in TABLE_ACCESS[name] if a != "TransactWriteItems"}
        if "TransactWriteItems" in TABLE_ACCESS[name]:
            expected |= transaction_writes(name)
        assert granted == expected, name
        assert "Scan" not in granted and not {"BatchGetItem", "TransactWriteItems", "PartiQLSelect"} & granted
        # and deletes are only the API's (schedules, idempotency keys, a dataset's items), admission's (a queue
        # entry) and the slot releases of the functions that end runs
        if "DeleteItem" in granted:
            assert name in {"api", "admission", "report", "record_failure"}, name
    # And the index is queried by exactly the functions that list a dataset's runs
    readers = {n for n in _function_names() if "Query:GSI1" in TABLE_ACCESS[n]}
    assert readers == {"api", "analyze"}


def test_the_chunk_function_reads_only_uploads_and_writes_only_run_chunk_partials(synth: Synth) -> None:
    from infra.runtime import CHUNK_CONCURRENCY

    # Given the chunk function's role (one byte range of an upload in, its partial out)
    statements = synth.statements_of_role(synth.role_of(synth.function_id("chunk")))
    s3 = [(a, json.dumps(s["Resource"])) for s in statements for a in actions_of(s) if a.startswith("s3:")]
    reads = {resource for action, resource in s3 if action in ("s3:GetObject", "s3:GetObjectVersion")}
    writes = {resource for action, resource in s3 if action == "s3:PutObject"}
    # Then it reads the uploads (and fixed versions) only, never the run's artifacts
    assert reads and all(("/uploads/*" in r or "/versions/*" in r) for r in reads), reads
    # And writes only under a run's chunks/ prefix (tagged: the bucket's lifecycle expires the partials);
    # it holds no table, secret or event right
    tagging = {r for a, r in s3 if a == "s3:PutObjectTagging"}
    assert tagging == writes
    rules = [
        rule
        for b in synth.of_type("AWS::S3::Bucket").values()
        for rule in b["Properties"].get("LifecycleConfiguration", {}).get("Rules", [])
    ]
    (expiry,) = [r for r in rules if r["Id"] == "chunk-partials-expire"]
    assert expiry["TagFilters"] == [{"Key": "iterate-chunk-partial", "Value": "true"}]
    assert expiry["ExpirationInDays"] <= 7 and expiry["Status"] == "Enabled"
    assert writes and all("/artifacts/*/*/*/chunks/*" in r for r in writes), writes
    assert not [
        a
        for s in statements
        for a in actions_of(s)
        if a.split(":")[0] in ("dynamodb", "secretsmanager", "events")
    ]
    # And its Map runs at the chunk concurrency, not the sandbox's
    (sm,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    states = json.loads(sm["Properties"]["DefinitionString"])["States"]
    assert states["ProfileChunks"]["MaxConcurrency"] == CHUNK_CONCURRENCY
    assert states["InvestigateEach"]["MaxConcurrency"] == 10


def test_followup_holds_no_s3_right_and_only_the_fix_worker_writes_under_versions(synth: Synth) -> None:
    # The follow-up conversation writes no data; a versions/ write belongs to the function that applies fixes
    statements = synth.statements_of_role(synth.role_of(synth.function_id("followup")))
    assert not [a for s in statements for a in actions_of(s) if a.startswith("s3:")]
    writers = set()
    for name in _function_names():
        for s in synth.statements_of_role(synth.role_of(synth.function_id(name))):
            if "s3:PutObject" in actions_of(s) and "/versions/" in json.dumps(s["Resource"]):
                writers.add(name)
    assert writers == {"fix_worker"}
    # And the fix worker writes nowhere else, nor reads the script library
    for s in synth.statements_of_role(synth.role_of(synth.function_id("fix_worker"))):
        if "s3:PutObject" in actions_of(s):
            assert "/versions/" in json.dumps(s["Resource"])
        assert "/library/" not in json.dumps(s.get("Resource", ""))


def test_the_user_pool_client_has_no_oauth_flow_or_callback_url(synth: Synth) -> None:
    (client,) = synth.of_type("AWS::Cognito::UserPoolClient").values()
    props = client["Properties"]
    # SRP sign-in from the application only: no implicit (or any) OAuth grant, no example.com callback
    assert props["AllowedOAuthFlowsUserPoolClient"] is False
    assert not {"AllowedOAuthFlows", "CallbackURLs", "LogoutURLs", "AllowedOAuthScopes"} & props.keys()
    assert props["SupportedIdentityProviders"] == ["COGNITO"]
    assert "ALLOW_USER_SRP_AUTH" in props["ExplicitAuthFlows"] and props["GenerateSecret"] is False


def test_regression_events_reach_an_encrypted_topic_and_schedules_have_a_dlq(synth: Synth) -> None:
    from iterate.aws.payloads import EVENT_SOURCE, REGRESSION_DETAIL_TYPE

    # Given the regression topic
    topic_id, topic = _topic(synth, "Iterate regressions")
    # Then a rule sends exactly the Iterate.IssueRegressed events to it
    (rule,) = [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("detail-type") == [REGRESSION_DETAIL_TYPE]
    ]
    assert rule["EventPattern"]["source"] == [EVENT_SOURCE]
    assert [t["Arn"] for t in rule["Targets"]] == [{"Ref": topic_id}]
    # And EventBridge may publish to it, encrypted with a key it may use, over TLS only
    policy = _topic_policy(synth, topic_id)["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "events.amazonaws.com"} and "sns:Publish" in actions_of(s)
        for s in policy
    )
    key = synth.resources[topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]]["Properties"]
    assert any(
        s.get("Principal") == {"Service": "events.amazonaws.com"} and "kms:GenerateDataKey*" in actions_of(s)
        for s in key["KeyPolicy"]["Statement"]
    )
    # And the API gives every schedule a dead-letter queue the scheduler role may send to, and the minimum
    env = synth.resources[synth.function_id("api")]["Properties"]["Environment"]["Variables"]
    dlq_id = env["ITERATE_SCHEDULE_DLQ_ARN"]["Fn::GetAtt"][0]
    assert synth.resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    assert synth.resources[dlq_id]["Properties"]["SqsManagedSseEnabled"] is True
    assert env["ITERATE_MIN_SCHEDULE_MINUTES"] == "60"
    role_policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in synth.of_type("AWS::IAM::Policy").values()
        if any("SchedulerRole" in str(r) for r in p["Properties"]["Roles"])
    ]
    assert any(
        "sqs:SendMessage" in actions_of(s) and {"Fn::GetAtt": [dlq_id, "Arn"]} == s["Resource"]
        for statements in role_policies
        for s in statements
    )


def test_context_sets_the_regression_address_and_the_minimum_schedule_interval(configured: Synth) -> None:
    topic_id, _ = _topic(configured, "Iterate regressions")
    (subscription,) = [
        s
        for s in configured.of_type("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic_id}
    ]
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "data-team@example.com"
    env = configured.resources[configured.function_id("api")]["Properties"]["Environment"]["Variables"]
    assert env["ITERATE_MIN_SCHEDULE_MINUTES"] == "15"


@pytest.mark.parametrize("minutes", [1, 4])
def test_a_minimum_schedule_interval_below_five_minutes_is_refused_at_synth(
    tmp_path: Path, minutes: int
) -> None:
    from pydantic import ValidationError

    from infra.app import build_app

    with pytest.raises(ValidationError, match="min_schedule_minutes"):
        build_app(outdir=tmp_path, placeholder_assets=True, context={"iterate:min_schedule_minutes": minutes})


def test_admission_queue_is_fifo_with_a_dlq_and_feeds_the_admission_function(synth: Synth) -> None:
    # Given the FIFO queues of the stack
    fifo = {k: q for k, q in synth.of_type("AWS::SQS::Queue").items() if q["Properties"].get("FifoQueue")}
    (queue_id,) = [k for k, q in fifo.items() if "RedrivePolicy" in q["Properties"]]
    queue = fifo[queue_id]["Properties"]
    # Then the run id dedupes (not the body), the DLQ is FIFO too and takes a message after 1,000 receives
    assert queue.get("ContentBasedDeduplication") in (None, False)
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 1000
    assert _refs(queue["RedrivePolicy"]["deadLetterTargetArn"]) <= set(fifo)
    assert queue["SqsManagedSseEnabled"] is True
    # And the admission function reads it in batches reporting partial failures (the waiting ones)
    admission = synth.function_id("admission")
    (mapping,) = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if queue_id in _refs(m["Properties"]["EventSourceArn"])
    ]
    assert mapping["FunctionName"] == {"Ref": admission} and mapping["BatchSize"] == 10
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # And only admission may start executions; the API and the fix worker may queue runs
    (sm_id,) = synth.of_type("AWS::StepFunctions::StateMachine")
    for name in _function_names():
        statements = synth.statements_of_role(synth.role_of(synth.function_id(name)))
        starts = any(
            "states:StartExecution" in actions_of(s) and sm_id in _refs(s["Resource"]) for s in statements
        )
        sends = any(
            "sqs:SendMessage" in actions_of(s) and queue_id in _refs(s["Resource"]) for s in statements
        )
        assert starts == (name == "admission"), name
        assert sends == (name in {"admission", "api", "fix_worker"}), name
    # And an execution's end (any outcome) reaches admission, which frees its slots
    (ended,) = [
        r["Properties"]
        for r in synth.of_type("AWS::Events::Rule").values()
        if r["Properties"]["EventPattern"]["source"] == ["aws.states"]
    ]
    assert ended["EventPattern"]["detail"]["status"] == ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]
    assert ended["EventPattern"]["detail"]["stateMachineArn"] == [{"Ref": sm_id}]
    assert [t["Arn"] for t in ended["Targets"]] == [{"Fn::GetAtt": [admission, "Arn"]}]
    # And the slots' lease outlives the state machine's timeout
    env = synth.resources[admission]["Properties"]["Environment"]["Variables"]
    assert int(env["ITERATE_RUN_LEASE_S"]) == 6 * 3600 + 900
    assert env["ITERATE_MAX_CONCURRENT_RUNS"] == "5" and env["ITERATE_GLOBAL_CONCURRENT_RUNS"] == "50"


def test_schedules_invoke_the_admission_function(synth: Synth) -> None:
    admission = synth.function_id("admission")
    (role_id,) = [
        k
        for k, r in synth.of_type("AWS::IAM::Role").items()
        if "scheduler.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    statements = synth.statements_of_role(role_id)
    invokes = [s for s in statements if "lambda:InvokeFunction" in actions_of(s)]
    assert [s["Resource"] for s in invokes] == [{"Fn::GetAtt": [admission, "Arn"]}]
    assert not any(a.startswith("states:") for s in statements for a in actions_of(s))
    api_env = synth.resources[synth.function_id("api")]["Properties"]["Environment"]["Variables"]
    assert api_env["ITERATE_ADMISSION_FUNCTION_ARN"] == {"Fn::GetAtt": [admission, "Arn"]}


def test_api_and_profile_functions_reserve_concurrency(synth: Synth) -> None:
    reserved = {
        name: synth.resources[synth.function_id(name)]["Properties"].get("ReservedConcurrentExecutions")
        for name in _function_names()
    }
    # Then the API keeps 20, the profile function one per run the deployment allows at once, the sandbox 13
    assert {k: v for k, v in reserved.items() if v is not None} == {"api": 20, "profile": 50, "sandbox": 13}


def test_a_monthly_budget_notifies_the_alarm_topic(synth: Synth) -> None:
    topic_id, topic = _topic(synth, "Iterate alarms")
    (budget,) = synth.of_type("AWS::Budgets::Budget").values()
    props = budget["Properties"]
    assert props["Budget"]["BudgetType"] == "COST" and props["Budget"]["TimeUnit"] == "MONTHLY"
    assert props["Budget"]["BudgetLimit"] == {"Amount": 1000, "Unit": "USD"}
    kinds = set()
    for entry in props["NotificationsWithSubscribers"]:
        assert entry["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topic_id}}]
        kinds.add((entry["Notification"]["NotificationType"], entry["Notification"]["Threshold"]))
    assert kinds == {("FORECASTED", 80), ("ACTUAL", 100)}
    # And Budgets may publish to the topic and use its key
    policy = _topic_policy(synth, topic_id)
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "budgets.amazonaws.com"} and "sns:Publish" in actions_of(s)
        for s in statements
    )
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key_statements = synth.resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    assert any(
        "budgets.amazonaws.com" in _services(s) and "kms:GenerateDataKey*" in actions_of(s)
        for s in key_statements
    )
