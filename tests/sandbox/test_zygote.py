"""The pre-forking zygote: same verdicts as fresh processes, safe under threads, untouched by hostile runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits

pytestmark = pytest.mark.unit


def test_forked_and_fresh_runs_give_the_same_result(dataset: Path) -> None:
    code = "result = {'cities': sorted(set(df['city'])), 'n': len(df)}"
    with (
        LocalSandbox(SandboxLimits(timeout_s=10)) as forked,
        LocalSandbox(SandboxLimits(timeout_s=10, prefork=False)) as fresh,
    ):
        a = forked.run(code, DatasetRef(path=str(dataset)))
        b = fresh.run(code, DatasetRef(path=str(dataset)))
    assert a.success and b.success
    assert a.output == b.output


def test_concurrent_runs_do_not_mix_their_results(dataset: Path) -> None:
    # Given one sandbox shared by four threads, each asking a different question
    with LocalSandbox(SandboxLimits(timeout_s=20)) as sandbox:

        def ask(i: int) -> object:
            return sandbox.run(
                f"result = {{'i': {i}, 'n': len(df) * {i}}}", DatasetRef(path=str(dataset))
            ).output

        # When they run at the same time
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, range(8)))
    # Then each got its own answer
    assert answers == [{"i": i, "n": 8 * i} for i in range(8)]


def test_a_hostile_run_leaves_the_zygote_serving(dataset: Path) -> None:
    # Given a sandbox whose static policy is off, so the code reaches the forked process
    limits = SandboxLimits(timeout_s=2, memory_mb=256, enforce_policy=False)
    with LocalSandbox(limits) as sandbox:
        ref = DatasetRef(path=str(dataset))
        assert sandbox.run("result = {'ok': 1}", ref).success
        zygote = sandbox._zygote
        assert zygote is not None and zygote.alive()
        # When the code tries to kill its process group, its parent and to exhaust memory
        hostile = "o = pd.io.common.os\no.kill(0, 9)\no.kill(o.getppid(), 9)"
        assert not sandbox.run(hostile, ref).success
        assert not sandbox.run("x = 'a' * 10 ** 10", ref).success
        # Then the same zygote is still alive and the next run succeeds
        assert sandbox._zygote is zygote and zygote.alive()
        assert sandbox.run("result = {'ok': 2}", ref).output == {"ok": 2}
    # And closing the sandbox stops it
    assert not zygote.alive()
