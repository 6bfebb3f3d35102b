"""Sandbox: untrusted investigation code run against the dataset, locally (subprocess) or as a Lambda."""

from iterate.sandbox.local import LocalSandbox, SandboxError, SandboxLimits, SandboxOutcome
from iterate.sandbox.policy import ALLOWED_IMPORTS, Violation, check_policy
from iterate.sandbox.remote import (
    DatasetFetchError,
    LambdaSandbox,
    SandboxDataset,
    SandboxEnvironmentDirty,
    SandboxEvent,
    SandboxUnavailable,
    clean_environment,
    run_event,
    run_in_clean_environment,
)

__all__ = [
    "ALLOWED_IMPORTS",
    "DatasetFetchError",
    "LambdaSandbox",
    "LocalSandbox",
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
    "run_event",
    "run_in_clean_environment",
]
