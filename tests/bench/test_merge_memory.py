"""scripts/merge_memory.py: MergeChunks' body alone, on partials made as the chunk functions make them."""

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gen_bench  # noqa: E402
import merge_memory  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_merge_alone_flags_what_the_single_pass_flags(tmp_path: Path) -> None:
    from iterate import pipeline
    from iterate.agents import build_agents
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    source = tmp_path / "bench.csv"
    gen_bench.write(source, n_rows=12_000, seed=7)  # ~2.3 MB: three ranges of 1 MiB
    # When the merge is measured on 1 MiB partials
    result = merge_memory.measure(source, chunk_mb=1, keep=tmp_path / "run")
    # Then it merged every range, and the profile step on the merged table flags what one pass flags
    settings = Settings.from_env()
    ctx = pipeline.RunContext(
        run_id="one-pass",
        store=LocalArtifactStore(tmp_path / "one-pass"),
        agents=build_agents(settings),
        sandbox=None,  # type: ignore[arg-type]
        settings=settings,
    )
    one_pass = pipeline.profile_step(ctx, source)
    assert result["plan"]["count"] == 3 and result["rows"] == one_pass.rowCount == 12_000
    assert result["flagged_cells"] == one_pass.flaggedCells > 0
    merged_flags = (tmp_path / "run" / "flags.csv").read_bytes()
    assert merged_flags == (tmp_path / "one-pass" / "flags.csv").read_bytes()
    # And the figures are measured, not left out
    assert result["end_hwm_mb"] >= result["merge_hwm_mb"] > 0 and result["process"]["wall_s"] > 0
