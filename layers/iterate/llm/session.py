"""One run's view of the LLM: cache lookups, usage metering, observers and contract-validated answers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from iterate.llm.cache import ResponseCache, cache_key, digest
from iterate.llm.errors import LLMOutputError
from iterate.llm.jsonout import extract_json, parse_model
from iterate.llm.observers import LLMCallEvent, Observer, Observers, ToolCallEvent
from iterate.llm.types import LLM, LLMRequest, LLMResponse, Usage
from iterate.llm.usage import UsageMeter
from iterate.prompts import Prompt

T = TypeVar("T")
MIN_REPAIR_S = 2.0
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class CacheScope:
    """What makes an answer reusable: the dataset's content and the user's instructions."""

    content_hash: str
    instructions: str | None = None


class LLMSession:
    """Shared by the agents of a run, so usage adds up per agent and per run and the breaker is common."""

    def __init__(
        self,
        llm: LLM,
        *,
        meter: UsageMeter | None = None,
        cache: ResponseCache | None = None,
        observers: Observers | Iterable[Observer] = (),
        call_budget_s: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.llm = llm
        # Seconds one agent call may take, repair turn included: below the Lambda (or API Gateway) timeout.
        self.call_budget_s = call_budget_s
        self.meter = meter or UsageMeter()
        self.cache = cache
        self.observers = observers if isinstance(observers, Observers) else Observers(observers)
        self._clock = clock

    @property
    def model(self) -> str:
        return self.llm.model

    def run(
        self,
        request: LLMRequest,
        *,
        prompt: Prompt,
        parse: Callable[[LLMResponse], T],
        scope: CacheScope | None = None,
        repair_hint: str | None = None,
    ) -> T:
        """Answer `request` and parse it; one repair turn when the answer is malformed; cache what parsed."""
        key = None
        if self.cache is not None and scope is not None:
            key = cache_key(
                content_hash=scope.content_hash,
                agent=request.agent,
                prompt_version=prompt.version,
                instructions=scope.instructions,
                model=self.llm.model,
                request_digest=digest([request.system, request.messages, request.tools]),
            )
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    cached = LLMResponse.from_json(hit)
                    hit_value = parse(cached)
                except (LLMOutputError, KeyError, TypeError):
                    pass  # a stale or foreign entry: ask again
                else:
                    self._observe(request.agent, cached, 0.0)
                    return hit_value

        started = self._clock()
        if self.call_budget_s is not None:
            request.deadline_s = self.call_budget_s
        response = self._call(request)
        try:
            value = parse(response)
        except LLMOutputError as exc:
            remaining = None if self.call_budget_s is None else self.call_budget_s - (self._clock() - started)
            if remaining is not None and remaining < MIN_REPAIR_S:
                raise  # no time left for a repair turn: fall back now rather than overrun the function
            # One repair turn: show the model its answer and what was wrong with it.
            repair = LLMRequest(
                agent=request.agent,
                system=request.system,
                messages=[
                    *request.messages,
                    {"role": "assistant", "content": _as_text(response) or "(empty answer)"},
                    {
                        "role": "user",
                        "content": f"That answer was rejected: {exc}. "
                        + (repair_hint or "Answer again with valid JSON only."),
                    },
                ],
                max_tokens=request.max_tokens,
                tools=request.tools,
                tool_choice=request.tool_choice,
                deadline_s=remaining,
            )
            response = self._call(repair)
            value = parse(response)  # a second bad answer propagates: the caller falls back
        if key is not None and self.cache is not None:
            self.cache.put(key, response.to_json())
        return value

    def structured(
        self,
        *,
        agent: str,
        prompt: Prompt,
        user: str,
        output: type[M],
        tool_name: str,
        tool_description: str,
        max_tokens: int = 4096,
        scope: CacheScope | None = None,
        check: Callable[[M], None] | None = None,
    ) -> M:
        """A contract-shaped answer via forced tool use (JSON in text, fenced or not, is accepted too).

        `check` adds rules the JSON Schema cannot express; a violation earns the model one repair turn.
        """
        request = LLMRequest(
            agent=agent,
            system=prompt.text,
            messages=[{"role": "user", "content": user}],
            max_tokens=max_tokens,
            tools=[
                {
                    "name": tool_name,
                    "description": tool_description,
                    "input_schema": output.model_json_schema(),
                }
            ],
            tool_choice={"type": "tool", "name": tool_name},
        )

        def parse(response: LLMResponse) -> M:
            data = next((c.input for c in response.tool_calls if c.name == tool_name), None)
            value = parse_model(extract_json(response.text) if data is None else data, output)
            if check is not None:
                check(value)  # raises LLMOutputError: semantic rules the schema cannot express
            return value

        return self.run(
            request,
            prompt=prompt,
            parse=parse,
            scope=scope,
            repair_hint=f"Call the `{tool_name}` tool with arguments that match its schema.",
        )

    def _call(self, request: LLMRequest) -> LLMResponse:
        started = self._clock()
        response = self.llm.complete(request)
        self._observe(request.agent, response, (self._clock() - started) * 1000)
        return response

    def _observe(self, agent: str, response: LLMResponse, duration_ms: float) -> None:
        if response.cached:
            usage = Usage()
            cost = 0.0
        else:
            usage = response.usage
            cost = self.meter.record(agent, self.llm.model, usage).costUsd
        self.observers.llm_call(
            LLMCallEvent(
                agent=agent,
                model=response.model or self.llm.model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cost_usd=cost,
                duration_ms=round(duration_ms, 1),
                attempts=response.attempts,
                cached=response.cached,
                stop_reason=response.stop_reason,
            )
        )
        for call in response.tool_calls:
            self.observers.tool_call(
                ToolCallEvent(agent, call.name, len(json.dumps(call.input, default=str)))
            )


def _as_text(response: LLMResponse) -> str:
    if response.tool_calls:
        return json.dumps([c.input for c in response.tool_calls], default=str)[:4000]
    return response.text[:4000]
