"""Orchestration: the state machine from statemachine/analysis.asl.json, its substitutions, logs and grants."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.asl import CHUNK_MAP, iter_states, with_map_concurrency
from infra.nag import acknowledge, acknowledge_wildcard

# The batches of template proofs: each child catches every error of its own (a failed batch fails nothing).
BATCH_MAP = "ProveTemplates"

__all__ = [
    "CHUNK_MAP",
    "AslError",
    "OrchestrationConstruct",
    "iter_states",
    "load_asl",
    "with_map_concurrency",
]

PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


class AslError(ValueError):
    """The ASL file is missing, is not JSON, or uses a placeholder the stack cannot fill."""


def load_asl(path: Path) -> dict[str, Any]:
    """The ASL document; a missing or invalid file is an error, never a silent fallback."""
    if not path.is_file():
        raise AslError(f"state machine definition not found: {path}")
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AslError(f"{path} is not valid JSON: {exc}") from exc
    return doc


def placeholders(text: str) -> set[str]:
    """Every `${Name}` the definition uses."""
    return set(PLACEHOLDER.findall(text))


def uses_distributed_map(doc: Mapping[str, Any]) -> bool:
    return any(
        (s.get("ItemProcessor") or {}).get("ProcessorConfig", {}).get("Mode") == "DISTRIBUTED"
        for _, s in iter_states(doc["States"])
    )


def service_integrations(doc: Mapping[str, Any]) -> set[str]:
    """`dynamodb:updateItem`, `events:putEvents`, `s3:getObject` … for every optimized integration a Task
    or a Map's ItemReader uses."""
    found = set()
    for _, state in iter_states(doc["States"]):
        resources = [state.get("Resource", "") if state.get("Type") == "Task" else ""]
        resources.append((state.get("ItemReader") or {}).get("Resource", ""))
        for resource in resources:
            if resource.startswith("arn:aws:states:::"):
                found.add(resource.removeprefix("arn:aws:states:::").split(".")[0])
    return found


class OrchestrationConstruct(Construct):
    """The Standard state machine; every `${…}` in the ASL must map to a value here or synth fails.

    The definition is the ASL file as it is, but for the Maps' MaxConcurrency, set from the stack config.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        asl_path: Path,
        functions: Mapping[str, lambda_.IFunction],
        table: dynamodb.ITable,
        bucket_name: str,
        readable_objects: str,
        map_concurrency: int,
        substitutions: Mapping[str, str] | None = None,
        chunk_concurrency: int | None = None,
        timeout: Duration | None = None,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        chunks = {CHUNK_MAP: chunk_concurrency} if chunk_concurrency is not None else {}
        doc = with_map_concurrency(load_asl(asl_path), map_concurrency, chunks)
        if timeout is not None:
            # A definition given as a string keeps its own TimeoutSeconds (the construct's `timeout` is not
            # merged into it): the execution's timeout goes into the definition.
            doc["TimeoutSeconds"] = int(timeout.to_seconds())
        text = asl_path.read_text()
        stack = Stack.of(self)
        # A fixed name lets the role grant the distributed Map's child executions without a dependency cycle
        # (role policy → state machine ARN → role).
        self.state_machine_name = f"{stack.stack_name}-Analysis"
        known: dict[str, str] = {
            **{placeholder: fn.function_arn for placeholder, fn in functions.items()},
            "TableName": table.table_name,
            "TableArn": table.table_arn,
            "BucketName": bucket_name,
            "EventBusName": "default",
            "StateMachineName": self.state_machine_name,
            **(substitutions or {}),
        }
        used = placeholders(text)
        unknown = sorted(used - known.keys())
        if unknown:
            raise AslError(
                f"{asl_path.name} uses placeholders the stack does not provide: {', '.join(unknown)}"
            )
        # Only the names the ASL uses: Fn::Sub with unused variables is noise cfn-lint warns about.
        self.substitutions = {name: known[name] for name in sorted(used)}

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            # The vendedlogs prefix keeps the log-group resource policy small (AWS guidance for Step Functions).
            log_group_name=f"/aws/vendedlogs/states/{self.state_machine_name}",
            retention=log_retention,
            removal_policy=removal_policy,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=self.state_machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(json.dumps(doc, indent=1)),
            definition_substitutions=self.substitutions,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
            ),
            tracing_enabled=True,
        )
        role = self.state_machine.role
        for placeholder, fn in functions.items():
            if placeholder in used:
                fn.grant_invoke(role)
                acknowledge_wildcard(
                    role,
                    f"{fn.function_arn}:*",
                    "Invoke on the function's versions and aliases (grant_invoke), one function per statement.",
                )
        integrations = service_integrations(doc)
        if any(i.startswith("dynamodb:") for i in integrations):
            table.grant_read_write_data(role)
        if "s3:getObject" in integrations:
            # The Maps read their items (the chunk manifest ProfileDataset wrote, the issue ids AnalyzeDataset
            # wrote) from the run's prefix.
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[readable_objects])
            )
            acknowledge_wildcard(
                role,
                readable_objects,
                "The Maps' ItemReaders read the chunk manifest and the issue list the steps wrote under the "
                "run's artifacts prefix, keyed by owner/dataset/run at run time; read-only, object level.",
            )
        if any(i.startswith("events:") for i in integrations):
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["events:PutEvents"],
                    resources=[
                        stack.format_arn(service="events", resource="event-bus", resource_name="default")
                    ],
                )
            )
        self.distributed_map = uses_distributed_map(doc)
        # Child executions of a distributed Map publish their metrics under "<machine>/<the Map's Label>".
        labels = [
            s["Label"]
            for name, s in iter_states(doc["States"])
            if s.get("Type") == "Map" and s.get("Label") and name not in (CHUNK_MAP, BATCH_MAP)
        ]
        self.investigations_arn = (
            f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:stateMachine:"
            f"{self.state_machine_name}/{labels[0]}"
            if labels
            else None
        )
        if self.distributed_map:
            self._grant_child_executions(role)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:*LogDelivery, DescribeLogGroups…) and X-Ray trace submission "
            "have no resource-level permissions.",
        )

    def _grant_child_executions(self, role: iam.IRole) -> None:
        stack = Stack.of(self)
        name = self.state_machine_name
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:StartExecution"],
                resources=[
                    stack.format_arn(
                        service="states",
                        resource="stateMachine",
                        resource_name=name,
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            )
        )
        child_executions = f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:{name}/*"
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:StopExecution"], resources=[child_executions]
            )
        )
        acknowledge_wildcard(
            role,
            child_executions,
            "The distributed Map's child executions are named by Step Functions at run time "
            "(<machine>/<map run>:<id>); the grant is limited to this state machine's children.",
        )

    def execution_arn_pattern(self) -> str:
        """Every execution of this state machine (the API describes and cancels runs by execution ARN)."""
        return (
            f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:{self.state_machine_name}:*"
        )
