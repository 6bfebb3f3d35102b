"""Token usage and estimated cost, per call, per agent and per run."""

from __future__ import annotations

import threading

from iterate.contracts import TokenUsage
from iterate.llm.types import Usage

# USD per million tokens: (input, output, cache write, cache read). Public list prices, 2026-11;
# matched on the model name's prefix, the first match wins. Unknown models are priced as Sonnet.
PRICES: tuple[tuple[str, tuple[float, float, float, float]], ...] = (
    ("claude-opus-4-5", (5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4-6", (5.0, 25.0, 6.25, 0.50)),
    ("claude-opus", (15.0, 75.0, 18.75, 1.50)),
    ("claude-haiku-4", (1.0, 5.0, 1.25, 0.10)),
    ("claude-haiku", (0.80, 4.0, 1.0, 0.08)),
    ("claude-sonnet", (3.0, 15.0, 3.75, 0.30)),
)
DEFAULT_PRICE = (3.0, 15.0, 3.75, 0.30)


def cost_usd(model: str, usage: Usage) -> float:
    """Estimated list-price cost of one call."""
    price = next((p for prefix, p in PRICES if model.startswith(prefix)), DEFAULT_PRICE)
    per_token = (
        usage.input_tokens * price[0]
        + usage.output_tokens * price[1]
        + usage.cache_write_tokens * price[2]
        + usage.cache_read_tokens * price[3]
    )
    return per_token / 1_000_000


class UsageMeter:
    """Accumulates TokenUsage by agent; thread-safe because investigations run in parallel."""

    def __init__(self) -> None:
        self._by_agent: dict[str, TokenUsage] = {}
        self._lock = threading.Lock()

    def record(self, agent: str, model: str, usage: Usage) -> TokenUsage:
        """Add one call; returns that call's own TokenUsage (with its cost)."""
        call = TokenUsage(
            inputTokens=usage.input_tokens,
            outputTokens=usage.output_tokens,
            cacheReadTokens=usage.cache_read_tokens,
            cacheWriteTokens=usage.cache_write_tokens,
            calls=1,
            costUsd=cost_usd(model, usage),
        )
        with self._lock:
            self._by_agent[agent] = _add(self._by_agent.get(agent, TokenUsage()), call)
        return call

    def snapshot(self) -> dict[str, TokenUsage]:
        """Usage per agent plus "total" (always present, zero when nothing was called)."""
        with self._lock:
            out = {k: v.model_copy() for k, v in sorted(self._by_agent.items())}
        total = TokenUsage()
        for u in out.values():
            total = _add(total, u)
        out["total"] = total
        return out


def _add(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    return TokenUsage(
        inputTokens=a.inputTokens + b.inputTokens,
        outputTokens=a.outputTokens + b.outputTokens,
        cacheReadTokens=a.cacheReadTokens + b.cacheReadTokens,
        cacheWriteTokens=a.cacheWriteTokens + b.cacheWriteTokens,
        calls=a.calls + b.calls,
        costUsd=round(a.costUsd + b.costUsd, 6),
    )
