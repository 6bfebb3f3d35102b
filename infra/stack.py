"""The Iterate stack: composes the constructs per concern and wires the few cross-concern grants."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Duration, RemovalPolicy, SecretValue, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from pydantic import BaseModel, ConfigDict, Field

from infra.assets import REPO, BuiltLayer
from infra.constructs.admission import AdmissionConstruct
from infra.constructs.alerts import RegressionAlertsConstruct
from infra.constructs.api import ApiConstruct
from infra.constructs.engine import EngineConstruct
from infra.constructs.functions import FUNCTION_SPECS, PROFILE_MEMORY_MB, FunctionsConstruct
from infra.constructs.layers import LayersConstruct
from infra.constructs.monitoring import MonitoringConstruct
from infra.constructs.network import SandboxNetworkConstruct
from infra.constructs.orchestration import OrchestrationConstruct
from infra.constructs.storage import ARTIFACTS, StorageConstruct
from infra.constructs.triggers import TriggersConstruct, dead_letter_queue
from infra.nag import acknowledge, acknowledge_wildcard
from infra.runtime import CHUNK_CONCURRENCY
from iterate.api.fix_routes import FIX_EVENT_MAX_AGE_S
from iterate.aws.schedules import DEFAULT_MIN_SCHEDULE_MINUTES, SCHEDULE_FLOOR_MINUTES
from iterate.aws.secrets import SECRET_PLACEHOLDER


class StackConfig(BaseModel):
    """Deployment knobs, read from the app's context (`-c iterate:…` or App(context=…))."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    asl_path: Path = REPO / "statemachine" / "analysis.asl.json"
    functions_dir: Path = REPO / "functions"
    openapi_path: Path = REPO / "docs" / "openapi.json"  # exported by the API code; routes and body models
    # Keep data on `cdk destroy` by default; a throwaway dev stack may choose DESTROY.
    retain_data: bool = True
    log_retention_days: int = 30
    # The sandbox concurrency: caps what hostile investigation code can burn, for the whole account (every
    # run shares it); needs that much of the account's unreserved concurrency. None: no reservation (and no
    # cap). Invokes over it are throttled, and throttles wait with backoff (the ASL's RunInSandbox Retry).
    # Sized from `make sandbox-peak` (2026-12-08, template proofs batched): one run of the sample makes 2 sandbox
    # invocations (14 proofs in one, 1 alone) and holds 1 at once; 0.47 s each (handler, mean). 10,000 runs a day
    # within 8 hours: 0.69 invocations a second, 2.8 at once even at the 4.07 s the unbatched proofs took with
    # 10 at once on 2 shared cores; plus one run's burst (a wide table's batches or LLM-written proofs, at most the
    # Map's 10 at once): 13.
    sandbox_reserved_concurrency: int | None = Field(default=13, ge=1)
    # Admission (infra/constructs/admission.py): runs of one owner, and of the deployment, in progress at once;
    # a run past either waits in the admission queue. The state machine's timeout, which a run slot's lease
    # outlives by 15 minutes (the lease is what frees a slot whose every release was lost).
    owner_concurrent_runs: int = Field(default=5, ge=1)
    global_concurrent_runs: int = Field(default=50, ge=1)
    run_timeout_hours: int = Field(default=6, ge=1, le=24 * 7)
    # Per-owner daily quotas (UTC day), checked before a run is queued; the deployment's LLM token rate (one
    # bucket every owner's calls share); each owner's API request rate (a bucket per owner).
    quota_runs_per_day: int = Field(default=500, ge=1)
    quota_bytes_per_day: int = Field(default=50 * 10**9, ge=1)
    quota_tokens_per_day: int = Field(default=5_000_000, ge=1)
    llm_tokens_per_minute: int = Field(default=400_000, ge=1000)
    api_owner_rps: float = Field(default=10.0, gt=0)
    api_owner_burst: int = Field(default=40, ge=1)
    # Reserved concurrency: the API keeps its own (a burst of runs cannot throttle it) and caps what one
    # burst of requests takes; the profile function never needs more than one per run in progress (None:
    # the global run limit). Reserved concurrency must leave the account 100 unreserved.
    api_reserved_concurrency: int | None = Field(default=20, ge=1)
    profile_reserved_concurrency: int | None = Field(default=None, ge=1)
    # An AWS Budgets cost budget per month (USD): at 80% forecast and 100% actual it notifies the alarm topic.
    monthly_budget_usd: float = Field(default=1000.0, gt=0)
    # Investigations of one run at once (the Map's MaxConcurrency); None: the sandbox concurrency, at most 10.
    investigation_concurrency: int | None = Field(default=None, ge=1, le=1000)
    sandbox_code_timeout_s: int = Field(default=30, ge=1, le=55)  # < the sandbox Lambda's 60 s
    # Chunk functions of one run at once (the ProfileChunks Map's MaxConcurrency): a large upload's byte ranges
    # parsed in parallel; each takes one of the account's Lambda concurrency while it runs.
    chunk_concurrency: int = Field(default=CHUNK_CONCURRENCY, ge=1, le=1000)
    # The largest input a run takes (ITERATE_MAX_FILE_BYTES, ITERATE_MAX_CELLS in every function; None: the
    # engine's defaults, 5 GB and 100 M cells), and the profile function's memory, which merges a chunked upload
    # and profiles the whole table in one process: MergeChunks alone, 10M rows x 20 columns, peaks at 1.8 GB of
    # anonymous memory, the ranges and the table in mapped files under its /tmp (2.9 GB without them;
    # scripts/merge_memory.py, docs/large-files.md), so more cells need more memory too.
    max_file_bytes: int | None = Field(default=None, ge=1)
    max_cells: int | None = Field(default=None, ge=1)
    profile_memory_mb: int = Field(default=PROFILE_MEMORY_MB, ge=1024, le=10240)
    # Every alarm goes to one SNS topic; with an address, the topic also e-mails it (confirm the subscription).
    alarm_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    # Iterate.IssueRegressed events go to an SNS topic; with an address, the topic also e-mails it.
    regression_email: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    # The shortest interval a dataset's schedule may have (the API refuses shorter ones); never below 5.
    min_schedule_minutes: int = Field(default=DEFAULT_MIN_SCHEDULE_MINUTES, ge=SCHEDULE_FLOOR_MINUTES)
    # Template tests only: functions whose handler.py is missing are packaged from this placeholder dir.
    placeholder_code: Path | None = None

    def limits_env(self) -> dict[str, str]:
        """The input limits set in the context, as the settings every function reads."""
        limits = {"ITERATE_MAX_FILE_BYTES": self.max_file_bytes, "ITERATE_MAX_CELLS": self.max_cells}
        return {name: str(value) for name, value in limits.items() if value is not None}

    def admission_env(self) -> dict[str, str]:
        """Run limits and quotas, for the functions that queue or admit runs."""
        values = {
            "ITERATE_MAX_CONCURRENT_RUNS": self.owner_concurrent_runs,
            "ITERATE_GLOBAL_CONCURRENT_RUNS": self.global_concurrent_runs,
            "ITERATE_RUN_LEASE_S": self.run_timeout_hours * 3600 + 900,
            "ITERATE_QUOTA_RUNS_PER_DAY": self.quota_runs_per_day,
            "ITERATE_QUOTA_BYTES_PER_DAY": self.quota_bytes_per_day,
            "ITERATE_QUOTA_TOKENS_PER_DAY": self.quota_tokens_per_day,
        }
        return {name: str(value) for name, value in values.items()}

    def shared_env(self) -> dict[str, str]:
        """Settings every function but the sandbox reads: the input limits, the LLM rate, the API rate."""
        return {
            **self.limits_env(),
            "ITERATE_LLM_TOKENS_PER_MINUTE": str(self.llm_tokens_per_minute),
            "ITERATE_API_OWNER_RPS": str(self.api_owner_rps),
            "ITERATE_API_OWNER_BURST": str(self.api_owner_burst),
        }

    def reserved_concurrency(self) -> dict[str, int | None]:
        return {
            "api": self.api_reserved_concurrency,
            "profile": self.profile_reserved_concurrency or self.global_concurrent_runs,
        }

    def map_concurrency(self) -> int:
        """The investigation Map's MaxConcurrency: one run may use the whole sandbox concurrency, not more."""
        if self.investigation_concurrency is not None:
            return self.investigation_concurrency
        return min(10, self.sandbox_reserved_concurrency or 10)


class IterateStack(Stack):
    """Storage, network, layers, functions, orchestration, triggers, API and monitoring in one stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        layer_assets: dict[str, BuiltLayer],
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        retention = _retention(config.log_retention_days)

        self.storage = StorageConstruct(self, "Storage", removal_policy=removal)
        self.network = SandboxNetworkConstruct(
            self,
            "SandboxNetwork",
            bucket=self.storage.bucket,
            readable_prefix=ARTIFACTS,
            log_retention=retention,
            removal_policy=removal,
        )
        # Created with a placeholder, not a generated random value: a random "key" would put every run in
        # LLM mode against a key Anthropic refuses (each run "degraded"). The functions read the placeholder
        # as no key (offline) until someone puts the real key in (infra/README.md).
        self.anthropic_secret = secretsmanager.Secret(
            self,
            "AnthropicApiKey",
            description="Anthropic API key for Iterate's agents: replace the placeholder with the key "
            "(aws secretsmanager put-secret-value). Until then the agents run offline.",
            secret_string_value=SecretValue.unsafe_plain_text(SECRET_PLACEHOLDER),
        )
        acknowledge(
            self.anthropic_secret,
            "AwsSolutions-SMG4",
            "A third-party API key: Secrets Manager cannot rotate it; it is rotated in the Anthropic "
            "console and updated here (functions re-read it within 5 minutes).",
        )
        self.layers = LayersConstruct(self, "Layers", assets=layer_assets)
        self.engine = EngineConstruct(self, "Engine", bucket=self.storage.bucket)
        self.functions = FunctionsConstruct(
            self,
            "Functions",
            specs=FUNCTION_SPECS,
            functions_dir=config.functions_dir,
            layers=self.layers,
            storage=self.storage,
            network=self.network,
            anthropic_secret=self.anthropic_secret,
            log_retention=retention,
            removal_policy=removal,
            sandbox_reserved_concurrency=config.sandbox_reserved_concurrency,
            sandbox_code_timeout_s=config.sandbox_code_timeout_s,
            limits_env=config.shared_env(),
            admission_env=config.admission_env(),
            reserved_concurrency=config.reserved_concurrency(),
            memory_mb={"profile": config.profile_memory_mb},
            placeholder_code=config.placeholder_code,
        )
        fns = self.functions.functions
        self.orchestration = OrchestrationConstruct(
            self,
            "Orchestration",
            asl_path=config.asl_path,
            functions={
                spec.asl_placeholder: fns[spec.name]
                for spec in FUNCTION_SPECS
                if spec.asl_placeholder is not None
            },
            table=self.storage.table,
            bucket_name=self.storage.bucket.bucket_name,
            readable_objects=self.storage.objects(ARTIFACTS),
            substitutions=self.engine.substitutions,
            map_concurrency=config.map_concurrency(),
            chunk_concurrency=config.chunk_concurrency,
            timeout=Duration.hours(config.run_timeout_hours),
            log_retention=retention,
            removal_policy=removal,
        )
        state_machine = self.orchestration.state_machine
        # The engine path: EngineStep (the profile function) registers the run's tables, RunEngineQuery runs
        # the statements on Athena with the state machine's rights (iterate.aws.large).
        self.engine.grant_tables(fns["profile"].role)
        fns["profile"].add_environment("ITERATE_ENGINE_DATABASE", self.engine.database_name)
        # A run that ends before EngineStep's last round has its tables removed by RecordFailure, or by the
        # execution-status rule (admission) when the execution was aborted or timed out.
        for name in ("record_failure", "admission"):
            self.engine.grant_cleanup(fns[name].role)
            fns[name].add_environment("ITERATE_ENGINE_DATABASE", self.engine.database_name)
        self.engine.grant_queries(state_machine.role)
        self.admission = AdmissionConstruct(
            self, "Admission", function=fns["admission"], state_machine=state_machine
        )
        self.triggers = TriggersConstruct(
            self, "Triggers", bucket=self.storage.bucket, admission=fns["admission"]
        )
        self._wire_api_function(config)
        self.api = ApiConstruct(
            self,
            "Api",
            functions={"api": fns["api"], "followup": fns["followup"], "fix": fns["fix"]},
            openapi_path=config.openapi_path,
            log_retention=retention,
            removal_policy=removal,
        )
        if self.orchestration.investigations_arn is None:
            raise ValueError(
                "the investigation Map needs a Label: its child executions' metrics are named by it"
            )
        self.monitoring = MonitoringConstruct(
            self,
            "Monitoring",
            state_machine=state_machine,
            investigations_arn=self.orchestration.investigations_arn,
            dlqs={
                "UploadEventsUndelivered": (
                    self.triggers.dlq,
                    "Uploads whose event could not start a run (EventBridge gave up): replay them from the DLQ",
                ),
                "ScheduledRunsUndelivered": (
                    self.triggers.schedule_dlq,
                    "Scheduled re-analyses the scheduler could not start after its retries",
                ),
                "FixJobsFailed": (
                    self.fix_dlq,
                    "Fix jobs whose worker failed on an internal error or whose event expired",
                ),
                "AdmissionUndelivered": (
                    self.admission.dlq,
                    "Queued runs admission could not read or start after 1,000 receives",
                ),
                "AdmissionEventsFailed": (
                    self.admission.events_dlq,
                    "Upload, schedule or execution-ended events the admission function failed on",
                ),
            },
            admission_queue=self.admission.queue,
            monthly_budget_usd=config.monthly_budget_usd,
            functions=dict(fns),
            api=self.api.api,
            table=self.storage.table,
            alarm_email=config.alarm_email,
            removal_policy=removal,
        )
        self.alerts = RegressionAlertsConstruct(
            self, "RegressionAlerts", email=config.regression_email, removal_policy=removal
        )
        for name, value in {
            "BucketName": self.storage.bucket.bucket_name,
            "TableName": self.storage.table.table_name,
            "StateMachineArn": state_machine.state_machine_arn,
            "ApiUrl": self.api.api.url,
            "UserPoolId": self.api.user_pool.user_pool_id,
            "UserPoolClientId": self.api.client.user_pool_client_id,
            "AnthropicSecretArn": self.anthropic_secret.secret_arn,
            "AlarmTopicArn": self.monitoring.topic.topic_arn,
            "RegressionTopicArn": self.alerts.topic.topic_arn,
            "ScheduleDlqUrl": self.triggers.schedule_dlq.queue_url,
            "FixJobsDlqUrl": self.fix_dlq.queue_url,
            "AdmissionQueueUrl": self.admission.queue.queue_url,
            "AdmissionDlqUrl": self.admission.dlq.queue_url,
            "AdmissionEventsDlqUrl": self.admission.events_dlq.queue_url,
        }.items():
            CfnOutput(self, name, value=value)

    def _wire_api_function(self, config: StackConfig) -> None:
        """The API starts/cancels runs and manages per-dataset schedules; the fix route starts runs too."""
        self._wire_fix_worker()
        api_fn = self.functions.functions["api"]
        api_role = self.functions.roles["api"]
        sm = self.orchestration.state_machine
        triggers = self.triggers
        api_fn.add_environment("ITERATE_STATE_MACHINE_ARN", sm.state_machine_arn)
        api_fn.add_environment(
            "ITERATE_ADMISSION_FUNCTION_ARN", self.functions.functions["admission"].function_arn
        )
        self.admission.allow_queueing(api_fn)
        api_fn.add_environment("ITERATE_SCHEDULER_ROLE_ARN", triggers.scheduler_role.role_arn)
        api_fn.add_environment("ITERATE_SCHEDULE_GROUP", triggers.schedule_group.schedule_group_name)
        api_fn.add_environment("ITERATE_SCHEDULE_DLQ_ARN", triggers.schedule_dlq.queue_arn)
        api_fn.add_environment("ITERATE_MIN_SCHEDULE_MINUTES", str(config.min_schedule_minutes))
        executions = self.orchestration.execution_arn_pattern()
        api_role.add_to_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
            )
        )
        acknowledge_wildcard(
            api_role,
            executions,
            "Polling and cancelling runs: execution names are chosen per run; limited to this state machine.",
        )
        api_role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "scheduler:CreateSchedule",
                    "scheduler:UpdateSchedule",
                    "scheduler:DeleteSchedule",
                    "scheduler:GetSchedule",
                ],
                resources=[triggers.schedule_arn_pattern()],
            )
        )
        acknowledge_wildcard(
            api_role,
            triggers.schedule_arn_pattern(),
            "One schedule per dataset, named at run time; limited to Iterate's own schedule group.",
        )
        triggers.scheduler_role.grant_pass_role(api_role)

    def _wire_fix_worker(self) -> None:
        """The fix route invokes the fix worker asynchronously (never retried: a retry would write a second
        version); a failed or expired invocation lands in the fix jobs' DLQ, which has its alarm."""
        fns, roles = self.functions.functions, self.functions.roles
        worker = fns["fix_worker"]
        self.fix_dlq = dead_letter_queue(self, "FixJobsDlq", "the fix worker's asynchronous invocations")
        worker.configure_async_invoke(
            retry_attempts=0,
            max_event_age=Duration.seconds(FIX_EVENT_MAX_AGE_S),
            on_failure=destinations.SqsDestination(self.fix_dlq),
        )
        fns["fix"].add_environment("ITERATE_FIX_WORKER_FUNCTION", worker.function_name)
        # The function itself, not `<arn>:*` (grant_invoke's): the route invokes no version or alias.
        roles["fix"].add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[worker.function_arn])
        )
        self.admission.allow_queueing(worker)  # the run on a new version is queued like any other


def _retention(days: int) -> logs.RetentionDays:
    for value in logs.RetentionDays:
        if value.value == days if isinstance(value.value, int) else False:
            return value
    return logs.RetentionDays.ONE_MONTH
