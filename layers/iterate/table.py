"""The in-memory dataset: every column kept as text, dictionary-encoded so work scales with distinct values."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ReadProblem:
    """Something the reader repaired instead of refusing the file (ragged row, blank header, ...)."""

    kind: str  # "ragged_row" | "blank_header" | "duplicate_header" | ...
    line: int | None  # 1-based physical line in the file, when known
    row: int | None  # 0-based data row, when the row was kept
    column: str | None
    detail: str


@dataclass(frozen=True)
class SourceInfo:
    path: str
    format: str  # csv | tsv | parquet | jsonl | xlsx
    encoding: str | None = None
    delimiter: str | None = None
    compression: str | None = None
    size_bytes: int = 0
    content_hash: str = ""
    # Where each 0-based data row sits in the file, when the reader knows: `row_place` names the unit ("line":
    # 1-based physical line of a text file; "sheet row": the row number a spreadsheet shows), and the place
    # of row r is `first_place + r` when the rows follow each other, else `places[r]`. None: not known (a CSV
    # value spanning lines, a JSON array, Parquet), and the row is only ever called a 0-based data row.
    row_place: str | None = None
    first_place: int | None = None
    places: Any = field(default=None, compare=False, repr=False)

    def place_of(self, row: int) -> int | None:
        """The line (or sheet row) of 0-based data row `row`, or None when the reader could not tell."""
        if self.row_place is None:
            return None
        if self.first_place is not None:
            return self.first_place + row
        if self.places is not None and 0 <= row < len(self.places):
            return int(self.places[row])
        return None


def row_places(unit: str, places: Any) -> dict[str, Any]:
    """SourceInfo's row_place/first_place/places for rows at these places (kept as one number when they
    follow each other, as an array otherwise)."""
    arr = np.asarray(places, dtype=np.int64)
    if len(arr) == 0:
        return {}
    if int(arr[-1]) - int(arr[0]) == len(arr) - 1 and bool(np.all(np.diff(arr) == 1)):
        return {"row_place": unit, "first_place": int(arr[0])}
    return {"row_place": unit, "places": arr}


def code_dtype(n_unique: int) -> type[np.signedinteger[Any]]:
    """The narrowest signed code type for a dictionary of `n_unique` values (and -1 for "none"): int8 up to 127
    values, int16 up to 32,767, int32 up to 2**31 - 1, int64 past that. Codes index and compare; code that
    does arithmetic on them (x * n_y + y, sums) widens them first (`wide`)."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_unique <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def one_array(values: pa.ChunkedArray) -> pa.Array:
    """The chunks as one array: a single chunk as it is (combine_chunks copies even one chunk: a file of 10M
    rows x 20 columns read in ranges arrives as one chunk a column, and building its Table copied 800 MB of
    codes at once, RSS 1.8 -> 2.8 GB in 1.1 s; now 2.1 GB in 0.4 s)."""
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()


def dictionary_encoded(values: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """The values dictionary-encoded as one array (first-seen order), without copying a chunked column's text
    into one buffer first: pyarrow encodes a chunked array with one hash table and gives every chunk the final
    dictionary, so only the indices are joined. (A CSV read in one pass has a chunk per 1 MB block: joining
    the 1M-row bench file's text first copied 280 MB of fresh memory, freed again once encoded.)"""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks <= 1:
            return pc.dictionary_encode(one_array(values))
        encoded = pc.dictionary_encode(values)
        dictionary = encoded.chunk(0).dictionary
        shared = dictionary.buffers()[1].address  # its offsets: one buffer, when the dictionary is shared
        if all(chunk.dictionary.buffers()[1].address == shared for chunk in encoded.chunks):
            return pa.DictionaryArray.from_arrays(
                pa.concat_arrays([c.indices for c in encoded.chunks]), dictionary
            )
        values = values.combine_chunks()  # (a pyarrow that gave each chunk its own dictionary)
    return pc.dictionary_encode(values)


def wide(codes: np.ndarray) -> np.ndarray:
    """Codes as int64 (a copy only when narrower): what `codes * n + other` needs so the key cannot wrap
    (two int32 columns of 50,000 distinct values each already make keys past 2**31)."""
    return codes.astype(np.int64, copy=False)


class Column:
    """One column as a dictionary encoding: its distinct text values (first-seen order), each row's code, and
    each value's count. The row-by-row text is not kept (`values` rebuilds it when asked): a 10M-row file
    costs its codes and its distinct values, not its raw text."""

    def __init__(self, name: str, index: int, values: pa.Array | pa.ChunkedArray) -> None:
        self.name = name
        self.index = index
        if isinstance(values, pa.ChunkedArray) and pa.types.is_dictionary(values.type):
            values = one_array(values)  # (text in chunks is encoded as it is: dictionary_encoded)
        if pa.types.is_dictionary(values.type) and (values.null_count or values.dictionary.null_count):
            values = values.dictionary_decode()
        if pa.types.is_dictionary(values.type):  # already encoded (a file read in chunks)
            dictionary, indices = values.dictionary, values.indices
            if dictionary.type != pa.string() and dictionary.type != pa.large_string():
                dictionary = pc.cast(dictionary, pa.string())
        else:
            if values.type != pa.string() and values.type != pa.large_string():
                values = pc.cast(values, pa.string())
            # Nulls only come from readers of typed formats (Parquet, JSON); as text they are blanks.
            if values.null_count:
                values = pc.fill_null(values, "")
            encoded = dictionary_encoded(values)
            dictionary, indices = encoded.dictionary, encoded.indices
        # int32 codes wherever the dictionary fits (every column short of 2**31 distinct values): half the
        # memory of int64 on a long file (3M rows x 20 columns: 229 MB instead of 457). Code that combines
        # codes into wider keys (x * n_y + y) widens to int64 itself (`wide`).
        self.codes: np.ndarray = indices.to_numpy(zero_copy_only=False).astype(
            code_dtype(len(dictionary)), copy=False
        )
        self.dictionary: pa.Array = dictionary
        self.counts: np.ndarray = np.bincount(self.codes, minlength=len(self.dictionary))

    def spill(self, directory: Path) -> int:
        """Codes, counts and dictionary written to files in `directory` and replaced by read-only maps of them
        (Table.spill); the bytes moved."""
        stem = directory / str(self.index)
        codes = _mapped(stem.with_suffix(".codes.npy"), self.codes)
        counts = _mapped(stem.with_suffix(".counts.npy"), self.counts)
        (dictionary,) = map_arrays([self.dictionary], stem.with_suffix(".dictionary.arrow"))
        moved = self.codes.nbytes + self.counts.nbytes + self.dictionary.nbytes
        self.codes, self.counts, self.dictionary = codes, counts, dictionary
        return moved

    @property
    def values(self) -> pa.Array:
        """The column's text row by row, rebuilt from the dictionary (a new array on each call)."""
        return self.dictionary.take(pa.array(self.codes))

    def values_at(self, rows: np.ndarray) -> pa.Array:
        """The text of these 0-based rows, without rebuilding the whole column."""
        return self.dictionary.take(pa.array(self.codes[np.asarray(rows, dtype=np.int64)]))

    @cached_property
    def uniques(self) -> list[str]:
        """Distinct values in first-seen order; position i has count counts[i]."""
        return self.dictionary.to_pylist()

    @property
    def n_unique(self) -> int:
        return len(self.dictionary)

    def __len__(self) -> int:
        return len(self.codes)

    def rows_of(self, unique_ids: np.ndarray | list[int]) -> np.ndarray:
        """0-based rows whose value is one of the given dictionary positions."""
        mask = np.zeros(self.n_unique, dtype=bool)
        mask[np.asarray(unique_ids, dtype=np.int64)] = True
        return np.flatnonzero(mask[self.codes])

    def texts(self, unique_ids: np.ndarray | list[int]) -> list[str]:
        """The values at these dictionary positions, without turning the whole dictionary into Python strings
        (a million-value column's `uniques` costs tens of MB; a finding lists a few of them)."""
        cached: list[str] | None = self.__dict__.get("uniques")
        ids = np.asarray(unique_ids, dtype=np.int64).reshape(-1)
        if cached is not None:
            return [cached[int(i)] for i in ids]
        return [str(v) for v in self.dictionary.take(pa.array(ids, pa.int64())).to_pylist()]

    def value(self, row: int) -> str:
        code = int(self.codes[row])
        # One value of a million-value column need not turn the whole dictionary into Python strings.
        cached: list[str] | None = self.__dict__.get("uniques")
        return cached[code] if cached is not None else str(self.dictionary[code].as_py())


# A spill file is only written where this much disk stays free after it: the run writes data.parquet and its
# artifacts beside it (data.parquet of 10M rows x 20 columns: 630 MB), and its spill must not take their room.
SPILL_RESERVE_BYTES = 1 << 30


def _room_for(path: Path, nbytes: int) -> None:
    """Raise ENOSPC unless the disk of `path` keeps SPILL_RESERVE_BYTES free once `nbytes` are written there."""
    import errno
    import shutil

    free = shutil.disk_usage(path.parent).free
    if free - nbytes < SPILL_RESERVE_BYTES:
        raise OSError(errno.ENOSPC, f"{free:,} bytes free: not enough to spill {nbytes:,} and keep a reserve")


def _mapped(path: Path, array: np.ndarray) -> np.ndarray:
    """`array` written to `path` and mapped back read-only (a plain ndarray view of the map); the file is
    unlinked once mapped (the map keeps its pages), so nothing is left behind however the process ends.
    OSError where the disk cannot take it with SPILL_RESERVE_BYTES to spare."""
    if array.size == 0:  # an empty file cannot be mapped
        return array
    _room_for(path, array.nbytes)
    try:
        np.save(path, array, allow_pickle=False)
        return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))
    finally:
        path.unlink(missing_ok=True)


def map_arrays(arrays: list[pa.Array], path: Path) -> list[pa.Array]:
    """The arrays (of one length: the columns of a batch) written to the Arrow IPC file `path` and read back
    from a map of it, zero-copy and read-only, dictionary-encoded ones included; the file is unlinked once
    mapped, as in `_mapped` (and with its reserve)."""
    batch = pa.record_batch(arrays, names=[str(k) for k in range(len(arrays))])
    _room_for(path, batch.nbytes)
    try:
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as out:
            out.write_batch(batch)
        del batch
        return pa.ipc.open_file(pa.memory_map(str(path))).get_batch(0).columns
    finally:
        path.unlink(missing_ok=True)


@dataclass
class Table:
    """A dataset read as text: the name of each column as written, values never typed at read time."""

    name: str
    columns: list[Column]
    n_rows: int
    source: SourceInfo
    problems: list[ReadProblem] = field(default_factory=list)

    @classmethod
    def from_arrow(
        cls,
        table: pa.Table,
        *,
        name: str,
        source: SourceInfo,
        problems: list[ReadProblem] | None = None,
        names: list[str] | None = None,
    ) -> Table:
        """Wrap a pyarrow table of text columns; `names` overrides the (possibly deduplicated) names."""
        names = names or table.column_names
        if table.num_rows >= 100_000 and len(names) > 1:
            # Dictionary encoding is C++ work that releases the GIL: columns are encoded side by side.
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
                columns = list(
                    pool.map(lambda item: Column(item[1], item[0], table.column(item[0])), enumerate(names))
                )
        else:
            columns = [Column(n, i, table.column(i)) for i, n in enumerate(names)]
        return cls(name=name, columns=columns, n_rows=table.num_rows, source=source, problems=problems or [])

    @property
    def nbytes(self) -> int:
        """What the columns hold in memory: codes, counts and dictionaries."""
        return sum(c.codes.nbytes + c.counts.nbytes + c.dictionary.nbytes for c in self.columns)

    def spill(self, directory: str | os.PathLike[str]) -> int:
        """Move every column's codes, counts and dictionary to files under `directory` and map them back,
        read-only; the bytes moved. The values are the same; where they live is not: the kernel pages them in
        as they are read and, under memory pressure, drops them again instead of keeping every page in the
        process (10M rows x 20 columns read into memory: 1,266 MB of anonymous memory before, 319 MB after, in
        0.8 s).

        Each file is unlinked as soon as it is mapped, so nothing is left behind however the process ends. A
        column that cannot be written (the disk is full) stays in memory, and so do the ones after it.
        """
        import tempfile

        moved = 0
        with tempfile.TemporaryDirectory(prefix="iterate-spill-", dir=directory) as tmp:
            try:
                for column in self.columns:
                    moved += column.spill(Path(tmp))
            except OSError:
                pass
        return moved

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_arrow(self) -> pa.Table:
        return pa.table({f"{c.index}": c.values for c in self.columns}).rename_columns(self.column_names)

    def to_pandas(self) -> pd.DataFrame:
        """All columns as Python strings (object dtype), names as in the file."""
        import pandas as pd

        data = {c.name: c.values.to_numpy(zero_copy_only=False) for c in self.columns}
        frame = pd.DataFrame(data) if len(set(self.column_names)) == len(self.columns) else None
        if frame is None:  # duplicate names: build positionally
            frame = pd.DataFrame(
                {i: c.values.to_numpy(zero_copy_only=False) for i, c in enumerate(self.columns)}
            )
            frame.columns = self.column_names
        return frame
