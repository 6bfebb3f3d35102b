"""Every Lambda function from one factory: a spec per function, each with its own role, log group and grants."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Aws, Duration, RemovalPolicy, Size
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.constructs.layers import ARCHITECTURE, RUNTIME, LayersConstruct
from infra.constructs.network import SandboxNetworkConstruct
from infra.constructs.storage import ARTIFACTS, CHUNKS, LIBRARY, UPLOADS, VERSIONS, StorageConstruct
from infra.nag import acknowledge, acknowledge_wildcard
from infra.runtime import (
    SANDBOX_INLINE_RESULT_BYTES,
    SANDBOX_MAX_OUTPUT_BYTES,
    TABLE_ACCESS,
    transaction_writes,
)
from iterate.api.fix_routes import FIX_WORKER_TIMEOUT_S
from iterate.storage.dynamo import GSI1

HANDLER = "handler.lambda_handler"
CODE_EXCLUDES = ["__pycache__", "*.pyc", "tests", ".pytest_cache"]
# API Gateway gives up on an integration after 29 s; a function behind it should stop first.
API_TIMEOUT_S = 28


class MissingFunctionError(RuntimeError):
    """A function in FUNCTION_SPECS has no `functions/<name>/handler.py` to package."""


@dataclass(frozen=True)
class FunctionSpec:
    """What differs between functions: code folder, layers, sizing and the narrow access each one needs."""

    name: str
    description: str
    layers: tuple[str, ...]
    memory_mb: int
    timeout_s: int
    s3_read: tuple[str, ...] = ()
    s3_write: tuple[str, ...] = ()
    # Deletes every version of objects under these prefixes (DELETE /datasets/{id}): it lists versions there.
    s3_delete: tuple[str, ...] = ()
    tagged_writes: bool = False  # its PUTs carry object tags (a lifecycle rule expires them by tag)
    multipart: bool = False  # aborts the multipart uploads it started under its s3_write prefixes
    # Reads a run's source in the owner's own bucket through the role the owner grants (iterate.aws.sources).
    reads_owner_sources: bool = False
    llm: bool = False  # may read the Anthropic key secret
    events: bool = False  # puts the run-completion event on the default bus
    sandbox: bool = False  # isolated VPC, no AWS permissions, no table/bucket settings
    ephemeral_mb: int = 512
    in_state_machine: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def table_access(self) -> frozenset[str]:
        """The DynamoDB actions this function's code makes (infra/runtime.py); none: no table at all."""
        return TABLE_ACCESS[self.name]

    @property
    def table(self) -> bool:
        return bool(self.table_access)

    @property
    def pascal(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def asl_placeholder(self) -> str | None:
        """The `${…}` name the ASL uses for this function's ARN (the contract with the runtime engineer)."""
        return f"{self.pascal}FunctionArn" if self.in_state_machine else None


PIPELINE = ("powertools", "iterate")
# The roles owners grant for data in their own buckets (any account: the owner's trust policy decides).
OWNER_ROLES = f"arn:{Aws.PARTITION}:iam::*:role/*"
# The profile function's memory by default: it merges a large upload's chunks and profiles the whole table.
PROFILE_MEMORY_MB = 4096
# The agent steps need the LLM SDK, and also pandas/pyarrow: the engine's offline agents (used when no key is
# set, and as the fallback when Claude fails) import the detectors, which import pandas. Measured with the
# trimmed data layer: 210 MiB of 250 (scripts/measure_functions.py). Should the offline agents stop needing
# pandas, these functions can drop "data".
AGENT_LAYERS = ("data", "llm", *PIPELINE)
FUNCTION_SPECS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        "profile",
        "Claims the upload, creates the run, reads the file once and profiles it",
        ("data", *PIPELINE),
        memory_mb=PROFILE_MEMORY_MB,  # iterate:profile_memory_mb changes it (infra/stack.py StackConfig)
        timeout_s=600,
        s3_read=(UPLOADS, ARTIFACTS, VERSIONS),  # versions/: a run started on a fixed version
        s3_write=(ARTIFACTS,),
        ephemeral_mb=4096,  # the source file is downloaded to /tmp before pyarrow reads it
        reads_owner_sources=True,
    ),
    # One byte range of a large upload per invocation (the ProfileChunks Map): a ranged GET of the upload,
    # its encoded columns PUT under the run's chunks/. Measured per range (scripts/aws_chunked.py,
    # docs/large-files.md): peak memory ~3-4x the range, so 64 MiB ranges fit 1 GB with room.
    FunctionSpec(
        "chunk",
        "Parses one byte range of a large upload into its encoded columns, stored under the run's chunks/",
        ("data", *PIPELINE),
        memory_mb=1024,
        timeout_s=120,
        s3_read=(UPLOADS, VERSIONS),  # the upload itself (versions/: a run started on a fixed version)
        s3_write=(CHUNKS,),  # it reads nothing back: no GetObject there
        tagged_writes=True,  # partials are tagged: the bucket's lifecycle expires them after a day or two
        reads_owner_sources=True,
    ),
    FunctionSpec(
        "understand",
        "Understanding agent: business description of the dataset and its columns",
        AGENT_LAYERS,
        memory_mb=512,
        timeout_s=300,
        s3_read=(ARTIFACTS,),
        s3_write=(ARTIFACTS,),
        llm=True,
    ),
    FunctionSpec(
        "analyze",
        "Analysis agent: detector candidates and understanding into issues to investigate",
        AGENT_LAYERS,
        memory_mb=1024,
        timeout_s=300,
        s3_read=(ARTIFACTS,),
        s3_write=(ARTIFACTS,),
        llm=True,
    ),
    FunctionSpec(
        "investigate",
        "Investigation agent: writes code per hypothesis, presigns the data for the sandbox, records results",
        AGENT_LAYERS,
        memory_mb=1024,
        timeout_s=300,
        # artifacts/: also what its presigned GET for data.parquet is signed with; library/: stored proofs
        # it offers before asking Claude (their index is in the table)
        s3_read=(ARTIFACTS, LIBRARY),
        s3_write=(ARTIFACTS,),
        llm=True,
    ),
    FunctionSpec(
        "sandbox",
        "Runs untrusted investigation code; reaches only a presigned GET for one run's data.parquet",
        ("data", *PIPELINE),
        # The code's budget is 3/4 of it (2,304 MB): what code that loads every column (an LLM's) needs on
        # the largest table the default limits accept (ITERATE_MAX_CELLS, 5M rows x 20 columns: stopped for
        # memory at 1,536 MB, 4.1 s at 2,304 MB). The duplicate-row templates read their columns on demand.
        memory_mb=3072,
        timeout_s=60,
        sandbox=True,
        # Code that reads every column (an LLM's, a duplicate-rows template) downloads the whole data.parquet
        # to /tmp (~63 MB per million rows of 20 columns); a template fetches only its columns' chunks.
        ephemeral_mb=4096,
    ),
    FunctionSpec(
        "report",
        "Merges the investigations into analysis.json, report.html and flags; emits the completion event",
        ("data", *PIPELINE),
        memory_mb=2048,
        timeout_s=600,
        s3_read=(ARTIFACTS,),
        s3_write=(ARTIFACTS, LIBRARY),  # library/: the run's new proofs, for the next run of the dataset
        events=True,
        ephemeral_mb=2048,
    ),
    FunctionSpec(
        "record_failure",
        "Marks a run FAILED with its reason and emits the completion event; never touches uploads/",
        ("core", *PIPELINE),
        memory_mb=256,
        timeout_s=60,
        s3_read=(ARTIFACTS,),
        s3_write=(ARTIFACTS,),
        events=True,
    ),
    # Only the conversation (DynamoDB and the LLM): it returns the fix action an answer decides and writes no
    # data, so it holds no S3 right. Writing the fixed dataset under versions/ is the fix function's.
    FunctionSpec(
        "followup",
        "Follow-up conversation on a smart-fix issue (API route): one question at a time, the fix it decides",
        AGENT_LAYERS,
        memory_mb=1024,
        timeout_s=API_TIMEOUT_S,
        llm=True,
        in_state_machine=False,
    ),
    # POST /runs/{id}/fixes and GET …/fixes/{fixId}: checks a fix against the run's analysis.json, records the
    # job and invokes the fix worker asynchronously (the data work never runs inside API Gateway's 29 s).
    FunctionSpec(
        "fix",
        "Checks and records a fix job of a finished run (API route), invokes the fix worker, reports its status",
        ("data", *PIPELINE),  # iterate.fix (which chooses the fixes) imports pyarrow
        memory_mb=1024,
        timeout_s=API_TIMEOUT_S,
        s3_read=(ARTIFACTS,),  # the run's analysis.json
        in_state_machine=False,
    ),
    # Invoked asynchronously by the fix route: reads a finished run's input (an upload or an earlier version)
    # and its evidence, writes the new version: the only writer of versions/. No LLM: answers are mapped by the
    # offline agent. No retries (a retry would write a second version); a failed invocation goes to its DLQ.
    FunctionSpec(
        "fix_worker",
        "Applies a fix job's fixes to a run's input as a new dataset version and starts a run on it",
        ("data", *PIPELINE),
        memory_mb=2048,
        timeout_s=FIX_WORKER_TIMEOUT_S,
        s3_read=(UPLOADS, ARTIFACTS, VERSIONS),
        s3_write=(VERSIONS,),
        ephemeral_mb=4096,  # the input and the version are written to /tmp
        in_state_machine=False,
    ),
    # Queues the runs uploads and schedules ask for (quotas checked first), starts queued runs as run slots
    # free up, and releases the slots of executions that ended. HeadObject only: a schedule's upload size.
    FunctionSpec(
        "admission",
        "Admission: queues runs per owner (FIFO), starts them when a global and an owner run slot are free",
        ("core", *PIPELINE),
        memory_mb=256,
        timeout_s=60,
        s3_read=(UPLOADS, VERSIONS),
        reads_owner_sources=True,
        in_state_machine=False,
    ),
    FunctionSpec(
        "api",
        "REST API: datasets, presigned uploads, runs, issues, reports, schedules (scoped to the caller)",
        ("core", *PIPELINE),
        memory_mb=512,
        timeout_s=API_TIMEOUT_S,
        s3_read=(ARTIFACTS, UPLOADS),  # presigned report links; the size of an upload a run is started on
        s3_write=(UPLOADS,),  # presigned upload URLs: the only writer of uploads/ is the caller's PUT
        multipart=True,  # a file past 5 GB goes in as a multipart upload (iterate.aws.uploads)
        reads_owner_sources=True,
        s3_delete=(UPLOADS, ARTIFACTS, VERSIONS, LIBRARY),  # DELETE /datasets/{id}: all a dataset stored
        in_state_machine=False,
    ),
)
# The one sandbox function: the investigate function books its time at this memory (each run's cost estimate).
SANDBOX_SPEC = next(s for s in FUNCTION_SPECS if s.sandbox)


def function_code_dir(functions_dir: Path, name: str) -> Path:
    return functions_dir / name


class FunctionsConstruct(Construct):
    """Builds every function in `specs` the same way; what differs lives in its FunctionSpec."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: tuple[FunctionSpec, ...],
        functions_dir: Path,
        layers: LayersConstruct,
        storage: StorageConstruct,
        network: SandboxNetworkConstruct,
        anthropic_secret: secretsmanager.ISecret,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        sandbox_reserved_concurrency: int | None,
        sandbox_code_timeout_s: int,
        placeholder_code: Path | None,
        limits_env: dict[str, str] | None = None,
        memory_mb: dict[str, int] | None = None,
        admission_env: dict[str, str] | None = None,
        reserved_concurrency: dict[str, int | None] | None = None,
    ) -> None:
        """`limits_env`: input limits (ITERATE_MAX_*) for every function but the sandbox; `memory_mb`: memory
        by function name, over its spec's; `admission_env`: run limits and quotas, for the functions that
        queue runs or read them; `reserved_concurrency`: by function name (the sandbox's is its own argument)."""
        super().__init__(scope, construct_id)
        self.specs = {s.name: s for s in specs}
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        default_bus = events.EventBus.from_event_bus_name(self, "DefaultBus", "default")
        for spec in specs:
            code_dir = function_code_dir(functions_dir, spec.name)
            if not (code_dir / "handler.py").is_file():
                if placeholder_code is None:
                    raise MissingFunctionError(
                        f"{code_dir / 'handler.py'} is missing; every function needs one"
                    )
                code_dir = placeholder_code
            role = iam.Role(
                self,
                f"{spec.pascal}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"Iterate {spec.name} function (its own role: least privilege per step)",
            )
            log_group = logs.LogGroup(
                self, f"{spec.pascal}Logs", retention=log_retention, removal_policy=removal_policy
            )
            env = {
                "POWERTOOLS_SERVICE_NAME": "iterate",
                "POWERTOOLS_METRICS_NAMESPACE": "Iterate",
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **spec.extra_env,
            }
            if not spec.sandbox:
                env["ITERATE_BUCKET"] = storage.bucket.bucket_name
                env.update(limits_env or {})
            if spec.table:
                env["ITERATE_TABLE"] = storage.table.table_name
            if spec.llm:
                env["ITERATE_ANTHROPIC_SECRET_ARN"] = anthropic_secret.secret_arn
            if spec.events:
                env["ITERATE_EVENT_BUS"] = "default"
            if spec.name in ("api", "admission", "fix_worker"):  # they queue runs (quotas) or admit them
                env.update(admission_env or {})
            if spec.sandbox or spec.name == "investigate":
                env["ITERATE_SANDBOX_TIMEOUT_S"] = str(sandbox_code_timeout_s)
            if spec.name == "investigate":  # RecordAttempt books the sandbox's time at its memory (run cost)
                env["ITERATE_SANDBOX_FUNCTION_MEMORY_MB"] = str(SANDBOX_SPEC.memory_mb)
            if spec.sandbox:
                # The worker's address-space cap must sit below the function's memory, with room for Python.
                env["ITERATE_SANDBOX_MEMORY_MB"] = str(spec.memory_mb * 3 // 4)
                # Step Functions caps state at 256 KiB: output under it, and results over the inline cap go
                # to S3 through the presigned PUT in the event (the state then carries their key).
                env["ITERATE_SANDBOX_MAX_OUTPUT_BYTES"] = str(SANDBOX_MAX_OUTPUT_BYTES)
                env["ITERATE_SANDBOX_INLINE_RESULT_BYTES"] = str(SANDBOX_INLINE_RESULT_BYTES)
                # No active tracing here (no X-Ray rights, no route to it): keep the SDK from trying.
                env["POWERTOOLS_TRACE_DISABLED"] = "true"
                # Emptied after every invocation (and checked empty before the next): all of /tmp.
                env["ITERATE_SANDBOX_SCRATCH"] = "/tmp"

            vpc_props: dict[str, object] = {}
            reserved = (reserved_concurrency or {}).get(spec.name)
            if reserved is not None:
                vpc_props["reserved_concurrent_executions"] = reserved
            if spec.sandbox:
                vpc_props = {
                    "vpc": network.vpc,
                    "vpc_subnets": ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
                    "security_groups": [network.sandbox_sg],
                    "reserved_concurrent_executions": sandbox_reserved_concurrency,
                }
            fn = lambda_.Function(
                self,
                spec.pascal,
                description=spec.description,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=HANDLER,
                code=lambda_.Code.from_asset(str(code_dir), exclude=CODE_EXCLUDES),
                layers=layers.get(spec.layers),
                memory_size=(memory_mb or {}).get(spec.name, spec.memory_mb),
                timeout=Duration.seconds(spec.timeout_s),
                ephemeral_storage_size=Size.mebibytes(spec.ephemeral_mb),
                environment=env,
                role=role,
                log_group=log_group,
                # The sandbox gets no X-Ray permissions either: its role must hold nothing but ENI management.
                tracing=lambda_.Tracing.DISABLED if spec.sandbox else lambda_.Tracing.ACTIVE,
                **vpc_props,  # type: ignore[arg-type]
            )
            self.functions[spec.name] = fn
            self.roles[spec.name] = role
            # A role we create ourselves gets no AWSLambdaBasicExecutionRole: logs go to this log group only.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[log_group.log_group_arn],
                )
            )
            if spec.sandbox:
                self._grant_vpc_networking(role)
                self._deny_ec2_from_code(spec, role, fn)
            self._grant(spec, role, storage, anthropic_secret, default_bus)
            self._acknowledge(spec, role, fn, storage)

    @staticmethod
    def _grant_vpc_networking(role: iam.Role) -> None:
        # What AWSLambdaVPCAccessExecutionRole holds minus its logs:* on every log group: Lambda creates
        # and removes the function's network interfaces with the function's own role.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSubnets",
                    "ec2:DeleteNetworkInterface",
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                ],
                resources=["*"],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Lambda's VPC network-interface actions (ec2:CreateNetworkInterface, Describe*) do not support "
            "resource-level permissions; this is the sandbox's only permission besides its own log group.",
        )

    def _deny_ec2_from_code(self, spec: FunctionSpec, role: iam.Role, fn: lambda_.Function) -> None:
        """No EC2 call with the sandbox's credentials from its code, or from wherever they leak to.

        Lambda puts `lambda:SourceFunctionArn` in the context of the credentials it hands the execution
        environment, and leaves it out of the calls it makes itself with the same role outside it (the VPC
        network interfaces among them). So this Deny stops every ec2:* call made with the function's
        credentials (inside the function or wherever they were taken) and none of Lambda's own. ArnLike
        matches the function's ARN and any version or alias of it. A policy of its own, attached after the
        function: in the role's default policy the ARN would make a cycle (the function depends on that policy).
        """
        arn = fn.function_arn
        iam.Policy(
            self,
            f"{spec.pascal}DenyEc2FromCode",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    effect=iam.Effect.DENY,
                    actions=["ec2:*"],
                    resources=["*"],
                    conditions={"ArnLike": {"lambda:SourceFunctionArn": [arn, f"{arn}:*"]}},
                )
            ],
        )

    @staticmethod
    def _grant(
        spec: FunctionSpec,
        role: iam.Role,
        storage: StorageConstruct,
        secret: secretsmanager.ISecret,
        default_bus: events.IEventBus,
    ) -> None:
        for prefix in spec.s3_read:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:GetObjectVersion"], resources=[storage.objects(prefix)]
                )
            )
        if spec.s3_read:
            # Without ListBucket a missing key reads as AccessDenied instead of NoSuchKey.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[storage.bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in spec.s3_read]}},
                )
            )
        for prefix in spec.s3_write:
            actions = ["s3:PutObject", "s3:PutObjectTagging"] if spec.tagged_writes else ["s3:PutObject"]
            actions += ["s3:AbortMultipartUpload"] if spec.multipart else []
            role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[storage.objects(prefix)]))
        for prefix in spec.s3_delete:
            # The bucket is versioned: a dataset is gone only when every version and delete marker is.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:DeleteObject", "s3:DeleteObjectVersion"], resources=[storage.objects(prefix)]
                )
            )
        if spec.s3_delete:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucketVersions"],
                    resources=[storage.bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in spec.s3_delete]}},
                )
            )
        # IAM has no TransactWriteItems action: each write inside a transaction is authorized as itself.
        item_actions = sorted(
            {
                iam_action
                for a in spec.table_access
                if not a.startswith("Query")
                for iam_action in (transaction_writes(spec.name) if a == "TransactWriteItems" else (a,))
            }
        )
        if item_actions:
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in item_actions], resources=[storage.table.table_arn]
                )
            )
        queried = [storage.table.table_arn] if "Query" in spec.table_access else []
        queried += [f"{storage.table.table_arn}/index/{GSI1}"] if "Query:GSI1" in spec.table_access else []
        if queried:
            role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:Query"], resources=queried))
        if spec.reads_owner_sources:
            role.add_to_policy(iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[OWNER_ROLES]))
        if spec.llm:
            secret.grant_read(role)
        if spec.events:
            default_bus.grant_put_events_to(role)

    @staticmethod
    def _acknowledge(
        spec: FunctionSpec, role: iam.Role, fn: lambda_.Function, storage: StorageConstruct
    ) -> None:
        for prefix in sorted({*spec.s3_read, *spec.s3_write, *spec.s3_delete}):
            acknowledge_wildcard(
                role,
                storage.objects(prefix),
                f"Objects under {prefix} are keyed by owner/dataset/run, known only at run time; the grant "
                "is limited to that prefix and to object-level get/put (and, for the API, delete) actions.",
            )
        if spec.reads_owner_sources:
            acknowledge_wildcard(
                role,
                OWNER_ROLES,
                "An owner's role lives in the owner's account, named by the owner at run time; Iterate presents the "
                "owner's external id (iterate-<owner>), which the role's trust policy requires, and only reads.",
            )
        if not spec.sandbox:
            acknowledge(
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments/PutTelemetryRecords (active tracing) have no resource-level permissions.",
            )
        acknowledge(
            fn,
            "AwsSolutions-L1",
            "Python 3.12 on purpose: the layers are built for cp312 (pip --python-version 3.12); moving the "
            "runtime means rebuilding and re-measuring them together.",
        )
