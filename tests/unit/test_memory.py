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
