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


_UNLIMITED = (
    1 << 60
)  # a cgroup limit at or above this is "no limit" (v1 writes 2**63 - 4096 rounded to pages)


def _cgroup_dirs() -> list[str]:
    """This process's memory cgroup directories, its own first, then each one above it (v1 or v2)."""
    import os

    from iterate.sandbox.oslayers import own_cgroups

    try:
        own = own_cgroups()
    except (OSError, ValueError):
        return []
    if "memory" in own:
        root, path = "/sys/fs/cgroup/memory", own["memory"]
    else:
        root, path = "/sys/fs/cgroup", own.get("", "")
    parts = [p for p in path.split("/") if p]
    # Inside a container the path may be written from the host's root: the longest tail that exists here.
    for start in range(len(parts) + 1):
        here = os.path.join(root, *parts[start:])
        if os.path.isdir(here):
            break
    else:
        return []
    dirs = []
    while True:
        dirs.append(here)
        if os.path.normpath(here) == os.path.normpath(root):
            return dirs
        here = os.path.dirname(here)


def cgroup_anon(directory: str) -> int | None:
    """Anonymous memory (bytes) charged to the memory cgroup at `directory`, its processes and the cgroups below
    it together (v2 `anon`, v1 `total_rss`); None where it cannot be read."""
    import os

    try:
        with open(os.path.join(directory, "memory.stat")) as handle:
            stat = dict(line.split() for line in handle if line.count(" ") == 1)
        return next((int(stat[k]) for k in ("anon", "total_rss", "rss") if k in stat), None)
    except (OSError, ValueError):
        return None


def _cgroup_room(directory: str) -> int | None:
    """Bytes the cgroup lets its processes still take: its limit less its anonymous memory (page cache is
    reclaimed before anything is killed); None without a limit."""
    import os

    for limit_name in ("memory.max", "memory.limit_in_bytes"):
        path = os.path.join(directory, limit_name)
        if not os.path.exists(path):
            continue
        try:
            with open(path) as handle:
                text = handle.read().strip()
            if text == "max" or int(text) >= _UNLIMITED:
                return None
        except (OSError, ValueError):
            return None
        return max(0, int(text) - (cgroup_anon(directory) or 0))
    return None


def available_memory_mb() -> int | None:
    """Memory (MiB) this process and the processes it starts can still take: the least of the system's
    MemAvailable and, for this process's memory cgroup and each one above it, its limit less its anonymous
    memory. None where neither can be read (not Linux)."""
    room: list[int] = []
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    room.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for directory in _cgroup_dirs():
        left = _cgroup_room(directory)
        if left is not None:
            room.append(left)
    return min(room) // 2**20 if room else None


MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})


def in_memory_fs(path: str, mountinfo: str | None = None) -> bool:
    """Whether `path` lies on a filesystem kept in memory (tmpfs, ramfs: /tmp on some systems), where a file
    costs the same memory as the array it holds. Read from /proc/self/mountinfo (or the `mountinfo` text
    given): False where there is none."""
    import os

    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
                mountinfo = fh.read()
        except OSError:
            return False
    real = os.path.realpath(path)
    best, kind = "", ""
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest.split():
            continue
        point = parts[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):  # the last of equal mount points is the one on top
            best, kind = point, rest.split()[0]
    return kind in MEMORY_FILESYSTEMS


# Where the memory left is at least this many times the bytes that would be moved to files, they stay in memory:
# a run that keeps its table in memory peaks at about 2.4 times the table's bytes, its read at 1.5 times the
# file's (10M rows x 20 columns: a 1,266 MB table, a 1,881 MiB file; the whole run finished in a 3,072 MiB cgroup
# and was killed in 2,816; the read peaked at 2,773 MB). The files save nothing a run with that much room needs,
# and cost writes (about 4 GB to the page cache and 3 GB of TMPDIR at 10M rows) and some time (+5 to +8 s in one
# session's pairs of runs, within the machine's swing in the next: docs/large-files.md). The same room lets the
# read merge its ranges the quicker way (iterate.io.chunked.merge_columns).
ROOM_FACTOR = 3


def memory_short(nbytes: int) -> bool:
    """Whether less than ROOM_FACTOR times `nbytes` is available to this process and the ones it starts
    (`available_memory_mb`), or that cannot be told: then a run takes the path that needs less memory."""
    room = available_memory_mb()
    return room is None or room * 2**20 < ROOM_FACTOR * nbytes


def spill_directory(nbytes: int, threshold: int, mode: str = "auto") -> str | None:
    """Where `nbytes` of a run's arrays are moved to mapped files (a table: Table.spill; a file's parsed ranges:
    iterate.io.chunked.keeping_ranges): the temporary directory (TMPDIR) once `nbytes` reaches `threshold`
    (ITERATE_SPILL_BYTES; 0: never) and, in `mode` "auto" (ITERATE_SPILL), memory is short (`memory_short`:
    less than ROOM_FACTOR times `nbytes` available, the system's and its memory cgroups'; short where it cannot
    be read). "always": whatever the memory; "never": not at all. None where nothing is moved, and also where
    TMPDIR is kept in memory itself, or where files could not be removed while mapped (Windows)."""
    import os
    import tempfile

    if mode == "never" or threshold <= 0 or nbytes < threshold or os.name == "nt":
        return None
    if mode != "always" and not memory_short(nbytes):
        return None
    directory = tempfile.gettempdir()
    return None if in_memory_fs(directory) else directory
