"""The LLM port, its Anthropic adapter, and what every call needs: retries, a breaker, usage, a cache, observers."""

from iterate.llm.errors import (
    CircuitOpenError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    RetryableLLMError,
)
from iterate.llm.types import LLM, LLMRequest, LLMResponse, ToolCall, Usage

__all__ = [
    "LLM",
    "CircuitOpenError",
    "LLMError",
    "LLMOutputError",
    "LLMRequest",
    "LLMRequestError",
    "LLMResponse",
    "RetryableLLMError",
    "ToolCall",
    "Usage",
]
