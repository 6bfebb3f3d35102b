"""When a run starts the sandbox's interpreter: during the read, or after the detectors on a large input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import iterate.detect
import iterate.memory
import iterate.pipeline
from iterate.pipeline import run_local
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.settings import Settings

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "orders.csv"


class Recording(LocalSandbox):
    def __init__(self, events: list[str], limits: SandboxLimits) -> None:
        super().__init__(limits)
        self.events = events

    def prepare(self, data: Any = None, *, arrow: Any = None) -> Any:
        self.events.append("prepare" if data is None else "prepare data")
        return super().prepare(data, arrow=arrow)


@pytest.mark.parametrize("large", [False, True])
def test_the_sandbox_starts_after_the_detectors_only_on_a_large_input(
    large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    detect = iterate.detect.detect

    def recorded(*args: Any, **kwargs: Any) -> Any:
        events.append("detect")
        return detect(*args, **kwargs)

    monkeypatch.setattr(iterate.detect, "detect", recorded)
    if large:  # (and memory short: a large input with memory to spare is run as a small one)
        monkeypatch.setattr(iterate.pipeline, "LARGE_INPUT_BYTES", SAMPLE.stat().st_size)
        monkeypatch.setattr(iterate.memory, "memory_short", lambda nbytes: True)
    settings = Settings()
    with Recording(events, SandboxLimits.from_settings(settings)) as sandbox:
        result = run_local(SAMPLE, tmp_path / "out", settings=settings, sandbox=sandbox)
    # Given the sample: small, the interpreter starts while it is read and the frame is loaded as soon as the
    # detectors' per-column phase is over (asked again after the step: found loaded); large, the interpreter
    # starts once the detectors are done (their peak is then not shared with it) and the frame after the step
    if large:
        assert events == ["detect", "prepare", "prepare data"]
    else:
        assert events == ["prepare", "detect", "prepare data", "prepare", "prepare data"]
    # And the proofs ran all the same
    assert sum(i.status == "confirmed" for i in result.issues) >= 5


@pytest.mark.parametrize("large", [False, True])
def test_large_blocks_are_mapped_one_by_one_only_on_a_large_input(
    large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iterate.memory

    calls: list[str] = []
    monkeypatch.setattr(iterate.memory, "map_large_blocks", lambda *a, **k: calls.append("map") or True)
    monkeypatch.setattr(iterate.memory, "use_system_pool", lambda *a, **k: calls.append("pool") or True)
    if large:
        monkeypatch.setattr(iterate.pipeline, "LARGE_INPUT_BYTES", SAMPLE.stat().st_size)
    run_local(SAMPLE, tmp_path / "out", settings=Settings(), sandbox=None)
    # Given a small input: no mappings of their own (their page faults cost a 1M-row run 3-5 s); given a
    # large one, both, before the read
    assert calls == (["map", "pool"] if large else [])
