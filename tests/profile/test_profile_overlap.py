"""Below LARGE_INPUT_BYTES, with a sandbox that loads data ahead (LocalSandbox.prepare), the profile step writes
data.parquet beside the statistics and the detectors and asks the sandbox to load it once the detectors'
per-column phase is over. The artifacts are those of the step without a sandbox; a failed detection stops the
step with its own error and loads nothing."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gen_bench  # noqa: E402

pytestmark = pytest.mark.unit


class Preparing:
    """A sandbox that only records what it was asked to load ahead, and what the file held then."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.rows: list[int] = []

    def prepare(self, data: object = None) -> None:
        if data is None:
            self.events.append("prepare: start")
            return
        self.events.append("prepare: load")
        self.rows.append(pq.ParquetFile(data.path).metadata.num_rows)  # type: ignore[attr-defined]


def _step(
    context: Callable[..., Any], tmp_path: Path, source: Path, name: str, sandbox: object
) -> tuple[object, dict[str, bytes]]:
    from iterate import pipeline

    summary = pipeline.profile_step(context(tmp_path / name, name, sandbox), source)
    names = ("profile.json", "candidates.json", "flags.csv", "data.parquet")
    return summary, {n: (tmp_path / name / n).read_bytes() for n in names}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "bench.csv"
    gen_bench.write(path, n_rows=20_000, seed=11)
    return path


def _recording_detect(monkeypatch: pytest.MonkeyPatch, events: list[str], fail: bool = False) -> None:
    import iterate.detect

    detect = iterate.detect.detect

    def detecting(*args, phase_done=None, **kwargs):  # type: ignore[no-untyped-def]
        def done(phase: str) -> None:
            events.append(f"detect: {phase}")
            if phase_done is not None:
                phase_done(phase)

        if fail:
            raise RuntimeError("the detectors failed")
        return detect(*args, phase_done=done, **kwargs)

    monkeypatch.setattr(iterate.detect, "detect", detecting)


def test_the_sandbox_loads_the_written_file_once_the_columns_are_examined(
    tmp_path, source, monkeypatch, profile_context
):
    # Given the step without a sandbox (the file written first, nothing loaded ahead)
    alone = _step(profile_context, tmp_path, source, "alone", None)
    # When a sandbox that loads data ahead is there
    events: list[str] = []
    _recording_detect(monkeypatch, events)
    sandbox = Preparing(events)
    overlapped = _step(profile_context, tmp_path, source, "overlapped", sandbox)
    # Then it is asked to load the file once, whole, after the detectors' per-column phase
    assert events.count("prepare: load") == 1 and sandbox.rows == [20_000]
    assert events.index("detect: columns") < events.index("prepare: load")
    # And every artifact is the one the step writes without it
    assert overlapped == alone


def test_a_failed_detection_stops_the_step_and_loads_nothing(tmp_path, source, monkeypatch, profile_context):
    events: list[str] = []
    _recording_detect(monkeypatch, events, fail=True)
    sandbox = Preparing(events)
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="the detectors failed"):
        _step(profile_context, tmp_path, source, "failed", sandbox)
    # The writer was waited for and nothing was loaded
    assert "prepare: load" not in events
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive() and not t.daemon]


@pytest.mark.parametrize("short", [True, False])
def test_a_large_input_is_loaded_beside_the_detectors_only_where_memory_is_plenty(
    tmp_path, source, monkeypatch, short, profile_context
):
    import iterate.memory
    from iterate import pipeline

    monkeypatch.setattr(pipeline, "LARGE_INPUT_BYTES", 1)
    asked: list[int] = []

    def memory_short(nbytes: int) -> bool:
        asked.append(nbytes)
        return short

    monkeypatch.setattr(iterate.memory, "memory_short", memory_short)
    events: list[str] = []
    _recording_detect(monkeypatch, events)
    sandbox = Preparing(events)
    _step(profile_context, tmp_path, source, "large", sandbox)
    # The room asked for is the frame's and the text's: twice the input
    assert asked == [pipeline.OVERLAP_BYTES_PER_INPUT_BYTE * source.stat().st_size]
    if short:
        # run_local asks for the load once the step has handed its memory back; the step itself does not
        assert "prepare: load" not in events and "prepare: start" in events
    else:
        assert events.index("detect: columns") < events.index("prepare: load")
