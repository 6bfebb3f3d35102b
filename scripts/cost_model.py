"""`make cost-model`: what one run costs on AWS for 1 MB, 1 GB and 100 GB inputs, from costs measured here.

Measured on this machine, on two files of the bench generator (scripts/gen_bench.py; ~1 MB and --rows, default
1M rows ≈ 200 MB):
- a chunk's work: each 64 MiB range's parse and encoding (`iterate.io.chunked.parse_range`, timed around the
  real call while the file is read in ranges in-process), per MB;
- each step's time in an offline `iterate analyze` (analysis.json's timingsMs), the number of proofs, and how
  long a sandbox takes to load the run's data.parquet (what every RunInSandbox invocation does first);
- tokens of one LLM-mode run on the small file, through the real anthropic SDK against the tests' fake Messages
  server (tests/llm: its token counts are that server's estimate of each request and answer).

Times are CPU seconds (this machine is shared; a Lambda's CPU is its own), taken as a Lambda's billed seconds.
Then priced with iterate.aws.cost.PRICES at each function's configured memory (infra FUNCTION_SPECS). Step times
grow linearly with the input between the two measured sizes and beyond; tokens and the number of proofs do not
grow with rows. Prints a markdown table (docs/cost-model.md holds the one measured last, with its assumptions).

    .venv/bin/python scripts/cost_model.py [--rows 1000000] [--work out/cost-model]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `infra` (function memory) and `scripts` (the generators)
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

MB = 1024 * 1024
SIZES_MB = {"1 MB": 1.0, "1 GB": 1024.0, "100 GB": 102_400.0}
LAMBDA_MAX_MB = 10_240  # the largest memory a Lambda function can have
# What the merging profile function holds, per MB of CSV: where memory is short for the file it keeps the ranges,
# merged columns and table in mapped files (iterate.memory.memory_short), and MergeChunks alone on 10M rows
# (1,881 MiB of CSV) peaked at 0.9 GB of anonymous memory in the merge and 1.8 GB in the profile step
# (scripts/merge_memory.py, docs/large-files.md); with room to spare (3x the file) it holds them instead, ~1.6x
# the CSV. 1.0: the bound it works within where memory is what limits it (it was ~7.5x before the mapped files).
MERGE_MEMORY_PER_CSV = 1.0
# GenerateCode and RecordAttempt: the investigate function's two invocations per proof. Measured under moto
# (tests/statemachine, InvestigateDurationMs): 23-216 ms, most near 100 ms against moto's slow S3.
INVESTIGATE_CALL_S = 0.1
# Per-run requests outside proofs and chunks, measured by tests/statemachine/test_sfn_infra_cost.py on the
# sample orders run (5 proofs): about 50 S3 writes, 135 S3 reads, 70 DynamoDB writes, 30 reads.
BASE_REQUESTS = {
    "s3_write_request": 30,
    "s3_read_request": 60,
    "dynamo_write_request": 40,
    "dynamo_read_request": 10,
}
PER_PROOF_REQUESTS = {
    "s3_write_request": 4,
    "s3_read_request": 15,
    "dynamo_write_request": 6,
    "dynamo_read_request": 4,
}
# A chunk: its ranged GET and its PUT; the merge GETs it back.
PER_CHUNK_REQUESTS = {"s3_write_request": 1, "s3_read_request": 2}


@dataclass
class Measured:
    size_mb: float
    steps_s: dict[str, float]  # profile, understand, analyze, investigate, report (offline, local)
    proofs: int
    load_s: float  # a sandbox loading data.parquet
    parse_s_per_mb: float | None = None  # a chunk's parse, per MB of CSV


def _generate(rows: int, path: Path) -> None:
    from scripts.gen_bench import write

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, n_rows=rows)


def _timed_parse(path: Path) -> tuple[float, int]:
    """CPU seconds spent in parse_range over all ranges of a chunked in-process read (ranges of 64 MiB, or a
    quarter of a smaller file), and the number of ranges."""
    from iterate.io import chunked, read_table

    spent: list[float] = []
    real = chunked.parse_range

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent.append(time.process_time() - started)

    size = path.stat().st_size
    chunking = chunked.Chunking(chunk_bytes=min(chunked.DEFAULT_CHUNK_BYTES, size // 4), workers=1)
    chunked.parse_range = timed  # type: ignore[assignment]
    try:
        read_table(path, chunking=chunking)
    finally:
        chunked.parse_range = real  # type: ignore[assignment]
    return sum(spent), len(spent)


def _cpu() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _analyze(path: Path, out: Path) -> Measured:
    import pandas as pd

    from iterate.pipeline import run_local

    shutil.rmtree(out, ignore_errors=True)
    before = _cpu()
    result = run_local(path, out)
    cpu = _cpu() - before
    timings = dict(result.run.timingsMs) if result.run else {}
    wall = {
        k: float(timings.get(k, 0.0)) / 1000
        for k in ("profile", "understand", "analyze", "investigate", "report")
    }
    # CPU, not wall: this machine is shared, and a Lambda's CPU is its own. The run's CPU (its children's
    # included: the background profile, the sandbox) is shared out over the steps by their wall time.
    steps = {k: v * cpu / max(sum(wall.values()), 1e-9) for k, v in wall.items()}
    proofs = sum(1 for i in result.issues if i.investigation is not None)
    started = time.process_time()
    pd.read_parquet(out / "data.parquet")
    load_s = time.process_time() - started
    return Measured(size_mb=path.stat().st_size / MB, steps_s=steps, proofs=proofs, load_s=load_s)


def _tokens(path: Path, out: Path) -> dict[str, Any]:
    """Tokens and their list-price cost of one LLM-mode run (default product mode: templates prove detector
    issues), through the fake Messages server."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_library import run_once

    work = out / "llm"
    shutil.rmtree(work, ignore_errors=True)
    run_once(path, work / "run", library=work / "library", cache=work / "cache", prefer_templates=True)
    analysis = json.loads((work / "run" / "analysis.json").read_text(encoding="utf-8"))
    total = (analysis.get("run") or {}).get("usage", {}).get("total", {})
    return {
        "tokens": int(
            sum(
                int(total.get(k, 0))
                for k in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
            )
        ),
        "usd": float(total.get("costUsd", 0.0)),
    }


def _functions() -> tuple[dict[str, int], dict[str, int]]:
    """Each function's memory (MB) and timeout (s), as the stack deploys them."""
    from infra.constructs.functions import FUNCTION_SPECS

    memory = {s.name: s.memory_mb for s in FUNCTION_SPECS}
    timeout = {s.name: s.timeout_s for s in FUNCTION_SPECS}
    memory.setdefault(
        "chunk", memory["profile"]
    )  # a stack without the chunk function: priced as the profile one
    return memory, timeout


def _interpolate(small: float, large: float, small_mb: float, large_mb: float, size_mb: float) -> float:
    slope = (large - small) / (large_mb - small_mb)
    return max(small, small + slope * (size_mb - small_mb))


def model(
    small: Measured,
    large: Measured,
    tokens: dict[str, Any],
    memory: dict[str, int],
    timeout: dict[str, int],
    chunk_mb: float,
) -> list[dict[str, Any]]:
    from iterate.aws.cost import PRICES

    rows = []
    for label, size in SIZES_MB.items():

        def step(name: str, size: float = size) -> float:
            return _interpolate(small.steps_s[name], large.steps_s[name], small.size_mb, large.size_mb, size)

        chunks = math.ceil(size / chunk_mb) if size > chunk_mb else 0
        parse_s = (large.parse_s_per_mb or 0.0) * size if chunks else 0.0
        proofs = large.proofs
        load = _interpolate(small.load_s, large.load_s, small.size_mb, large.size_mb, size)
        # One Lambda merges and profiles the whole table, past its configured memory priced at what it would
        # need (at most Lambda's largest): MERGE_MEMORY_PER_CSV times the CSV.
        merge_mb = size * MERGE_MEMORY_PER_CSV
        merge_s = max(step("profile") - parse_s, 0.0)
        profile_memory = min(max(memory["profile"], merge_mb), LAMBDA_MAX_MB)
        gb_s = {
            "chunks": chunks * ((large.parse_s_per_mb or 0.0) * chunk_mb) * memory["chunk"] / 1024,
            # the merge and the profile: the single pass's time without the parse the chunks did
            "profile": merge_s * profile_memory / 1024,
            "understand": step("understand") * memory["understand"] / 1024,
            "analyze": step("analyze") * memory["analyze"] / 1024,
            "investigate": 2 * proofs * INVESTIGATE_CALL_S * memory["investigate"] / 1024,
            "sandbox": proofs * (load + 0.05) * memory["sandbox"] / 1024,
            "report": step("report") * memory["report"] / 1024,
        }
        invocations = 5 + chunks + 3 * proofs
        transitions = 7 + 2 * chunks + 6 * proofs
        requests = {
            k: BASE_REQUESTS.get(k, 0)
            + proofs * PER_PROOF_REQUESTS.get(k, 0)
            + chunks * PER_CHUNK_REQUESTS.get(k, 0)
            for k in set(BASE_REQUESTS) | set(PER_PROOF_REQUESTS) | set(PER_CHUNK_REQUESTS)
        }
        lambda_usd = sum(gb_s.values()) * PRICES["lambda_gb_second"] + invocations * PRICES["lambda_request"]
        sfn_usd = transitions * PRICES["state_transition"]
        requests_usd = sum(n * PRICES[k] for k, n in requests.items())
        rows.append(
            {
                "input": label,
                "chunks": chunks,
                "proofs": proofs,
                "lambda_gb_s": sum(gb_s.values()),
                "sandbox_gb_s": gb_s["sandbox"],
                "transitions": transitions,
                "s3_requests": requests["s3_write_request"] + requests["s3_read_request"],
                "dynamo_requests": requests["dynamo_write_request"] + requests["dynamo_read_request"],
                "infra_usd": lambda_usd + sfn_usd + requests_usd,
                "tokens": tokens["tokens"],
                "tokens_usd": tokens["usd"],
                "merge_s": merge_s,
                "merge_gb": merge_mb / 1024,
                "fits_one_merge_lambda": merge_mb <= LAMBDA_MAX_MB and merge_s <= timeout["profile"],
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| input | chunks | proofs | Lambda GB-s | of it sandbox | transitions | S3 requests | DynamoDB requests "
        "| infrastructure $ | tokens (LLM mode) | tokens $ | merge + profile s | its memory GB | fits one Lambda |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    body = "".join(
        f"| {r['input']} | {r['chunks']:,} | {r['proofs']} | {r['lambda_gb_s']:,.1f} | {r['sandbox_gb_s']:,.1f} "
        f"| {r['transitions']:,} | {r['s3_requests']:,} | {r['dynamo_requests']:,} | {r['infra_usd']:.4f} "
        f"| {r['tokens']:,} | {r['tokens_usd']:.4f} | {r['merge_s']:,.0f} | {r['merge_gb']:,.1f} | {'yes' if r['fits_one_merge_lambda'] else 'no'} |\n"
        for r in rows
    )
    return head + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the large measured file")
    parser.add_argument("--work", type=Path, default=REPO / "out" / "cost-model")
    args = parser.parse_args(argv)
    os.environ.setdefault("ITERATE_WORKERS", "1")  # the chunks are timed in-process, one at a time
    os.environ.pop("ANTHROPIC_API_KEY", None)  # the step timings are the offline engine's
    from iterate.io.chunked import DEFAULT_CHUNK_BYTES

    small_csv, large_csv = args.work / "small.csv", args.work / f"bench_{args.rows}.csv"
    _generate(5_000, small_csv)
    _generate(args.rows, large_csv)
    small = _analyze(small_csv, args.work / "small")
    large = _analyze(large_csv, args.work / "large")
    parse_s, ranges = _timed_parse(large_csv)
    large.parse_s_per_mb = parse_s / large.size_mb
    tokens = _tokens(small_csv, args.work)
    memory, timeout = _functions()
    print(f"measured: small {small.size_mb:.2f} MB, large {large.size_mb:.1f} MB (CPU seconds)")
    print(f"  chunk parse: {parse_s:.2f} s over {ranges} ranges, {large.parse_s_per_mb * 1000:.1f} ms per MB")
    for m, name in ((small, "small"), (large, "large")):
        steps = ", ".join(f"{k} {v:.2f} s" for k, v in m.steps_s.items())
        print(f"  {name}: {steps}; {m.proofs} proofs; data.parquet loads in {m.load_s:.2f} s")
    print(f"  LLM mode (fake server), small file: {tokens['tokens']:,} tokens, ${tokens['usd']:.4f}")
    print(f"  memory MB: {json.dumps(memory)}\n")
    print(table(model(small, large, tokens, memory, timeout, DEFAULT_CHUNK_BYTES / MB)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
