"""Typed LLM errors: the state machine and the fallback wrapper route on these classes, never on messages."""


class LLMError(Exception):
    """Any failure to get a usable answer from the LLM; the caller falls back to the offline agent."""

    reason = "llm_error"


class RetryableLLMError(LLMError):
    """Rate limit, overload, 5xx, timeout or connection failure that outlived its retries."""

    reason = "unavailable"


class CircuitOpenError(LLMError):
    """The breaker is open after repeated failures: fail fast instead of waiting on a dead endpoint."""

    reason = "circuit_open"


class LLMRequestError(LLMError):
    """The API refused the request itself (bad key, bad request): retrying cannot help."""

    reason = "request_refused"


class LLMOutputError(LLMError):
    """The model answered, but not with something the contract accepts (malformed or invalid JSON)."""

    reason = "invalid_output"
