"""The Anthropic adapter, through the real SDK against the fake server: retries, breaker, timeouts, usage."""

from __future__ import annotations

import time

import pytest
from fake_anthropic import error_reply, slow, text_reply, tool_reply

from iterate.llm import CircuitOpenError, LLMRequest, LLMRequestError, RetryableLLMError
from iterate.llm.resilience import Backoff, CircuitBreaker

pytestmark = pytest.mark.unit


def request(agent: str = "understanding") -> LLMRequest:
    return LLMRequest(
        agent=agent,
        system="You are a test.",
        messages=[{"role": "user", "content": "hello"}],
        tools=[{"name": "answer", "description": "d", "input_schema": {"type": "object"}}],
        tool_choice={"type": "tool", "name": "answer"},
    )


def test_a_tool_answer_comes_back_with_usage_and_the_system_prompt_marked_cacheable(fake, make_llm):
    # Given a server that answers with a tool call
    fake.add(tool_reply("answer", {"ok": True}))
    # When the adapter sends one request
    response = make_llm().complete(request())
    # Then the tool call, the token usage and the model are read from the SDK's response
    assert response.tool_calls[0].name == "answer" and response.tool_calls[0].input == {"ok": True}
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.attempts == 1
    sent = fake.requests[0]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["tool_choice"] == {"type": "tool", "name": "answer"}
    # The SDK's own retries are off: ours are the only ones.
    assert fake.headers[0].get("x-stainless-retry-count") == "0"


def test_429_then_success_waits_at_least_the_retry_after(fake, make_llm, sleeps):
    # Given a rate limit asking for 3 seconds, then an answer
    fake.add(error_reply(429, "rate_limit_error", retry_after=3), text_reply("fine"))
    # When the adapter is called
    response = make_llm().complete(request())
    # Then it retried once, after waiting what the server asked for
    assert response.text == "fine" and response.attempts == 2
    assert len(fake.requests) == 2
    assert sleeps == [pytest.approx(3.0)]


def test_a_529_storm_gives_up_after_the_retries_and_opens_the_breaker(fake, make_llm, sleeps):
    # Given an API that is overloaded on every call
    fake.default = error_reply(529, "overloaded_error")
    llm = make_llm(max_retries=3, breaker=CircuitBreaker(threshold=4, cooldown_s=60))
    # When one call is made
    with pytest.raises(RetryableLLMError):
        llm.complete(request())
    # Then it tried 1 + 3 times with growing, jittered waits, and the breaker is now open
    assert len(fake.requests) == 4
    assert len(sleeps) == 3 and all(0 <= s <= 8.0 for s in sleeps)
    assert llm.breaker.is_open
    # And the next call fails at once, without touching the network
    started = time.perf_counter()
    with pytest.raises(CircuitOpenError):
        llm.complete(request("analysis"))
    assert time.perf_counter() - started < 0.5  # the request count below is the real proof
    assert len(fake.requests) == 4


def test_an_answer_slower_than_the_timeout_is_abandoned_quickly(fake, make_llm):
    # Given a server that takes 6 s to answer, and a 0.3 s per-call timeout
    fake.default = slow(text_reply("too late"), 6.0)
    llm = make_llm(timeout_s=0.3, max_timeout_retries=1, deadline_s=5.0)
    llm._sdk()  # the one-off SDK import is not what this test measures
    # When the adapter is called
    started = time.perf_counter()
    with pytest.raises(RetryableLLMError):
        llm.complete(request())
    # Then it gave up after one retry of the timeout, long before a single answer could arrive
    assert len(fake.requests) == 2
    assert time.perf_counter() - started < 4.0


def test_a_refused_request_is_not_retried(fake, make_llm, sleeps):
    # Given a 400 (for example a bad model name)
    fake.add(error_reply(400, "invalid_request_error"))
    # When the adapter is called, Then it fails at once with a non-retryable error
    with pytest.raises(LLMRequestError):
        make_llm().complete(request())
    assert len(fake.requests) == 1 and sleeps == []


def test_the_deadline_stops_retries_that_would_outlast_it(fake, make_llm, sleeps):
    # Given 500s asking to retry after 20 s, and a 10 s budget for the whole call
    fake.default = error_reply(500, "api_error", retry_after=20)
    llm = make_llm(deadline_s=10.0)
    # When the adapter is called, Then it does not wait 20 s it does not have
    with pytest.raises(RetryableLLMError):
        llm.complete(request())
    assert len(fake.requests) == 1 and sleeps == []


def test_full_jitter_stays_within_the_exponential_envelope():
    # Given the extremes of the random source
    high, low = (
        Backoff(base_s=0.5, cap_s=8, rand=lambda: 0.999999),
        Backoff(base_s=0.5, cap_s=8, rand=lambda: 0.0),
    )
    # Then the delay grows as base * 2^n up to the cap, and can be as small as zero
    assert [round(high.delay(n), 3) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert low.delay(5) == 0.0
    # And a retry-after longer than the jitter wins, capped
    assert low.delay(0, retry_after_s=2.5) == 2.5
    assert low.delay(0, retry_after_s=3600) == 30.0


def test_the_breaker_half_opens_after_its_cooldown():
    # Given a breaker on a controllable clock, opened by two failures
    now = [0.0]
    breaker = CircuitBreaker(threshold=2, cooldown_s=10, clock=lambda: now[0])
    breaker.record_failure()
    breaker.record_failure()
    with pytest.raises(CircuitOpenError):
        breaker.before_call()
    # When the cooldown passes, Then one trial call goes through
    now[0] = 10.5
    breaker.before_call()
    # And a failure of that trial re-opens it at once
    breaker.record_failure()
    with pytest.raises(CircuitOpenError):
        breaker.before_call()
    # While a success closes it
    now[0] = 30.0
    breaker.before_call()
    breaker.record_success()
    assert not breaker.is_open
