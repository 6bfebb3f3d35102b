"""MergeChunks' own memory: the AWS merge of a large upload's partials, then its profile step, in a process alone.

Under moto (`make bench-aws`) every function runs in one process beside moto's S3, so the merge's peak cannot be
told from what the process kept of the upload and the states before it. Here the same code runs alone:

1. this process plans the file's ranges as ProfileDataset does (`plan_ranges`: ITERATE_CHUNK_BYTES, the same
   cuts) and parses each as a chunk function does (`parse_bytes` on the range's bytes, `write_partial`), into a
   directory laid out as the run's prefix (`chunks/manifest.json`, `chunks/part-NNNNN.arrow`);
2. a fresh process runs MergeChunks' body on it: `pipeline.bound_memory`, `iterate.aws.chunks.read_merged` (the
   partials fetched in file order, the digest streamed from the object meanwhile, `merge_columns`, the Table),
   then `pipeline.profile_read_step` (data.parquet, detection, the profile's statistics in a forked process,
   candidates, flags). S3 is a file-backed stand-in (ranged and whole GETs of the uploaded file; the
   run's artifacts as files), so nothing else lives in that process.

It prints the merge's and the profile step's wall time, the process's peak RSS after each (VmHWM), and the
peak PSS summed over the process and its children (the forked profile) sampled every 0.1 s, against the
profile function's memory (ITERATE_PROFILE_MEMORY_MB as deployed: 4,096 MB by default).

    python scripts/merge_memory.py --source big.csv [--chunk-mb 64] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import _WRAP, DEFAULT_FILE  # noqa: E402  (scripts/ is not a package: found beside this file)

BUCKET, KEY = "bench", "uploads/bench/d1/source.csv"
FUNCTION_MB = 4096  # the profile function's memory (infra: ProfileFunction), which runs MergeChunks


class _Body:
    def __init__(self, path: Path, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end

    def read(self) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            return fh.read(self.end - self.start)

    def iter_chunks(self, size: int):  # type: ignore[no-untyped-def]
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            left = self.end - self.start
            while left > 0:
                piece = fh.read(min(size, left))
                if not piece:
                    return
                left -= len(piece)
                yield piece


class FileS3:
    """get_object on the uploaded file (whole, or one `Range: bytes=a-b`), as boto3 answers it."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.size = source.stat().st_size

    def get_object(self, *, Bucket: str, Key: str, Range: str | None = None, **_: Any) -> dict[str, Any]:
        assert (Bucket, Key) == (BUCKET, KEY), (Bucket, Key)
        start, end = 0, self.size
        if Range is not None:
            first, last = Range.removeprefix("bytes=").split("-")
            start, end = int(first), min(int(last) + 1, self.size)
        return {"Body": _Body(self.source, start, end)}


def prepare(source: Path, run_dir: Path, chunk_bytes: int) -> dict[str, Any]:
    """The manifest and every range's partial, as ProfileDataset and the ProfileChunks Map leave them."""
    import functools

    from iterate.aws.chunks import MANIFEST, part_key
    from iterate.io.chunked import parse_bytes, write_partial
    from iterate.io.delimited import Dialect, chunk_options
    from iterate.io.limits import ReadLimits
    from iterate.io.reader import plan_ranges
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    store = LocalArtifactStore(run_dir)
    s3 = FileS3(source)
    size = s3.size

    def read_at(offset: int, length: int) -> bytes:
        return s3.get_object(Bucket=BUCKET, Key=KEY, Range=f"bytes={offset}-{offset + length - 1}")[
            "Body"
        ].read()

    limits = ReadLimits.from_settings(Settings.from_env())
    planned = plan_ranges(Path(source.name), size, read_at, limits=limits, chunk_bytes=chunk_bytes)
    if planned is None:
        raise SystemExit(f"{source} is read in one pass at {chunk_bytes:,}-byte chunks: nothing to merge")
    text, ranges = planned
    items = []
    options = functools.partial(chunk_options, text.layout.dialect, len(text.layout.names), text.encoding)
    started = time.perf_counter()
    for k, (start, end) in enumerate(ranges):
        item = {
            "index": k,
            "start": start,
            "end": end,
            "last": k == len(ranges) - 1,
            "skip": text.layout.header.lines if k == 0 else 0,
        }
        part = parse_bytes(
            read_at(start, end - start), last=item["last"], skip=item["skip"], options=options, threads=True
        )
        store.put_bytes(part_key(k), write_partial(part))
        items.append(item)
    store.put_bytes(MANIFEST, json.dumps(items).encode())
    dialect: Dialect = text.layout.dialect
    return {
        "size": size,
        "count": len(items),
        "parse": {
            "delimiter": dialect.delimiter,
            "quotechar": dialect.quotechar,
            "width": len(text.layout.names),
            "encoding": text.encoding,
        },
        "chunks_s": time.perf_counter() - started,
    }


def _hwm_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024


class _AnonPeak:
    """The process's largest anonymous memory (RssAnon) sampled every 0.02 s: what it cannot give back
    without swap. VmHWM also counts the pages of files it maps (a spilled table: Table.spill), which the
    kernel can drop under pressure."""

    def __init__(self) -> None:
        import threading

        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            with open("/proc/self/status") as fh:
                anon = next((int(line.split()[1]) for line in fh if line.startswith("RssAnon:")), 0) / 1024
            self.peak_mb = max(self.peak_mb, anon)
            self._stop.wait(0.02)

    def take(self) -> float:
        """The peak so far, and start again from now."""
        peak, self.peak_mb = self.peak_mb, 0.0
        return peak


def merge(source: Path, run_dir: Path, plan: dict[str, Any], out: Path) -> None:
    """MergeChunks' body (iterate.aws.steps.merge_chunks without the run record around it), timed."""
    started = time.perf_counter()
    from iterate import pipeline
    from iterate.agents import build_agents
    from iterate.aws.chunks import read_merged
    from iterate.aws.payloads import ChunkedRead, ChunkParseSettings, S3ObjectRef
    from iterate.settings import Settings
    from iterate.storage.local import LocalArtifactStore

    settings = Settings.from_env()
    imported = time.perf_counter()
    chunked = ChunkedRead(
        source=S3ObjectRef(bucket=BUCKET, key=KEY),
        fileName=source.name,
        size=plan["size"],
        manifestKey="chunks/manifest.json",
        count=plan["count"],
        parse=ChunkParseSettings(**plan["parse"]),
    )
    store = LocalArtifactStore(run_dir)
    anon = _AnonPeak()
    pipeline.bound_memory(chunked.size)
    table, why = read_merged(FileS3(source), store, chunked, settings)
    if table is None:
        raise SystemExit(f"not merged: {why}")
    merged = time.perf_counter()
    merged_hwm = _hwm_mb()
    merge_anon = anon.take()
    ctx = pipeline.RunContext(
        run_id="merge-memory",
        store=store,
        agents=build_agents(settings),
        sandbox=None,
        settings=settings,  # type: ignore[arg-type]
    )
    summary = pipeline.profile_read_step(ctx, table, source_name=source.name, started=imported)
    done = time.perf_counter()
    out.write_text(
        json.dumps(
            {
                "rows": summary.rowCount,
                "columns": summary.columnCount,
                "flagged_cells": summary.flaggedCells,
                "merge_s": merged - imported,
                "profile_s": done - merged,
                "merge_hwm_mb": merged_hwm,
                "end_hwm_mb": _hwm_mb(),
                "merge_anon_mb": merge_anon,
                "profile_anon_mb": anon.take(),
                "import_s": imported - started,
                "timings_ms": ctx.timings_ms,
            }
        )
    )


def measure(source: Path, chunk_mb: int, keep: Path | None = None) -> dict[str, Any]:
    """Partials made here, then MergeChunks' body in a fresh process: its figures, and the plan's."""
    source = source.resolve()
    run_dir = Path(keep or tempfile.mkdtemp(prefix="iterate-merge-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        plan = prepare(source, run_dir, chunk_mb * 2**20)
        (run_dir / "plan.json").write_text(json.dumps(plan))
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO / "layers") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        command = [sys.executable, __file__, "--source", str(source), "--merge-only", str(run_dir)]
        wrapped = subprocess.run(
            [sys.executable, "-c", _WRAP, *command], capture_output=True, text=True, env=env, check=True
        )
        process = json.loads(wrapped.stdout.strip().splitlines()[-1])
        if process["rc"] != 0:
            raise SystemExit(f"the merge failed: {process['stderr']}")
        result = json.loads((run_dir / "merge.json").read_text())
    finally:
        if keep is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return {**result, "plan": plan, "process": process}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a CSV larger than --chunk-mb")
    parser.add_argument("--chunk-mb", type=int, default=64)
    parser.add_argument("--keep", type=Path, help="keep the run directory here (partials, data.parquet)")
    parser.add_argument("--merge-only", type=Path, help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args(argv)
    source = args.source.resolve()
    if args.merge_only is not None:
        plan = json.loads((args.merge_only / "plan.json").read_text())
        merge(source, args.merge_only, plan, args.merge_only / "merge.json")
        return 0
    if not source.exists() and source == DEFAULT_FILE.resolve():
        from gen_bench import write  # the bench file `make bench` makes, made here when it is not there yet

        print(f"generating {source} (1,000,000 rows) ...", flush=True)
        write(source, 1_000_000)
    result = measure(source, args.chunk_mb, args.keep)
    plan, process = result["plan"], result["process"]
    tree = process["tree_pss_mb"]
    print(
        f"{source.name}: {result['rows']:,} rows x {result['columns']} columns, {plan['size'] / 2**20:,.0f} MiB,"
    )
    print(f"  {plan['count']} partials of {args.chunk_mb} MiB (parsed here in {plan['chunks_s']:.1f} s)")
    print("| MergeChunks, alone in a fresh process | figure |")
    print("|---|---|")
    print(f"| merge (partials fetched, digest streamed, merged) | {result['merge_s']:.1f} s |")
    print(
        f"| peak RSS once merged (VmHWM, mapped files' pages included) | {result['merge_hwm_mb']:,.0f} MB |"
    )
    print(f"| peak anonymous memory of the merge (RssAnon, sampled) | {result['merge_anon_mb']:,.0f} MB |")
    print(f"| profile step on the merged Table | {result['profile_s']:.1f} s |")
    print(
        f"| peak RSS of the process (VmHWM, mapped files' pages included) | {result['end_hwm_mb']:,.0f} MB |"
    )
    print(
        f"| peak anonymous memory of the profile step (RssAnon, sampled) | {result['profile_anon_mb']:,.0f} MB |"
    )
    print(
        f"| peak PSS, the process and its forked profile | {tree:,.0f} MB |" if tree else "| peak PSS | - |"
    )
    print(f"| wall, whole process (imports included) | {process['wall_s']:.1f} s |")
    print(f"| flagged cells (flags.csv rows) | {result['flagged_cells']:,} |")
    print(f"| the profile function's memory | {FUNCTION_MB:,} MB |")
    print(f"| profile step phases (ms) | {json.dumps(result['timings_ms'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
