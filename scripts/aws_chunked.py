"""A large bench CSV through the real state machine under moto, read in chunks by the ProfileChunks Map.

Not part of the test suite (`make bench-aws`). It generates the bench file (`--rows`), uploads it to moto's S3,
runs the real ASL with every Lambda routed in-process (tests/handlers/awsenv.py, the harness the statemachine
tests use) and ITERATE_CHUNK_BYTES=`--chunk-mb`, then checks the run's flags.csv equals a local single-pass
`iterate analyze`-style profile of the same file. It prints the wall time, the peak RSS of this process (moto's
S3 included), the chunk count, and a per-chunk table for a cost model: the wall of each chunk function as it ran
in the Map, and, measured again in a fresh process per range, the wall and the peak RSS of the chunk's own work
(parse_bytes + write_partial on the range's bytes) per MB of range.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "handlers"))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

# What one chunk function does with its range's bytes, in a process of its own (RSS is per process).
_CHUNK_WORK = r"""
import functools, json, sys, time
from iterate.io.chunked import parse_bytes, write_partial
from iterate.io.delimited import Dialect, chunk_options
def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field)) / 1024
path, start, end, skip, last, delimiter, width = sys.argv[1:8]
base = status("VmRSS:")  # after the imports: what the function holds before its range
t = time.perf_counter()
with open(path, "rb") as fh:
    fh.seek(int(start)); data = fh.read(int(end) - int(start))
options = functools.partial(chunk_options, Dialect(delimiter, '"'), int(width), "utf-8")
part = parse_bytes(data, last=last == "1", skip=int(skip), options=options, threads=True)
del data
stored = write_partial(part)
print(json.dumps({"wall_s": time.perf_counter() - t, "rss_mb": status("VmHWM:") - base, "base_mb": base,
                  "rows": part.rows, "trusted": part.columns is not None, "stored_mb": len(stored) / 2**20}))
"""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _state_spans(events: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds from entering to leaving each top-level state named in the history (the last entry wins)."""
    entered: dict[str, Any] = {}
    spans: dict[str, float] = {}
    for event in events:
        if "stateEnteredEventDetails" in event:
            entered[event["stateEnteredEventDetails"]["name"]] = event["timestamp"]
        elif "stateExitedEventDetails" in event:
            name = event["stateExitedEventDetails"]["name"]
            if name in entered:
                spans[name] = (event["timestamp"] - entered[name]).total_seconds()
    return {
        name: spans.get(name, float("nan")) for name in ("ProfileDataset", "ProfileChunks", "MergeChunks")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the bench file (~200 bytes each)")
    parser.add_argument("--chunk-mb", type=float, default=8.0, help="ITERATE_CHUNK_BYTES in MiB")
    parser.add_argument("--concurrency", type=int, default=2, help="the chunk Map's MaxConcurrency")
    parser.add_argument("--measure", type=int, default=4, help="ranges measured again in a process each")
    args = parser.parse_args(argv)

    import boto3
    import pytest
    from awsenv import (
        BUCKET,
        MOTO_CONFIG,
        REGION,
        base_env,
        create_resources,
        create_state_machine,
        history,
        load_handler,
        object_created_event,
        reset_caches,
        route_lambdas,
        run_execution,
    )
    from moto import mock_aws

    from gen_bench import write
    from infra.asl import CHUNK_MAP, with_map_concurrency

    work = Path(tempfile.mkdtemp(prefix="iterate-aws-chunked-"))
    source = work / "orders.csv"
    t = time.perf_counter()
    write(source, n_rows=args.rows, seed=7)
    size = source.stat().st_size
    print(f"generated {args.rows:,} rows, {size / 2**20:,.1f} MiB in {time.perf_counter() - t:.1f} s")

    # The deployed definition: the real ASL with the Maps' concurrency set as the CDK stack sets it.
    asl = work / "analysis.asl.json"
    doc = with_map_concurrency(
        json.loads((REPO / "statemachine" / "analysis.asl.json").read_text()),
        10,
        {CHUNK_MAP: args.concurrency},
    )
    asl.write_text(json.dumps(doc))

    timings: list[dict[str, Any]] = []
    lock = threading.Lock()
    monkeypatch = pytest.MonkeyPatch()
    base_env(monkeypatch, ITERATE_SANDBOX_TIMEOUT_S="60", ITERATE_CHUNK_BYTES=str(int(args.chunk_mb * 2**20)))
    try:
        with mock_aws(config=MOTO_CONFIG):
            reset_caches()
            resources = create_resources()
            arn = create_state_machine(asl)
            sfn = boto3.client("stepfunctions", region_name=REGION)
            key = "uploads/bench/orders/orders.csv"
            with source.open("rb") as body:
                version = resources["s3"].put_object(Bucket=BUCKET, Key=key, Body=body)["VersionId"]
            chunk = load_handler("chunk").lambda_handler

            def timed_chunk(event: dict[str, Any], context: Any) -> Any:
                started = time.perf_counter()
                result = chunk(event, context)
                item = event["chunk"]
                with lock:
                    timings.append(
                        {"index": item["index"], "mb": (item["end"] - item["start"]) / 2**20,
                         "map_wall_s": time.perf_counter() - started, "rows": result["rows"],
                         "trusted": result["trusted"]}
                    )  # fmt: skip
                return result

            t = time.perf_counter()
            with route_lambdas(
                {"sandbox": load_handler("sandbox").lambda_handler, "chunk": timed_chunk}
            ) as calls:
                done = run_execution(sfn, arn, object_created_event(BUCKET, key, version), timeout_s=7200)
            wall = time.perf_counter() - t
            if done["status"] != "SUCCEEDED":
                print(f"run {done['status']}: {calls.failures[-1][1] if calls.failures else done}")
                return 1
            prefix = json.loads(done["output"])["run"]["prefix"]
            flags = resources["s3"].get_object(Bucket=BUCKET, Key=prefix + "flags.csv")["Body"].read()
            manifest = json.loads(
                resources["s3"].get_object(Bucket=BUCKET, Key=prefix + "chunks/manifest.json")["Body"].read()
            )
            biggest_state, biggest = max(calls.state_sizes, key=lambda named: named[1], default=("-", 0))
            spans = _state_spans(history(sfn, done["executionArn"]))
    finally:
        monkeypatch.undo()
        reset_caches()
    peak = _peak_rss_mb()
    print(
        f"state machine under moto: {wall:.1f} s wall, {len(manifest)} chunks of {args.chunk_mb:g} MiB, "
        f"concurrency {args.concurrency}, peak RSS of this process {peak:,.0f} MB, largest state {biggest:,} bytes ({biggest_state})"
    )

    print(
        "  ProfileDataset (cut) {ProfileDataset:.1f} s, ProfileChunks (Map) {ProfileChunks:.1f} s, "
        "MergeChunks (merge + profile) {MergeChunks:.1f} s".format(**spans)
    )

    # The same file, one pass, locally: the flags must be the same bytes.
    from iterate.agents import build_agents
    from iterate.pipeline import RunContext, profile_step
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    t = time.perf_counter()
    local_dir = work / "local"
    settings = Settings(chunk_bytes=2**40, workers=1)
    ctx = RunContext(
        run_id="local",
        store=LocalArtifactStore(local_dir),
        agents=build_agents(settings),
        sandbox=None,  # type: ignore[arg-type]  # the profile step only offers the data to a sandbox that can
        settings=settings,
    )
    profile_step(ctx, source)
    local_flags = (local_dir / "flags.csv").read_bytes()
    print(f"local single pass: {time.perf_counter() - t:.1f} s; flags.csv {len(local_flags):,} bytes")
    same = flags == local_flags
    print(f"flags equal to the local single pass: {same}")

    # Per chunk: the Map's wall (in-process, side by side with the others), then the chunk's work measured
    # alone in a fresh process (its peak RSS over the process's own start-up).
    width = len(source.open("rb").readline().split(b","))
    sample = manifest[: args.measure]
    measured: dict[int, dict[str, Any]] = {}
    for item in sample:
        out = subprocess.run(
            [sys.executable, "-c", _CHUNK_WORK, str(source), str(item["start"]), str(item["end"]),
             str(item["skip"]), "1" if item["last"] else "0", ",", str(width)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO / "layers")},
        )  # fmt: skip
        measured[item["index"]] = json.loads(out.stdout)
    print()
    print(
        "| chunk | MiB | rows | wall in the Map (s) | wall alone (s) | s per MiB | peak RSS over start-up (MB) | RSS MB per MiB | partial (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in sorted(timings, key=lambda r: r["index"]):
        alone = measured.get(row["index"])
        extra = (
            f"{alone['wall_s']:.2f} | {alone['wall_s'] / row['mb']:.3f} | {alone['rss_mb']:.0f} | "
            f"{alone['rss_mb'] / row['mb']:.1f} | {alone['stored_mb']:.2f}"
            if alone
            else "- | - | - | - | -"
        )
        print(f"| {row['index']} | {row['mb']:.1f} | {row['rows']:,} | {row['map_wall_s']:.2f} | {extra} |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
