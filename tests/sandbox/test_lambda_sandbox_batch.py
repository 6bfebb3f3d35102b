"""The sandbox Lambda's batch event: several template proofs of one run in one invocation, each with its verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from host_listener import Listener
from test_lambda_sandbox import (  # noqa: F401  (s3_dataset is a fixture)
    Context,
    _processes_of,
    _spawn_as,
    load_sandbox_handler,
    other_uid,
    s3_dataset,
)

from iterate.sandbox import (
    SandboxBatchEvent,
    SandboxBatchResult,
    SandboxLimits,
    run_batch_event,
    run_batch_in_clean_environment,
)

COUNT = "result = {'affected_rows': int((df[%r] == %r).sum()), 'cols': list(df.columns)}"
HANG = "while True:\n    pass\nresult = {'affected_rows': 0}"


def batch(url: str, codes: list[tuple[str, list[str]]], timeout_s: float = 10) -> dict[str, object]:
    return {
        "items": [{"code": code, "columns": columns} for code, columns in codes],
        "dataset": {"presigned_url": url, "columns": sorted({c for _, cols in codes for c in cols})},
        "timeout_s": timeout_s,
    }


@pytest.mark.handler
def test_a_batch_event_proves_each_item_on_its_own_columns_in_one_invocation(s3_dataset: str) -> None:  # noqa: F811
    # Given three template proofs of one run, on different columns
    event = batch(
        s3_dataset,
        [
            (COUNT % ("city", "Lyon"), ["city"]),
            (COUNT % ("note", ""), ["note"]),
            (COUNT % ("city", "x"), ["city"]),
        ],
    )
    # When the sandbox function handles them as one batch
    out = SandboxBatchResult.model_validate(load_sandbox_handler().lambda_handler(event, Context()))
    # Then each item has its own verdict, computed on the frame a single run with its columns would see
    assert [i is not None and i.success for i in out.items] == [True, True, True], out
    assert [i.output for i in out.items if i] == [
        {"affected_rows": 3, "cols": ["city"]},
        {"affected_rows": 0, "cols": ["note"]},
        {"affected_rows": 0, "cols": ["city"]},
    ]
    # And they shared one process (the batch's size says so)
    assert {i.batch_size for i in out.items if i} == {3}


@pytest.mark.handler
def test_a_proof_that_times_out_costs_the_others_of_its_batch_nothing(s3_dataset: str) -> None:  # noqa: F811
    # Given a batch in which one proof never ends
    event = batch(
        s3_dataset,
        [(COUNT % ("city", "Lyon"), ["city"]), (HANG, ["note"]), (COUNT % ("when", ""), ["when"])],
        2,
    )
    # When the function handles it (the batch process is stopped at the timeout)
    out = SandboxBatchResult.model_validate(load_sandbox_handler().lambda_handler(event, Context()))
    # Then the others are proved alone in the same invocation, and the endless one has its own timeout
    first, endless, last = out.items
    assert first is not None and first.success and first.output["affected_rows"] == 3
    assert last is not None and last.success
    assert endless is not None and not endless.success and endless.stopped == "timeout"
    # And each of those verdicts is the item's own run (no batch size), recorded as a single run's would be
    assert (first.batch_size, endless.batch_size, last.batch_size) == (None, None, None)


@pytest.mark.unit
def test_items_an_invocation_has_no_time_left_for_are_left_unsettled(tmp_path: Path, dataset: Path) -> None:
    # Given a batch whose process times out, in an invocation with too little time left to run items alone
    event = SandboxBatchEvent.model_validate(
        batch("https://x/data.parquet", [(COUNT % ("city", "Lyon"), ["city"]), (HANG, ["note"])], 2)
    )

    def fetch(url: str, target: Path) -> int:
        target.write_bytes(dataset.read_bytes())
        return dataset.stat().st_size

    event = event.model_copy(update={"dataset": event.dataset.model_copy(update={"columns": None})})
    event = event.model_copy(update={"items": [i.model_copy(update={"columns": None}) for i in event.items]})
    # When it runs
    out = run_batch_event(
        event,
        limits=SandboxLimits(timeout_s=2, namespaces=False, prefork=False),
        remaining_s=lambda: 5.5,
        fetch=fetch,
        scratch=str(tmp_path),
    )
    # Then no verdict is invented for them: each is None, for the caller to run in an invocation of its own
    assert out.items == [None, None]


@pytest.mark.unit
def test_a_batch_invocation_with_inprocess_checks_off_contains_a_hostile_item_and_leaves_nothing(
    tmp_path: Path,
    dataset: Path,
    other_uid: int,  # noqa: F811
) -> None:
    # Given a batch with a hostile item (a connection to the host), in-process checks and static policy off,
    # and an invocation during which something of the environment's uid is started and a file left in scratch
    scratch = tmp_path / "scratch"
    listener = Listener()
    accepted = listener.accepted
    hostile = (
        f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=1)\nresult = {{}}"
    )

    def fetch(url: str, target: Path) -> int:
        _spawn_as(other_uid, "setsid /bin/sleep 120 >/dev/null 2>&1 < /dev/null &")
        (scratch / "left-behind.txt").write_text("tenant A")
        target.write_bytes(dataset.read_bytes())
        return dataset.stat().st_size

    event = SandboxBatchEvent.model_validate(
        {
            "items": [
                {"code": COUNT % ("city", "Lyon")},
                {"code": hostile},
                {"code": COUNT % ("note", "")},
            ],
            "dataset": {"presigned_url": "https://x/data.parquet"},
            "timeout_s": 5,
        }
    )
    limits = SandboxLimits(
        timeout_s=5, namespaces=False, prefork=False, inprocess_checks=False, enforce_policy=False
    )
    try:
        # When it runs as the function runs it (the clean-environment wrapper, the Lambda's layer set)
        out = run_batch_in_clean_environment(
            event, limits=limits, scratch=scratch, remaining_s=lambda: 55.0, uid=other_uid, fetch=fetch
        )
    finally:
        listener.close()
    # Then the hostile item got nowhere, the others have their own results
    assert listener.accepted == accepted
    first, bad, last = out.items
    assert bad is None or not bad.success
    assert first is not None and first.success and first.output["affected_rows"] == 3
    assert last is not None and last.success
    # And afterwards no process of the uid and nothing in the scratch remain
    assert _processes_of(other_uid) == []
    assert list(scratch.iterdir()) == []
