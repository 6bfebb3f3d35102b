"""Chunked reading (iterate.io.chunked): a file read in byte ranges, by 1 or 2 workers, is the single pass's Table.

Equivalence is checked where it matters: the Table (dictionary and codes of every column, source, problems),
and on the dev datasets the whole profile step's output: profile, candidate issues and flags.csv.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from iterate.detect import detect
from iterate.io import DatasetReadError, read_table
from iterate.io.chunked import Chunking, line_ranges, resolve_workers
from iterate.issues import flags_of, issues_from_findings
from iterate.profile import profile_table
from iterate.report.flags import write_flags_csv
from iterate.settings import Settings
from iterate.table import Table

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO.parent / "shared" / "datasets"
DEV = sorted(p.name for p in DATASETS.iterdir() if (p / "dirty.csv").exists()) if DATASETS.exists() else []


def assert_same_table(single: Table, chunked: Table) -> None:
    assert chunked.n_rows == single.n_rows
    assert chunked.column_names == single.column_names
    for a, b in zip(single.columns, chunked.columns, strict=True):
        assert b.dictionary.equals(a.dictionary), a.name
        assert np.array_equal(b.codes, a.codes), a.name
        assert np.array_equal(b.counts, a.counts), a.name
    assert chunked.source == single.source
    assert chunked.source.place_of(chunked.n_rows - 1) == single.source.place_of(single.n_rows - 1)
    assert chunked.problems == single.problems


@pytest.fixture
def paths_taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which way each read went: "chunked", or why it fell back to the single pass."""
    import iterate.io.delimited as delimited

    taken: list[str] = []
    real = delimited.read_chunked

    def spy(path: Path, **kwargs: object) -> object:
        table, why = real(path, **kwargs)  # type: ignore[arg-type]
        taken.append("chunked" if table is not None else why)
        return table, why

    monkeypatch.setattr(delimited, "read_chunked", spy)
    return taken


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark generator's file at 20,000 rows (1.6 MB: planted errors, a few quoted values)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from gen_bench import write

    path = tmp_path_factory.mktemp("bench") / "bench_20k.csv"
    write(path, 20_000)
    return path


def test_ranges_cover_the_file_and_end_after_a_line_feed(bench_file: Path) -> None:
    # Given the bench file, When it is cut in ranges of 100 KB
    ranges = line_ranges(bench_file, 100_000)
    data = bench_file.read_bytes()
    # Then they tile the file, each but the last ends after a line feed, each is at least the chunk size
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(e == s2 for (_, e), (s2, _) in itertools.pairwise(ranges))
    assert all(data[e - 1 : e] == b"\n" and e - s >= 100_000 for s, e in ranges[:-1])
    assert len(ranges) == -(-len(data) // 100_000) or len(ranges) == len(data) // 100_000


@pytest.mark.parametrize("chunk_bytes", [50_000, 333_333, 1_000_000])
@pytest.mark.parametrize("workers", [1, 2])
def test_the_bench_file_in_chunks_is_the_single_pass_table(
    bench_file: Path, chunk_bytes: int, workers: int, paths_taken: list[str]
) -> None:
    single = read_table(bench_file)
    chunked = read_table(bench_file, chunking=Chunking(chunk_bytes, workers))
    assert paths_taken == ["chunked"]
    assert_same_table(single, chunked)
    # and the chunked columns were built from codes: no column holds the raw text
    assert all(not hasattr(c, "_values") and "values" not in c.__dict__ for c in chunked.columns)


def test_a_file_of_one_chunk_is_read_in_one_pass(bench_file: Path) -> None:
    assert line_ranges(bench_file, 10**9) == [(0, bench_file.stat().st_size)]
    assert_same_table(read_table(bench_file), read_table(bench_file, chunking=Chunking(10**9, 2)))


def _rows(n: int, spanning: set[int] = frozenset(), ragged: set[int] = frozenset()) -> list[list[str]]:  # type: ignore[assignment]
    rows = []
    for i in range(n):
        note = f"line one\nline two of {i}" if i in spanning else f"note {i % 37}"
        row = [str(i), f"name, {i % 101}", note, f"{(i * 7) % 1000 / 10:.1f}"]
        rows.append([*row, "extra"] if i in ragged else row)
    return rows


def _write(path: Path, rows: list[list[str]], *, newline: str = "\n", encoding: str = "utf-8") -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=newline)
    writer.writerow(["id", "name", "note", "value"])
    writer.writerows(rows)
    path.write_bytes(buffer.getvalue().encode(encoding))
    return path


@pytest.mark.parametrize(
    "case",
    [
        "plain",
        "crlf",
        "bom",
        "spanning_values",  # a quoted value holding a line break: a range boundary may fall inside it
        "spanning_value_at_every_boundary",
        "ragged_rows",
        "blank_lines",
        "trailing_blank_lines",
        "lone_cr",
        "cp1252",
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_hostile_files_read_in_chunks_match_the_single_pass(
    tmp_path: Path, case: str, workers: int, paths_taken: list[str]
) -> None:
    # Given a 3,000-row file with the case's trouble spread through it
    n = 3000
    path = tmp_path / f"{case}.csv"
    if case == "spanning_values":
        _write(path, _rows(n, spanning={5, 1234, 2999}))
    elif case == "spanning_value_at_every_boundary":
        _write(path, _rows(n, spanning=set(range(0, n, 7))))
    elif case == "ragged_rows":
        _write(path, _rows(n, ragged={17, 2500}))
    elif case == "crlf":
        _write(path, _rows(n), newline="\r\n")
    elif case == "bom":
        _write(path, _rows(n), encoding="utf-8-sig")
    elif case == "cp1252":
        rows = _rows(n)
        rows[2000][1] = "café"
        _write(path, rows, encoding="cp1252")
    else:
        _write(path, _rows(n))
        data = path.read_bytes()
        if case == "blank_lines":
            data = data.replace(b"\nnote 3,", b"\n\nnote 3,", 1)
            lines = data.split(b"\n")
            lines.insert(2000, b"")
            data = b"\n".join(lines)
        elif case == "trailing_blank_lines":
            data += b"\n\n\r\n"
        elif case == "lone_cr":
            lines = data.split(b"\n")
            data = b"\n".join(lines[:1500]) + b"\r" + b"\n".join(lines[1500:])
        path.write_bytes(data)
    # When it is read in one pass and in ranges of 8 KB (about 20 of them)
    single = read_table(path)
    chunked = read_table(path, chunking=Chunking(8_000, workers))
    # Then both give the same table, repairs and row places
    assert_same_table(single, chunked)
    # (a clean file took the ranges; one a range cannot read alone was read in one pass; cp1252 never tries)
    clean = {"plain", "crlf", "bom", "trailing_blank_lines"}
    assert paths_taken == ([] if case == "cp1252" else ["chunked"] if case in clean else [paths_taken[0]])
    assert case in clean or case == "cp1252" or paths_taken[0] != "chunked"
    if case == "ragged_rows":
        assert [p.kind for p in chunked.problems] == ["ragged_row", "ragged_row"]


@pytest.mark.parametrize("where", ["middle", "last_row"])
def test_an_unclosed_quote_gives_the_same_outcome_in_chunks(tmp_path: Path, where: str) -> None:
    # Given a file where one quote opens and never closes (in the middle, or in the last row)
    path = _write(tmp_path / "open_quote.csv", _rows(3000))
    data = path.read_bytes()
    key = b"\n1500," if where == "middle" else b"\n2999,"
    at = data.index(key) + 1
    path.write_bytes(data[:at] + key[1:] + b'"never closed,' + data[at + len(key) - 1 :])

    def outcome(chunking: Chunking | None) -> Table | str:
        try:
            return read_table(path, chunking=chunking)
        except DatasetReadError as exc:
            return str(exc)

    # When it is read in one pass and in ranges, Then the error (or the repaired table) is the same
    single, chunked = outcome(None), outcome(Chunking(8_000, 2))
    if isinstance(single, str) or isinstance(chunked, str):
        assert chunked == single
    else:
        assert_same_table(single, chunked)


def _profile_outputs(table: Table, tmp: Path) -> tuple[str, str, str]:
    """What the profile step writes, as text: profile.json, the candidate issues, flags.csv."""
    detection = detect(table)
    profile = profile_table(table, null_marker=detection.null_marker)
    issues = issues_from_findings(detection.findings, table, profile)
    flags = tmp / "flags.csv"
    write_flags_csv(flags_of(detection.findings, table), flags, columns=table.column_names)
    return (
        profile.model_dump_json(),
        json.dumps([i.model_dump(mode="json") for i in issues], sort_keys=True),
        flags.read_text(encoding="utf-8"),
    )


@pytest.mark.skipif(not DEV, reason="../shared/datasets is not here")
@pytest.mark.parametrize("dataset", DEV)
def test_every_dev_dataset_in_chunks_gives_the_same_profile_issues_and_flags(
    dataset: str, tmp_path: Path, paths_taken: list[str]
) -> None:
    # Given a dev dataset, read in one pass and in ranges of about a twentieth of it by 1 and 2 workers
    path = DATASETS / dataset / "dirty.csv"
    single = read_table(path)
    expected = _profile_outputs(single, tmp_path)
    chunk = max(4096, path.stat().st_size // 20)
    for workers in (1, 2):
        chunked = read_table(path, chunking=Chunking(chunk, workers))
        # Then the table, and everything the profile step writes from it, are identical
        assert_same_table(single, chunked)
        assert _profile_outputs(chunked, tmp_path) == expected
    assert paths_taken == ["chunked", "chunked"]  # every dev dataset fits the ranges


def test_workers_and_chunk_size_are_settings() -> None:
    settings = Settings.from_env(
        {"ITERATE_WORKERS": "3", "ITERATE_CHUNK_BYTES": "1000000", "ITERATE_SPILL": "always"}
    )
    assert Chunking.from_settings(settings) == Chunking(1_000_000, 3, 256 * 2**20, 256 * 2**20, "always")
    default = Chunking.from_settings(Settings.from_env({}))
    assert default.workers == resolve_workers(None) >= 1
    assert default.chunk_bytes == 64 * 1024 * 1024
    single = Chunking.from_settings(
        Settings.from_env(
            {"ITERATE_SINGLE_PASS_BYTES": "0", "ITERATE_WORKERS": "1", "ITERATE_SPILL_BYTES": "0"}
        )
    )
    assert single == Chunking(64 * 2**20, 1, 0, 0)


def test_one_worker_reads_a_file_of_up_to_the_single_pass_size_in_one_pass() -> None:
    one, two = Chunking(64 * 2**20, 1, 256 * 2**20), Chunking(64 * 2**20, 2, 256 * 2**20)
    # One worker: ranges only from the single-pass size on (before that they only cost time)
    assert [one.splits(mb * 2**20) for mb in (32, 197, 256, 257, 2000)] == [False, False, False, True, True]
    # Several: from one range on (they are the parallelism)
    assert [two.splits(mb * 2**20) for mb in (32, 64, 65, 197)] == [False, False, True, True]
    # Without a single-pass size, one worker splits as several do
    assert Chunking(64 * 2**20, 1, 0).splits(65 * 2**20)


def test_by_default_two_cores_or_fewer_parse_in_process_and_more_use_up_to_four_cores() -> None:
    assert [resolve_workers(None, cores) for cores in (1, 2, 3, 4, 8, 64)] == [1, 1, 3, 4, 4, 4]
    assert resolve_workers(2, cores=2) == 2  # asked for: as given
    assert resolve_workers(8, cores=8) == 8
    assert resolve_workers(0, cores=8) == 1


def test_where_processes_cannot_start_the_ranges_are_parsed_in_process(
    bench_file: Path, monkeypatch: pytest.MonkeyPatch, paths_taken: list[str]
) -> None:
    import iterate.io.chunked as chunked

    # Given a host without /dev/shm (AWS Lambda): multiprocessing's semaphores fail with ENOSYS
    def no_semaphores(*args: object, **kwargs: object) -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(chunked, "ProcessPoolExecutor", no_semaphores)
    # When the file is read with two workers, Then the ranges are read in-process, to the same table
    assert_same_table(read_table(bench_file), read_table(bench_file, chunking=Chunking(200_000, 2)))
    assert paths_taken == ["chunked"]


def test_a_worker_that_dies_sends_the_file_to_the_single_pass(
    bench_file: Path, monkeypatch: pytest.MonkeyPatch, paths_taken: list[str]
) -> None:
    import iterate.io.chunked as chunked

    # Given worker processes that are killed while parsing
    def killed(*args: object, **kwargs: object) -> chunked.ChunkParse:
        raise chunked.BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(chunked, "_parse_all", lambda *a, **k: iter([killed()]))
    # When the file is read in ranges, Then the single pass reads it
    assert_same_table(read_table(bench_file), read_table(bench_file, chunking=Chunking(200_000, 2)))
    assert paths_taken == ["a worker process stopped"]


def test_a_column_keeps_codes_and_rebuilds_its_text_on_demand() -> None:
    import pyarrow as pa

    from iterate.table import Column

    # Given a column read as plain text, and the same text already dictionary-encoded (as a chunked read gives)
    text = pa.array(["b", "a", "b", None, "c", "a"], pa.string())
    plain = Column("x", 0, text)
    encoded = Column("x", 0, pa.array(["b", "a", "b", "", "c", "a"]).dictionary_encode())
    # Then both hold the same dictionary (first-seen order; a null is a blank), codes and counts
    assert plain.dictionary.to_pylist() == encoded.dictionary.to_pylist() == ["b", "a", "", "c"]
    assert plain.codes.tolist() == encoded.codes.tolist() == [0, 1, 0, 2, 3, 1]
    assert plain.counts.tolist() == [2, 2, 1, 1] and len(plain) == 6
    # And the text comes back whole or for a few rows, without being stored
    assert plain.values.to_pylist() == ["b", "a", "b", "", "c", "a"]
    assert plain.values_at(np.array([4, 0])).to_pylist() == ["c", "b"]
    assert "values" not in vars(plain)


def test_a_file_in_chunks_over_the_cell_limit_is_refused_before_the_rest_is_read(
    bench_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iterate.io.chunked as chunked
    from iterate.io import ReadLimits

    # Given the 20,000-row bench file (20 columns), a limit of 100,000 cells, and ranges of ~200 KB
    parsed: list[int] = []
    real = chunked.parse_range

    def counted(*args: object, **kwargs: object) -> chunked.ChunkParse:
        part = real(*args, **kwargs)  # type: ignore[arg-type]
        parsed.append(part.rows)
        return part

    monkeypatch.setattr(chunked, "parse_range", counted)
    limits = ReadLimits(max_cells=100_000)
    ranges = chunked.line_ranges(bench_file, 200_000)
    # When it is read in ranges (in-process: the spy sees every parse)
    with pytest.raises(DatasetReadError) as refused:
        read_table(bench_file, limits=limits, chunking=Chunking(200_000, 1, 0))
    # Then it is refused on the cell limit as soon as the rows counted pass it, not after every range
    err = refused.value
    assert err.limit is not None and err.limit.setting == "ITERATE_MAX_CELLS"
    assert len(parsed) < len(ranges)
    rows = sum(parsed)
    assert rows * 20 > 100_000 >= (rows - parsed[-1]) * 20
    assert f"has at least {rows:,} rows × 20 columns = {rows * 20:,} cells (counted in its first" in str(err)
    assert "set ITERATE_MAX_CELLS above 100000" in str(err)
    # And the single pass refuses the same file on the same limit, with its exact count
    with pytest.raises(DatasetReadError) as single:
        read_table(bench_file, limits=limits)
    assert single.value.limit is not None and single.value.limit.setting == "ITERATE_MAX_CELLS"
    assert "has 20,000 rows × 20 columns = 400,000 cells, more than" in str(single.value)


def test_columns_merged_by_sorting_give_the_single_pass_table(
    bench_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import iterate.io.chunked as chunked

    # Given every column long enough to be merged by sorting when its ranges hardly share values, and memory short
    monkeypatch.setattr(chunked, "SORT_MERGE_VALUES", 1)
    monkeypatch.setattr(chunked, "memory_short", lambda nbytes: True)
    sorted_merges: list[int] = []
    real = chunked._merge_by_sorting

    def spy(parts: list) -> object:  # type: ignore[type-arg]
        sorted_merges.append(sum(len(p) for p in parts))
        return real(parts)

    monkeypatch.setattr(chunked, "_merge_by_sorting", spy)
    # When the bench file is read in ranges
    merged = read_table(bench_file, chunking=Chunking(100_000, 1))
    # Then the near-unique columns (ids, e-mails, phone numbers) were merged by sorting, the repeated ones
    # (status, category, ...) by pyarrow's unification, and the table is the single pass's
    assert 3 <= len(sorted_merges) < len(merged.columns)
    single = read_table(bench_file)
    assert_same_table(single, merged)
    # With memory to spare, every column is unified by pyarrow's hash table instead: the same table
    monkeypatch.setattr(chunked, "memory_short", lambda nbytes: False)
    sorted_merges.clear()
    assert_same_table(single, read_table(bench_file, chunking=Chunking(100_000, 1)))
    assert sorted_merges == []


def test_merging_by_sorting_is_unify_dictionaries() -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    from iterate.io.chunked import _merge_by_sorting

    rng = np.random.default_rng(3)
    words = ["", "a", "ab", "b", "é", "e\u0301", "zz", "a ", " a", "10", "9", "1e3", "Ab"]
    pool = words + [f"v{i}" for i in range(300)]
    # Ranges of random values: repeats inside a range and across ranges, one empty range, one range of one value
    parts = [
        pc.dictionary_encode(pa.array(list(rng.choice(pool, size=n)), pa.string()))
        for n in (400, 0, 250, 1, 700)
    ]
    expected = pa.table({"c": pa.chunked_array(parts)}).unify_dictionaries().column(0).combine_chunks()
    got = _merge_by_sorting(parts)
    assert got.dictionary.equals(expected.dictionary)
    assert np.array_equal(got.indices.to_numpy(), expected.indices.to_numpy())
    assert got.indices.type == expected.indices.type


@pytest.mark.parametrize("workers", [1, 2])
def test_ranges_kept_in_mapped_files_until_the_merge_make_the_same_table(
    bench_file: Path, workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import iterate.io.chunked as chunked_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the spill directory: TMPDIR
    kept: list[tuple[str, int]] = []
    map_arrays = chunked_module.map_arrays

    def counting(arrays, path):  # type: ignore[no-untyped-def]
        mapped = map_arrays(arrays, path)
        assert not path.exists()  # unlinked once mapped
        kept.append((path.name.split("-")[0], len(mapped[0])))
        return mapped

    monkeypatch.setattr(chunked_module, "map_arrays", counting)
    single = read_table(bench_file)
    # Below the setting, nothing is kept in files
    assert_same_table(single, read_table(bench_file, chunking=Chunking(100_000, workers, 0, 10**9, "always")))
    assert kept == []
    # At the setting but with memory to spare (by default), nothing either
    assert_same_table(single, read_table(bench_file, chunking=Chunking(100_000, workers, 0, 1)))
    assert kept == []
    # From it on, every range is, then every merged column, and the merged table is the same
    chunked = read_table(bench_file, chunking=Chunking(100_000, workers, 0, 1, "always"))
    assert_same_table(single, chunked)
    ranges = [rows for kind, rows in kept if kind == "range"]
    assert len(ranges) == len(line_ranges(bench_file, 100_000)) > 1 and sum(ranges) == single.n_rows
    assert [rows for kind, rows in kept if kind == "column"] == [single.n_rows] * len(single.columns)
    assert list(tmp_path.iterdir()) == []  # nothing left behind

    def full_disk(arrays, path):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(chunked_module, "map_arrays", full_disk)  # the ranges stay in memory
    assert_same_table(single, read_table(bench_file, chunking=Chunking(100_000, workers, 0, 1, "always")))
