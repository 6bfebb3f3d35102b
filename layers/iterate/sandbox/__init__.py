"""Sandbox: untrusted investigation code run against the dataset, locally (subprocess) or as a Lambda."""

from iterate.sandbox.local import LocalSandbox, SandboxError, SandboxLimits, SandboxOutcome
from iterate.sandbox.policy import ALLOWED_IMPORTS, Violation, check_policy

__all__ = [
    "ALLOWED_IMPORTS",
    "LocalSandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxOutcome",
    "Violation",
    "check_policy",
]
