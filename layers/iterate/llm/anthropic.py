"""The Anthropic adapter of the LLM port: the official SDK, our own retries, a breaker and a per-call timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from iterate.llm.errors import CircuitOpenError, LLMError, LLMRequestError, RetryableLLMError
from iterate.llm.observers import LLMErrorEvent, Observers
from iterate.llm.resilience import Backoff, CircuitBreaker
from iterate.llm.types import LLMRequest, LLMResponse, ToolCall, Usage

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


class AnthropicLLM:
    """Calls the Messages API through the `anthropic` SDK (imported lazily: ~1.5 s, only LLM steps pay it).

    The SDK's own retries are off so that ours (full jitter, retry-after, breaker, deadline) are the only ones.
    The SDK reads ANTHROPIC_BASE_URL itself; `base_url` overrides it (tests point it at a local fake server).
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        max_timeout_retries: int = 1,
        deadline_s: float | None = None,
        temperature: float | None = None,
        backoff: Backoff | None = None,
        breaker: CircuitBreaker | None = None,
        observers: Observers | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        gate: Callable[[int], Any] | None = None,
    ) -> None:
        self.model = model
        # Consulted before each call with the tokens it may use (a deployment-wide token bucket on AWS); it
        # waits for them or raises, and a raise becomes a RetryableLLMError (the agent falls back, or the
        # state machine retries the step).
        self._gate = gate
        self._api_key = api_key
        self._base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_timeout_retries = max_timeout_retries
        # A whole call, retries included, must finish well inside the Lambda timeout.
        self.deadline_s = deadline_s if deadline_s is not None else 2.5 * timeout_s
        # SDK 2.x / API 2026-10-21 reject sampling parameters, so temperature is only sent when asked for
        # (older API versions or gateways); determinism comes from forced tool use and validation instead.
        self.temperature = temperature
        self.backoff = backoff or Backoff()
        self.breaker = breaker or CircuitBreaker()
        self.observers = observers or Observers()
        self._sleep = sleep
        self._clock = clock
        self._client: Any = None
        self._lock = threading.Lock()

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                import anthropic

                self._client = anthropic.Anthropic(
                    api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self.timeout_s
                )
            return self._client

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            # The static system prompt is cached server-side: later calls read it at a tenth of the price.
            "system": [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
            "messages": request.messages,
        }
        if request.tools:
            kwargs["tools"] = request.tools
        if request.tool_choice:
            kwargs["tool_choice"] = request.tool_choice
        if self.temperature is not None:
            kwargs["extra_body"] = {"temperature": self.temperature}
        return kwargs

    def complete(self, request: LLMRequest) -> LLMResponse:
        """One answer, or an LLMError subclass once retries, the deadline or the breaker say stop."""
        import anthropic

        try:
            self.breaker.before_call()
        except CircuitOpenError:
            self.observers.error(LLMErrorEvent(request.agent, "CircuitOpenError", 0, retrying=False))
            raise
        client = self._sdk()
        kwargs = self._kwargs(request)
        if self._gate is not None:
            try:
                self._gate(estimate_tokens(request))
            except Exception as exc:
                self.observers.error(LLMErrorEvent(request.agent, type(exc).__name__, 0, retrying=False))
                raise RetryableLLMError(f"LLM rate: {exc}") from exc
        started = self._clock()
        deadline = min(self.deadline_s, request.deadline_s) if request.deadline_s else self.deadline_s
        timeouts = 0
        attempt = 0
        while True:
            remaining = deadline - (self._clock() - started)
            try:
                message = client.messages.create(**kwargs, timeout=max(0.1, min(self.timeout_s, remaining)))
            except anthropic.APIStatusError as exc:
                status = exc.status_code
                retryable = status in RETRYABLE_STATUS or status >= 500
                retry_after = _retry_after(exc)
                error: LLMError = (
                    RetryableLLMError(f"HTTP {status}") if retryable else LLMRequestError(f"HTTP {status}")
                )
            except anthropic.APITimeoutError:
                timeouts += 1
                status, retry_after = None, None
                retryable = timeouts <= self.max_timeout_retries
                error = RetryableLLMError("timeout")
            except anthropic.APIConnectionError:
                status, retry_after, retryable = None, None, True
                error = RetryableLLMError("connection error")
            except anthropic.AnthropicError as exc:  # anything else the SDK raises: not worth retrying
                status, retry_after, retryable = None, None, False
                error = LLMRequestError(type(exc).__name__)
            else:
                self.breaker.record_success()
                return _to_response(message, self.model, attempt + 1)

            self.breaker.record_failure()
            delay = self.backoff.delay(attempt, retry_after)
            elapsed = self._clock() - started
            will_retry = (
                retryable
                and attempt < self.max_retries
                and not self.breaker.is_open
                and elapsed + delay < deadline
            )
            self.observers.error(
                LLMErrorEvent(request.agent, type(error).__name__, attempt + 1, will_retry, status)
            )
            if not will_retry:
                raise error
            self._sleep(delay)
            attempt += 1


def estimate_tokens(request: LLMRequest) -> int:
    """What a call may use at most, for the token bucket: its prompt (about 4 characters a token) and the
    answer's max_tokens."""
    import json

    prompt = len(request.system) + len(json.dumps(request.messages, default=str))
    if request.tools:
        prompt += len(json.dumps(request.tools, default=str))
    return prompt // 4 + request.max_tokens


def _retry_after(exc: Any) -> float | None:
    """Seconds from retry-after-ms / retry-after (numeric form only; dates are rare on this API)."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue
    return None


def _to_response(message: Any, model: str, attempts: int) -> LLMResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, input=dict(block.input or {})))
    u = message.usage
    usage = Usage(
        input_tokens=int(getattr(u, "input_tokens", 0) or 0),
        output_tokens=int(getattr(u, "output_tokens", 0) or 0),
        cache_read_tokens=int(getattr(u, "cache_read_input_tokens", 0) or 0),
        cache_write_tokens=int(getattr(u, "cache_creation_input_tokens", 0) or 0),
    )
    return LLMResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=usage,
        stop_reason=getattr(message, "stop_reason", None),
        model=getattr(message, "model", None) or model,
        attempts=attempts,
    )
