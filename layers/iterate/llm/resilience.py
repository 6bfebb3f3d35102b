"""Backoff with full jitter and a circuit breaker, with the clock and randomness injectable for tests."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from iterate.llm.errors import CircuitOpenError


@dataclass
class Backoff:
    """Exponential backoff, full jitter (AWS architecture blog): sleep = uniform(0, min(cap, base * 2**n))."""

    base_s: float = 0.5
    cap_s: float = 8.0
    max_retry_after_s: float = 30.0
    rand: Callable[[], float] = field(default=random.random)

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based); the server's retry-after wins when longer."""
        jittered = self.rand() * min(self.cap_s, self.base_s * (2**attempt))
        if retry_after_s is not None and retry_after_s > 0:
            return max(jittered, min(retry_after_s, self.max_retry_after_s))
        return jittered


class CircuitBreaker:
    """Opens after `threshold` consecutive failed attempts; while open, calls fail at once; half-opens after cooldown.

    Shared by every agent of a run, so one outage costs a few seconds for the whole run, not per call.
    """

    def __init__(
        self,
        *,
        threshold: int = 4,
        cooldown_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None and self._clock() - self._opened_at < self.cooldown_s

    def before_call(self) -> None:
        """Raise CircuitOpenError while open; after the cooldown let one trial call through (half-open)."""
        with self._lock:
            if self._opened_at is None:
                return
            if self._clock() - self._opened_at < self.cooldown_s:
                raise CircuitOpenError(f"LLM circuit open after {self._failures} consecutive failures")
            # Half-open: one more failure re-opens at once.
            self._opened_at = None
            self._failures = self.threshold - 1

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._failures >= self.threshold:
                self._opened_at = self._clock()
