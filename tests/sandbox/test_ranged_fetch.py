"""The sandbox function fetches only the columns a template reads: footer and column chunks by ranged GETs
into a sparse file that reads as the whole dataset does for those columns."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import iterate.io.parquet_text
from iterate.io import write_parquet_text
from iterate.sandbox import SandboxEvent, SandboxLimits, run_event
from iterate.sandbox.frames import load_frame
from iterate.sandbox.ranged import Part, RangeNotServed, fetch_columns
from iterate.table import SourceInfo, Table

pytestmark = pytest.mark.unit


class Served:
    """An object served by ranged GETs as S3 serves them, counting the bytes sent."""

    def __init__(self, body: bytes, *, honours_range: bool = True) -> None:
        self.body = body
        self.honours_range = honours_range
        self.sent = 0
        self.requests = 0

    def __call__(self, start: int, end: int | None) -> Part:
        self.requests += 1
        if not self.honours_range:
            raise RangeNotServed("HTTP 200 to a ranged GET")
        total = len(self.body)
        first = max(total + start, 0) if start < 0 else start
        last = total - 1 if start < 0 or end is None else min(end, total - 1)
        data = self.body[first : last + 1]
        self.sent += len(data)
        return Part(first, data, total)


@pytest.fixture
def wide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Given a 20-column all-text data.parquet of 30,000 rows in 8 row groups, written as the engine does."""
    import iterate.sandbox.ranged as ranged

    monkeypatch.setattr(iterate.io.parquet_text, "ROW_GROUP", 4_000)
    # A 4 MB file: chunks are fetched apart from a gap of 8 KiB, as a real one's from a gap of 1 MiB
    monkeypatch.setattr(ranged, "MERGE_GAP_BYTES", 8 << 10)
    rng = random.Random(7)
    rows = {
        f"col {k}": [
            f"{rng.random():.9f}" if k % 3 else rng.choice(["a", "b", "é", ""]) for _ in range(30_000)
        ]
        for k in range(20)
    }
    path = tmp_path / "data.parquet"
    table = Table.from_arrow(pa.table(rows), name="t", source=SourceInfo(path=str(path), format="csv"))
    return write_parquet_text(table, path)


def frame_of(path: Path, columns: list[str] | None) -> Any:
    return load_frame(os.open(path, os.O_RDONLY), columns)


def test_only_the_named_columns_are_fetched_and_they_read_as_in_the_whole_file(wide: Path, tmp_path: Path):
    served = Served(wide.read_bytes())
    target = tmp_path / "sparse.parquet"
    wanted = ["col 4", "col 11"]
    # When two of twenty columns are fetched
    fetched = fetch_columns(served, target, wanted, limit=1 << 30)
    # Then what was sent is the footer and those columns' chunks: well under a fifth of the file
    assert fetched == served.sent
    assert served.sent < wide.stat().st_size / 5
    # and the file is the object's size, with holes where the other columns are
    assert target.stat().st_size == wide.stat().st_size
    assert target.stat().st_blocks * 512 < wide.stat().st_size / 2
    # and the two columns load exactly as from the whole file
    got, expected = frame_of(target, wanted), frame_of(wide, wanted)
    assert list(got.columns) == wanted
    assert got.equals(expected)


def test_chunks_close_together_come_in_one_request(
    wide: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import iterate.sandbox.ranged as ranged

    # Given columns side by side (their chunks adjacent in every row group)
    apart, together = Served(wide.read_bytes()), Served(wide.read_bytes())
    fetch_columns(apart, tmp_path / "a", ["col 4", "col 5"], limit=1 << 30)
    monkeypatch.setattr(ranged, "MERGE_GAP_BYTES", 1 << 20)
    fetch_columns(together, tmp_path / "b", ["col 4", "col 11"], limit=1 << 30)
    # Then adjacent chunks are one request per row group (and the footer's); gaps under the merge size too
    assert apart.requests == 1 + 8
    assert together.requests == 1 + 1
    assert frame_of(tmp_path / "b", ["col 4", "col 11"]).equals(frame_of(wide, ["col 4", "col 11"]))


def test_a_long_footer_takes_a_second_request(wide: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import iterate.sandbox.ranged as ranged

    monkeypatch.setattr(ranged, "TAIL_BYTES", 64)  # shorter than this file's footer
    served = Served(wide.read_bytes())
    fetch_columns(served, tmp_path / "sparse.parquet", ["col 0"], limit=1 << 30)
    assert frame_of(tmp_path / "sparse.parquet", ["col 0"]).equals(frame_of(wide, ["col 0"]))


@pytest.mark.parametrize(
    ("served", "columns"),
    [
        pytest.param(dict(honours_range=False), ["col 1"], id="server ignores ranges"),
        pytest.param({}, ["no such column"], id="no column named is in the file"),
    ],
)
def test_when_ranges_cannot_help_the_caller_fetches_the_whole_object(
    wide: Path, tmp_path: Path, served: dict[str, Any], columns: list[str]
):
    assert fetch_columns(Served(wide.read_bytes(), **served), tmp_path / "x", columns, limit=1 << 30) is None


def test_a_file_that_is_not_parquet_or_is_too_large_is_refused(wide: Path, tmp_path: Path):
    with pytest.raises(ValueError, match="not a Parquet file"):
        fetch_columns(Served(b"id,name\n1,a\n" * 100), tmp_path / "x", ["id"], limit=1 << 30)
    with pytest.raises(ValueError, match="larger than"):
        fetch_columns(Served(wide.read_bytes()), tmp_path / "y", ["col 1"], limit=1000)


def test_an_event_with_columns_runs_on_only_those_columns_fetched_from_s3(tmp_path: Path, wide: Path):
    # Given a bucket/key event naming one column, and an S3 client that serves ranges and counts them
    body = wide.read_bytes()
    sent = {"bytes": 0, "ranges": []}

    class S3:
        def get_object(self, *, Bucket: str, Key: str, Range: str | None = None, **_: Any) -> dict[str, Any]:
            assert (Bucket, Key) == ("b", "k")
            if Range is None:
                sent["bytes"] += len(body)
                return {"Body": io.BytesIO(body)}
            spec = Range.removeprefix("bytes=")
            first, _, last = spec.partition("-")
            if not first:
                start, end = len(body) - int(last), len(body) - 1
            else:
                start, end = int(first), min(int(last) if last else len(body) - 1, len(body) - 1)
            sent["bytes"] += end - start + 1
            sent["ranges"].append(Range)
            return {
                "Body": io.BytesIO(body[start : end + 1]),
                "ContentRange": f"bytes {start}-{end}/{len(body)}",
            }

    event = SandboxEvent.model_validate(
        {
            "code": "result = {'affected_rows': len(df), 'cols': list(df.columns), 'x': int((df['col 7'] == '').sum())}",
            "dataset": {"bucket": "b", "key": "k", "columns": ["col 7"]},
        }
    )
    # When the sandbox function runs it
    result = run_event(event, limits=SandboxLimits(timeout_s=10), s3_client=S3, scratch=str(tmp_path))
    # Then the code saw that column alone, with the numbers of the whole file, fetched in ranges
    table = pa.parquet.read_table(wide, columns=["col 7"])  # type: ignore[attr-defined]
    blanks = sum(v == "" for v in table.column(0).to_pylist())
    assert result.success, result.error
    assert result.output == {"affected_rows": 30_000, "cols": ["col 7"], "x": blanks}
    assert sent["ranges"] and sent["bytes"] < len(body) / 5


class _RangeServer:
    """A local HTTP server of one object: answers a Range with 206 and Content-Range, or ignores it."""

    def __init__(self, body: bytes, *, honours_range: bool) -> None:
        import http.server
        import threading

        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                spec = self.headers.get("Range", "")
                if not served.honours_range or not spec.startswith("bytes="):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                first, _, last = spec.removeprefix("bytes=").partition("-")
                start = len(body) - int(last) if not first else int(first)
                end = len(body) - 1 if not first or not last else min(int(last), len(body) - 1)
                start = max(start, 0)
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                self.wfile.write(body[start : end + 1])

            def log_message(self, *args: Any) -> None:
                pass

        self.honours_range = honours_range
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/data.parquet?X-Amz-Signature=x"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("client", ["requests", "urllib"])
def test_ranged_gets_of_a_url_with_requests_or_urllib(
    wide: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
):
    import sys

    from iterate.sandbox.ranged import http_range_get

    if client == "urllib":
        monkeypatch.setitem(sys.modules, "requests", None)  # as where requests is not installed
    honest, deaf = (
        _RangeServer(wide.read_bytes(), honours_range=True),
        _RangeServer(b"x" * 100, honours_range=False),
    )
    try:
        # Given a server that honours ranges: the two columns come by ranged GETs and read as in the file
        fetched = fetch_columns(
            http_range_get(honest.url, timeout_s=10), tmp_path / "a", ["col 2"], limit=1 << 30
        )
        assert fetched is not None and fetched < wide.stat().st_size / 5
        assert frame_of(tmp_path / "a", ["col 2"]).equals(frame_of(wide, ["col 2"]))
        # Given one that answers 200 with the whole object: the caller is told to fetch it whole
        assert (
            fetch_columns(http_range_get(deaf.url, timeout_s=10), tmp_path / "b", ["x"], limit=1 << 30)
            is None
        )
    finally:
        honest.close()
        deaf.close()
