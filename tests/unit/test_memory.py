"""iterate.memory: a run hands the memory it freed back to the system."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

from iterate.memory import hand_back, map_large_blocks

pytestmark = pytest.mark.unit


class _Facts:
    """Like a column's facts and a model cached on them: two objects that refer to each other."""

    def __init__(self) -> None:
        self.rows = np.ones(1_000_000)
        self.model = {"facts": self}


def test_hand_back_frees_arrays_that_only_a_cycle_holds():
    gc.disable()  # as when the collector has not come round yet
    try:
        facts = _Facts()
        rows = weakref.ref(facts.rows)
        del facts
        assert rows() is not None  # reference counting alone does not free a cycle
        hand_back()
        assert rows() is None
    finally:
        gc.enable()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_large_blocks_are_mapped_on_glibc():
    import ctypes.util

    if "musl" in (ctypes.util.find_library("c") or ""):
        pytest.skip("not glibc")
    assert map_large_blocks() is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_pyarrow_allocates_with_malloc_once_switched_and_earlier_buffers_stay_valid():
    import ctypes.util

    import pyarrow as pa
    import pyarrow.compute as pc

    from iterate.memory import use_system_pool

    if "musl" in (ctypes.util.find_library("c") or ""):
        pytest.skip("not glibc")
    before = pa.default_memory_pool()
    earlier = pa.array([f"v{i}" for i in range(10_000)])  # made by the pool in use until now
    try:
        assert use_system_pool() is True
        assert pa.default_memory_pool().backend_name == "system"
        later = pc.utf8_upper(earlier)
        assert later[9_999].as_py() == "V9999" and earlier[9_999].as_py() == "v9999"
        del earlier  # freed by the pool that made it
        assert later.to_pylist()[:2] == ["V0", "V1"]
    finally:
        pa.set_memory_pool(before)
