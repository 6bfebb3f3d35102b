"""scripts/cpu_timeline.py counts the CPU of a process tree, short-lived children included, once each: exactly
through a cgroup's counter where one can be made, else by walking /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import cpu_timeline  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

# A parent that forks children one after the other, each burning ~40 ms of CPU, then burns ~0.2 s itself and
# reports what it and its reaped children used.
PARENT = """
import os, resource, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
NESTED = {nested}
for _ in range(10):
    pid = os.fork()
    if pid == 0:
        if NESTED:  # a process that forks the one doing the work, waits for it, and ends with it
            inner = os.fork()
            if inner == 0:
                burn(0.04)
                os._exit(0)
            os.waitpid(inner, 0)
        else:
            burn(0.04)
        os._exit(0)
    os.waitpid(pid, 0)
burn(0.2)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
self = resource.getrusage(resource.RUSAGE_SELF)
print(used.ru_utime + used.ru_stime + self.ru_utime + self.ru_stime, flush=True)
time.sleep(0.5)  # idle: the readings after this see everything it used
"""


@pytest.mark.parametrize("nested", [False, True])
def test_short_lived_children_are_counted_once(nested: bool) -> None:
    # nested: the worker and the process that forked it end between two readings, reaped one by the other
    # (as a sandbox runner and its launcher): the worker's CPU reaches the parent's count through both
    program = PARENT.replace("{nested}", str(nested))
    process = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    clock = cpu_timeline.TreeClock(process.pid)
    counted = 0.0
    while process.poll() is None:
        # Every 20 ms: each child is seen running once or twice, then counted again through its parent
        # (reaped) unless what was seen of it is taken off; and some start and end between two readings.
        time.sleep(0.02)
        counted += clock.read()
    actual = float(process.communicate()[0])
    # /proc counts in clock ticks: the parent's own time and its reaped children's each truncate (<= 2 ticks)
    assert abs(counted - actual) <= 0.06, (counted, actual)


# Children left to the kernel to reap (SIGCHLD ignored, as the sandbox's zygotes do): no parent's count of reaped
# children ever holds their CPU, so each reports its own through a pipe.
IGNORING = """
import os, signal, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
r, w = os.pipe()
for _ in range(10):
    if os.fork() == 0:
        burn(0.04)
        os.write(w, (repr(time.process_time()) + "\\n").encode())
        os._exit(0)
    time.sleep(0.01)
os.close(w)
with os.fdopen(r) as reports:
    children = sum(float(line) for line in reports)  # ends once every child has exited
burn(0.2)
print(children + time.process_time(), flush=True)
time.sleep(0.5)
"""


def test_the_cgroup_counter_counts_processes_the_kernel_reaped() -> None:
    # Given a fresh cgroup (skipped where none can be made: not root, or no cpuacct / delegated cpu controller)
    clock = cpu_timeline.CgroupClock.make(f"iterate-timeline-test-{os.getpid()}")
    if clock is None:
        pytest.skip("no cgroup with a CPU counter can be made here")
    try:
        # When a process whose children the kernel reaps runs in it, read every 20 ms
        process = subprocess.Popen(
            [sys.executable, "-c", IGNORING], stdout=subprocess.PIPE, text=True, preexec_fn=clock.join
        )
        counted = 0.0
        while process.poll() is None:
            time.sleep(0.02)
            counted += clock.read()
        counted += clock.read()
        actual = float(process.communicate()[0])
    finally:
        clock.remove()
    # Then everything is counted, the children included (the interpreter's exit is all that is extra)
    assert actual - 0.01 <= counted <= actual + 0.06, (counted, actual)


class FakeProc:
    """/proc as TreeClock reads it: pid -> (parent, own CPU s, reaped children's CPU s)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stats: dict[int, tuple[int, float, float]] = {}
        real_listdir = os.listdir
        monkeypatch.setattr(cpu_timeline, "_stat", lambda pid: self.stats.get(pid))
        monkeypatch.setattr(
            cpu_timeline.os,
            "listdir",
            lambda path: [str(p) for p in self.stats] if path == "/proc" else real_listdir(path),
        )


@pytest.mark.parametrize(
    ("reaped_grew", "expected"),
    [
        # the parent reaped it: its count grew by the child's whole 0.05 s, of which 0.03 s was seen already
        (0.05, 0.01 + 0.05 - 0.03),
        # the kernel reaped it: the parent's count did not grow; the 0.03 s seen stays, nothing is taken off
        (0.0, 0.01),
    ],
)
def test_a_gone_child_is_taken_off_only_where_its_parent_counted_it(
    monkeypatch: pytest.MonkeyPatch, reaped_grew: float, expected: float
) -> None:
    proc = FakeProc(monkeypatch)
    # Given a parent (pid 10) and a child (11) seen once with 0.03 s used
    proc.stats = {10: (1, 0.10, 0.0), 11: (10, 0.03, 0.0)}
    clock = cpu_timeline.TreeClock(10)
    first = clock.read()
    assert first == pytest.approx(0.13)
    # When the child has ended by the next reading and the parent used 0.01 s more
    proc.stats = {10: (1, 0.11, reaped_grew)}
    # Then the child is counted once: through the parent where it reaped it, else as far as it was seen
    assert clock.read() == pytest.approx(expected)
