"""A large bench CSV through the real state machine under moto, read in chunks by the ProfileChunks Map.

Not part of the test suite (`make bench-aws`). It generates the bench file (`--rows`) or takes one (`--source`),
uploads it to moto's S3, runs the real ASL with every Lambda routed in-process (tests/handlers/awsenv.py, the
harness the statemachine tests use, GetObject served by seek: `s3_reads_by_seek`) and
ITERATE_CHUNK_BYTES=`--chunk-mb`, then checks the run's flags.csv equals a local single-pass profile of the same
file (`iterate analyze`'s profile step, one pass). With `--sample-rows N` the file's first N rows go through the
same chunked path in `--sample-chunk-mb` ranges and are compared with their own single pass too.

It prints the wall time, the peak RSS of this process (moto's S3 and every function in it; the upload's own peak
apart), the process tree's (sandbox processes included) and each state's, the chunk count, and a per-chunk table
for a cost model: the wall of each chunk function as it ran in the Map, and, measured again in a fresh process per
range, the wall and the peak RSS of the chunk's own work (parse_bytes + write_partial on the range's bytes) per MB.
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


STATES = ("ProfileDataset", "ProfileChunks", "MergeChunks")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _status_mb(pid: int | str, field: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith(field)), 0) / 1024
    except OSError:  # the process ended between the listing and the read
        return 0.0


def _tree_rss_mb(root: int) -> float:
    """RSS summed over `root` and its descendants (the sandbox's processes), read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(_status_mb(pid, "VmRSS:") for pid in tree)


class Sampler:
    """(wall clock, RSS of this process, RSS of its process tree) every `every` seconds, in a thread."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.samples.append((time.time(), _status_mb(me, "VmRSS:"), _tree_rss_mb(me)))
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float = 0.0, end: float = float("inf")) -> tuple[float, float]:
        """Peak RSS of this process and of the tree between two wall-clock times (0 when nothing sampled)."""
        inside = [(own, tree) for t, own, tree in self.samples if start <= t <= end]
        return (max((o for o, _ in inside), default=0.0), max((t for _, t in inside), default=0.0))


def _reset_peak_rss() -> bool:
    """Start VmHWM (this process's peak RSS) afresh (Linux >= 4.0), so the upload's peak is not the run's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _state_windows(events: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(entered, exited) wall-clock seconds of each top-level state named in the history (the last entry wins)."""
    entered: dict[str, float] = {}
    windows: dict[str, tuple[float, float]] = {}
    for event in events:
        if "stateEnteredEventDetails" in event:
            entered[event["stateEnteredEventDetails"]["name"]] = event["timestamp"].timestamp()
        elif "stateExitedEventDetails" in event:
            name = event["stateExitedEventDetails"]["name"]
            if name in entered:
                windows[name] = (entered[name], event["timestamp"].timestamp())
    return windows


def run_under_moto(
    source: Path, work: Path, *, chunk_bytes: int, concurrency: int, investigate_concurrency: int, label: str
) -> dict[str, Any]:
    """Upload `source` to moto's S3 and run the real ASL on it, chunked; the run's figures and its flags.csv."""
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
        s3_uploads_decoded_linearly,
    )
    from moto import mock_aws

    from infra.asl import CHUNK_MAP, with_map_concurrency

    # The deployed definition: the real ASL with the Maps' concurrency set as the CDK stack sets it.
    asl = work / f"analysis-{label}.asl.json"
    doc = with_map_concurrency(
        json.loads((REPO / "statemachine" / "analysis.asl.json").read_text()),
        investigate_concurrency,
        {CHUNK_MAP: concurrency},
    )
    asl.write_text(json.dumps(doc))

    timings: list[dict[str, Any]] = []
    lock = threading.Lock()
    monkeypatch = pytest.MonkeyPatch()
    # The sandbox's memory budget as deployed (3/4 of its 3,072 MB function), its timeout as `make bench-aws`
    # always ran it; ITERATE_MAX_CELLS as the caller's environment says (10M rows x 20 columns is over the default).
    base_env(
        monkeypatch,
        ITERATE_SANDBOX_TIMEOUT_S="60",
        ITERATE_SANDBOX_MEMORY_MB=os.environ.get("ITERATE_SANDBOX_MEMORY_MB", "2304"),
        ITERATE_CHUNK_BYTES=str(chunk_bytes),
    )
    out: dict[str, Any] = {"label": label, "size": source.stat().st_size, "chunk_bytes": chunk_bytes}
    try:
        with Sampler() as sampler, mock_aws(config=MOTO_CONFIG):
            reset_caches()
            resources = create_resources()
            arn = create_state_machine(asl)
            sfn = boto3.client("stepfunctions", region_name=REGION)
            key = f"uploads/bench/{label}/orders.csv"
            t = time.perf_counter()
            upload_started = time.time()
            reset = _reset_peak_rss()
            with source.open("rb") as body, s3_uploads_decoded_linearly():
                version = resources["s3"].put_object(Bucket=BUCKET, Key=key, Body=body)["VersionId"]
            out["upload_s"] = time.perf_counter() - t
            out["upload_peak_mb"] = max(
                _status_mb("self", "VmHWM:") if reset else _peak_rss_mb(), sampler.peak(upload_started)[0]
            )
            out["hwm_reset"] = _reset_peak_rss()
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
            started = time.time()
            with route_lambdas(
                {"sandbox": load_handler("sandbox").lambda_handler, "chunk": timed_chunk}
            ) as calls:
                done = run_execution(sfn, arn, object_created_event(BUCKET, key, version), timeout_s=7200)
            ended = time.time()
            out["wall_s"] = time.perf_counter() - t
            out["status"] = done["status"]
            out["peak_mb"] = _status_mb("self", "VmHWM:") if out["hwm_reset"] else _peak_rss_mb()
            out["sampled_peak_mb"], out["tree_peak_mb"] = sampler.peak(started, ended)
            windows = _state_windows(history(sfn, done["executionArn"]))
            out["states"] = {
                name: {"wall_s": end - begin, "peak_mb": sampler.peak(begin, end)}
                for name, (begin, end) in windows.items()
                if name in STATES
            }
            after = max((end for name, (_, end) in windows.items() if name in STATES), default=ended)
            out["after_merge_peak_mb"] = sampler.peak(after, ended)
            out["biggest_state"] = max(calls.state_sizes, key=lambda named: named[1], default=("-", 0))
            out["failures"] = [f"{name}: {trace.splitlines()[-1]}" for name, trace in calls.failures]
            out["sandbox_calls"] = sum(1 for name, _ in calls if name == "sandbox")
            if done["status"] != "SUCCEEDED":
                out["error"] = calls.failures[-1][1] if calls.failures else str(done)
                return out
            prefix = json.loads(done["output"])["run"]["prefix"]
            out["flags"] = resources["s3"].get_object(Bucket=BUCKET, Key=prefix + "flags.csv")["Body"].read()
            manifest = resources["s3"].get_object(Bucket=BUCKET, Key=prefix + "chunks/manifest.json")["Body"]
            out["manifest"] = json.loads(manifest.read())
            out["timings"] = sorted(timings, key=lambda r: r["index"])
            out["investigations"] = _investigations(resources["s3"], BUCKET, prefix)
    finally:
        monkeypatch.undo()
        reset_caches()
    return out


def _investigations(s3: Any, bucket: str, prefix: str) -> dict[str, Any]:
    """How the run's investigations ended (succeeded, or the reason they stopped), and one error per reason."""
    outcomes: dict[str, int] = {}
    errors: dict[str, str] = {}
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "investigations/")
    for page in pages:
        for item in page.get("Contents", []):
            name = item["Key"].rsplit("/", 1)[1]
            if not name.endswith(".json") or ".attempt-" in name or name.count(".") > 1:
                continue
            found = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            if not isinstance(found, dict) or "success" not in found:
                continue
            how = "succeeded" if found.get("success") else str(found.get("stopped") or "failed")
            outcomes[how] = outcomes.get(how, 0) + 1
            if how != "succeeded":
                errors.setdefault(how, str(found.get("error") or "")[:300])
    statuses: dict[str, int] = {}
    try:
        report = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "issues.json")["Body"].read())
        for issue in report.get("issues", []):
            statuses[str(issue.get("status"))] = statuses.get(str(issue.get("status")), 0) + 1
    except Exception:  # no report written: the outcomes above say why
        pass
    return {"outcomes": outcomes, "errors": errors, "statuses": statuses}


def single_pass_flags(source: Path, work: Path) -> tuple[bytes, float, float]:
    """flags.csv of the same file read in one pass, locally (the profile step of `iterate analyze`), its wall
    time and this process's peak RSS meanwhile."""
    from iterate.agents import build_agents
    from iterate.pipeline import RunContext, profile_step
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    local_dir = work / f"local-{source.stem}"
    settings = Settings(
        chunk_bytes=2**40, workers=1, max_cells=int(os.environ.get("ITERATE_MAX_CELLS", 100_000_000))
    )
    ctx = RunContext(
        run_id="local",
        store=LocalArtifactStore(local_dir),
        agents=build_agents(settings),
        sandbox=None,  # type: ignore[arg-type]  # the profile step only offers the data to a sandbox that can
        settings=settings,
    )
    reset = _reset_peak_rss()
    t = time.perf_counter()
    profile_step(ctx, source)
    wall = time.perf_counter() - t
    peak = _status_mb("self", "VmHWM:") if reset else _peak_rss_mb()
    return (local_dir / "flags.csv").read_bytes(), wall, peak


def _head(source: Path, rows: int, target: Path) -> Path:
    """The header and the first `rows` rows of `source` (the bench file has no line break inside a value)."""
    with source.open("rb") as src, target.open("wb") as dst:
        for _ in range(rows + 1):
            line = src.readline()
            if not line:
                break
            dst.write(line)
    return target


def _report(run: dict[str, Any], concurrency: int) -> None:
    if run["status"] != "SUCCEEDED":
        print(f"[{run['label']}] run {run['status']}: {run.get('error')}")
        return
    name, size = run["biggest_state"]
    print(
        f"[{run['label']}] state machine under moto: {run['status']}, {run['wall_s']:.1f} s wall, "
        f"{len(run['manifest'])} chunks of {run['chunk_bytes'] / 2**20:g} MiB, chunk concurrency {concurrency}, "
        f"{run['sandbox_calls']} sandbox calls; largest state {size:,} bytes ({name})"
    )
    print(
        f"  upload (PutObject into moto, not part of the run): {run['upload_s']:.1f} s, peak RSS {run['upload_peak_mb']:,.0f} MB"
    )
    print(
        f"  peak RSS of this process during the execution: {run['peak_mb']:,.0f} MB (sampled every 0.25 s: "
        f"{run['sampled_peak_mb']:,.0f} MB; with the sandbox's processes: {run['tree_peak_mb']:,.0f} MB)"
    )
    for state in STATES:
        figures = run["states"].get(state)
        if figures:
            own, tree = figures["peak_mb"]
            print(f"  {state}: {figures['wall_s']:.1f} s, peak RSS {own:,.0f} MB (tree {tree:,.0f} MB)")
    own, tree = run["after_merge_peak_mb"]
    print(
        f"  after MergeChunks (understand, analyze, investigations, report): peak RSS {own:,.0f} MB (tree {tree:,.0f} MB)"
    )
    found = run.get("investigations") or {}
    outcomes = ", ".join(f"{n} {how}" for how, n in sorted(found.get("outcomes", {}).items()))
    print(f"  investigations: {outcomes or 'none'}")
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(found.get("statuses", {}).items()))
    print(f"  issues: {statuses or 'none'}")
    for how, error in found.get("errors", {}).items():
        print(f"    {how}, e.g.: {error}")
    for failure in run["failures"]:
        print(f"  a function raised (the run caught it): {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the bench file (~200 bytes each)")
    parser.add_argument(
        "--source", type=Path, help="a CSV already generated (gen_bench.py): --rows is ignored"
    )
    parser.add_argument("--chunk-mb", type=float, default=8.0, help="ITERATE_CHUNK_BYTES in MiB")
    parser.add_argument("--concurrency", type=int, default=2, help="the chunk Map's MaxConcurrency")
    parser.add_argument(
        "--investigate-concurrency",
        type=int,
        default=10,
        help="every other Map's MaxConcurrency (investigations)",
    )
    parser.add_argument("--measure", type=int, default=4, help="ranges measured again in a process each")
    parser.add_argument("--no-local", action="store_true", help="skip the whole file's local single pass")
    parser.add_argument(
        "--sample-rows", type=int, default=0, help="also run the file's first N rows, chunked"
    )
    parser.add_argument(
        "--sample-chunk-mb", type=float, default=4.0, help="ITERATE_CHUNK_BYTES for the sample"
    )
    parser.add_argument("--keep", type=Path, help="write the runs' flags.csv and figures (JSON) here")
    args = parser.parse_args(argv)

    from gen_bench import write

    work = Path(tempfile.mkdtemp(prefix="iterate-aws-chunked-", dir=args.keep))
    if args.source:
        source = args.source
    else:
        source = work / "orders.csv"
        t = time.perf_counter()
        write(source, n_rows=args.rows, seed=7)
        print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s")
    size = source.stat().st_size
    print(f"file {source}: {size / 2**20:,.1f} MiB", flush=True)

    run = run_under_moto(
        source, work, chunk_bytes=int(args.chunk_mb * 2**20), concurrency=args.concurrency,
        investigate_concurrency=args.investigate_concurrency, label="whole",
    )  # fmt: skip
    _report(run, args.concurrency)
    summary: dict[str, Any] = {"whole": {k: v for k, v in run.items() if k not in ("flags", "manifest")}}
    ok = run["status"] == "SUCCEEDED"
    if ok and args.keep:
        (work / "flags-moto.csv").write_bytes(run["flags"])

    # The same file, one pass, locally: the flags must be the same bytes.
    if ok and not args.no_local:
        local_flags, wall, peak = single_pass_flags(source, work)
        same = run["flags"] == local_flags
        print(
            f"local single pass: {wall:.1f} s, peak RSS {peak:,.0f} MB; flags.csv {len(local_flags):,} bytes; "
            f"equal to the chunked run under moto: {same}",
            flush=True,
        )
        summary["local"] = {"wall_s": wall, "peak_mb": peak, "flags_bytes": len(local_flags), "same": same}
        ok = ok and same

    # A sample of the file (its first rows) through the same chunked path, against its own single pass.
    if args.sample_rows:
        sample = _head(source, args.sample_rows, work / "sample.csv")
        small = run_under_moto(
            sample, work, chunk_bytes=int(args.sample_chunk_mb * 2**20), concurrency=args.concurrency,
            investigate_concurrency=args.investigate_concurrency, label="sample",
        )  # fmt: skip
        _report(small, args.concurrency)
        if small["status"] == "SUCCEEDED":
            local_flags, wall, _ = single_pass_flags(sample, work)
            same = small["flags"] == local_flags
            print(
                f"[sample] {args.sample_rows:,} rows, {sample.stat().st_size / 2**20:,.1f} MiB in "
                f"{len(small['manifest'])} chunks: flags.csv {len(small['flags']):,} bytes, equal to its single pass "
                f"({wall:.1f} s): {same}"
            )
            summary["sample"] = {
                **{k: v for k, v in small.items() if k not in ("flags", "manifest")},
                "rows": args.sample_rows, "same": same, "flags_bytes": len(small["flags"]),
            }  # fmt: skip
            ok = ok and same
        else:
            ok = False
    if args.keep:
        (work / "figures.json").write_text(json.dumps(summary, indent=2, default=str))
        print(f"kept in {work}")
    if run["status"] != "SUCCEEDED":
        return 1

    # Per chunk: the Map's wall (in-process, side by side with the others), then the chunk's work measured
    # alone in a fresh process (its peak RSS over the process's own start-up).
    width = len(source.open("rb").readline().split(b","))
    measured: dict[int, dict[str, Any]] = {}
    for item in run["manifest"][: args.measure]:
        done = subprocess.run(
            [sys.executable, "-c", _CHUNK_WORK, str(source), str(item["start"]), str(item["end"]),
             str(item["skip"]), "1" if item["last"] else "0", ",", str(width)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO / "layers")},
        )  # fmt: skip
        measured[item["index"]] = json.loads(done.stdout)
    print()
    print(
        "| chunk | MiB | rows | wall in the Map (s) | wall alone (s) | s per MiB | peak RSS over start-up (MB) | RSS MB per MiB | partial (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in run["timings"]:
        alone = measured.get(row["index"])
        extra = (
            f"{alone['wall_s']:.2f} | {alone['wall_s'] / row['mb']:.3f} | {alone['rss_mb']:.0f} | "
            f"{alone['rss_mb'] / row['mb']:.1f} | {alone['stored_mb']:.2f}"
            if alone
            else "- | - | - | - | -"
        )
        print(f"| {row['index']} | {row['mb']:.1f} | {row['rows']:,} | {row['map_wall_s']:.2f} | {extra} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
