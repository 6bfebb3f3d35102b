"""The ASL document's Maps, walked and configured without CDK (the stack and scripts/aws_chunked.py share it)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any


def iter_states(states: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state, including those nested in Map item processors and Parallel branches."""
    for name, state in states.items():
        yield name, state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from iter_states(processor["States"])
        for branch in state.get("Branches", []):
            yield from iter_states(branch["States"])


# The Map that parses a large upload's byte ranges (its concurrency is the chunk setting, not the sandbox's).
CHUNK_MAP = "ProfileChunks"


def with_map_concurrency(
    doc: dict[str, Any], concurrency: int, named: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The definition with every Map's MaxConcurrency set to `concurrency` (a deployment setting: the
    sandbox's reserved concurrency is shared by every run, so one run must not take it all), but for the
    Maps `named` by state name, which get their own."""
    named = named or {}
    copy: dict[str, Any] = json.loads(json.dumps(doc))
    for name, state in iter_states(copy["States"]):
        if state.get("Type") == "Map":
            state["MaxConcurrency"] = named.get(name, concurrency)
    return copy
