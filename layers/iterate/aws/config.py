"""The AWS-only settings a function needs (table, bucket, state machine, scheduler), read on first use."""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from iterate.aws.schedules import DEFAULT_MIN_SCHEDULE_MINUTES, SCHEDULE_FLOOR_MINUTES


class MissingConfigError(RuntimeError):
    """A function was deployed without an environment variable it needs."""


class AwsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str | None = None
    table: str | None = None
    event_bus: str = "default"
    state_machine_arn: str | None = None
    scheduler_role_arn: str | None = None
    schedule_group: str = "default"
    schedule_dlq_arn: str | None = None  # where EventBridge Scheduler puts a re-analysis it could not start
    min_schedule_minutes: int = Field(default=DEFAULT_MIN_SCHEDULE_MINUTES, ge=SCHEDULE_FLOOR_MINUTES)
    anthropic_secret_arn: str | None = None
    fix_worker_function: str | None = None  # the function POST /runs/{id}/fixes invokes asynchronously
    presign_expiry_s: int = 900
    # The Glue database the engine path registers each run's tables in (iterate.aws.large), one per deployment.
    engine_database: str = "iterate_engine"
    # Admission (iterate.aws.admission): every run waits in the FIFO queue until a global and an owner slot
    # are free. Runs of one owner in progress at once, runs of the deployment at once, how long a slot's
    # lease lasts if every release of it were lost (beyond the state machine's timeout), and how long a
    # waiting message stays invisible before admission looks at it again.
    admission_queue_url: str | None = None
    admission_function_arn: str | None = None  # what schedules invoke (it queues their runs)
    max_concurrent_runs: int = Field(default=5, ge=1)
    global_concurrent_runs: int = Field(default=50, ge=1)
    run_lease_s: int = Field(default=6 * 3600 + 900, ge=60)
    admission_retry_s: int = Field(default=15, ge=1, le=900)
    # Per-owner daily quotas (UTC days), checked before a run is queued.
    quota_runs_per_day: int = Field(default=500, ge=1)
    quota_bytes_per_day: int = Field(default=50 * 10**9, ge=1)
    quota_tokens_per_day: int = Field(default=5_000_000, ge=1)
    # The deployment's LLM token rate (every owner's calls share it): tokens per minute, the bucket's size.
    llm_tokens_per_minute: int = Field(default=400_000, ge=1000)
    # Per-owner API rate (requests per second, and the burst a bucket holds).
    api_owner_rps: float = Field(default=10.0, gt=0)
    api_owner_burst: int = Field(default=40, ge=1)
    # For each run's infrastructure estimate (iterate.aws.cost): this function's memory, as Lambda sets it
    # (None off Lambda: its time is then not priced), and the sandbox function's (RecordAttempt books it).
    function_memory_mb: int | None = Field(default=None, ge=128)
    sandbox_memory_mb: int | None = Field(default=None, ge=128)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> AwsConfig:
        e = os.environ if env is None else env
        raw = {
            "bucket": e.get("ITERATE_BUCKET"),
            "table": e.get("ITERATE_TABLE"),
            "event_bus": e.get("ITERATE_EVENT_BUS"),
            "state_machine_arn": e.get("ITERATE_STATE_MACHINE_ARN"),
            "scheduler_role_arn": e.get("ITERATE_SCHEDULER_ROLE_ARN"),
            "schedule_group": e.get("ITERATE_SCHEDULE_GROUP"),
            "schedule_dlq_arn": e.get("ITERATE_SCHEDULE_DLQ_ARN"),
            "min_schedule_minutes": e.get("ITERATE_MIN_SCHEDULE_MINUTES"),
            "anthropic_secret_arn": e.get("ITERATE_ANTHROPIC_SECRET_ARN"),
            "fix_worker_function": e.get("ITERATE_FIX_WORKER_FUNCTION"),
            "presign_expiry_s": e.get("ITERATE_PRESIGN_EXPIRY_S"),
            "engine_database": e.get("ITERATE_ENGINE_DATABASE"),
            "admission_queue_url": e.get("ITERATE_ADMISSION_QUEUE_URL"),
            "admission_function_arn": e.get("ITERATE_ADMISSION_FUNCTION_ARN"),
            "max_concurrent_runs": e.get("ITERATE_MAX_CONCURRENT_RUNS"),
            "global_concurrent_runs": e.get("ITERATE_GLOBAL_CONCURRENT_RUNS"),
            "run_lease_s": e.get("ITERATE_RUN_LEASE_S"),
            "admission_retry_s": e.get("ITERATE_ADMISSION_RETRY_S"),
            "quota_runs_per_day": e.get("ITERATE_QUOTA_RUNS_PER_DAY"),
            "quota_bytes_per_day": e.get("ITERATE_QUOTA_BYTES_PER_DAY"),
            "quota_tokens_per_day": e.get("ITERATE_QUOTA_TOKENS_PER_DAY"),
            "llm_tokens_per_minute": e.get("ITERATE_LLM_TOKENS_PER_MINUTE"),
            "api_owner_rps": e.get("ITERATE_API_OWNER_RPS"),
            "api_owner_burst": e.get("ITERATE_API_OWNER_BURST"),
            "function_memory_mb": e.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
            "sandbox_memory_mb": e.get("ITERATE_SANDBOX_FUNCTION_MEMORY_MB"),
        }
        return cls.model_validate({k: v for k, v in raw.items() if v})

    def need(self, name: str) -> str:
        """The named setting, or a clear error naming the missing environment variable."""
        value = getattr(self, name)
        if not value:
            raise MissingConfigError(f"ITERATE_{name.upper()} is not set for this function")
        return str(value)


@lru_cache(maxsize=1)
def get_aws_config() -> AwsConfig:
    return AwsConfig.from_env()
