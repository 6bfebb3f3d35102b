"""`make timeline`: how many cores a whole `iterate analyze` keeps busy, second by second.

Runs the command given after `--` (default: `iterate analyze` on the 1M-row bench file), reads the CPU time of
its whole process tree (the sandbox's zygotes and runners included) from /proc every TICK seconds, and prints
one bar per bucket with the run's progress lines where they fall, then the stretches where less than
ONE_CORE of the machine's cores were busy: the phases that run on one core, where overlapping other work
costs no time (docs/large-files.md, "Filling the one-core phases", was found this way). Linux only.

Where a cgroup can be made (cgroup v1's cpuacct, or v2 with the cpu controller delegated), the command runs
in a fresh one and each reading is the cgroup's CPU counter: exact, every process included however short-lived
and however it ended (`CgroupClock`). Elsewhere the tree is walked in /proc (`TreeClock`): a process that starts
and ends between two readings (a proof forked from a zygote can take 20 ms) is counted when its parent reaps
it, through the parent's count of its reaped children's CPU, but one its parent leaves to the kernel to reap
(the sandbox's zygotes ignore SIGCHLD) is counted only as far as a reading saw it: such a phase reads low.
The header says which clock was used.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEFAULT_FILE = REPO / "bench" / "data" / "bench_1m.csv"
# A stretch counts as one-core when the tree used less than this many cores on average over it.
ONE_CORE = 1.3
HZ = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, CPU seconds it used, CPU seconds of its children it has reaped) of one process, None once
    it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / HZ, (int(fields[13]) + int(fields[14])) / HZ


class TreeClock:
    """CPU seconds used by a process tree between two readings, short-lived processes included: a process that
    ended between readings shows in its parent's count of reaped children's CPU; what was already counted of
    it while it ran (its last reading) is taken off, so nothing is counted twice."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.last: dict[
            int, tuple[int, float, float]
        ] = {}  # pid -> (parent, own, reaped) at the last reading

    def read(self) -> float:
        stats: dict[int, tuple[int, float, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                stat = _stat(int(entry))
                if stat is not None:
                    stats[int(entry)] = stat
        tree, grown = {self.root}, True
        while grown:
            more = {pid for pid, (parent, _, _) in stats.items() if parent in tree} - tree
            grown = bool(more)
            tree |= more
        used = 0.0
        grew: dict[
            int, float
        ] = {}  # pid -> its count of reaped children's CPU, growth since the last reading
        for pid in tree & stats.keys():
            _, own, reaped = stats[pid]
            _, own_before, reaped_before = self.last.get(pid, (0, 0.0, 0.0))
            grew[pid] = max(reaped - reaped_before, 0.0)
            used += max(own - own_before, 0.0) + grew[pid]
        # Processes gone since the last reading, by the ancestor still in the tree that reaped them.
        gone: dict[int, float] = {}
        for pid, (_, own, reaped) in self.last.items():
            if pid not in stats:
                keeper = self._reaped_in(pid, tree, stats)
                if keeper is not None:
                    gone[keeper] = gone.get(keeper, 0.0) + own + reaped
        for keeper, seen in gone.items():
            # Counted there in full (what was seen of them alive, and since): take the seen part off. Unless that
            # count did not grow by as much: the kernel reaped them (their parent ignores SIGCHLD) and nothing
            # of them reached it, so what was seen stays counted and the rest of their run is missed.
            if grew[keeper] >= seen - 2 / HZ:
                used -= seen
        self.last = {pid: stats[pid] for pid in tree if pid in stats}
        return max(used, 0.0)

    def _reaped_in(self, pid: int, tree: set[int], stats: dict[int, tuple[int, float, float]]) -> int | None:
        """The process in the tree that reaped a process gone since the last reading: its parent then, or the
        first of its ancestors then still there (a reaped process's count of reaped children carries its own,
        so a runner and the process that forked it, both ended, reach the zygote's count); None if outside."""
        seen: set[int] = set()
        while pid in self.last and pid not in stats and pid not in seen:
            seen.add(pid)
            pid = self.last[pid][0]
        return pid if pid in tree else None


class CgroupClock:
    """CPU seconds used by every process of a fresh cgroup between two readings, from the kernel's own
    counter (v1 `cpuacct.usage`, nanoseconds; v2 `cpu.stat` usage_usec, which counts descendant cgroups, so
    the sandbox's runner cgroups below it stay counted). `make()` returns None where no cgroup can be made."""

    def __init__(self, path: str, version: int) -> None:
        self.path, self.version = path, version
        self.last = self._total()

    @classmethod
    def make(cls, name: str) -> CgroupClock | None:
        from iterate.sandbox.oslayers import own_cgroups  # controller ('' for v2) -> this process's cgroup

        try:
            own = own_cgroups()
        except OSError:
            return None
        v1 = "/sys/fs/cgroup/cpuacct"
        if "cpuacct" in own and os.path.exists(os.path.join(v1, "cpuacct.usage")):
            path, version = os.path.join(v1, own["cpuacct"].lstrip("/"), name), 1
        elif "" in own and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            parent = os.path.join("/sys/fs/cgroup", own[""].lstrip("/"))
            try:
                with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
                    if "cpu" not in fh.read().split():
                        return None
            except OSError:
                return None
            path, version = os.path.join(parent, name), 2
        else:
            return None
        try:
            os.makedirs(path)
            return cls(path, version)
        except OSError:
            return None

    def _total(self) -> float:
        if self.version == 1:
            with open(os.path.join(self.path, "cpuacct.usage")) as fh:
                return int(fh.read()) / 1e9
        with open(os.path.join(self.path, "cpu.stat")) as fh:
            usage = dict(line.split() for line in fh)
        return int(usage["usage_usec"]) / 1e6

    def join(self) -> None:
        """Move the calling process into the cgroup (in a child before exec: all it starts is counted)."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))

    def read(self) -> float:
        total = self._total()
        used, self.last = total - self.last, total
        return max(used, 0.0)

    def remove(self) -> None:
        """Remove the cgroup (once every process of it has ended; retried briefly while the last exit)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tick", type=float, default=0.1, help="seconds between readings (default 0.1)")
    parser.add_argument("--bucket", type=float, default=0.5, help="seconds per printed bar (default 0.5)")
    parser.add_argument("command", nargs="*", help="the command to time (after --)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("cpu_timeline: reads /proc, Linux only", file=sys.stderr)
        return 2
    command = args.command or [
        str(BIN / "iterate"),
        "analyze",
        str(DEFAULT_FILE),
        "--out",
        str(REPO / "bench" / "out" / "timeline"),
    ]
    if not args.command and not DEFAULT_FILE.exists():
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "gen_bench.py"), "--out", str(DEFAULT_FILE)], check=True
        )
    cores = os.cpu_count() or 1
    exact = CgroupClock.make(f"iterate-timeline-{os.getpid()}")
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=exact.join if exact is not None else None,  # only the main thread runs yet
    )
    said: list[tuple[float, str]] = []

    def listen() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.append((time.perf_counter() - started, line.rstrip()))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    clock: CgroupClock | TreeClock = exact if exact is not None else TreeClock(process.pid)
    readings: list[tuple[float, float]] = []  # (seconds since start, cores used since the reading before)
    last = 0.0
    while process.poll() is None:
        time.sleep(args.tick)
        now = time.perf_counter() - started
        used = clock.read()
        readings.append((now, used / max(now - last, 1e-9)))
        last = now
    listener.join(timeout=5)
    wall = time.perf_counter() - started
    if exact is not None:
        exact.remove()
    how = (
        "cgroup CPU counter, exact"
        if exact is not None
        else "/proc tree walk, short auto-reaped processes missed"
    )

    buckets: dict[int, list[float]] = {}
    for at, busy in readings:
        buckets.setdefault(int(at / args.bucket), []).append(busy)
    lines = sorted(said)
    print(
        f"{' '.join(command)}\nexit {process.returncode}, {wall:.1f} s wall, {cores} cores; cores busy per "
        f"{args.bucket:g} s (# = 0.1 core; {how})"
    )
    for k in sorted(buckets):
        while lines and lines[0][0] < k * args.bucket:
            print(f"{lines[0][0]:7.2f}  >> {lines.pop(0)[1].strip()}")
        busy = sum(buckets[k]) / len(buckets[k])
        print(f"{k * args.bucket:7.2f}  {busy:4.2f} {'#' * round(busy * 10)}")
    for at, text in lines:
        print(f"{at:7.2f}  >> {text.strip()}")

    # Stretches of consecutive readings under ONE_CORE (the tree's own start-up included).
    low, spans = None, []
    for at, busy in [*readings, (wall, float(cores))]:
        if busy < ONE_CORE and low is None:
            low = at - args.tick
        elif busy >= ONE_CORE and low is not None:
            spans.append((max(low, 0.0), at - args.tick))
            low = None
    spans = [(a, b) for a, b in spans if b - a >= 2 * args.tick]
    total = sum(b - a for a, b in spans)
    print(f"\nless than {ONE_CORE} cores busy: {total:.1f} s of {wall:.1f} s in {len(spans)} stretches")
    for a, b in spans:
        print(f"  {a:7.2f} - {b:7.2f}  ({b - a:.1f} s)")
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
