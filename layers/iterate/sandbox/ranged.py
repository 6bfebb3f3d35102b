"""The sandbox function's download of only what an investigation reads: the Parquet footer and the column
chunks of the columns it names, by ranged GETs, written at their own offsets into a sparse file of the
object's size.

The file then reads as the dataset does for those columns (pyarrow reads the footer and their chunks, nothing
else), while the bytes of every other column are holes that take neither the network, the time nor the
ephemeral storage: a template reading 2 of 20 columns of a 10M-row data.parquet fetches a tenth of it.
A server that ignores the range (answers 200 with the whole object), names that cannot be picked one by one,
or no column named: the whole object, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from iterate.sandbox.frames import written_names

# The first request asks for the object's last 64 KiB: the footer of a 20-column data.parquet with ten row
# groups is ~20 KB, so one request usually brings it whole.
TAIL_BYTES = 64 * 1024
# Chunks this close together are fetched in one request (their gap fetched too, and written as it came).
MERGE_GAP_BYTES = 1 << 20
# Ranged GETs in flight at once.
FETCH_THREADS = 4


class RangeNotServed(Exception):
    """The server answered a ranged GET with the whole object (or no Content-Range)."""


@dataclass(frozen=True)
class Part:
    """Bytes of the object from `start`, and the object's whole size (from Content-Range)."""

    start: int
    data: bytes
    total: int


# get(start, end): bytes [start, end] of the object (inclusive, as in HTTP); start < 0: the last -start bytes.
RangeGet = Callable[[int, int | None], Part]


def content_range_total(header: str | None) -> int:
    """The object's size from `bytes a-b/total`; RangeNotServed without one."""
    if not header or "/" not in header:
        raise RangeNotServed("no Content-Range in the answer")
    total = header.rsplit("/", 1)[1].strip()
    if not total.isdigit():
        raise RangeNotServed(f"Content-Range without a size: {header!r}")
    return int(total)


def _spec(start: int, end: int | None) -> str:
    return f"bytes={start}" if start < 0 else f"bytes={start}-{'' if end is None else end}"


def _read_capped(body: BinaryIO, limit: int) -> bytes:
    parts, size = [], 0
    while piece := body.read(min(limit + 1 - size, 8 << 20)):
        parts.append(piece)
        size += len(piece)
        if size > limit:
            raise ValueError(f"a ranged answer larger than the {limit} bytes asked for")
    return b"".join(parts)


def _part(start: int, end: int | None, content_range: str | None, body: BinaryIO) -> Part:
    """The answer to a ranged GET of [start, end] (start < 0: the last -start bytes): its body, read no further
    than what was asked for, placed by the object's size its Content-Range gives."""
    total = content_range_total(content_range)
    asked = -start if start < 0 else (end - start + 1 if end is not None else 1 << 62)
    data = _read_capped(body, asked)
    return Part(total - len(data) if start < 0 else start, data, total)


def http_range_get(url: str, *, timeout_s: float) -> RangeGet:
    """Ranged GETs of a presigned URL (a GET's Range header is not part of its signature). With requests
    when installed (as iterate.sandbox.remote.fetch_url), else urllib."""
    try:
        import requests
    except ImportError:
        requests = None  # type: ignore[assignment]

    def get(start: int, end: int | None) -> Part:
        headers = {"Range": _spec(start, end)}
        if requests is not None:
            with requests.get(url, headers=headers, stream=True, timeout=timeout_s) as response:
                if response.status_code != 206:
                    raise RangeNotServed(f"HTTP {response.status_code} to a ranged GET")
                return _part(start, end, response.headers.get("Content-Range"), response.raw)
        import urllib.request

        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            if response.status != 206:
                raise RangeNotServed(f"HTTP {response.status} to a ranged GET")
            return _part(start, end, response.headers.get("Content-Range"), response)

    return get


def s3_range_get(client: Any, bucket: str, key: str, version_id: str | None) -> RangeGet:
    """Ranged GETs of one S3 object (needs s3:GetObject on exactly that object)."""
    extra = {"VersionId": version_id} if version_id else {}

    def get(start: int, end: int | None) -> Part:
        response = client.get_object(Bucket=bucket, Key=key, Range=_spec(start, end), **extra)
        return _part(start, end, response.get("ContentRange"), response["Body"])

    return get


def chunk_ranges(metadata: Any, positions: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of every row group's chunk of the columns at `positions`, merged where close."""
    spans = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i in positions:
            chunk = group.column(i)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                start = min(start, chunk.dictionary_page_offset)
            spans.append((start, start + chunk.total_compressed_size))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start - merged[-1][1] <= MERGE_GAP_BYTES:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def fetch_columns(get: RangeGet, target: Path, columns: Sequence[str], *, limit: int) -> int | None:
    """Write a sparse copy of the Parquet object at `target` that holds its footer and the chunks of
    `columns` (names as written). The bytes fetched; None when only the whole object will do (the caller
    fetches it): the server ignored the range, no column named is in the file, or names repeat.

    Raises ValueError when the object is not Parquet or is larger than `limit`.
    """
    import pyarrow.parquet as pq

    try:
        tail = get(-TAIL_BYTES, None)
    except RangeNotServed:
        return None
    total = tail.total
    if total > limit:
        raise ValueError(f"dataset larger than {limit} bytes")
    data = tail.data
    if len(data) < 12 or data[-4:] != b"PAR1":
        raise ValueError("the dataset is not a Parquet file")
    footer = int.from_bytes(data[-8:-4], "little") + 8
    if footer > total - 4:
        raise ValueError("the dataset's Parquet footer is damaged")
    fetched = len(data)
    if footer > len(data):  # a footer longer than the first answer: fetch it whole
        tail = get(total - footer, total - 1)
        fetched += len(tail.data)
    with open(target, "wb") as out:
        out.truncate(total)  # a hole of the object's size; only what is written takes space
        os.pwrite(out.fileno(), tail.data, tail.start)
    metadata = pq.read_metadata(target)
    schema = metadata.schema.to_arrow_schema()
    written = written_names(schema)  # the names the worker picks its columns by
    wanted = set(columns)
    positions = [i for i, name in enumerate(written) if name in wanted]
    if not positions or len(written) != len(schema.names) or metadata.num_columns != len(schema.names):
        return None
    ranges = chunk_ranges(metadata, positions)

    def one(span: tuple[int, int]) -> int:
        part = get(span[0], span[1] - 1)
        if part.total != total or len(part.data) != span[1] - span[0]:
            raise ValueError("the dataset changed while it was fetched")
        with open(target, "r+b") as out:
            os.pwrite(out.fileno(), part.data, span[0])
        return len(part.data)

    with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
        fetched += sum(pool.map(one, ranges))
    return fetched
