"""gzip/bzip2/xz decompressed as a stream, stopped as soon as the output passes a size or ratio limit."""

from __future__ import annotations

import bz2
import lzma
import zlib
from pathlib import Path
from typing import Any, NoReturn

from iterate.io.errors import DatasetReadError
from iterate.io.limits import ReadLimits, check_expansion, size_text

# Small steps keep the ratio exact (bzip2 and xz buffer what they were given) and each step's output small.
_IN = 256 * 1024
_OUT = 8 * 1024 * 1024


class _Decoder:
    """One member (gzip) or stream (bzip2, xz), fed input and drained at most _OUT bytes at a time."""

    def __init__(self, compression: str) -> None:
        self.compression = compression
        self.fed = False
        self.tail = b""  # gzip: input given and not consumed yet (zlib hands it back; bzip2/xz keep theirs)
        self.d: Any
        if compression == "gzip":
            self.d = zlib.decompressobj(wbits=31)
        elif compression == "bz2":
            self.d = bz2.BZ2Decompressor()
        else:
            self.d = lzma.LZMADecompressor()

    @property
    def needs_input(self) -> bool:
        if self.compression == "gzip":
            return not self.tail and not self.d.eof
        return bool(self.d.needs_input) and not self.d.eof

    @property
    def eof(self) -> bool:
        return bool(self.d.eof)

    def unused(self) -> bytes:
        """The bytes after the end of this member (the start of the next one), once `eof`."""
        return bytes(self.d.unused_data)

    def step(self, data: bytes) -> bytes:
        self.fed = self.fed or bool(data)
        if self.compression == "gzip":
            out = self.d.decompress(self.tail + data, _OUT)
            self.tail = self.d.unconsumed_tail
            return bytes(out)
        return bytes(self.d.decompress(data, _OUT))


_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def inflate(path: Path, compression: str, limits: ReadLimits) -> bytes:
    """The decompressed content of `path` (every member or stream, like gzip -d), or a DatasetReadError.

    Refuses once the output passes `limits.max_decompressed_bytes`, or once it passes RATIO_FLOOR_BYTES
    and is more than `limits.max_compression_ratio` times the compressed bytes read: a decompression bomb
    stops after a few MB of input, whatever size it would reach.
    """
    chunks: list[bytes] = []
    total = 0  # decompressed bytes so far
    read = 0  # compressed bytes read from the file
    members = 0
    decoder = _Decoder(compression)
    data = b""  # input for the next step
    with path.open("rb") as fh:
        while True:
            if not data and decoder.needs_input:
                data = fh.read(_IN)
                read += len(data)
                if not data:
                    if members and not decoder.fed:
                        break  # the end of the file, right after a complete member
                    _corrupt(path, compression, chunks, "the file ends before the compressed data does")
            first = not decoder.fed
            try:
                out = decoder.step(data)
            except _ERRORS as exc:
                if members and first and compression != "gzip":
                    break  # bytes after a complete stream that start no other are ignored, as bz2/lzma do
                _corrupt(path, compression, chunks, str(exc))
            data = b""
            if out:
                chunks.append(out)
                total += len(out)
                consumed = read - len(decoder.tail)
                check_expansion(
                    path,
                    total,
                    consumed,
                    limits,
                    what=f"the first {size_text(consumed)} of {compression} data",
                    advice="decompress it and analyze the file itself",
                )
            if decoder.eof:
                members += 1
                data = decoder.unused()
                decoder = _Decoder(compression)
    return b"".join(chunks)


def _corrupt(path: Path, compression: str, chunks: list[bytes], why: str) -> NoReturn:
    line = sum(c.count(b"\n") for c in chunks) + 1 if chunks else None
    raise DatasetReadError(
        path,
        f"the {compression} data is truncated or corrupt ({why}); it stops at this line of the content",
        f"get the complete file, or compress the original again with {compression}",
        line=line,
    )
