"""A column read in many chunks (a CSV read in one pass: a chunk per 1 MB block) is dictionary-encoded without
first joining its text into one buffer: the dictionary (first-seen order) and the codes must be exactly those of
encoding the joined column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from iterate.table import Column, dictionary_encoded

pytestmark = pytest.mark.unit


def _joined(values: pa.ChunkedArray) -> pa.DictionaryArray:
    return pc.dictionary_encode(values.combine_chunks())


CASES = {
    # later chunks bring new values and repeat earlier ones; an empty chunk in the middle
    "many chunks": pa.chunked_array([["b", "a", "b"], [], ["c", "a", ""], ["d", "b", "e", "c"]]),
    "one chunk": pa.chunked_array([["x", "y", "x"]]),
    "no chunks": pa.chunked_array([], pa.string()),
    "large_string": pa.chunked_array([["é", "a"], ["a", "ü", "é"]], pa.large_string()),
}


@pytest.mark.parametrize("name", CASES)
def test_chunked_encoding_equals_encoding_the_joined_column(name: str) -> None:
    values = CASES[name]
    got, expected = dictionary_encoded(values), _joined(values)
    assert got.dictionary.to_pylist() == expected.dictionary.to_pylist()
    assert got.indices.to_pylist() == expected.indices.to_pylist()


def test_a_column_built_from_chunks_is_the_column_built_from_their_join() -> None:
    rng = np.random.default_rng(3)
    words = np.array([f"v{i}" for i in range(500)])
    chunks = [words[rng.integers(0, 500, size=int(n))].tolist() for n in rng.integers(0, 400, size=40)]
    values = pa.chunked_array(chunks, pa.string())
    a, b = Column("c", 0, values), Column("c", 0, values.combine_chunks())
    assert a.dictionary.to_pylist() == b.dictionary.to_pylist()
    assert np.array_equal(a.codes, b.codes) and a.codes.dtype == b.codes.dtype
    assert np.array_equal(a.counts, b.counts)
    assert a.values.to_pylist() == values.to_pylist()


def test_a_chunked_column_with_nulls_reads_them_as_blanks_as_its_join_does() -> None:
    values = pa.chunked_array([["a", None, "b"], [None, "c", "a"]])
    a, b = Column("c", 0, values), Column("c", 0, values.combine_chunks())
    assert a.dictionary.to_pylist() == b.dictionary.to_pylist() == ["a", "", "b", "c"]
    assert np.array_equal(a.codes, b.codes)
    assert a.values.to_pylist() == ["a", "", "b", "", "c", "a"]
