"""ReadLimits: the size and shape a file may have, checked as early as each format allows (ITERATE_MAX_*)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterate.io.errors import DatasetReadError, LimitExceeded

# The environment variable that raises each limit, for the message; the names match iterate.settings.
SETTINGS = {
    "max_file_bytes": "ITERATE_MAX_FILE_BYTES",
    "max_decompressed_bytes": "ITERATE_MAX_DECOMPRESSED_BYTES",
    "max_compression_ratio": "ITERATE_MAX_COMPRESSION_RATIO",
    "max_columns": "ITERATE_MAX_COLUMNS",
    "max_cells": "ITERATE_MAX_CELLS",
    "max_cell_bytes": "ITERATE_MAX_CELL_BYTES",
    "max_json_depth": "ITERATE_MAX_JSON_DEPTH",
    "max_xlsx_cells": "ITERATE_MAX_XLSX_CELLS",
}

# Below this much output, compressed data is never refused for its ratio alone: a small file of
# repeated rows compresses very well and costs nothing to read.
RATIO_FLOOR_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ReadLimits:
    """What a file may hold before it is refused; the defaults are iterate.settings.Settings' defaults.

    Real tables compress 3-25 times (measured with gzip, bzip2 and xz on the benchmark datasets); a
    decompression bomb compresses a thousand times and more.
    """

    max_file_bytes: int = 5_000_000_000
    max_decompressed_bytes: int = 5_000_000_000
    max_compression_ratio: float = 100.0
    max_columns: int = 10_000
    max_cells: int = 100_000_000  # rows × columns
    max_cell_bytes: int = 16_000_000
    max_json_depth: int = 100
    # openpyxl parses 40,000-70,000 cells a second here (2M cells: 30-56 s): past this, minutes.
    max_xlsx_cells: int = 5_000_000

    @classmethod
    def from_settings(cls, settings: Any) -> ReadLimits:
        """Limits from an `iterate.settings.Settings` (or anything with the same max_* attributes)."""
        return cls(**{name: getattr(settings, name) for name in SETTINGS})


def size_text(n: float) -> str:
    """Bytes as a person reads them: 5.0 GB, 64 MB, 812 KB, 17 bytes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def refuse(
    path: str | Path,
    limit: str,
    allowed: float,
    measured: float,
    problem: str,
    *,
    line: int | None = None,
    advice: str = "",
) -> DatasetReadError:
    """The error for a file over one of the limits: which limit, the value measured, how to raise it.

    `problem` says what was measured in plain words; the limit, its setting and `advice` (what else
    to do, e.g. "split the file") follow.
    """
    setting = SETTINGS[limit]
    hint = f"{advice}; " if advice else ""
    now = f"{int(allowed)}" if float(allowed).is_integer() else f"{allowed:g}"
    hint += f"if the file is genuine, set {setting} above {now} (the limit now)"
    return DatasetReadError(
        path,
        problem,
        hint,
        line=line,
        limit=LimitExceeded(setting=setting, allowed=allowed, measured=measured),
    )


def cells_refusal(
    path: str | Path,
    rows: int,
    columns: int,
    limits: ReadLimits,
    *,
    counted: tuple[int, int] | None = None,
) -> DatasetReadError | None:
    """The refusal of a file holding more than `max_cells` rows × columns; None within the limit.

    `counted`: (bytes read, the file's size) when `rows` are the rows counted so far in the file's first bytes
    (a file read in ranges is refused as soon as they pass the limit: 25M rows of a 5 GB file would
    otherwise be read, about 8 GB of memory, to be refused after)."""
    cells = rows * columns
    if cells <= limits.max_cells:
        return None
    start = "" if counted is None else "at least "
    where = (
        ""
        if counted is None
        else f" (counted in its first {size_text(counted[0])} of {size_text(counted[1])})"
    )
    return refuse(
        path,
        "max_cells",
        limits.max_cells,
        cells,
        f"has {start}{rows:,} rows × {columns:,} columns = {cells:,} cells{where},"
        f" more than the {limits.max_cells:,} allowed",
        advice="split the file into parts with fewer rows or columns",
    )


def check_expansion(
    path: str | Path, unpacked: int, packed: int, limits: ReadLimits, *, what: str, advice: str
) -> None:
    """Refuse compressed data (a stream read so far, an archive member, Parquet pages) that unpacks past
    `max_decompressed_bytes` or, once past RATIO_FLOOR_BYTES, expands more than `max_compression_ratio`.
    `what` names the data in the message ("the first 8 MB of gzip data", "its data pages")."""
    if unpacked > limits.max_decompressed_bytes:
        raise refuse(
            path,
            "max_decompressed_bytes",
            limits.max_decompressed_bytes,
            unpacked,
            f"{what} unpacks to more than {size_text(limits.max_decompressed_bytes)}"
            f" ({size_text(unpacked)} from {size_text(packed)})",
            advice=advice,
        )
    ratio = unpacked / max(packed, 1)
    if unpacked > RATIO_FLOOR_BYTES and ratio > limits.max_compression_ratio:
        raise refuse(
            path,
            "max_compression_ratio",
            limits.max_compression_ratio,
            round(ratio, 1),
            f"{what} expands {ratio:,.0f} times ({size_text(packed)} to {size_text(unpacked)}), more than the"
            f" {limits.max_compression_ratio:g} times allowed: real tables compress 3-25 times, a decompression"
            " bomb a thousand times",
            advice=advice,
        )
