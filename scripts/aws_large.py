"""The engine path on AWS under moto: a generated bench CSV through the real ASL, Athena answered by DuckDB.

Not part of the test suite (`make bench-aws`). Generates the bench file (`--rows`, or `--source`), uploads it to
moto's S3 with a SHA-256 checksum, and runs the real state machine with ITERATE_ENGINE=always and
ITERATE_CHUNK_BYTES=`--chunk-mb`: the chunk Map writes the Parquet copy, EngineStep and RunEngineQuery loop
(tests/handlers/athenafake.py runs each statement on DuckDB and measures the Parquet bytes it reads). Then it
prints the figures a cost model needs, measured on this run: per function its invocations, seconds and GB-seconds
at the memory the stack deploys it with; the Athena statements and the bytes they scanned; the Parquet copy's
size; the S3 and DynamoDB requests per function; the state transitions. `--json FILE` keeps them.

Seconds are this machine's (2 shared cores, moto's S3 in the same process), not a Lambda's: a Lambda of 1 GB or
more has at least this much CPU to itself, so the GB-seconds are an upper bound for the same work.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "handlers"))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))


def _memory_mb() -> dict[str, int]:
    from infra.constructs.functions import FUNCTION_SPECS

    return {s.name: s.memory_mb for s in FUNCTION_SPECS}


def run(source: Path, *, chunk_bytes: int, concurrency: int, sample_rows: int | None) -> dict[str, Any]:
    import boto3
    import pytest
    from athenafake import athena_sync
    from awsenv import (
        _RUNNING,
        BUCKET,
        FUNCTIONS,
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
        s3_uploads_decoded_linearly,
    )
    from botocore.client import BaseClient
    from moto import mock_aws

    from infra.asl import CHUNK_MAP, with_map_concurrency

    work = Path(tempfile.mkdtemp(prefix="iterate-aws-large-"))
    asl = work / "analysis.asl.json"
    doc = json.loads((REPO / "statemachine" / "analysis.asl.json").read_text())
    asl.write_text(json.dumps(with_map_concurrency(doc, 10, {CHUNK_MAP: concurrency})))
    monkeypatch = pytest.MonkeyPatch()
    env = {
        "ITERATE_SANDBOX_TIMEOUT_S": "60",
        "ITERATE_CHUNK_BYTES": str(chunk_bytes),
        "ITERATE_ENGINE": "always",
    }
    if sample_rows:
        env["ITERATE_ENGINE_SAMPLE_ROWS"] = str(sample_rows)
    base_env(monkeypatch, **env)
    seconds: dict[str, float] = Counter()
    invocations: Counter[str] = Counter()
    requests: Counter[tuple[str, str, str]] = Counter()
    lock = threading.Lock()
    real_call: list[Any] = []  # the call as route_lambdas patched it (its own record keeps working)

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        function = getattr(_RUNNING, "name", None)
        if function is not None:
            with lock:
                requests[(function, self.meta.service_model.service_name, operation)] += 1
        return real_call[0](self, operation, params)

    def timed(name: str) -> Any:
        handler = load_handler(name).lambda_handler

        def call(event: dict[str, Any], context: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                with lock:
                    seconds[name] += time.perf_counter() - started
                    invocations[name] += 1

        return call

    out: dict[str, Any] = {"csv_bytes": source.stat().st_size, "chunk_bytes": chunk_bytes}
    try:
        with mock_aws(config=MOTO_CONFIG):
            reset_caches()
            resources = create_resources()
            arn = create_state_machine(asl)
            sfn = boto3.client("stepfunctions", region_name=REGION)
            key = "uploads/bench/large/orders.csv"
            with source.open("rb") as body, s3_uploads_decoded_linearly():
                version = resources["s3"].put_object(
                    Bucket=BUCKET, Key=key, Body=body, ChecksumAlgorithm="SHA256"
                )["VersionId"]
            t = time.perf_counter()
            with athena_sync() as athena, route_lambdas({name: timed(name) for name in FUNCTIONS}) as calls:
                real_call.append(BaseClient._make_api_call)
                with mock.patch.object(BaseClient, "_make_api_call", counting):
                    done = run_execution(sfn, arn, object_created_event(BUCKET, key, version), timeout_s=7200)
            out["wall_s"] = time.perf_counter() - t
            out["status"] = done["status"]
            events = history(sfn, done["executionArn"])
            entered = [
                e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
            ]
            out["transitions"] = len(entered)
            out["rounds"] = entered.count("RunEngineQuery")
            out["failures"] = [f"{n}: {tb.splitlines()[-1]}" for n, tb in calls.failures]
            out["biggest_state"] = max(calls.state_sizes, key=lambda x: x[1], default=("-", 0))
            s3 = resources["s3"]
            if done["status"] == "SUCCEEDED":
                prefix = json.loads(done["output"])["run"]["prefix"]
                listed = s3.get_paginator("list_objects_v2").paginate(
                    Bucket=BUCKET, Prefix=prefix + "chunks/parquet/"
                )
                out["parquet_bytes"] = sum(o["Size"] for p in listed for o in p.get("Contents", []))
                profile = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + "profile.json")["Body"].read())
                out["rows"] = profile["rowCount"]
                out["content_hash"] = profile["contentHash"]
                flags = s3.get_object(Bucket=BUCKET, Key=prefix + "flags.csv")["Body"].read()
                out["flagged_cells"] = flags.count(b"\n") - 1
            out["athena"] = [{k: q[k] for k in ("bytes", "rows", "s")} for q in athena.queries]
    finally:
        monkeypatch.undo()
        reset_caches()
    memory = _memory_mb()
    out["functions"] = {
        name: {
            "invocations": invocations[name],
            "seconds": round(seconds[name], 2),
            "memory_mb": memory[name],
            "gb_s": round(seconds[name] * memory[name] / 1024, 1),
        }
        for name in FUNCTIONS
        if invocations[name]
    }
    per: dict[str, Counter[str]] = {}
    for (function, service, _op), n in requests.items():
        per.setdefault(function, Counter())[service] += n
    out["requests"] = {f: dict(c) for f, c in per.items()}
    out["requests_by_operation"] = {f"{f} {s}:{o}": n for (f, s, o), n in sorted(requests.items())}
    return out


def report(out: dict[str, Any]) -> None:
    gb = out["csv_bytes"] / 1e9
    print(
        f"\nengine path under moto: {out['status']} in {out['wall_s']:.1f} s wall; {out.get('rows', 0):,} rows, "
        f"CSV {out['csv_bytes'] / 1e6:,.1f} MB in chunks of {out['chunk_bytes'] / 2**20:g} MiB; "
        f"{out['rounds']} Athena rounds; {out['transitions']} state transitions; "
        f"largest state {out['biggest_state'][1]:,} bytes ({out['biggest_state'][0]})"
    )
    for failure in out["failures"]:
        print(f"  a function raised: {failure}")
    if out["status"] != "SUCCEEDED":
        return
    print(
        f"  Parquet copy: {out['parquet_bytes'] / 1e6:,.1f} MB ({out['parquet_bytes'] / out['csv_bytes']:.2f} of the "
        f"CSV); content identity {out['content_hash'][:40]}...; flagged cells {out['flagged_cells']:,}"
    )
    scanned = sum(q["bytes"] for q in out["athena"])
    print(
        f"  Athena: {len(out['athena'])} statements, {scanned / 1e6:,.1f} MB scanned "
        f"({scanned / out['csv_bytes']:.2f} of the CSV; {scanned / 1e6 / max(gb, 1e-9) / 1000:.3f} GB per CSV GB)"
    )
    for i, q in enumerate(out["athena"]):
        print(
            f"    statement {i + 1}: {q['bytes'] / 1e6:8.1f} MB scanned, {q['rows']:>9,} rows out, {q['s']:.2f} s"
        )
    print(f"  {'function':<15}{'invocations':>12}{'seconds':>10}{'memory MB':>11}{'GB-s':>9}   requests")
    for name, f in out["functions"].items():
        reqs = ", ".join(f"{s} {n}" for s, n in sorted(out["requests"].get(name, {}).items()))
        print(
            f"  {name:<15}{f['invocations']:>12}{f['seconds']:>10.1f}{f['memory_mb']:>11,}{f['gb_s']:>9.1f}   {reqs}"
        )
    total = sum(f["gb_s"] for f in out["functions"].values())
    print(f"  Lambda GB-s in all: {total:,.1f} ({total / max(gb, 1e-9):,.0f} per CSV GB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--source", type=Path)
    parser.add_argument("--chunk-mb", type=float, default=16.0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--sample-rows", type=int, default=None, help="ITERATE_ENGINE_SAMPLE_ROWS")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    from gen_bench import write

    source = args.source
    if source is None:
        source = Path(tempfile.mkdtemp(prefix="iterate-aws-large-src-")) / "orders.csv"
        write(source, n_rows=args.rows, seed=7)
    out = run(
        source,
        chunk_bytes=int(args.chunk_mb * 2**20),
        concurrency=args.concurrency,
        sample_rows=args.sample_rows,
    )
    report(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0 if out["status"] == "SUCCEEDED" else 1


if __name__ == "__main__":
    raise SystemExit(main())
