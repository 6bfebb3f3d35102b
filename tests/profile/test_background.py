"""BackgroundProfile: the profile computed in a forked child equals the one computed in-process."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iterate.detect.context import dataset_null_marker
from iterate.profile import background
from iterate.profile.background import BackgroundProfile
from iterate.profile.dataset import profile_table
from iterate.table import SourceInfo, Table


def _table(n: int = 300) -> Table:
    data = {
        "id": [str(i) for i in range(n)],
        "amount": [f"{(i * 37) % 101}.5" if i % 50 else "N/A" for i in range(n)],
        "city": [("Paris", "Lyon", "Lille")[i % 3] for i in range(n)],
        "day": [f"2024-01-{1 + i % 28:02d}" for i in range(n)],
    }
    arrow = pa.table({k: pa.array(v, pa.string()) for k, v in data.items()})
    return Table.from_arrow(
        arrow, name="t", source=SourceInfo(path="t.csv", format="csv", content_hash="h", size_bytes=1)
    )


def test_the_forked_profile_is_the_in_process_profile() -> None:
    table = _table()
    marker = dataset_null_marker(table)
    pending = BackgroundProfile(table, marker)
    assert pending._process is not None  # it really ran in a child
    assert pending.result() == profile_table(table, null_marker=marker)
    assert pending._process.exitcode == 0


def test_a_child_that_fails_is_replaced_by_the_in_process_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise SystemExit(7)

    monkeypatch.setattr(background, "_child", broken)
    table = _table()
    pending = BackgroundProfile(table, "")
    assert pending._process is not None
    assert pending.result() == profile_table(table, null_marker="")
    assert pending._process.exitcode == 7


def test_long_tables_are_profiled_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "MAX_ROWS", 100)
    table = _table(300)
    pending = BackgroundProfile(table, "")
    assert pending._process is None
    assert pending.result() == profile_table(table, null_marker="")


def test_a_child_that_never_answers_is_stopped_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a child stuck forever (as on a lock another thread held when it was forked)
    def stuck(*_: object) -> None:
        import time

        time.sleep(3600)

    monkeypatch.setattr(background, "_child", stuck)
    table = _table()
    pending = BackgroundProfile(table, "")
    assert pending._process is not None
    # Then the caller stops waiting, kills it, and computes the same profile itself
    assert pending.result(wait_s=0.5) == profile_table(table, null_marker="")
    assert pending._process.exitcode is not None and pending._process.exitcode < 0
