"""iterate.memory.available_memory_mb: what the system, or an enclosing cgroup, still lets a run take."""

import sys
from pathlib import Path

import pytest

from iterate import memory


def test_a_v1_cgroup_leaves_its_limit_less_its_anonymous_memory(tmp_path: Path) -> None:
    (tmp_path / "memory.limit_in_bytes").write_text(str(2 * 2**30))
    (tmp_path / "memory.stat").write_text(
        "cache 900000000\nrss 1\ntotal_cache 900000000\ntotal_rss 536870912\n"
    )
    # page cache is reclaimed before anything is killed: only the anonymous memory counts
    assert memory._cgroup_room(str(tmp_path)) == 2 * 2**30 - 2**29


def test_a_v2_cgroup_leaves_its_limit_less_its_anonymous_memory(tmp_path: Path) -> None:
    (tmp_path / "memory.max").write_text(str(2**30) + "\n")
    (tmp_path / "memory.stat").write_text("anon 268435456\nfile 700000000\n")
    assert memory._cgroup_room(str(tmp_path)) == 2**30 - 2**28


@pytest.mark.parametrize("limit", ["max", str(2**63 - 4096)])
def test_a_cgroup_without_a_limit_leaves_no_bound(tmp_path: Path, limit: str) -> None:
    (tmp_path / "memory.max").write_text(limit)
    (tmp_path / "memory.stat").write_text("anon 1\n")
    assert memory._cgroup_room(str(tmp_path)) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_on_linux_the_memory_available_is_known_and_at_most_the_system_s() -> None:
    available = memory.available_memory_mb()
    assert available is not None and available > 0
    with open("/proc/meminfo") as handle:
        system = next(int(line.split()[1]) for line in handle if line.startswith("MemAvailable:"))
    assert available <= system // 1024 + 64  # (read a moment apart)
