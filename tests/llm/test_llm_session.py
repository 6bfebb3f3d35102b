"""The session: contract-validated answers, one repair turn, the response cache, usage and observers."""

from __future__ import annotations

import pytest
from fake_anthropic import text_reply, tool_reply

from iterate.agents.claude.numbers import scrub
from iterate.contracts import Contract
from iterate.llm import LLMOutputError
from iterate.llm.cache import DirectoryCache, MemoryCache
from iterate.llm.jsonout import extract_json
from iterate.llm.session import CacheScope, LLMSession
from iterate.prompts import load

pytestmark = pytest.mark.unit


class Answer(Contract):
    name: str
    score: int


class Recorder:
    def __init__(self) -> None:
        self.calls: list = []
        self.tools: list = []
        self.errors: list = []

    def on_llm_call(self, event) -> None:
        self.calls.append(event)

    def on_tool_call(self, event) -> None:
        self.tools.append(event)

    def on_error(self, event) -> None:
        self.errors.append(event)


def ask(session: LLMSession, scope: CacheScope | None = None) -> Answer:
    return session.structured(
        agent="understanding",
        prompt=load("understanding"),
        user="data",
        output=Answer,
        tool_name="record",
        tool_description="Record the answer.",
        scope=scope,
    )


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "a", "score": 3}\n```',
        'Sure! Here is the JSON you asked for:\n{"name": "a", "score": 3}\nHope this helps.',
        '```\n{"name": "a", "score": 3}\n```\nThe score reflects {the data}.',
    ],
)
def test_fenced_json_and_prose_around_it_are_tolerated(fake, make_llm, text):
    # Given a model that ignores the tool and answers in text
    fake.add(text_reply(text))
    # When the session asks for the contract, Then the JSON is found and validated
    assert ask(LLMSession(make_llm())) == Answer(name="a", score=3)
    assert len(fake.requests) == 1


def test_malformed_json_earns_one_repair_turn(fake, make_llm):
    # Given a broken answer, then a good one
    fake.add(text_reply('{"name": "a", "score": '), tool_reply("record", {"name": "b", "score": 1}))
    # When the session asks
    answer = ask(LLMSession(make_llm()))
    # Then the second request shows the model its answer and why it was rejected
    assert answer == Answer(name="b", score=1)
    repair = fake.requests[1]["messages"]
    assert repair[1]["role"] == "assistant" and repair[2]["content"].startswith("That answer was rejected")


def test_two_invalid_answers_raise_an_output_error(fake, make_llm):
    # Given a model that twice answers with the wrong shape
    fake.add(
        tool_reply("record", {"name": "a"}), tool_reply("record", {"name": "a", "score": "high", "x": 1})
    )
    # When the session asks, Then it refuses the answer (the caller then falls back)
    with pytest.raises(LLMOutputError):
        ask(LLMSession(make_llm()))
    assert len(fake.requests) == 2


def test_an_unchanged_dataset_costs_no_tokens_the_second_time(fake, make_llm, tmp_path):
    # Given a cache directory and a server that answers once
    fake.add(tool_reply("record", {"name": "a", "score": 3}))
    first = LLMSession(make_llm(), cache=DirectoryCache(tmp_path))
    ask(first, CacheScope("sha256:abc", "focus on revenue"))
    # When a new session (a new run) asks the same about the same content with the same instructions
    second = LLMSession(make_llm(), cache=DirectoryCache(tmp_path))
    answer = ask(second, CacheScope("sha256:abc", "focus on revenue"))
    # Then the answer comes from the cache and no token is spent
    assert answer == Answer(name="a", score=3)
    assert len(fake.requests) == 1
    assert second.meter.snapshot()["total"].inputTokens == 0
    # And other instructions, or other content, are a miss
    fake.add(tool_reply("record", {"name": "c", "score": 4}), tool_reply("record", {"name": "d", "score": 5}))
    assert ask(second, CacheScope("sha256:abc", "focus on dates")).name == "c"
    assert ask(second, CacheScope("sha256:def", "focus on revenue")).name == "d"
    assert len(fake.requests) == 3


def test_usage_and_cost_add_up_per_agent_and_observers_see_every_event(fake, make_llm):
    # Given observers and two answered calls by one agent
    recorder = Recorder()
    fake.add(tool_reply("record", {"name": "a", "score": 1}), tool_reply("record", {"name": "b", "score": 2}))
    session = LLMSession(make_llm(), cache=MemoryCache(), observers=[recorder])
    ask(session)
    ask(session)
    # Then usage is recorded per agent and in total, with a cost
    usage = session.meter.snapshot()
    assert usage["understanding"].calls == 2 and usage["total"].calls == 2
    assert usage["total"].inputTokens == sum(e.input_tokens for e in recorder.calls) > 0
    assert usage["total"].costUsd > 0
    # And each call and each tool call reached the observers
    assert len(recorder.calls) == 2 and [t.tool for t in recorder.tools] == ["record", "record"]


def test_a_large_static_prompt_is_read_from_the_prompt_cache_on_the_second_call(fake, make_llm):
    # Given a prompt prefix above the minimum cacheable size
    big = Answer.model_json_schema() | {"description": "x" * 5000}
    fake.default = tool_reply("record", {"name": "a", "score": 1})
    session = LLMSession(make_llm())

    def call() -> None:
        session.structured(
            agent="analysis",
            prompt=load("analysis"),
            user="u",
            output=Answer,
            tool_name="record",
            tool_description=str(big),
        )

    # When the same agent is called twice
    call()
    call()
    # Then the first call wrote the cache and the second read it, which the cost reflects
    usage = session.meter.snapshot()["analysis"]
    assert usage.cacheWriteTokens > 0 and usage.cacheReadTokens == usage.cacheWriteTokens


def test_extract_json_refuses_text_without_json():
    with pytest.raises(LLMOutputError):
        extract_json("I cannot help with that.")
    assert extract_json("noise [1, 2] more") == [1, 2]


def test_counts_and_percentages_that_code_did_not_measure_are_removed():
    text = "About 37% of orders (1,234 rows) have a bad zip, e.g. rows 4, 9 and 12; 5-digit codes expected."
    # Given measured figures that disagree with the model's
    out = scrub(text, counts=[120], share=0.024)
    # Then the invented numbers are gone and a domain number that is no count stays
    assert "37%" not in out and "1,234" not in out and "4, 9" not in out
    assert "5-digit" in out and "some rows" in out
    # And a figure code measured survives
    assert "120 rows" in scrub("120 rows are affected (2.4%)", counts=[120], share=0.024)
    assert "2.4%" in scrub("120 rows are affected (2.4%)", counts=[120], share=0.024)


class BrokenStore:
    def put_bytes(self, key, data, *, content_type="application/octet-stream"):
        raise OSError("S3 is down")

    def get_bytes(self, key):
        raise OSError("S3 is down")

    def exists(self, key):
        raise OSError("S3 is down")

    def uri(self, key):
        return key


def test_the_cache_can_live_in_an_artifact_store_and_its_failures_are_misses(fake, make_llm, tmp_path):
    from iterate.llm.cache import StoreCache
    from iterate.storage.local import LocalArtifactStore

    # Given answers cached in an artifact store (S3 on AWS, a directory here)
    fake.add(tool_reply("record", {"name": "a", "score": 3}))
    store = LocalArtifactStore(tmp_path)
    ask(LLMSession(make_llm(), cache=StoreCache(store)), CacheScope("sha256:abc"))
    # When another function asks the same, Then no request is made
    assert ask(LLMSession(make_llm(), cache=StoreCache(store)), CacheScope("sha256:abc")).name == "a"
    assert len(fake.requests) == 1
    # And a store that fails only costs a real call
    fake.add(tool_reply("record", {"name": "b", "score": 1}))
    assert ask(LLMSession(make_llm(), cache=StoreCache(BrokenStore())), CacheScope("sha256:abc")).name == "b"


def test_metrics_and_logs_observers_turn_events_into_metrics_and_log_records(fake, make_llm, caplog):
    import logging

    from iterate.llm.observers import LoggingObserver, MetricsObserver

    class Metrics:
        def __init__(self) -> None:
            self.points: list[tuple[str, str, float]] = []

        def add_metric(self, name: str, unit: str, value: float) -> None:
            self.points.append((name, unit, value))

    metrics = Metrics()
    fake.add(tool_reply("record", {"name": "a", "score": 1}))
    session = LLMSession(make_llm(), observers=[MetricsObserver(metrics), LoggingObserver()])
    with caplog.at_level(logging.INFO, logger="iterate.llm"):
        ask(session)
    names = [p[0] for p in metrics.points]
    assert {"LLMCalls", "LLMInputTokens", "LLMOutputTokens", "LLMLatency", "LLMToolCalls"} <= set(names)
    record = next(r for r in caplog.records if r.getMessage() == "llm call")
    assert record.agent == "understanding" and record.input_tokens > 0  # structured fields, not f-strings
