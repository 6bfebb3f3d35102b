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
    # Runs of one owner in progress at once (API-started, scheduled and uploaded alike): the API answers 429
    # past it, ProfileDataset waits (the ASL retries RunLimitReachedError with backoff).
    max_concurrent_runs: int = Field(default=5, ge=1)
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
            "max_concurrent_runs": e.get("ITERATE_MAX_CONCURRENT_RUNS"),
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
