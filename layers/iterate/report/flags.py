"""flags.csv writer: `row,column,issue_id,score`, one line per flagged (cell, issue), vectorised for millions."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iterate.visible import visible

HEADER = "row,column,issue_id,score\n"
# A spreadsheet treats a field starting with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = r"^[=+\-@\t\r]"
_BATCH = 1_000_000


@dataclass(frozen=True)
class FlagArrays:
    """Flags as parallel arrays: 0-based data rows, column names, issue ids, and each cell's score (0-1).

    `scores` may be None: every cell is then written with score 1 (a rule with no doubt).
    """

    rows: Any
    columns: Any
    issue_ids: Any
    scores: Any = None


FlagsInput: TypeAlias = (
    Iterable[tuple[int, str, str]]
    | Iterable[tuple[int, str, str, float]]
    | FlagArrays
    | Mapping[str, Any]
    | pa.Table
)


def neutralise(text: str) -> str:
    """`text`, prefixed with `'` only when a spreadsheet would run it as a formula; plain text is unchanged.

    Only names starting with = + - @ TAB or CR change: the scorer matches column names exactly, so every
    other name must be written exactly as in the input header.
    """
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _field(text: str) -> str:
    """A column name or issue id as written: control characters escaped (ESC as `\\x1b`, U+202E as
    `\\u202e`) except TAB, LF and CR, which CSV quoting carries, so that a CSV reader gets a multi-line
    header name back exactly (the scorer matches names exactly); then neutralised and quoted."""
    return _csv_field(neutralise(visible(text, keep="\t\n\r")))


def _csv_field(text: str) -> str:
    """One CSV field with RFC 4180 quoting, only when needed (comma, quote, CR or LF).

    Written by hand: csv.writer decides on quoting by its line terminator, so it misses a bare CR or LF.
    """
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _to_arrays(flags: FlagsInput) -> tuple[pa.Array, pa.Array, pa.Array, np.ndarray]:
    scores: Any = None
    if isinstance(flags, pa.Table):
        rows, cols, ids = (flags.column(n).combine_chunks() for n in ("row", "column", "issue_id"))
        if "score" in flags.column_names:
            scores = flags.column("score").combine_chunks().to_numpy(zero_copy_only=False)
    elif isinstance(flags, FlagArrays):
        rows, cols, ids, scores = flags.rows, flags.columns, flags.issue_ids, flags.scores
    elif isinstance(flags, Mapping):
        rows, cols, ids, scores = flags["row"], flags["column"], flags["issue_id"], flags.get("score")
    elif hasattr(flags, "columns") and hasattr(flags, "to_dict") and "row" in getattr(flags, "columns", ()):
        # a pandas DataFrame with row/column/issue_id (and maybe score) columns
        frame: Any = flags
        rows, cols, ids = frame["row"].to_numpy(), frame["column"].to_numpy(), frame["issue_id"].to_numpy()
        scores = frame["score"].to_numpy() if "score" in frame.columns else None
    else:
        triples = list(flags)
        rows = [t[0] for t in triples]
        cols = [t[1] for t in triples]
        ids = [t[2] for t in triples]
        scores = [t[3] if len(t) > 3 else 1.0 for t in triples]  # type: ignore[misc]
    row_a, col_a, id_a = _arrow(rows, pa.int64()), _arrow(cols, pa.string()), _arrow(ids, pa.string())
    if scores is None:
        score_np = np.ones(len(row_a))
    else:
        score_np = np.asarray(scores, dtype=np.float64)
        if score_np.shape != (len(row_a),):
            raise ValueError("scores must be parallel to rows")
        if np.isnan(score_np).any() or (score_np < 0).any() or (score_np > 1).any():
            raise ValueError("scores must lie in 0-1")
    return row_a, col_a, id_a, score_np


def _arrow(values: Any, typ: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return values.cast(typ)
    return pa.array(np.asarray(values) if typ == pa.int64() else values, type=typ)


def _encode(values: pa.Array) -> tuple[np.ndarray, list[str]]:
    """Dictionary codes and uniques: quoting and neutralising then cost one step per distinct value."""
    enc = pc.dictionary_encode(values)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, enc.dictionary.to_pylist()


def write_flags_csv(
    flags: FlagsInput,
    path_or_stream: str | os.PathLike[str] | IO[str] | IO[bytes],
    *,
    columns: Sequence[str] | None = None,
) -> int:
    """Write `row,column,issue_id,score` lines sorted by row then column position; return the number of lines.

    `flags` is an iterable of `(row, column, issue_id[, score])`, a `FlagArrays`, a mapping or pyarrow Table /
    pandas DataFrame with `row`, `column`, `issue_id` (and `score`: 0-1, the probability that the cell is
    wrong; 1 when not given). Scores are written with 4 decimals. `columns` is the input header in order (for sorting by
    position; without it, columns sort in order of first appearance). Exact duplicate lines are written once;
    a cell flagged by two issues gets two lines. Column names and issue ids starting with = + - @ TAB or CR
    are prefixed with `'` against spreadsheet formula injection, and control characters other than TAB, LF
    and CR are written escaped (`\\x1b`), so the file carries none raw; every other name is written unchanged.
    """
    rows, cols, ids, scores = _to_arrays(flags)
    if not (len(rows) == len(cols) == len(ids)):
        raise ValueError("rows, columns and issue_ids must have the same length")
    if rows.null_count or cols.null_count or ids.null_count:
        raise ValueError("flags must not contain nulls")
    row_np = rows.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if len(row_np) and int(row_np.min()) < 0:
        raise ValueError("flag rows are 0-based data rows and cannot be negative")

    col_codes, col_names = _encode(cols)
    id_codes, id_names = _encode(ids)
    if columns is not None:
        first_pos: dict[str, int] = {}
        for i, name in enumerate(columns):
            first_pos.setdefault(name, i)
        # names not in the header (should not happen) sort after every real column, in appearance order
        position = np.array(
            [first_pos.get(n, len(columns) + k) for k, n in enumerate(col_names)], dtype=np.int64
        )
    else:
        position = np.arange(len(col_names), dtype=np.int64)
    col_pos = position[col_codes] if len(col_codes) else col_codes

    row_np, col_pos, id_codes, scores = _sorted_unique(row_np, col_pos, id_codes, scores)
    # back from sort positions to dictionary codes
    pos_to_code = np.empty(int(position.max()) + 1 if len(position) else 0, dtype=np.int64)
    pos_to_code[position] = np.arange(len(position), dtype=np.int64)
    col_codes = pos_to_code[col_pos]

    col_text = pa.array([_field(n) for n in col_names], type=pa.string())
    id_text = pa.array([_field(n) for n in id_names], type=pa.string())
    # Scores are written once per distinct rounded value (there are at most 10,001 of them), with the line
    # end riding on them, so the joined array's data buffer is the finished CSV text.
    score_codes = np.rint(scores * 10_000).astype(np.int64)
    score_text = pa.array([f"{k / 10_000:.4f}\n" for k in range(10_001)], type=pa.string())

    def chunks() -> Iterable[bytes]:
        yield HEADER.encode()
        for start in range(0, len(row_np), _BATCH):
            stop = start + _BATCH
            lines = pc.binary_join_element_wise(
                pc.cast(pa.array(row_np[start:stop]), pa.string()),
                col_text.take(pa.array(col_codes[start:stop])),
                id_text.take(pa.array(id_codes[start:stop])),
                score_text.take(pa.array(score_codes[start:stop])),
                ",",
            )
            yield _joined_bytes(lines)

    _write(chunks(), path_or_stream)
    return len(row_np)


def _sorted_unique(
    rows: np.ndarray, cols: np.ndarray, ids: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Sort by (row, column position, issue) and drop exact duplicates (a cell's score goes with it)."""
    if len(rows) == 0:
        return rows, cols, ids, scores
    n_ids = int(ids.max()) + 1
    n_cols = int(cols.max()) + 1
    if (int(rows.max()) + 1) * n_cols * n_ids < 2**62:
        key = (rows * n_cols + cols) * n_ids + ids
        order = np.argsort(key, kind="stable")  # np.unique hashes first: far slower here
        key = key[order]
        keep = np.concatenate(([True], key[1:] != key[:-1]))
        key = key[keep]
        return key // (n_cols * n_ids), (key // n_ids) % n_cols, key % n_ids, scores[order][keep]
    order = np.lexsort((ids, cols, rows))
    rows, cols, ids, scores = rows[order], cols[order], ids[order], scores[order]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1]) | (ids[1:] != ids[:-1])
    return rows[keep], cols[keep], ids[keep], scores[keep]


def _joined_bytes(lines: pa.Array) -> bytes:
    """The concatenation of every string in `lines`, read straight from its data buffer."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if len(lines) == 0:
        return b""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    return data[int(offsets[0]) : int(offsets[-1])].to_pybytes()


def _write(parts: Iterable[bytes], target: str | os.PathLike[str] | IO[str] | IO[bytes]) -> None:
    if isinstance(target, str | os.PathLike):
        with Path(target).open("wb") as fh:
            for part in parts:
                fh.write(part)
        return
    text = isinstance(target, io.TextIOBase)
    for part in parts:
        target.write(part.decode("utf-8") if text else part)  # type: ignore[arg-type]
