"""Sandbox: untrusted investigation code run against the dataset, locally (subprocess) or as a Lambda."""

from iterate.sandbox.local import LocalSandbox, SandboxError, SandboxLimits, SandboxOutcome
from iterate.sandbox.policy import ALLOWED_IMPORTS, Violation, check_policy
from iterate.sandbox.remote import (
    DatasetFetchError,
    LambdaSandbox,
    ResultStoreError,
    SandboxDataset,
    SandboxEnvironmentDirty,
    SandboxEvent,
    SandboxUnavailable,
    clean_environment,
    deliver_result,
    run_event,
    run_in_clean_environment,
)

__all__ = [
    "ALLOWED_IMPORTS",
    "DatasetFetchError",
    "LambdaSandbox",
    "LocalSandbox",
    "ResultStoreError",
    "SandboxDataset",
    "SandboxEnvironmentDirty",
    "SandboxError",
    "SandboxEvent",
    "SandboxLimits",
    "SandboxOutcome",
    "SandboxUnavailable",
    "Violation",
    "check_policy",
    "clean_environment",
    "deliver_result",
    "run_event",
    "run_in_clean_environment",
]
