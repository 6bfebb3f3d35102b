"""The LLM port: one request/response shape that any adapter (Anthropic, a test fake) speaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Usage:
    """Tokens one call consumed, as the API reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass
class LLMRequest:
    """One Messages call. `system` is the static (cacheable) prompt; `messages` carry the per-run data."""

    agent: str
    system: str
    messages: list[dict[str, Any]]
    max_tokens: int = 4096
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: dict[str, Any] | None = None
    deadline_s: float | None = None  # seconds this request may take in total, retries included


@dataclass
class LLMResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str = ""
    attempts: int = 1
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [{"id": t.id, "name": t.name, "input": t.input} for t in self.tool_calls],
            "stop_reason": self.stop_reason,
            "model": self.model,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LLMResponse:
        return cls(
            text=data.get("text", ""),
            tool_calls=[ToolCall(t["id"], t["name"], t["input"]) for t in data.get("tool_calls", [])],
            stop_reason=data.get("stop_reason"),
            model=data.get("model", ""),
            cached=True,
        )


@runtime_checkable
class LLM(Protocol):
    """Sends one request; raises an `LLMError` subclass when no answer can be had (after its own retries)."""

    model: str

    def complete(self, request: LLMRequest) -> LLMResponse: ...
