"""Does a whole `iterate analyze` finish inside a hard memory limit? The laptop check of issue 14, for real.

Peak RSS or PSS sampled every 0.1 s misses short peaks and, at 10M rows, differs by up to 300 MB from run to
run. Here the run (the CLI, its forked profile, the sandbox's zygotes and runners: every process it starts) is
put in a memory cgroup of its own with a limit and no swap, as a laptop with that much free memory would be:
either it finishes, or the kernel kills it when it needs more than the limit after reclaiming what it can
(page cache of the input, clean file pages). The answer does not depend on sampling.

It prints whether the run finished (and its exit status), its wall time, the kernel's OOM kills in the group,
what its proofs did (how many succeeded, which stopped and why, which ran again: from analysis.json, not from the
issues' statuses, which stay "confirmed" when a proof fails), and two peaks over all the group's processes: anonymous memory (sampled every 0.05 s: what cannot be given
back without swap) and everything charged to the group (the kernel's own high-water mark, page cache of the
input included, so up to the limit on a large file).

Needs a writable memory cgroup (v1 `/sys/fs/cgroup/memory`, or v2 with the memory controller), as root in a
container or on a machine where the user has been delegated one; says so and exits 2 otherwise.

    python scripts/bound_run.py --rows 3000000 --mb 2048       # a generated bench file of that many rows
    python scripts/bound_run.py --source big.csv --mb 2048 -- --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# The group's task limit: far above what a run starts (the sandbox caps its own runs' tasks inside it).
MAX_TASKS = 4096


class Group:
    """A fresh cgroup below this process's own with `limit` bytes of memory and no swap: the sandbox's own
    `create_cgroup` (v1 memory + pids, or a delegated v2), read for what a bound run reports."""

    def __init__(self, limit: int) -> None:
        from iterate.sandbox.oslayers import create_cgroup

        cgroup = create_cgroup(f"iterate-bound-{os.getpid()}", memory_bytes=limit, max_tasks=MAX_TASKS)
        if cgroup is None:
            raise OSError("no memory and pids cgroup can be made here")
        self.cgroup = cgroup
        self.memory = cgroup.dirs["memory"]

    def anon(self) -> int:
        """Anonymous memory charged to the group now (bytes), all its processes together."""
        from iterate.memory import cgroup_anon

        return cgroup_anon(self.memory) or 0

    def peak(self) -> int | None:
        """The kernel's high-water mark of everything charged to the group (None where it keeps none)."""
        name = "memory.peak" if self.cgroup.version == 2 else "memory.max_usage_in_bytes"
        path = Path(self.memory) / name
        return int(path.read_text()) if path.exists() else None

    def oom_kills(self) -> int:
        return self.cgroup.events()["oom_kill"]

    def join_command(self, argv: list[str]) -> list[str]:
        """`argv` run from a shell that first moves itself into the group (so every process it starts is in it)."""
        joins = " && ".join(f"echo $$ > {shlex.quote(path)}" for path in self.cgroup.procs_files)
        quoted = " ".join(shlex.quote(a) for a in argv)
        return ["/bin/sh", "-c", f"{joins} && exec {quoted}"]

    def close(self) -> None:
        """Nothing left running in the group, then the group removed."""
        self.cgroup.kill_all()
        self.cgroup.remove()


def _source(args: argparse.Namespace) -> Path:
    if args.source is not None:
        return args.source
    path = REPO / "bench" / "data" / f"bench_{args.rows}.csv"
    if args.rows == 1_000_000:
        path = REPO / "bench" / "data" / "bench_1m.csv"
    if not path.exists():
        sys.path.insert(0, str(REPO / "scripts"))
        from gen_bench import write  # the generator `make bench` uses

        print(f"generating {path.name} ({args.rows:,} rows) ...", flush=True)
        write(path, args.rows)
    return path


@dataclass
class Bounded:
    """How a command ran in a memory cgroup of its own."""

    returncode: int
    oom_kills: int
    wall_s: float
    peak_anon: int  # bytes, sampled
    peak_charged: int | None  # bytes, the kernel's mark
    output: str

    def finished(self, ok_codes: tuple[int, ...] = (0,)) -> bool:
        return self.returncode in ok_codes and self.oom_kills == 0


def run_bounded(argv: list[str], limit: int) -> Bounded:
    """Run `argv` (and everything it starts) inside a fresh memory cgroup of `limit` bytes without swap.
    Raises OSError where no memory cgroup can be made."""
    group = Group(limit)
    peak_anon = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_anon
        while not done.is_set():
            with contextlib.suppress(OSError):
                peak_anon = max(peak_anon, group.anon())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        proc = subprocess.run(group.join_command(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        return Bounded(
            proc.returncode,
            group.oom_kills(),
            wall,
            peak_anon,
            group.peak(),
            proc.stdout.decode(errors="replace"),
        )
    finally:
        done.set()
        group.close()


def proofs_line(analysis: Path) -> str | None:
    """What the run's proofs did, from its analysis.json: how many succeeded, which stopped and why, which ran
    more than once (a proof stopped on memory beside others runs again alone). The issues' statuses cannot say:
    an issue the detection found stays "confirmed" when its proof fails. None when the run wrote no analysis."""
    import json

    try:
        issues = json.loads(analysis.read_text("utf-8"))["issues"]
    except (OSError, ValueError, KeyError):
        return None
    runs = [(i["id"], i.get("investigation")) for i in issues]
    proven = [(name, run) for name, run in runs if run is not None]
    ok = sum(1 for _, run in proven if run.get("success"))
    line = f"proofs: {ok} of {len(proven)} succeeded"
    failed = [f"{name} ({run.get('stopped') or 'failed'})" for name, run in proven if not run.get("success")]
    again = [name for name, run in proven if (run.get("attempts") or 1) > 1]
    if failed:
        line += "; not: " + ", ".join(failed)
    if again:
        line += "; ran more than once: " + ", ".join(again)
    return line


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, help="the file to analyze (default: a generated bench file)")
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of the generated bench file")
    parser.add_argument("--mb", type=int, default=2048, help="the memory limit in MiB (default 2048)")
    parser.add_argument(
        "--keep", type=Path, help="write the run here and keep it (default: a temporary directory)"
    )
    parser.add_argument("analyze_args", nargs="*", help="more arguments for iterate analyze (after --)")
    args = parser.parse_args()
    source = _source(args)
    if not source.is_file():
        print(f"bound_run: {source} is not a file: give --source an existing file, or --rows to generate one")
        return 2
    cells = os.environ.get("ITERATE_MAX_CELLS")
    print(
        f"{source.name}: {source.stat().st_size / 2**20:,.0f} MiB; limit {args.mb:,} MiB, no swap"
        + (f"; ITERATE_MAX_CELLS={cells}" if cells else ""),
        flush=True,
    )
    out = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="iterate-bound-"))
    argv = [str(BIN / "iterate"), "analyze", str(source), "--out", str(out), *args.analyze_args]
    try:
        result = run_bounded(argv, args.mb * 2**20)
        proofs = proofs_line(out / "analysis.json")
    except OSError as exc:
        print(f"bound_run: cannot make a memory cgroup here ({exc}); run it as root or in a delegated cgroup")
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)
    finished = result.finished((0, 3))  # 3: --fail-on's gate, a finished run
    print(
        f"  finished: {'yes' if finished else 'NO'} (exit {result.returncode}, OOM kills in the group: {result.oom_kills})"
    )
    print(f"  wall: {result.wall_s:.1f} s")
    print(
        f"  peak anonymous memory, all processes (sampled every 0.05 s): {result.peak_anon / 2**20:,.0f} MiB"
    )
    if result.peak_charged is not None:
        print(
            f"  peak charged to the group (kernel's mark, page cache included): {result.peak_charged / 2**20:,.0f} MiB"
        )
    if proofs:
        print(f"  {proofs}")
    if result.oom_kills and result.returncode == 0:
        print("  (the run finished, but the kernel killed one of its processes: see the run's proofs)")
    if not finished:
        for line in result.output.strip().splitlines()[-3:]:
            print(f"  | {line}")
    return 0 if finished else 1


if __name__ == "__main__":
    sys.exit(main())
