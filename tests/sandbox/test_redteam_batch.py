"""Red team against the batch path: a hostile item among template proofs in one sandbox process.

With the in-process checks on, they refuse the hostile item inside the batch and the whole batch is
discarded (each item then runs alone, as today). With ITERATE_SANDBOX_INPROCESS_CHECKS=0 the OS layers
alone contain it: no connection reaches the host, a fork bomb is stopped, nothing outlives the batch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from host_listener import Listener

from iterate.contracts import DatasetProfile, DuplicateStats, Evidence, Issue
from iterate.investigate import investigate_all
from iterate.ports import DatasetRef
from iterate.sandbox import LocalSandbox, SandboxLimits
from iterate.settings import Settings

pytestmark = pytest.mark.redteam

BENIGN = "result = {'affected_rows': int((df[%r] == '').sum())}"
BASE = {"timeout_s": 3, "memory_mb": 1024, "max_output_bytes": 100_000, "setup_allowance_s": 8}


def limits_for(mode: str) -> SandboxLimits:
    checks = "0" if "nochecks" in mode else "1"
    settings = Settings.from_env({"ITERATE_SANDBOX_INPROCESS_CHECKS": checks})
    # The static policy is left out so that what runs in the batch process is what gets refused.
    extra: dict[str, object] = {"enforce_policy": False}
    if mode.startswith("nons"):
        extra.update(namespaces=False, prefork=False)  # as the sandbox Lambda runs
    return SandboxLimits.from_settings(settings, **BASE, **extra)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    made = Listener()
    yield made
    made.close()


def sandbox_for(mode: str, made: dict[str, LocalSandbox]) -> LocalSandbox:
    if mode not in made:
        made[mode] = LocalSandbox(limits_for(mode))
    return made[mode]


def codes_around(hostile: str) -> list[str]:
    return [BENIGN % "city", hostile, BENIGN % "note", BENIGN % "when"]


COLUMNS = [("city",), ("city",), ("note",), ("when",)]


@pytest.mark.parametrize("mode", ["ns", "nons"])
@pytest.mark.parametrize(
    "hostile",
    [
        pytest.param("pd.io.common.os.system('touch TARGET')", id="os-system"),
        pytest.param("pd.io.common.Path('TARGET').write_text('pwned')", id="file-write"),
        pytest.param("import socket\nsocket.create_connection(('127.0.0.1', PORT), timeout=1)", id="network"),
    ],
)
def test_inprocess_checks_refuse_a_hostile_item_and_discard_the_batch(
    hostile: str,
    mode: str,
    dataset: Path,
    tmp_path: Path,
    listener: Listener,
    sandboxes: dict[str, LocalSandbox],
) -> None:
    # Given a batch of template proofs with a hostile item among them, in-process checks on
    target = tmp_path / "pwned.txt"
    code = hostile.replace("TARGET", str(target)).replace("PORT", str(listener.port))
    accepted = listener.accepted
    sandbox = sandbox_for(mode, sandboxes)
    # When the batch runs
    outcome, items = sandbox.run_batch_detailed(
        codes_around(code), DatasetRef(path=str(dataset)), columns=COLUMNS
    )
    # Then the in-process layers refused it, and the batch as a whole failed: no item's result is kept
    assert outcome is not None
    assert outcome.investigation.stopped == "policy", outcome.investigation.error
    assert any("refused" in v for v in outcome.violations), outcome.violations
    assert len(items) == 4 and not any(i.success for i in items)
    assert all(i.stopped == "policy" and i.batch_size == 4 for i in items)
    # And nothing got out
    assert not target.exists()
    assert listener.accepted == accepted
    assert "verified empty" in outcome.supervisor.get("cleanup", ""), outcome.supervisor


def test_a_refused_batch_ends_as_single_runs_would(dataset: Path, sandboxes: dict[str, LocalSandbox]) -> None:
    # Given an agent whose templates include a hostile one (as if a template had gone wrong)
    codes = dict(zip(["a", "bad", "b", "c"], codes_around("pd.io.common.os.system('true')"), strict=True))
    columns = dict(zip(codes, COLUMNS, strict=True))

    class Agent:
        source = "template"

        def write_code(self, issue: Issue, *, profile: DatasetProfile, attempts: list[object]) -> str:
            return codes[issue.id]

    issues = [
        Issue(
            id=k,
            type="missing_values",
            severity="low",
            description="d",
            affectedColumns=list(columns[k]),
            suggestedAction="s",
            category="quick_fixes",
            affectedRows=1,
            evidence=Evidence(
                affectedCells=1, affectedRows=1, affectedShare=0.1, stats={"column": columns[k][0]}
            ),
        )
        for k in codes
    ]
    profile = DatasetProfile(
        name="t",
        rowCount=8,
        columnCount=5,
        contentHash="h",
        nullMarker="",
        columns=[],
        duplicates=DuplicateStats(exactRows=0, exactGroups=0, nearRows=0),
    )
    sandbox = sandbox_for("ns", sandboxes)
    kw = {"agent": Agent(), "sandbox": sandbox, "data": DatasetRef(path=str(dataset)), "profile": profile}
    # When investigated with and without batching
    batched = investigate_all(issues, batch=1, max_attempts=1, **kw)  # type: ignore[arg-type]
    alone = investigate_all(issues, batch=0, max_attempts=1, **kw)  # type: ignore[arg-type]
    # Then the hostile one is refused as it is alone, and the others are proved alone (batch discarded)
    for one, other in zip(batched, alone, strict=True):
        assert one.status == other.status
        assert one.investigation is not None and other.investigation is not None
        assert one.investigation.success == other.investigation.success
        assert one.investigation.stopped == other.investigation.stopped
        assert one.investigation.output == other.investigation.output
        assert one.investigation.batch_size is None
    assert batched[1].investigation.stopped == "policy"  # type: ignore[union-attr]


OS_GOALS = [
    pytest.param(
        "import socket\ns = socket.create_connection(('127.0.0.1', PORT), timeout=1)\nresult = {'affected_rows': 0}",
        id="network",
    ),
    pytest.param("import os\nwhile True:\n    os.fork()", id="fork-bomb"),
    pytest.param(
        "import os, time\npid = os.fork()\n"
        "if pid == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        os.write(2, b'OUTLIVER %d\\n' % os.getpid())\n        time.sleep(60)\n        os._exit(0)\n"
        "    os._exit(0)\nos.waitpid(pid, 0)\ntime.sleep(0.3)\nresult = {'affected_rows': 0}",
        id="lingering-process",
    ),
]


@pytest.mark.parametrize("mode", ["ns-nochecks", "nons-nochecks"])
@pytest.mark.parametrize("hostile", OS_GOALS)
def test_os_layers_contain_a_hostile_batch_item(
    hostile: str, mode: str, dataset: Path, listener: Listener, sandboxes: dict[str, LocalSandbox]
) -> None:
    # Given a batch with a hostile item and the in-process checks off (ITERATE_SANDBOX_INPROCESS_CHECKS=0)
    sandbox = sandbox_for(mode, sandboxes)
    assert not sandbox.limits.inprocess_checks
    accepted = listener.accepted
    code = hostile.replace("PORT", str(listener.port))
    # When the batch runs
    started = time.monotonic()
    outcome, items = sandbox.run_batch_detailed(
        codes_around(code), DatasetRef(path=str(dataset)), columns=COLUMNS
    )
    elapsed = time.monotonic() - started
    # Then no connection reached the host
    assert outcome is not None
    assert listener.accepted == accepted
    # And nothing outlived the batch: the processes it reported are gone, its cgroup or uid is empty
    for pid in map(int, re.findall(r"OUTLIVER (\d+)", outcome.stderr_tail)):
        assert not Path(f"/proc/{pid}").exists() or _not_sandboxed(pid), f"pid {pid} outlived the batch"
    assert not outcome.supervisor.get("leftovers"), outcome.supervisor
    assert "verified empty" in outcome.supervisor.get("cleanup", ""), outcome.supervisor
    # And what the OS layers saw fails the whole batch: no item's result is kept
    if "socket" in code or "while True" in code:
        assert outcome.investigation.stopped in {"policy", "timeout", "memory"}, outcome.investigation.error
        assert not any(i.success for i in items)
    assert elapsed < 30


def _not_sandboxed(pid: int) -> bool:
    from iterate.sandbox.oslayers import is_run_uid

    try:
        uids = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split("\n")[0].split()
    except (OSError, IndexError):
        return True
    return not any(is_run_uid(int(u)) for u in uids)


TEMPLATE = (
    'import json\nPARAMS = json.loads(\'{"column": "%s"}\')\n'
    "result = {'affected_rows': int((df[PARAMS['column']] == '').sum())}"
)
TAMPERING = [
    pytest.param(
        "import pandas\npandas.Series.sum = lambda self, *a, **k: 999\nresult = {'affected_rows': 0}",
        id="patch-pandas",
    ),
    pytest.param(
        "import builtins\nbuiltins.int = lambda *a: 999\nresult = {'affected_rows': 0}", id="patch-builtins"
    ),
    pytest.param(
        "import json\njson.loads = lambda s: {'column': 'note'}\nresult = {'affected_rows': 0}",
        id="patch-json",
    ),
    pytest.param(
        "import gc, pandas\nfor o in gc.get_objects():\n"
        "    if isinstance(o, pandas.DataFrame) and 'city' in o.columns:\n"
        "        o['city'] = ''\nresult = {'affected_rows': 0}",
        id="rewrite-every-frame",
    ),
]


@pytest.mark.parametrize("mode", ["ns-nochecks", "nons-nochecks"])
@pytest.mark.parametrize("hostile", TAMPERING)
def test_no_batch_item_can_change_another_items_count(
    hostile: str, mode: str, dataset: Path, sandboxes: dict[str, LocalSandbox]
) -> None:
    # Given template proofs and, between them, an item that tampers with what the others would use
    # (shared modules, builtins, the frame), with the in-process checks off
    sandbox = sandbox_for(mode, sandboxes)
    ref = DatasetRef(path=str(dataset))
    columns = [("city",), ("city",), ("city",), ("note",), ("when",)]
    codes = [TEMPLATE % "city", hostile, TEMPLATE % "city", TEMPLATE % "note", TEMPLATE % "when"]
    # When the batch runs
    outcome, items = sandbox.run_batch_detailed(codes, ref, columns=columns)
    # Then every template's count is the one it has alone
    assert outcome is not None and outcome.investigation.success, outcome.investigation.error
    assert outcome.isolation.get("batch") == "a process per item"
    for code, cols, item in zip(codes, columns, items, strict=True):
        if code is hostile:
            continue
        alone = sandbox.run(code, DatasetRef(path=str(dataset), columns=cols))
        assert item.success and alone.success, (item.error, alone.error)
        assert item.output == alone.output, code
