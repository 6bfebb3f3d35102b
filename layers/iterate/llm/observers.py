"""Observer hooks on every LLM call, tool call and error, feeding structured logs and metrics."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class LLMCallEvent:
    agent: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    duration_ms: float
    attempts: int
    cached: bool
    stop_reason: str | None


@dataclass(frozen=True)
class ToolCallEvent:
    agent: str
    tool: str
    input_chars: int


@dataclass(frozen=True)
class LLMErrorEvent:
    agent: str
    error: str  # the error class name, e.g. RateLimitError, CircuitOpenError
    attempt: int
    retrying: bool
    status: int | None = None


class Observer(Protocol):
    def on_llm_call(self, event: LLMCallEvent) -> None: ...
    def on_tool_call(self, event: ToolCallEvent) -> None: ...
    def on_error(self, event: LLMErrorEvent) -> None: ...


class Observers:
    """Fans an event out to every observer; a broken observer never breaks a call."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._observers = list(observers)

    def _emit(self, method: str, event: Any) -> None:
        for obs in self._observers:
            try:
                getattr(obs, method)(event)
            except Exception:  # logging and metrics are best effort by design
                continue

    def llm_call(self, event: LLMCallEvent) -> None:
        self._emit("on_llm_call", event)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._emit("on_tool_call", event)

    def error(self, event: LLMErrorEvent) -> None:
        self._emit("on_error", event)


class LoggingObserver:
    """Structured log lines; works with a stdlib logger or a Powertools Logger (both accept `extra`)."""

    def __init__(self, logger: Any | None = None) -> None:
        self.logger = logger or logging.getLogger("iterate.llm")

    def on_llm_call(self, event: LLMCallEvent) -> None:
        self.logger.info("llm call", extra=asdict(event))

    def on_tool_call(self, event: ToolCallEvent) -> None:
        self.logger.info("llm tool call", extra=asdict(event))

    def on_error(self, event: LLMErrorEvent) -> None:
        # A retried error is routine; the one that ends the call is worth a warning.
        log = self.logger.info if event.retrying else self.logger.warning
        log("llm error", extra=asdict(event))


class MetricsObserver:
    """CloudWatch EMF metrics through a Powertools `Metrics` object (anything with add_metric(name, unit, value))."""

    def __init__(self, metrics: Any) -> None:
        self.metrics = metrics

    def on_llm_call(self, event: LLMCallEvent) -> None:
        self.metrics.add_metric(name="LLMCalls", unit="Count", value=1)
        self.metrics.add_metric(name="LLMInputTokens", unit="Count", value=event.input_tokens)
        self.metrics.add_metric(name="LLMOutputTokens", unit="Count", value=event.output_tokens)
        self.metrics.add_metric(name="LLMLatency", unit="Milliseconds", value=event.duration_ms)
        if event.cached:
            self.metrics.add_metric(name="LLMCacheHits", unit="Count", value=1)

    def on_tool_call(self, event: ToolCallEvent) -> None:
        self.metrics.add_metric(name="LLMToolCalls", unit="Count", value=1)

    def on_error(self, event: LLMErrorEvent) -> None:
        self.metrics.add_metric(name="LLMErrors", unit="Count", value=1)
