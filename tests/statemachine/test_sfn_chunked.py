"""A large upload read in chunks by the real ASL's ProfileChunks Distributed Map equals the single pass."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from awsenv import (
    BUCKET,
    REPO,
    history,
    load_handler,
    object_created_event,
    reset_caches,
    route_lambdas,
    run_execution,
)

from iterate.io.chunked import read_partial
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.statemachine, pytest.mark.filterwarnings("ignore:No application metrics")]

CHUNK_BYTES = 24 * 1024
COMPARED = ("profile.json", "candidates.json", "flags.csv", "data.parquet")


@pytest.fixture(scope="module")
def bench_csv(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Given the bench generator's file, 3,000 rows (~330 KB: a dozen ranges of 24 KB)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from gen_bench import write

    path = tmp_path_factory.mktemp("bench") / "orders.csv"
    write(path, n_rows=3_000, seed=11)
    return path.read_bytes()


def _run(
    machine: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    body: bytes,
    dataset: str,
    *,
    chunk_bytes: int,
    overrides: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Any, str]:
    """Upload `body` as uploads/alice/<dataset>/orders.csv and run the state machine to its end."""
    monkeypatch.setenv("ITERATE_CHUNK_BYTES", str(chunk_bytes))
    reset_caches()  # the functions read ITERATE_CHUNK_BYTES on first use
    key = f"uploads/alice/{dataset}/orders.csv"
    version = machine["s3"].put_object(Bucket=BUCKET, Key=key, Body=body)["VersionId"]
    with route_lambdas({"sandbox": load_handler("sandbox").lambda_handler, **(overrides or {})}) as calls:
        done = run_execution(
            machine["sfn"], machine["arn"], object_created_event(BUCKET, key, version), timeout_s=300
        )
    return done, calls, key


def _artifacts(machine: dict[str, Any], done: dict[str, Any]) -> dict[str, bytes]:
    prefix = json.loads(done["output"])["run"]["prefix"]
    return {
        name: machine["s3"].get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read() for name in COMPARED
    }


def _parts(machine: dict[str, Any], prefix: str) -> list[Any]:
    listed = machine["s3"].list_objects_v2(Bucket=BUCKET, Prefix=prefix + "chunks/part-")
    keys = sorted(o["Key"] for o in listed.get("Contents", []))
    return [read_partial(machine["s3"].get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys]


def _state_entered(events: list[dict[str, Any]], name: str) -> bool:
    return any((e.get("stateEnteredEventDetails") or {}).get("name") == name for e in events)


def test_a_large_upload_through_the_chunk_map_equals_the_single_pass(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    # When the bench file runs with 24 KB chunks, and again with chunks larger than the file (one pass)
    chunked, calls, _ = _run(machine, monkeypatch, bench_csv, "big", chunk_bytes=CHUNK_BYTES)
    single, single_calls, _ = _run(machine, monkeypatch, bench_csv, "big1", chunk_bytes=64 * 1024 * 1024)
    # Then both SUCCEEDED, the first through the Map with one chunk function per range
    assert chunked["status"] == "SUCCEEDED", chunked
    assert single["status"] == "SUCCEEDED", single
    assert not calls.failures and not single_calls.failures
    chunk_events = [event for name, event in calls if name == "chunk"]
    assert len(chunk_events) >= 10, len(chunk_events)
    assert sorted(e["chunk"]["index"] for e in chunk_events) == list(range(len(chunk_events)))
    assert not [e for name, e in single_calls if name == "chunk"]
    merges = [e for name, e in calls if name == "profile" and e.get("action") == "merge"]
    assert len(merges) == 1 and merges[0]["chunked"]["count"] == len(chunk_events)
    events = history(machine["sfn"], chunked["executionArn"])
    assert _state_entered(events, "ProfileChunks") and _state_entered(events, "MergeChunks")
    # And every range was trusted and stored as a partial: nothing fell back to the single pass
    prefix = json.loads(chunked["output"])["run"]["prefix"]
    parts = _parts(machine, prefix)
    assert len(parts) == len(chunk_events) and all(p.columns is not None for p in parts)
    assert sum(p.rows for p in parts) == 3_000
    # (each partial tagged, so the bucket's lifecycle rule expires it)
    tags = machine["s3"].get_object_tagging(Bucket=BUCKET, Key=prefix + "chunks/part-00000.arrow")["TagSet"]
    assert tags == [{"Key": "iterate-chunk-partial", "Value": "true"}]
    # And the profile, the candidate issues, the flags and the data are the single pass's, byte for byte
    assert _artifacts(machine, chunked) == _artifacts(machine, single)
    # And the state machine's output has the single pass's shape: no chunk left in it
    output = json.loads(chunked["output"])
    assert output["chunked"] is None and output["summary"]["rowCount"] == 3_000
    assert output["summary"] == json.loads(single["output"])["summary"]


def test_a_quoted_line_break_falls_back_to_one_pass_and_still_succeeds(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    # Given the bench file with a quoted value holding a line break in the middle of the file
    lines = bench_csv.split(b"\n")
    middle = len(lines) // 2
    fields = lines[middle].split(b",")
    fields[1] = b'"first line\nsecond line"'
    lines[middle] = b",".join(fields)
    body = b"\n".join(lines)
    # When it runs with 24 KB chunks, and again in one pass
    chunked, calls, _ = _run(machine, monkeypatch, body, "quoted", chunk_bytes=CHUNK_BYTES)
    single, _, _ = _run(machine, monkeypatch, body, "quoted1", chunk_bytes=64 * 1024 * 1024)
    # Then the Map ran, a range said it cannot be trusted, and the run still SUCCEEDED
    assert chunked["status"] == "SUCCEEDED", chunked
    assert any(name == "chunk" for name, _ in calls)
    prefix = json.loads(chunked["output"])["run"]["prefix"]
    untrusted = [p for p in _parts(machine, prefix) if p.columns is None]
    assert untrusted and "records on" in untrusted[0].reason
    # And the merge step read the whole file in one pass: the same outputs as the single pass
    assert _artifacts(machine, chunked) == _artifacts(machine, single)


def test_a_chunk_that_fails_ends_the_run_failed_with_its_reason(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    real = load_handler("chunk").lambda_handler

    def failing(event: dict[str, Any], context: Any) -> Any:
        if event["chunk"]["index"] == 3:
            raise MemoryError("the chunk function ran out of memory")
        return real(event, context)

    # When one chunk function fails (every retry of it)
    done, calls, _ = _run(
        machine, monkeypatch, bench_csv, "broken", chunk_bytes=CHUNK_BYTES, overrides={"chunk": failing}
    )
    # Then the run ends FAILED, through RecordFailure, with a reason that names the chunk. (On AWS the Map
    # itself fails, ToleratedFailurePercentage 0, and its Catch goes to RecordFailure; moto's interpreter
    # does not apply ToleratedFailurePercentage, so here MergeChunks finds the range without a result.)
    assert done["status"] == "FAILED", done
    assert "record_failure" in {name for name, _ in calls}
    repo = DynamoRunRepository(machine["table"], "alice")
    (run,) = [r for r in repo.list_runs("broken")]
    assert run["status"] == "FAILED"
    assert run["reason"].startswith("ChunkFailedError: chunk 3 of "), run["reason"]
    assert "function failed" in run["reason"]


def test_small_and_odd_files_keep_the_single_pass(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    import gzip

    # Given the same rows gzip-compressed (not a plain CSV), over the chunk size
    body = gzip.compress(bench_csv)
    assert len(body) > CHUNK_BYTES
    done, calls, key = _run(machine, monkeypatch, body, "zipped", chunk_bytes=CHUNK_BYTES)
    # Then it is profiled in one pass: no chunk function, no merge
    assert done["status"] == "SUCCEEDED", done
    assert not [name for name, _ in calls if name == "chunk"]
    assert json.loads(done["output"])["summary"]["rowCount"] == 3_000
    assert Path(key).name == "orders.csv"


def test_the_merge_of_a_large_upload_bounds_its_memory_as_a_local_run_would(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    import iterate.memory
    import iterate.pipeline

    # Given an upload over the size from which a run is bounded for memory (here: the bench file's)
    calls: list[str] = []
    monkeypatch.setattr(iterate.memory, "map_large_blocks", lambda *a, **k: calls.append("map") or True)
    monkeypatch.setattr(iterate.memory, "use_system_pool", lambda *a, **k: calls.append("pool") or True)
    monkeypatch.setattr(iterate.pipeline, "LARGE_INPUT_BYTES", len(bench_csv))
    # When it runs through the chunk Map
    done, _, _ = _run(machine, monkeypatch, bench_csv, "bounded", chunk_bytes=CHUNK_BYTES)
    # Then the merge step mapped its large blocks one by one and gave pyarrow malloc, before merging
    assert done["status"] == "SUCCEEDED", done
    assert calls == ["map", "pool"]


def test_the_merge_keeps_ranges_and_table_in_mapped_files_and_writes_the_same_artifacts(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes, tmp_path: Path
) -> None:
    import tempfile

    import iterate.aws.chunks
    import iterate.pipeline

    # Given the chunked run of the bench file as it is (too small to spill)
    plain, _, _ = _run(machine, monkeypatch, bench_csv, "inmemory", chunk_bytes=CHUNK_BYTES)
    # When it runs again with ITERATE_SPILL_BYTES at its smallest, whatever the memory left, TMPDIR a directory of
    # its own
    monkeypatch.setenv("ITERATE_SPILL_BYTES", "1")
    monkeypatch.setenv("ITERATE_SPILL", "always")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kept: list[int] = []
    spilled: list[int] = []
    keep_range, spill_table = iterate.aws.chunks.keep_range, iterate.pipeline.spill_table

    def counting_keep(columns, directory, index):  # type: ignore[no-untyped-def]
        kept.append(index if directory is not None else -1)
        return keep_range(columns, directory, index)

    def counting_spill(*args, **kwargs):  # type: ignore[no-untyped-def]
        spilled.append(spill_table(*args, **kwargs))
        return spilled[-1]

    monkeypatch.setattr(iterate.aws.chunks, "keep_range", counting_keep)
    monkeypatch.setattr(iterate.pipeline, "spill_table", counting_spill)
    done, _, _ = _run(machine, monkeypatch, bench_csv, "spilled", chunk_bytes=CHUNK_BYTES)
    # Then MergeChunks kept every range in a file, the profile step moved the table, nothing is left in TMPDIR
    assert done["status"] == "SUCCEEDED", done
    assert plain["status"] == "SUCCEEDED", plain
    assert kept == list(range(len(kept))) and len(kept) >= 10
    assert len(spilled) == 1 and spilled[0] > 0
    assert [p for p in tmp_path.iterdir() if p.name.startswith(("iterate-ranges-", "iterate-spill-"))] == []
    # And the profile, candidate issues, flags and data are the same, byte for byte
    assert _artifacts(machine, done) == _artifacts(machine, plain)


def test_an_upload_over_the_cell_limit_is_refused_by_the_merge_before_every_range_is_merged(
    machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch, bench_csv: bytes
) -> None:
    import re

    # Given a deployment that takes up to 20,000 cells, and the 3,000-row upload (20 columns: 60,000 cells)
    monkeypatch.setenv("ITERATE_MAX_CELLS", "20000")
    # When it runs through the chunk Map (a dozen ranges)
    done, calls, _ = _run(machine, monkeypatch, bench_csv, "toolarge", chunk_bytes=CHUNK_BYTES)
    # Then the run FAILED through RecordFailure, naming the limit and how to raise it
    assert done["status"] == "FAILED", done
    # (ProfileDataset and MergeChunks are both the profile function)
    assert [name for name, _ in calls if name != "chunk"] == ["profile", "profile", "record_failure"]
    (run,) = DynamoRunRepository(machine["table"], "alice").list_runs("toolarge")
    assert run["status"] == "FAILED" and run["error"] == "DatasetReadError", run
    assert "set ITERATE_MAX_CELLS above 20000" in run["reason"]
    # And it was refused once the ranges merged so far passed the limit, not after all 3,000 rows
    counted = re.search(r"has at least ([\d,]+) rows × 20 columns", run["reason"])
    assert counted is not None, run["reason"]
    assert 1_000 < int(counted.group(1).replace(",", "")) < 3_000
