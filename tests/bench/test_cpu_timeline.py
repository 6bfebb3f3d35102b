"""scripts/cpu_timeline.py counts the CPU of a process tree, short-lived children included, once each."""

from __future__ import annotations

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
