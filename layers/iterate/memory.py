"""What a long run's process does with the memory it frees: hand it back to the system instead of keeping it.

Two allocators hold a run's arrays: pyarrow's pool (its text and compute buffers) and the C library's malloc
(numpy's). glibc's malloc serves a block from its heaps, not from a mapping of its own, once the block is under
its "mmap threshold"; and it raises that threshold to the size of each mapped block freed, up to 32 MiB. After
the first large array is freed, every per-row array of a 3M-row file (3-24 MB) comes from the heaps of the
detectors' threads, and the heaps keep those pages when the arrays are freed: the main process held 1.8 GB
through the investigations of a 3M-row run, after the table and the detectors' arrays were gone.

pyarrow's own pool (mimalloc by default) keeps pages too: through the detectors' text kernels on 3M rows it
held 200-250 MB more than the live buffers at the detection's peak. The run's process gives pyarrow the C
library's allocator instead (`use_system_pool`): with large blocks mapped one by one, each large buffer freed
is returned at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from functools import cache

# mallopt's parameter for the threshold (malloc.h); setting it also stops glibc from raising it.
M_MMAP_THRESHOLD = -3
# Blocks from 1 MiB up get a mapping of their own, returned to the system when freed: a per-row array from
# 131,072 rows (int64) or 1M rows (bool). Smaller blocks come from the heaps as before.
LARGE_BLOCK = 1 << 20


@cache
def _libc() -> ctypes.CDLL | None:
    """glibc, or None (another C library, another system): then nothing here does anything."""
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        if libc.gnu_get_libc_version():
            return libc
    return None


def map_large_blocks(threshold: int = LARGE_BLOCK) -> bool:
    """Give every block of `threshold` bytes or more a mapping of its own, for the rest of this process (and
    the processes it forks): freeing a per-row array then returns its pages at once. Whether it was set."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, int(threshold)) == 1)


def use_system_pool() -> bool:
    """Make the C library's malloc pyarrow's default pool for the rest of this process (and the processes it
    forks), on glibc only, where `map_large_blocks` gives each large buffer a mapping of its own. Buffers
    already allocated stay with the pool that made them. Whether the pool was switched.

    Measured on the 3M-row bench file, the read then the detectors in one process, mimalloc and malloc in the
    same minutes: the detection peaks at 1,831-1,832 MB RSS instead of 2,037-2,080 MB, in the same time
    within this shared machine's swing (14.7 / 19.2 s of detection against 14.4 / 19.9 s)."""
    if _libc() is None:
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def hand_back() -> None:
    """Free what only reference cycles still hold, then return the free pages both allocators keep (pyarrow's
    pool; every malloc heap, middles too).

    The cycles matter: a column's facts and the models cached on them refer to each other (ColumnFacts ->
    NumericModel -> ColumnFacts), so the detectors' per-row arrays outlive the step that made them until the
    collector runs, which a long run of few allocations can postpone past the investigations."""
    import gc

    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
