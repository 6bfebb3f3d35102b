"""The dataset as the investigation's `df`: read from the inherited Parquet descriptor, preloaded, or on demand.

Columns are text, as the engine wrote them (`iterate.io.write_parquet_text`); a name may repeat. A dataset
zygote loads the frame once (`preload_frame`, kept in PRELOADED) and every runner forked from it narrows it.
"""

import contextlib
import json
import os
import weakref

from .confine.kernel import c_library


def written_names(schema) -> list[str]:  # type: ignore[no-untyped-def]
    """The names as written (repeats included), which iterate.io.write_parquet_text keeps in metadata."""
    meta = schema.metadata or {}
    return json.loads(meta[b"iterate.names"]) if b"iterate.names" in meta else list(schema.names)


def _text_frame(table):  # type: ignore[no-untyped-def]
    """A pandas frame of the table's columns as text, nulls as empty strings, under the written names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in table.columns:
        if column.type != pa.string() and column.type != pa.large_string():
            column = pc.cast(column, pa.string())
        columns.append(pc.fill_null(column, ""))
    frame = pa.table(columns, names=[f"c{i}" for i in range(len(columns))]).to_pandas()
    names = written_names(table.schema)
    frame.columns = names if len(names) == len(columns) else table.column_names
    return frame


def load_frame(fd: int, wanted: list[str] | None = None):  # type: ignore[no-untyped-def]
    """The dataset as a DataFrame of text columns, nulls as empty strings, from the inherited descriptor.

    `wanted`: names (as written) of the only columns to load; a big file's other columns are never read.
    """
    return load_frame_narrowed(fd, wanted)[0]


def load_frame_narrowed(fd: int, wanted: list[str] | None = None):  # type: ignore[no-untyped-def]
    """`load_frame`, and how: (frame, narrowed, narrowable). `narrowed`: only `wanted`'s columns were read;
    otherwise the frame is the whole table, and `narrowable` says whether columns can be picked from it."""
    import pyarrow.parquet as pq

    with os.fdopen(fd, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        written = written_names(schema)
        narrowable = len(written) == len(schema.names)
        if wanted is not None:
            picked = [i for i, name in enumerate(written) if name in set(wanted)]
            if picked and narrowable:
                return _read_text_frame(parquet, picked), True, True
        return _read_text_frame(parquet), False, narrowable


# A line of code that asks for the columns to be read from the file as it asks for them (see ColumnReader):
# the engine's whole-row templates carry it. A whole line, so no value or name inside a literal can make it.
ON_DEMAND_LINE = "# iterate: columns read on demand"


def reads_on_demand(code: str) -> bool:
    """Whether `code` asks for its columns read one at a time from the file rather than a whole frame."""
    return f"\n{ON_DEMAND_LINE}\n" in f"\n{code}\n"


class ColumnReader:
    """The dataset for code that reads its columns one at a time (the duplicate-row proofs read every column,
    one after the other, on fewer rows each time): what such code uses of a frame, `len(df)`, `df.columns`,
    `df.shape` and `df.iloc[rows, i]`, with each column read from the Parquet file when asked for, as
    `load_frame` would have made it. The whole table is never in memory: 10M rows x 20 columns is a 3.2 GB
    frame, one column of it ~160 MB.

    The file is opened (read-only) before the lockdown; reading an open descriptor afterwards needs no path.
    """

    @classmethod
    def open(cls, fd: int) -> "ColumnReader | None":
        """A reader of the file behind `fd` (on a duplicate of it: `fd` stays open), or None when its columns
        cannot be read one by one (the caller then loads the frame from `fd` as before)."""
        copy = os.dup(fd)
        try:
            return cls(copy)
        except ValueError:
            return None

    def __init__(self, fd: int) -> None:
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self._handle = os.fdopen(fd, "rb")
        self._parquet = pq.ParquetFile(self._handle)
        schema = self._parquet.schema_arrow
        self._stored = list(schema.names)
        self._nullable = [field.nullable for field in schema]
        # The same file read with its dictionary pages kept as dictionaries (`factorized`): made now, before
        # the lockdown, as the other reader is.
        self._coded = pq.ParquetFile(self._handle, read_dictionary=self._stored)
        written = written_names(schema)
        if len(written) != len(self._stored) or len(set(self._stored)) != len(self._stored):
            self._handle.close()
            raise ValueError("columns cannot be read one by one from this file")
        self.columns = pd.Index(written)
        metadata = self._parquet.metadata
        self._rows = metadata.num_rows
        self._first_group = metadata.row_group(0).num_rows if metadata.num_row_groups else 0
        self.shape = (self._rows, len(written))
        self.iloc = _ColumnIndexer(self)

    def __len__(self) -> int:
        return self._rows

    def column(self, position: int, rows):  # type: ignore[no-untyped-def]
        """Column `position` as the frame holds it (a Series named after it), on `rows` (a slice or positions)."""
        name = self._stored[position]
        head = isinstance(rows, slice) and rows.start in (None, 0) and rows.step in (None, 1)
        if head and rows.stop is not None and 0 <= rows.stop <= self._first_group:
            table = self._parquet.read_row_group(0, columns=[name], use_threads=False)
        else:
            table = self._parquet.read(columns=[name], use_threads=False)
        text = _text_column(table.column(0))
        del table
        series = self._pa.table([text], names=["c"]).to_pandas()["c"]
        series.name = self.columns[position]
        return series.iloc[rows]

    def factorized(self, position: int, rows):  # type: ignore[no-untyped-def]
        """`pd.factorize(df.iloc[rows, position].astype(str), use_na_sentinel=False)`, the same codes and distinct
        values in the same order, read from the file's dictionary pages where its column is stored as one (the
        engine's data.parquet on a column of repeated values): the codes come from the page's indices and only
        the distinct values are text, instead of every row's text being read and hashed again (10M rows, the
        bench's dictionary-encoded columns: 0.02-0.13 s a column against 0.2-0.9 s). A column stored as plain
        values (most values distinct, where the writer gave up its dictionary) is read as text and factorized,
        as before."""
        import numpy as np
        import pandas as pd

        # A column that may hold nulls (not the engine's: its columns are written `not null`) is read as text,
        # which turns them into "" as the frame does.
        if self._nullable[position] or not self._dictionary_encoded(position):
            return pd.factorize(self.column(position, rows).astype(str), use_na_sentinel=False)
        table = self._coded.read(columns=[self._stored[position]], use_threads=False).unify_dictionaries()
        column = table.column(0)  # dictionary-typed, one chunk or more (the file has row groups)
        dictionary = column.chunk(0).dictionary
        indices = np.concatenate([chunk.indices.to_numpy() for chunk in column.chunks])
        del table, column
        codes, used = pd.factorize(indices[rows], use_na_sentinel=False)
        del indices
        values = _text_column(self._pa.chunked_array([dictionary.take(self._pa.array(used))]))
        return codes, pd.array(values, dtype="str")

    def _dictionary_encoded(self, position: int) -> bool:
        """Whether column `position` is stored as dictionary indices in every row group: under 4 bytes a value
        uncompressed, which a value written plainly never is (its length alone takes 4)."""
        metadata = self._parquet.metadata
        for group in range(metadata.num_row_groups):
            chunk = metadata.row_group(group).column(position)
            if not chunk.has_dictionary_page or chunk.total_uncompressed_size >= 4 * max(chunk.num_values, 1):
                return False
        return metadata.num_row_groups > 0


class _ColumnIndexer:
    def __init__(self, reader: ColumnReader) -> None:
        self._reader = reader

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        if not isinstance(key, tuple) or len(key) != 2 or isinstance(key[1], (slice, list, tuple)):
            raise TypeError("columns read on demand: df.iloc[rows, i] with one column position i")
        rows, position = key
        return self._reader.column(int(position), rows)


def _text_column(column):  # type: ignore[no-untyped-def]
    """One column as text, nulls as empty strings, in one chunk of large_string: what pandas 3 keeps
    (it converts string to large_string anyway), made here once, in one buffer of text and one of offsets."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.type != pa.string() and column.type != pa.large_string():
        column = pc.cast(column, pa.string())
    column = pc.cast(pc.fill_null(column, ""), pa.large_string())
    if column.num_chunks == 1:
        return column
    return pa.chunked_array([column.combine_chunks()], pa.large_string())


def _read_text_frame(parquet, picked: list[int] | None = None):  # type: ignore[no-untyped-def]
    """The Parquet file's columns (the positions `picked`, or all) as `_text_frame` makes them, read and
    converted one column at a time.

    What the frame holds is the same (964 MB of buffers on 3M rows x 20 columns); what differs is the memory
    around it. Read whole, the table (the text with 4-byte offsets, 23 chunks a column) lived beside its
    converted copy (8-byte offsets) and the pool kept the pages the table's chunks left between the frame's:
    a dataset zygote held 1,579-1,584 MB once loaded. A column at a time, the conversion re-uses the text
    buffer (only the offsets are widened): 1,201-1,227 MB at the load's peak, 1,145 MB once loaded (after
    _hand_back), loaded in 3.4-4.8 s instead of 4.8-9.2 s. One chunk per column also leaves the frame in a
    few large blocks that mimalloc backs with huge pages: forking a runner from it took 9-27 ms instead of
    24-29 ms (medians of 20 forks, three rounds alternated, load 10)."""
    import pyarrow as pa

    schema = parquet.schema_arrow
    stored = schema.names
    positions = list(range(len(stored))) if picked is None else list(picked)
    if len(set(stored)) == len(stored):
        columns = [
            _text_column(parquet.read(columns=[stored[i]], use_threads=False).column(0)) for i in positions
        ]
    else:  # repeated stored names cannot be read one by one by name (never so in the engine's data.parquet)
        table = parquet.read(use_threads=False)
        columns = [_text_column(table.column(i)) for i in positions]
        del table
    frame = pa.table(columns, names=[f"c{k}" for k in range(len(columns))]).to_pandas()
    written = written_names(schema)
    names = written if len(written) == len(stored) else stored
    frame.columns = [names[i] for i in positions]
    return frame


ARROW_MAGIC = b"ARROW1"  # the first bytes of an Arrow IPC file


def preload_frame(fd: int, max_mb: int):  # type: ignore[no-untyped-def]
    """The whole dataset, loaded once by a dataset zygote: (frame, whether columns can be picked from it).

    Refuses (MemoryError) a dataset estimated above `max_mb` in memory: runners then load only the
    columns they need, as without a dataset zygote.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    # Arrow-backed strings (pandas 3) cost their bytes and offsets; Python str objects far more.
    per_cell = 64 if pd.Series(["x"]).dtype == object else 16
    if os.pread(fd, len(ARROW_MAGIC), 0) == ARROW_MAGIC:
        # The caller's own table, handed over in a sealed memfd (LocalSandbox.prepare): mapped read-only, so
        # the frame's text is that memory itself (nothing to parse or copy; runners share it).
        import mmap

        import pyarrow as pa
        import pyarrow.ipc as ipc

        size = os.fstat(fd).st_size
        with os.fdopen(fd, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
        reader = ipc.open_file(pa.py_buffer(mapped))
        estimate_mb = size / 2**20  # the frame is the mapping; pandas adds little on top
        if estimate_mb > max_mb:
            raise MemoryError(f"about {estimate_mb:.0f} MB in memory, over the {max_mb} MB preload cap")
        table = reader.read_all()
        narrowable = len(written_names(table.schema)) == table.num_columns
        return _text_frame(table), narrowable
    with os.fdopen(fd, "rb") as handle:
        meta = pq.read_metadata(handle)
        raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        estimate_mb = (2 * raw + per_cell * meta.num_rows * meta.num_columns) / 2**20
        if estimate_mb > max_mb:
            raise MemoryError(f"about {estimate_mb:.0f} MB in memory, over the {max_mb} MB preload cap")
        handle.seek(0)
        parquet = pq.ParquetFile(handle)
        frame = _read_text_frame(parquet)
        # load_frame narrows only when the written names match the stored columns one to one.
        narrowable = len(written_names(parquet.schema_arrow)) == len(parquet.schema_arrow.names)
    _hand_back()
    return frame, narrowable


def _hand_back() -> None:
    """What loading freed goes back to the system before the runners fork from this process: objects only a
    cycle holds, then pyarrow's pool (mimalloc keeps freed pages: 80 MB on 3M rows x 20 columns) and malloc's
    heaps."""
    import gc

    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        c_library().malloc_trim(0)


def select_columns(frame, narrowable: bool, wanted: list[str] | None):  # type: ignore[no-untyped-def]
    """What `load_frame(fd, wanted)` gives, taken from the preloaded whole frame (same names, order, values)."""
    if wanted is None:
        return frame
    positions = _column_positions(frame)
    picked = sorted({i for name in set(wanted) for i in positions.get(name, ())})
    if not picked or not narrowable:
        return frame
    return frame.iloc[:, picked].copy(deep=False)


# [(frame, its columns Index, {name: [positions]})], both held weakly: the last frame's, reused by every
# item of a batch, and never what keeps a frame alive.
_POSITIONS: list = []


def _column_positions(frame) -> dict:  # type: ignore[no-untyped-def]
    """Each column name's positions in `frame` (a name can repeat), computed once per frame and names: reading
    a wide frame's names costs more than narrowing it, and a batch narrows the same frame for every item.
    (An Index is immutable: renaming the columns gives the frame a new one, and the positions are recomputed.)"""
    if not _POSITIONS or _POSITIONS[0][0]() is not frame or _POSITIONS[0][1]() is not frame.columns:
        positions: dict = {}
        for i, name in enumerate(frame.columns.tolist()):
            positions.setdefault(name, []).append(i)
        _POSITIONS[:] = [(weakref.ref(frame), weakref.ref(frame.columns), positions)]
    return _POSITIONS[0][2]


# Set in a dataset zygote before it serves: {"frame": DataFrame, "narrowable": bool}. Each runner forked
# from it takes its frame from here (copy-on-write) instead of reading the file.
PRELOADED: dict = {}
