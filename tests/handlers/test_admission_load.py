"""The load test, small (make test): uploads from several owners at once through admission under moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from awsenv import MOTO_CONFIG, base_env, create_resources, reset_caches
from load_driver import create_pass_machine, run_load
from moto import mock_aws

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Given the bucket, the table, the admission queue and a state machine, limits of 3 runs per owner and
    8 in all, a daily quota of 12 runs per owner, and waiting messages back after a second."""

    base_env(
        monkeypatch,
        ITERATE_MAX_CONCURRENT_RUNS="3",
        ITERATE_GLOBAL_CONCURRENT_RUNS="8",
        ITERATE_QUOTA_RUNS_PER_DAY="12",
        ITERATE_ADMISSION_RETRY_S="1",
    )
    with mock_aws(config={**MOTO_CONFIG, "stepfunctions": {"execute_state_machine": False}}):
        resources = create_resources()
        monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", create_pass_machine())
        reset_caches()
        yield resources
        reset_caches()


def test_a_burst_from_several_owners_is_queued_and_drained_within_the_limits(world: dict[str, Any]) -> None:
    # When 60 uploads from 6 owners arrive within 3 seconds (5 of them from one owner, 11 from each other;
    # one owner's 12th upload would pass its quota: none does here), runs lasting 0.3-1 s
    result = run_load(
        owners=6,
        uploads=60,
        window_s=3.0,
        owner_limit=3,
        global_limit=8,
        run_s=(0.3, 1.0),
        light_owner_uploads=5,
        broken_share=0.05,
        timeout_s=240,
    )
    print(result.table())
    # Then every run ended SUCCEEDED or with a user error, none for being busy, and many had to wait
    assert not result.other_failures, result.other_failures
    assert result.succeeded + result.user_errors == 60 and result.succeeded > 0
    assert result.queued > 0 and result.started == 60 - result.quota_rejected
    # And no owner, nor the deployment, ever went over its limit, and both were reached
    assert not result.over_limit, result.over_limit
    assert result.peak_global == 8 and result.peak_owner == 3
    # And the queue drained: no message, lease or queue entry is left; one execution per admitted run
    assert (result.left_in_queue, result.left_leases, result.left_queue_entries) == (0, 0, 0)
    assert result.left_slots_counted == 0
    assert result.executions == result.started


def test_uploads_over_the_daily_quota_are_recorded_as_the_users_failure(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a daily quota of 4 runs per owner
    monkeypatch.setenv("ITERATE_QUOTA_RUNS_PER_DAY", "4")
    reset_caches()
    # When one owner uploads 6 files at once (and another owner 6 too)
    result = run_load(
        owners=2,
        uploads=12,
        window_s=0.5,
        owner_limit=3,
        global_limit=8,
        run_s=(0.1, 0.3),
        light_owner_uploads=6,
        broken_share=0.0,
        duplicate_share=0.0,
        timeout_s=120,
    )
    # Then 4 of each owner's run and 2 are refused, recorded FAILED as QuotaExceededError (the user's)
    assert result.quota_rejected == 4 and result.succeeded == 8 and not result.other_failures
    from iterate.storage.dynamo import DynamoRunRepository

    refused = [r for r in DynamoRunRepository(world["table"], "o00").list_runs() if r["status"] == "FAILED"]
    assert len(refused) == 2 and {r["error"] for r in refused} == {"QuotaExceededError"}
    assert "daily quota of runs reached: 4 of 4 used today" in refused[0]["reason"]


def test_the_driver_reports_an_owner_over_its_limit(world: dict[str, Any]) -> None:
    # Given admission allowing each owner 3 runs at once, and a driver told the limit is 2 (the check must be
    # able to fail: the uploads and the queue's work run at once, their calls interleaved)
    result = run_load(
        owners=2,
        uploads=12,
        window_s=0.5,
        owner_limit=2,
        global_limit=8,
        run_s=(0.5, 1.0),
        light_owner_uploads=6,
        broken_share=0.0,
        duplicate_share=0.0,
        timeout_s=120,
    )
    # Then the runs over it are reported, with when
    assert result.over_limit and result.peak_owner == 3
    assert "one owner" in result.over_limit[0]
