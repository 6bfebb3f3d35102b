"""The pieces synth relies on: ASL loading and substitution checks, layer stripping and cache keys."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.infra


def _orchestration(tmp_path: Path, asl: str, *, map_concurrency: int = 10):  # type: ignore[no-untyped-def]
    from aws_cdk import App, RemovalPolicy, Stack
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk import aws_logs as logs

    from infra.constructs.orchestration import OrchestrationConstruct

    path = tmp_path / "flow.asl.json"
    path.write_text(asl)
    stack = Stack(App(), "T")
    fn = lambda_.Function.from_function_attributes(
        stack, "Fn", function_arn="arn:aws:lambda:us-east-1:111111111111:function:f", same_environment=True
    )
    return OrchestrationConstruct(
        stack,
        "O",
        asl_path=path,
        functions={"ProfileFunctionArn": fn},
        table=dynamodb.Table.from_table_name(stack, "Tbl", "t"),
        bucket_name="b",
        readable_objects="arn:aws:s3:::b/artifacts/*",
        map_concurrency=map_concurrency,
        log_retention=logs.RetentionDays.ONE_DAY,
        removal_policy=RemovalPolicy.DESTROY,
    )


ASL_OK = (
    '{"StartAt": "P", "States": {"P": {"Type": "Task", "Resource": "${ProfileFunctionArn}", "End": true}}}'
)


def test_a_placeholder_the_stack_cannot_fill_fails_synth(tmp_path: Path) -> None:
    from infra.constructs.orchestration import AslError

    # Given an ASL that names a resource the stack does not have
    asl = ASL_OK.replace("${ProfileFunctionArn}", "${ProfileFunctionArn}").replace(
        '"End": true', '"End": true, "Comment": "${Bogus}"'
    )
    # When the orchestration is built, Then it refuses, naming the placeholder
    with pytest.raises(AslError, match="Bogus"):
        _orchestration(tmp_path, asl)


def test_a_missing_or_invalid_asl_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    from infra.constructs.orchestration import AslError, load_asl

    with pytest.raises(AslError, match="not found"):
        load_asl(tmp_path / "nope.asl.json")
    bad = tmp_path / "bad.asl.json"
    bad.write_text("{not json")
    with pytest.raises(AslError, match="not valid JSON"):
        load_asl(bad)


def test_only_used_placeholders_are_substituted(tmp_path: Path) -> None:
    orchestration = _orchestration(tmp_path, ASL_OK)
    assert set(orchestration.substitutions) == {"ProfileFunctionArn"}
    assert orchestration.distributed_map is False


def test_strip_tree_drops_bulk_and_runtime_duplicates_but_keeps_code(tmp_path: Path) -> None:
    from infra.assets import strip_tree

    # Given an installed tree with tests, caches, stubs, RECORDs and boto3 pulled in by a dependency
    files = [
        "pkg/core.py", "pkg/tests/test_core.py", "pkg/__pycache__/core.cpython-312.pyc", "pkg/core.pyi",
        "pkg-1.0.dist-info/RECORD", "pkg-1.0.dist-info/METADATA", "boto3/__init__.py", "six.py", "bin/tool",
        "pyarrow/libarrow_flight.so.2600", "pyarrow/libarrow.so.2600",
    ]  # fmt: skip
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    # When the powertools layer's strip rules run
    strip_tree(tmp_path, "powertools")
    left = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    # Then only runtime code and metadata remain
    assert left == {"pkg/core.py", "pkg-1.0.dist-info/METADATA", "pyarrow/libarrow.so.2600"}


def test_layer_cache_key_follows_the_requirements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from infra import assets

    req = tmp_path / "requirements-x.txt"
    monkeypatch.setitem(assets.REQUIREMENT_LAYERS, "x", req)
    req.write_text("pydantic==2.14.3\n")
    first = assets.layer_digest("x")
    assert assets.layer_digest("x") == first
    req.write_text("pydantic==2.14.2\n")
    assert assets.layer_digest("x") != first
    with pytest.raises(assets.AssetBuildError):
        assets.layer_digest("nope")


def test_the_map_concurrency_is_the_stacks_setting(tmp_path: Path) -> None:
    import json

    from aws_cdk import Stack
    from aws_cdk.assertions import Template

    from infra.stack import StackConfig

    # Given an ASL with a Map, and a stack that sets its concurrency
    asl = {
        "StartAt": "M",
        "States": {
            "M": {
                "Type": "Map",
                "MaxConcurrency": 10,
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "P",
                    "States": {"P": {"Type": "Task", "Resource": "${ProfileFunctionArn}", "End": True}},
                },
                "End": True,
            }
        },
    }
    orchestration = _orchestration(tmp_path, json.dumps(asl), map_concurrency=3)
    (sm,) = (
        Template.from_stack(Stack.of(orchestration))
        .find_resources("AWS::StepFunctions::StateMachine")
        .values()
    )
    # Then the deployed definition carries that concurrency
    assert json.loads(sm["Properties"]["DefinitionString"])["States"]["M"]["MaxConcurrency"] == 3
    # And by default it follows the sandbox concurrency (one run may use it all, never more than 10)
    assert StackConfig(sandbox_reserved_concurrency=4).map_concurrency() == 4
    assert StackConfig(sandbox_reserved_concurrency=50).map_concurrency() == 10
    assert StackConfig(sandbox_reserved_concurrency=None).map_concurrency() == 10
    assert StackConfig(sandbox_reserved_concurrency=50, investigation_concurrency=20).map_concurrency() == 20
