"""What a sandbox is asked and answers: its limits, an investigation's outcome, its errors, its running totals."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from iterate.contracts import CodeInvestigation


class SandboxError(Exception):
    """The sandbox itself could not be used (missing dataset, no interpreter): not a verdict on the code."""


class ZygoteGone(SandboxError):
    """A zygote was not there to take a job, or dropped it before starting it: the job may go elsewhere."""


@dataclass(frozen=True)
class SandboxLimits:
    """What one investigation may use. `namespaces=None` tries Linux namespaces and falls back when refused."""

    timeout_s: float = 30.0
    memory_mb: int = 8192
    max_output_bytes: int = 1_000_000
    setup_allowance_s: float = 10.0
    scratch_mb: int = 16
    # Files the jail's tmpfs may hold (its own mount points and binds take a few hundred).
    scratch_inodes: int = 4096
    max_processes: int = 256
    namespaces: bool | None = None
    enforce_policy: bool = True
    # Fork each investigation from a process that imported pandas once (a zygote) instead of starting
    # Python afresh: ~0.05 s instead of ~0.4 s per run. Off where one sandbox runs one investigation (Lambda).
    prefork: bool = True
    # Try a user namespace before plain namespaces (what a non-root account gets); for tests of that path.
    user_namespace_first: bool = False
    # With prefork, each dataset's frame is loaded once by a "dataset zygote" forked from the zygote, and
    # every investigation of that dataset is forked from it (isolated the same way) instead of reading the
    # file again: a 1M-row file costs ~1.5 s of CPU to load. How many dataset zygotes stay alive (the least
    # recently used is closed first; 0 loads the frame in every investigation), the estimated in-memory
    # size above which a dataset is not preloaded, and how long its load may take (outside any job's time).
    preload_datasets: int = 2
    preload_max_mb: int = 4096
    preload_timeout_s: float = 300.0
    # The in-process layers (AST policy, restricted builtins, audit hook, import allowlist finder): early,
    # friendly refusals only. False (ITERATE_SANDBOX_INPROCESS_CHECKS=0) is for tests and red teams: the
    # OS layers must contain everything without them.
    inprocess_checks: bool = True
    # A cgroup per run (memory and tasks of the whole tree, and the kill of everything in it): None uses
    # one where it can be made (root, cgroup v1 memory+pids or a delegated v2), False never (tests of the
    # fallback: RLIMIT_NPROC on the run's uid, and this process summing the tree's memory).
    cgroup: bool | None = None

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> SandboxLimits:
        """Limits from an `iterate.settings.Settings` (or anything with the same sandbox_* attributes)."""
        checks = bool(getattr(settings, "sandbox_inprocess_checks", True))
        limits = cls(
            timeout_s=float(settings.sandbox_timeout_s),
            memory_mb=int(settings.sandbox_memory_mb),
            max_output_bytes=int(settings.sandbox_max_output_bytes),
            inprocess_checks=checks,
            enforce_policy=checks,
        )
        return replace(limits, **overrides)


@dataclass
class SandboxOutcome:
    """A run's CodeInvestigation plus how it was isolated and what the runtime guard refused."""

    investigation: CodeInvestigation
    isolation: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    # CPU seconds of the processes that ran it, when a zygote reported them (not on a timeout).
    cpu_s: float | None = None
    # What the supervisor and this process saw from outside the run (refusals, limits, leftovers).
    supervisor: dict[str, Any] = field(default_factory=dict)


class Counters:
    """Thread-safe running totals (see `LocalSandbox.stats`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def add(self, name: str, amount: float = 1) -> None:
        with self._lock:
            self._values[name] = self._values.get(name, 0) + amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)
