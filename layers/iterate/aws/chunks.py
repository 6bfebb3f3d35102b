"""A large upload profiled in chunks on AWS: ProfileDataset cuts it into byte ranges and writes a manifest, the
ProfileChunks Map parses each range in its own Lambda (ranged GET, iterate.io.chunked.parse_bytes, partial to
S3), and MergeChunks merges the partials in file order into exactly the Table the single pass reads.

The cut, the parse options, the parse, the merge and the Table's assembly are the local chunked reader's own
functions (iterate.io.chunked, iterate.io.reader): only where the bytes come from differs.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from iterate.aws.payloads import (
    PARTIAL_TAG_KEY,
    PARTIAL_TAG_VALUE,
    ChunkedRead,
    ChunkInput,
    ChunkItem,
    ChunkOutput,
    ChunkParseSettings,
    RunState,
    S3ObjectRef,
)
from iterate.io.chunked import (
    ChunkParse,
    keep_range,
    keeping_ranges,
    merge_columns,
    parse_bytes,
    read_partial,
    write_partial,
)
from iterate.io.delimited import Dialect, chunk_options
from iterate.io.limits import ReadLimits, cells_refusal
from iterate.io.reader import plan_ranges, stream_digest, table_from_ranges, text_layout
from iterate.memory import memory_short
from iterate.settings import Settings
from iterate.table import Table

MANIFEST = "chunks/manifest.json"
# The merge reads this many partials at once (each GET waits on the network, not the CPU).
_FETCHERS = 4
_BODY_PIECE = 8 * 1024 * 1024


class ChunkFailedError(RuntimeError):
    """A range has no stored result: its chunk function failed (RecordFailure keeps this as the reason)."""


def part_key(index: int) -> str:
    """Where range `index`'s partial is stored, relative to the run's prefix (derived, never passed in)."""
    return f"chunks/part-{index:05d}.arrow"


class ObjectRanges:
    """`read_at(offset, length)` over one S3 object version, in ranged GETs."""

    def __init__(self, s3: Any, source: S3ObjectRef, size: int) -> None:
        self.s3 = s3
        self.source = source
        self.size = size
        self.extra = {"VersionId": source.versionId} if source.versionId else {}

    def __call__(self, offset: int, length: int) -> bytes:
        length = min(length, self.size - offset)
        if length <= 0:
            return b""
        response = self.s3.get_object(
            Bucket=self.source.bucket,
            Key=self.source.key,
            Range=f"bytes={offset}-{offset + length - 1}",
            **self.extra,
        )
        return bytes(response["Body"].read())

    def pieces(self) -> Iterator[bytes]:
        """The whole object, streamed in pieces (never all in memory)."""
        body = self.s3.get_object(Bucket=self.source.bucket, Key=self.source.key, **self.extra)["Body"]
        yield from body.iter_chunks(_BODY_PIECE)


def plan_upload(
    s3: Any,
    store: Any,
    run: RunState,
    source: S3ObjectRef,
    size: int,
    file_name: str,
    settings: Settings,
    *,
    parts: Literal["arrow", "parquet"] = "arrow",
) -> ChunkedRead | None:
    """Cut the upload into ranges and write their manifest under the run's prefix, when `read_table` would
    read it in chunks (a plain UTF-8 CSV/TSV over ITERATE_CHUNK_BYTES); None: it is read in one pass."""
    planned = plan_ranges(
        Path(file_name),
        size,
        ObjectRanges(s3, source, size),
        limits=ReadLimits.from_settings(settings),
        chunk_bytes=settings.chunk_bytes,
    )
    if planned is None:
        return None
    text, ranges = planned
    items = [
        ChunkItem(
            index=k,
            start=start,
            end=end,
            last=k == len(ranges) - 1,
            skip=text.layout.header.lines if k == 0 else 0,
        )
        for k, (start, end) in enumerate(ranges)
    ]
    store.put_bytes(
        MANIFEST,
        json.dumps([item.model_dump(mode="json") for item in items]).encode(),
        content_type="application/json",
    )
    dialect = text.layout.dialect
    return ChunkedRead(
        source=source,
        fileName=file_name,
        size=size,
        manifestKey=run.prefix + MANIFEST,
        count=len(items),
        parse=ChunkParseSettings(
            delimiter=dialect.delimiter,
            quotechar=dialect.quotechar,
            width=len(text.layout.names),
            encoding=text.encoding,  # type: ignore[arg-type]
            parts=parts,
        ),
    )


def parse_chunk(payload: ChunkInput, s3: Any, *, source_s3: Any = None) -> ChunkOutput:
    """One range: its bytes in one ranged GET (`source_s3`: the client that reads the upload, when it is not
    `s3`), parsed with the single pass's options, stored as a partial."""
    item, parse, run = payload.chunk, payload.parse, payload.run
    data = ObjectRanges(source_s3 or s3, payload.source, item.end)(item.start, item.end - item.start)
    options = functools.partial(
        chunk_options, Dialect(parse.delimiter, parse.quotechar), parse.width, parse.encoding
    )
    part = parse_bytes(data, last=item.last, skip=item.skip, options=options, threads=True)
    del data
    if parse.parts == "parquet":  # the engine path's copy (iterate.aws.large): no partial for a merge
        from iterate.aws.large import write_part

        if part.columns is None:  # no part: EngineStep fails the run naming the range
            return ChunkOutput(
                index=item.index, rows=part.rows, partKey="", trusted=False, reason=part.reason
            )
        key = write_part(s3, run, item.index, list(part.columns), part.rows)
        return ChunkOutput(index=item.index, rows=part.rows, partKey=key, trusted=True, reason="")
    key = run.prefix + part_key(item.index)
    s3.put_object(
        Bucket=run.bucket,
        Key=key,
        Body=write_partial(part),
        ContentType="application/vnd.apache.arrow.file",
        Tagging=f"{PARTIAL_TAG_KEY}={PARTIAL_TAG_VALUE}",
    )
    return ChunkOutput(
        index=item.index, rows=part.rows, partKey=key, trusted=part.columns is not None, reason=part.reason
    )


def read_merged(s3: Any, store: Any, chunked: ChunkedRead, settings: Settings) -> tuple[Table | None, str]:
    """The Table of the whole upload from its partials merged in file order, with the file's digest streamed
    from S3 meanwhile; (None, why) when a range was not trusted or the single pass must decide anyway."""
    ranges = ObjectRanges(s3, chunked.source, chunked.size)
    path = Path(chunked.fileName)
    limits = ReadLimits.from_settings(settings)
    text = text_layout(path, chunked.size, ranges, limits=limits)
    if text is None:
        return None, "the file's head does not read as a plain CSV/TSV"
    items = [ChunkItem.model_validate(i) for i in json.loads(store.get_bytes(MANIFEST))]
    if [i.index for i in items] != list(range(chunked.count)):
        return None, "the chunk manifest does not list every range in order"

    def fetch(item: ChunkItem) -> ChunkParse:
        from iterate.storage.s3 import ArtifactNotFoundError

        try:
            return read_partial(store.get_bytes(part_key(item.index)))
        except ArtifactNotFoundError:
            raise ChunkFailedError(
                f"chunk {item.index} of {len(items)} (bytes {item.start:,}-{item.end:,} of the file) has no result:"
                " its chunk function failed (the ProfileChunks Map run lists it); start the run again, or raise"
                " the chunk function's memory if it ran out"
            ) from None

    stop = threading.Event()
    with (
        keeping_ranges(chunked.size, settings.spill_bytes, settings.spill) as kept,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="iterate-hash") as hasher,
    ):
        digest = hasher.submit(stream_digest, ranges.pieces(), find_nul=True, stop=stop)
        pool = ThreadPoolExecutor(max_workers=_FETCHERS, thread_name_prefix="iterate-part")
        parsed = []
        rows = 0
        try:
            for item, part in zip(items, pool.map(fetch, items), strict=True):
                if part.columns is None:
                    return None, f"range {item.index} (bytes {item.start:,}-{item.end:,}): {part.reason}"
                # Refused as a local read refuses it: once the ranges merged so far pass ITERATE_MAX_CELLS, not
                # after every partial is in memory (a 5 GB upload would need ~8 GB, past the function's 4 GB).
                rows += part.rows
                if not item.last:
                    counted = (item.end, chunked.size)
                    too_many = cells_refusal(path, rows, len(text.layout.names), limits, counted=counted)
                    if too_many is not None:
                        raise too_many
                parsed.append(keep_range(part.columns, kept, item.index))
                del part
                if kept is not None:  # the partial's columns in memory are gone now: hand their pages back
                    pa.default_memory_pool().release_unused()
        finally:
            if len(parsed) < len(items):  # untrusted or failed: the single pass hashes, or nobody needs it
                stop.set()
            pool.shutdown(wait=True, cancel_futures=True)  # no partial fetched past the first untrusted one
        columns = merge_columns(parsed, keep=kept, frugal=memory_short(chunked.size))
        del parsed
        hashed = digest.result()
    table = table_from_ranges(path, text, columns, size=chunked.size, digest=hashed, limits=limits)
    if table is None:
        return None, "no data row, a NUL byte, or a line break in the last row"
    return table, ""
