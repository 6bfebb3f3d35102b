"""A long table's column statistics are computed in the run's process before the detectors (not after them,
beside their findings); a short table's are forked beside them. Either way the step writes the same artifacts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gen_bench  # noqa: E402

pytestmark = pytest.mark.unit


def _profile_step(
    context: Callable[..., Any], tmp_path: Path, source: Path, name: str
) -> tuple[object, dict[str, bytes], list[str]]:
    from iterate import pipeline

    reported: list[str] = []
    ctx = context(
        tmp_path / name,
        name,
        progress=lambda step, done, total, message: reported.append(f"{step} {done}/{total}"),
    )
    summary = pipeline.profile_step(ctx, source)
    written = {
        n: (tmp_path / name / n).read_bytes() for n in ("profile.json", "candidates.json", "flags.csv")
    }
    assert ctx.timings_ms["profile_table"] >= 0 and ctx.timings_ms["detect"] > 0
    return summary, written, reported


def test_a_long_tables_statistics_come_before_the_detection_and_are_the_same(
    tmp_path, monkeypatch, profile_context
):
    import iterate.detect
    import iterate.profile.background as background

    source = tmp_path / "bench.csv"
    gen_bench.write(source, n_rows=20_000, seed=5)
    # Given the short table's run: statistics forked beside the detectors
    forked = _profile_step(profile_context, tmp_path, source, "forked")
    assert forked[2].index("detect 1/1") < forked[2].index("profile 1/1")
    # When the same table counts as long (no fork), the calls are recorded
    monkeypatch.setattr(background, "MAX_ROWS", 0)
    calls: list[str] = []
    profile_table, detect = background.profile_table, iterate.detect.detect

    def profiling(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("profile")
        return profile_table(*args, **kwargs)

    def detecting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("detect")
        return detect(*args, **kwargs)

    monkeypatch.setattr(background, "profile_table", profiling)
    monkeypatch.setattr(iterate.detect, "detect", detecting)
    in_process = _profile_step(profile_context, tmp_path, source, "in-process")
    # Then the statistics were computed once, before the detection, and reported in that order
    assert calls == ["profile", "detect"]
    assert in_process[2].index("profile 1/1") < in_process[2].index("detect 0/1")
    # And the profile, the candidates, the flags and the summary are the forked run's
    assert in_process[0] == forked[0] and in_process[1] == forked[1]
