"""Chunked reading of a delimited file: byte ranges at line ends, parsed in parallel, merged into codes.

Each range is parsed on its own (in a worker process when there are several workers) and every column is
dictionary-encoded there, so the raw text of the whole file is never held at once: what comes back is, per
column, a chunk's distinct values and its int32 codes. The chunks are merged in file order, which keeps each
dictionary in first-seen order, so the result has exactly the dictionary and codes a single pass would give.

A range boundary is the byte after a line feed. That is only right when no record spans lines (a quoted value
holding a line break) and no line is blank or ragged, which every range checks for itself: it must give one
record per physical line and no invalid row. When one range does not, the caller reads the file in one pass
instead, so a hostile file gets exactly the single-pass reader's repairs and errors.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from iterate.io.limits import ReadLimits, cells_refusal
from iterate.memory import memory_short, spill_directory
from iterate.table import dictionary_encoded, map_arrays, one_array

# A range this big parses in ~0.5 s and holds ~3x its size while parsing; past a few ranges the parse is
# spread over the workers and the file's raw text is never all in memory.
DEFAULT_CHUNK_BYTES = 64 * 1024 * 1024
_SCAN = 8 * 1024 * 1024


@dataclass(frozen=True)
class Chunking:
    """How a large delimited file is read: ranges of about `chunk_bytes`, parsed by `workers` processes.

    `single_pass_bytes`: with one worker, a file up to this size is read in one pass all the same. Parsed one
    after the other in this process, ranges only bound the memory, and cost time: on the 1M-row bench file
    (197 MB, 2 cores) the read took 1.67-2.04 s in 64 MiB ranges against 1.15-1.16 s in one pass, alternated,
    the run's peak the same (1.02-1.10 GB against 1.05-1.09 GB)."""

    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    workers: int = 1
    single_pass_bytes: int = 0
    # A file of this size or more keeps its parsed ranges in mapped files until they are merged (0: never),
    # as a large table is kept once read (iterate.settings.Settings.spill_bytes, Table.spill); `spill`: when
    # (iterate.memory.spill_directory: "auto" where memory is short, "always", "never").
    spill_bytes: int = 0
    spill: str = "auto"

    @classmethod
    def from_settings(cls, settings: Any) -> Chunking:
        """From an `iterate.settings.Settings` (its `chunk_bytes`, `workers` (None: see resolve_workers),
        `single_pass_bytes`, `spill_bytes` and `spill`)."""
        workers = resolve_workers(settings.workers)
        return cls(
            chunk_bytes=settings.chunk_bytes,
            workers=workers,
            single_pass_bytes=settings.single_pass_bytes,
            spill_bytes=settings.spill_bytes,
            spill=settings.spill,
        )

    def splits(self, size: int) -> bool:
        """Whether a file of `size` bytes is read in ranges (if its content allows)."""
        return size > self.chunk_bytes and (self.workers > 1 or size > self.single_pass_bytes)


# Up to this many cores, a file is parsed in the main process by default: pyarrow's reader already uses both
# cores of a 2-core machine, and worker processes only add their start, pickling each range's columns back
# and the merge (1M-row bench, 2 cores: 15.0 s of CPU for the whole run with one worker against 16.7 s with
# two, the same wall time; docs/large-files.md).
PARSE_IN_PROCESS_CORES = 2
# At most this many worker processes unless asked for more: each holds its range's text and columns until the
# merge takes them (316-389 MB per 64 MiB range), side by side. The 3M-row bench file's read peaked at 1,656 MB
# over all processes with 4 workers and at 2,554 MB with 8, what a laptop of 8 cores would have started.
MAX_DEFAULT_WORKERS = 4


def resolve_workers(workers: int | None, cores: int | None = None) -> int:
    """The number of worker processes: as given; when None, the machine's cores up to MAX_DEFAULT_WORKERS,
    or 1 on a machine of PARSE_IN_PROCESS_CORES cores or fewer."""
    if workers is not None:
        return max(1, workers)
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return min(cores, MAX_DEFAULT_WORKERS) if cores > PARSE_IN_PROCESS_CORES else 1


def line_ranges(path: Path, chunk_bytes: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges covering the file, each ending just after a line feed (the last at the end
    of the file), each at least `chunk_bytes` long except the last. One range when the file has no line feed
    past the first `chunk_bytes`."""
    size = path.stat().st_size
    with path.open("rb") as fh:

        def read_at(offset: int, length: int) -> bytes:
            fh.seek(offset)
            return fh.read(length)

        return cut_ranges(read_at, size, chunk_bytes)


def cut_ranges(
    read_at: Callable[[int, int], bytes], size: int, chunk_bytes: int, *, window: int = _SCAN
) -> list[tuple[int, int]]:
    """`line_ranges` over any byte source: `read_at(offset, length)` gives up to `length` bytes from `offset`
    (fewer at the end, b"" past it). The cut is the first line feed at or after each target, whatever the
    window, so a local file and an S3 object read in ranged GETs are cut at the same bytes."""
    starts = [0]
    target = chunk_bytes
    while target < size:
        found = -1
        offset = target
        while found < 0 and offset < size and (piece := read_at(offset, min(window, size - offset))):
            at = piece.find(b"\n")
            if at >= 0:
                found = offset + at
            offset += len(piece)
        if found < 0 or found + 1 >= size:
            break
        starts.append(found + 1)
        target = found + 1 + chunk_bytes
    ends = [*starts[1:], size]
    return list(zip(starts, ends, strict=True))


@dataclass(frozen=True)
class ChunkParse:
    """What one range gave: per column its dictionary-encoded values (None when the range does not fit the
    chunked path, with the reason), and its row count."""

    columns: list[pa.DictionaryArray] | None
    rows: int
    reason: str = ""


def _physical_lines(data: bytes, *, last: bool) -> int:
    """Lines of a range: every range but the last ends with a line feed; the last may end with several line
    breaks (blank lines at the end of a file, which the parser skips) or none."""
    if last:
        data = data.rstrip(b"\r\n")
        return data.count(b"\n") + 1 if data else 0
    return data.count(b"\n")


ParseOptions = Callable[[int, Callable[[pacsv.InvalidRow], str], bool], dict[str, object]]


def parse_range(
    path: str,
    start: int,
    end: int,
    *,
    last: bool,
    skip: int,
    options: ParseOptions,
    threads: bool,
) -> ChunkParse:
    """Parse bytes [start, end) of the file with the reader's options; each column dictionary-encoded."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return parse_bytes(data, last=last, skip=skip, options=options, threads=threads)


def parse_bytes(data: bytes, *, last: bool, skip: int, options: ParseOptions, threads: bool) -> ChunkParse:
    """One range's bytes (read from a file, or from S3 by the AWS chunk function) parsed with the reader's
    options: each column dictionary-encoded, or None with the reason the range cannot be trusted."""
    invalid = 0

    def count(_: pacsv.InvalidRow) -> str:
        nonlocal invalid
        invalid += 1
        return "skip"

    try:
        table = pacsv.read_csv(pa.BufferReader(data), **options(skip, count, threads))  # type: ignore[arg-type]
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        return ChunkParse(None, 0, f"parse error: {str(exc).splitlines()[0][:200]}")
    lines = _physical_lines(data, last=last) - skip
    del data
    if invalid:
        return ChunkParse(None, table.num_rows, f"{invalid} row(s) with the wrong number of fields")
    if table.num_rows != lines:
        # A value spanning lines, a blank line or a lone CR line break: only a single pass reads it right.
        return ChunkParse(None, table.num_rows, f"{table.num_rows} records on {lines} lines")
    columns = list(_map(dictionary_encoded, table.columns, threads))
    return ChunkParse(columns, table.num_rows)


_REASON = b"iterate.reason"
_ROWS = b"iterate.rows"


def write_partial(part: ChunkParse) -> bytes:
    """One range's parse as an Arrow IPC file: each column's dictionary and int32 codes (lz4), or no column
    and the reason the range was not trusted; what an AWS chunk function stores for the merge step."""
    columns = part.columns or []
    table = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(len(columns))])
    meta = {_ROWS: str(part.rows).encode()}
    if part.columns is None:
        meta[_REASON] = part.reason.encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def read_partial(data: bytes) -> ChunkParse:
    """The parse `write_partial` stored, as it was (dictionaries and codes unchanged)."""
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    meta = table.schema.metadata or {}
    rows = int(meta.get(_ROWS, b"0"))
    if _REASON in meta:
        return ChunkParse(None, rows, meta[_REASON].decode())
    return ChunkParse([one_array(column) for column in table.columns], rows)


def _map(fn: Callable[[Any], Any], items: list[Any], threads: bool) -> Iterator[Any]:
    """fn over items, on a thread per core when `threads` (pyarrow's kernels release the GIL)."""
    if not threads or len(items) < 2:
        return map(fn, items)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return iter(list(pool.map(fn, items)))


def _parse_all(
    path: Path, ranges: list[tuple[int, int]], skip: int, options: Any, workers: int
) -> Iterator[ChunkParse]:
    """Each range's parse, in file order."""
    jobs = [
        {
            "start": s,
            "end": e,
            "last": k == len(ranges) - 1,
            "skip": skip if k == 0 else 0,
            "options": options,
        }
        for k, (s, e) in enumerate(ranges)
    ]
    pool = _process_pool(min(workers, len(jobs))) if workers > 1 else None
    if pool is None:
        for job in jobs:
            yield parse_range(str(path), **job, threads=True)
        return
    with pool:
        futures = [pool.submit(parse_range, str(path), **job, threads=False) for job in jobs]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _process_pool(workers: int) -> ProcessPoolExecutor | None:
    """A pool of `workers` spawned processes, or None where processes cannot share a queue (AWS Lambda has no
    /dev/shm: multiprocessing's semaphores fail there with ENOSYS), and the ranges are parsed in-process.

    spawn, not fork: the reader runs threads (the hash of the file, pyarrow's pools) a fork would copy
    mid-flight. Each worker parses on one thread: the processes are the parallelism.
    """
    try:
        return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    except (OSError, NotImplementedError, ImportError):
        return None


def merge_columns(
    chunks: list[list[pa.DictionaryArray]], *, keep: Path | None = None, frugal: bool = True
) -> list[pa.DictionaryArray]:
    """Per column, one dictionary over all chunks (first-seen order kept: chunks are in file order) and
    the codes remapped to it; the same dictionary and codes as encoding the whole column at once. With
    `keep`, each merged column is moved to a mapped file there as soon as it is made (`_keep_mapped`).
    `frugal` (where memory is short: iterate.memory.memory_short): long dictionaries that hardly repeat are
    merged by sorting, in about half the memory of pyarrow's unification and three times its time; otherwise
    every column is unified (10M rows of the bench file read in ranges: 20.2-21.0 s against 23.4-24.3 s, the
    peak 3.1-3.2 GB against 2.8-2.9 GB)."""
    if len(chunks) == 1:
        return chunks[0]

    def merge(index: int) -> pa.DictionaryArray:
        parts = [chunk[index] for chunk in chunks]
        if frugal and _rarely_repeated(parts):
            unified = _merge_by_sorting(parts)
        else:
            column = pa.chunked_array(parts)
            unified = pa.table({"c": column}).unify_dictionaries().column(0).combine_chunks()
            del column
        del parts
        for chunk in chunks:  # the per-chunk arrays are no longer needed: let them go as we go
            chunk[index] = None  # type: ignore[call-overload]
        if keep is not None:
            (unified,) = _keep_mapped([unified], keep / f"column-{index}.arrow")
            pa.default_memory_pool().release_unused()  # the column in memory is gone now
        return unified

    return list(_map(merge, list(range(len(chunks[0]))), True))


# A column whose ranges' dictionaries together hold this many values or more, nearly all of them once (ids,
# phone numbers, timestamps), is merged by sorting: pyarrow's unification keeps a hash table of every distinct
# value beside a copy of them, 4.6x the merged dictionary at once (+921 MB for a 200 MB column of 10M values,
# the read's peak on a long file); sorting needs about half (+425 MB), for more time (2.4 s -> 7.5 s there).
SORT_MERGE_VALUES = 1_000_000
_REPEAT_SAMPLE = 2_000


def _rarely_repeated(parts: list[pa.DictionaryArray]) -> bool:
    """Whether the ranges' dictionaries are long and hardly share values: fewer than 1 in 20 of the second
    range's first values are in the first range's dictionary."""
    if len(parts) < 2 or sum(len(p.dictionary) for p in parts) < SORT_MERGE_VALUES:
        return False
    if any(p.null_count or p.dictionary.null_count for p in parts):
        return False
    sample = parts[1].dictionary.slice(0, _REPEAT_SAMPLE)
    shared = pc.sum(pc.is_in(sample, value_set=parts[0].dictionary)).as_py() or 0
    return shared < 0.05 * len(sample)


def _merge_by_sorting(parts: list[pa.DictionaryArray]) -> pa.DictionaryArray:
    """The ranges merged into one dictionary (first-seen order) and codes, exactly as unify_dictionaries
    merges them, found by a stable sort of the ranges' dictionaries instead of a hash table."""
    dictionaries = pa.chunked_array([p.dictionary for p in parts])
    m = len(dictionaries)
    order = pc.sort_indices(dictionaries).to_numpy()  # stable: equal values keep their order of appearance
    in_order = dictionaries.take(pa.array(order))
    repeat = np.zeros(m, dtype=bool)  # in sorted order: equal to the value before it
    repeat[1:] = pc.equal(in_order.slice(1), in_order.slice(0, m - 1)).to_numpy(zero_copy_only=False)
    del in_order
    # Per sorted value, where its run of equal values starts; the run's first is its earliest appearance.
    start = np.where(repeat, 0, np.arange(m, dtype=np.int64))
    np.maximum.accumulate(start, out=start)
    earliest = order[start]
    del start
    first = np.zeros(m, dtype=bool)
    first[order[~repeat]] = True
    del repeat
    rank = np.cumsum(first, dtype=np.int64) - 1  # a first appearance's place in the merged dictionary
    code_of = np.empty(m, dtype=np.int32)  # per entry of the ranges' dictionaries, its merged code
    code_of[order] = rank[earliest]
    del order, earliest, rank
    merged = dictionaries.filter(pa.array(first)).combine_chunks()
    del first, dictionaries
    codes = np.empty(sum(len(p) for p in parts), dtype=np.int32)
    row = entry = 0
    for p in parts:
        indices = p.indices.to_numpy(zero_copy_only=False)
        np.take(code_of[entry : entry + len(p.dictionary)], indices, out=codes[row : row + len(p)])
        row, entry = row + len(p), entry + len(p.dictionary)
    return pa.DictionaryArray.from_arrays(pa.array(codes), merged)


def _keep_mapped(columns: list[pa.DictionaryArray], path: Path) -> list[pa.DictionaryArray]:
    """Columns moved to a mapped file (iterate.table.map_arrays); as they were where the file cannot be written
    (a full disk, the disk's reserve). The caller still holds the ones in memory: once it lets them go,
    `pa.default_memory_pool().release_unused()` hands their pages back."""
    try:
        return map_arrays(columns, path)  # type: ignore[return-value]
    except OSError:
        return columns


@contextlib.contextmanager
def keeping_ranges(size: int, spill_bytes: int, spill: str = "auto") -> Iterator[Path | None]:
    """Where the parsed ranges of a file of `size` bytes wait for the merge: a temporary directory when the
    file is `spill_bytes` or more and `spill` says so (by default where memory is short; and TMPDIR is a
    disk: iterate.memory.spill_directory), else None (in memory). The ranges' columns together are about half
    the file's text (10M rows: 1.7 GB in memory when the merge began, and the read's peak anonymous memory
    2.6-2.8 GB; 0.8 GB with ranges and merged columns in mapped files)."""
    directory = spill_directory(size, spill_bytes, spill)
    if directory is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="iterate-ranges-", dir=directory) as kept:
        yield Path(kept)


def keep_range(columns: list[pa.DictionaryArray], kept: Path | None, index: int) -> list[pa.DictionaryArray]:
    """Range `index`'s columns, in a mapped file under `kept` (keeping_ranges) or as they are."""
    return columns if kept is None else _keep_mapped(columns, kept / f"range-{index}.arrow")


def read_chunked(
    path: Path,
    *,
    skip: int,
    names: list[str],
    options: ParseOptions,
    chunking: Chunking,
    limits: ReadLimits | None = None,
) -> tuple[pa.Table | None, str]:
    """The file as a table of dictionary-encoded text columns, read in ranges; (None, why) when it does
    not fit the chunked path (the caller reads it in one pass), or when it is one range anyway.

    With `limits`, a file whose ranges read so far already hold more than `max_cells` is refused there
    (DatasetReadError), before the rest is read: the single pass would refuse it too, after all of it."""
    ranges = line_ranges(path, chunking.chunk_bytes)
    if len(ranges) < 2:
        return None, "one range"
    parsed: list[list[pa.DictionaryArray]] = []
    size, rows = ranges[-1][1], 0
    with keeping_ranges(size, chunking.spill_bytes, chunking.spill) as kept:
        try:
            for k, ((_, end), part) in enumerate(
                zip(ranges, _parse_all(path, ranges, skip, options, chunking.workers), strict=True)
            ):
                if part.columns is None:
                    return None, part.reason
                rows += part.rows
                if limits is not None and end < size:
                    too_many = cells_refusal(path, rows, len(names), limits, counted=(end, size))
                    if too_many is not None:
                        raise too_many
                parsed.append(keep_range(part.columns, kept, k))
                del part
                if kept is not None:  # the range's columns in memory are gone now: hand their pages back
                    pa.default_memory_pool().release_unused()
        except BrokenProcessPool:  # a worker was killed (out of memory, a signal): the single pass decides
            return None, "a worker process stopped"
        columns = merge_columns(parsed, keep=kept, frugal=memory_short(size))
    return pa.Table.from_arrays(columns, names=names), ""
