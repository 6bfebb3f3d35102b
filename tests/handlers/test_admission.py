"""Admission's parts over moto: run slots as leases, owners' queues, daily quotas, token buckets, the
admission function's intake, batches and releases."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from awsenv import (
    ADMISSION_QUEUE_URL,
    BUCKET,
    REGION,
    FakeContext,
    admit_queued,
    load_handler,
    object_created_event,
    reset_caches,
)

from iterate.storage.admission import (
    DailyUsage,
    DynamoTokenBucket,
    OwnerQueue,
    QuotaExceededError,
    QuotaLimits,
    SlotLeases,
    TokenBucketEmptyError,
)
from iterate.storage.dynamo import DynamoRunRepository

pytestmark = [pytest.mark.handler, pytest.mark.filterwarnings("ignore:No application metrics")]


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_run_slots_hold_both_limits_and_come_back_on_release(aws: dict[str, Any]) -> None:
    slots = SlotLeases(aws["table"])
    take = lambda owner, run: slots.acquire(owner, run, owner_limit=2, global_limit=3, ttl_s=600)  # noqa: E731
    # Given alice holding her two slots
    assert take("alice", "a1") and take("alice", "a2")
    # When she asks for a third / Then it is refused; a retried admission of a held run passes
    assert not take("alice", "a3")
    assert take("alice", "a2")
    # And bob takes the last global slot, after which nobody gets one
    assert take("bob", "b1") and not take("bob", "b2") and not take("carol", "c1")
    assert (slots.held(), slots.held("alice"), slots.held("bob")) == (3, 2, 1)
    # When a1 ends, its slots go back (once: a second release is a no-op) and alice's third run gets them
    assert slots.release("a1") and not slots.release("a1")
    assert take("alice", "a3")
    assert (slots.held(), slots.held("alice")) == (3, 2)


def test_a_refused_slot_says_which_limit_refused_it_and_one_read_tells_who_holds_and_who_waits(
    aws: dict[str, Any],
) -> None:
    from iterate.storage.admission import admission_state, waiting_owners

    slots = SlotLeases(aws["table"])
    take = lambda owner, run: slots.take(owner, run, owner_limit=2, global_limit=3, ttl_s=600)  # noqa: E731
    # Given alice holding her two slots and bob one, the last of three
    assert [take("alice", "a1"), take("alice", "a2"), take("bob", "b1")] == ["held"] * 3
    # When alice asks again after a release elsewhere / Then her own limit refuses her, not the deployment's
    assert slots.release("b1") and take("alice", "a3") == "owner_full"
    # When bob asks twice / Then the second is refused by the deployment's limit (every later run waits too)
    assert take("bob", "b2") == "held" and take("carol", "c1") == "full"
    # And one read of the admission partition tells who holds the slots and who waits, as the two reads did
    OwnerQueue(aws["table"], "carol").add("c1", 5)
    state = admission_state(aws["table"])
    assert sorted(state.holders) == sorted(str(lease["owner"]) for lease in slots.leases())
    assert sorted(state.holders) == ["alice", "alice", "bob"]
    assert state.waiting == waiting_owners(aws["table"]) == {"carol": (1, 5)}


def test_a_lease_whose_every_release_was_lost_expires(aws: dict[str, Any]) -> None:
    clock = Clock()
    slots = SlotLeases(aws["table"], clock=clock)
    # Given alice's only slot held by a run whose release never came
    assert slots.acquire("alice", "lost", owner_limit=1, global_limit=10, ttl_s=600)
    assert not slots.acquire("alice", "next", owner_limit=1, global_limit=10, ttl_s=600)
    # When its lease runs out / Then the next admission sweeps it and takes the slot
    clock.now += 601
    assert slots.acquire("alice", "next", owner_limit=1, global_limit=10, ttl_s=600)
    assert [lease["runId"] for lease in slots.leases()] == ["next"] and slots.held("alice") == 1


def test_an_owners_queue_gives_each_waiting_run_its_place(aws: dict[str, Any]) -> None:
    queue = OwnerQueue(aws["table"], "alice")
    keys = [queue.add(f"r{i}", 1000 + i) for i in range(3)]
    OwnerQueue(aws["table"], "bob").add("b0", 1)  # another owner's queue is his own
    assert [queue.place(k) for k in keys] == [1, 2, 3] and queue.waiting() == 3
    queue.remove(keys[0])
    assert [queue.place(k) for k in keys[1:]] == [1, 2]


def test_daily_quotas_refuse_the_run_that_would_pass_one_and_reset_the_next_day(aws: dict[str, Any]) -> None:
    clock = Clock(1_800_000_000.0)  # 2027-01-15T08:00:00Z
    usage = DailyUsage(aws["table"], "alice", clock=clock)
    limits = QuotaLimits(runs=3, bytes=1000, tokens=500)
    usage.charge_run(400, limits)
    usage.charge_run(500, limits)
    # When a run would pass the bytes quota / Then it is refused naming it; nothing of it is counted
    with pytest.raises(QuotaExceededError) as refused:
        usage.charge_run(200, limits)
    assert (refused.value.quota, refused.value.limit, refused.value.used) == ("bytes", 1000, 900)
    assert refused.value.resets_at == "2027-01-16T00:00:00Z" and "this run needs 200 more" in str(
        refused.value
    )
    # And a file larger than the whole quota is refused outright
    with pytest.raises(QuotaExceededError, match="bytes"):
        usage.charge_run(5000, limits)
    # And once the LLM tokens are used up, no run starts, whatever its size
    usage.add_tokens(500)
    with pytest.raises(QuotaExceededError) as tokens:
        usage.charge_run(1, limits)
    assert tokens.value.quota == "tokens"
    assert usage.today() == {"runs": 2, "bytes": 900, "tokens": 500}
    # When the day turns / Then everything is allowed again
    clock.now += 86400
    usage.charge_run(900, limits)
    assert usage.today() == {"runs": 1, "bytes": 900, "tokens": 0}


def test_the_token_bucket_waits_for_its_refill_and_refuses_past_the_longest_wait(aws: dict[str, Any]) -> None:
    clock = Clock()
    bucket = DynamoTokenBucket(
        aws["table"], rate=100, capacity=1000, max_wait_s=5, clock=clock, sleep=clock.sleep
    )
    # Given a full bucket: a call takes what it needs at once
    assert bucket.take(900) == 0
    # When the next call needs more than is left / Then it waits for the refill (1 s for 100 tokens)
    assert bucket.take(200) == pytest.approx(1.0)
    # And a call that would wait longer than allowed is refused, saying when to come back
    with pytest.raises(TokenBucketEmptyError) as empty:
        bucket.take(1000)
    assert empty.value.retry_after_s == pytest.approx(10.0)
    # And a second bucket on the same table (another function) sees the same level
    other = DynamoTokenBucket(aws["table"], rate=100, capacity=1000, max_wait_s=0, clock=clock)
    with pytest.raises(TokenBucketEmptyError):
        other.take(10)


def test_the_anthropic_adapter_asks_the_gate_before_each_call_and_a_refusal_is_retryable() -> None:
    from iterate.llm.anthropic import AnthropicLLM, estimate_tokens
    from iterate.llm.errors import RetryableLLMError
    from iterate.llm.types import LLMRequest

    asked: list[int] = []

    def gate(tokens: int) -> None:
        asked.append(tokens)
        raise TokenBucketEmptyError("the deployment's LLM token rate is used up", retry_after_s=3)

    llm = AnthropicLLM(api_key="sk-test", model="m", base_url="http://127.0.0.1:9", gate=gate, max_retries=0)
    request = LLMRequest(
        agent="understanding",
        system="x" * 400,
        messages=[{"role": "user", "content": "y" * 400}],
        max_tokens=50,
    )
    with pytest.raises(RetryableLLMError, match="LLM rate"):
        llm.complete(request)
    assert asked == [estimate_tokens(request)] and 200 < asked[0] < 300


def _event(key: str, version: str, event_id: str, size: int = 10) -> dict[str, Any]:
    event = object_created_event(BUCKET, key, version, event_id=event_id)
    event["detail"]["object"]["size"] = size
    return event


def _admission(event: dict[str, Any]) -> dict[str, Any]:
    return dict(load_handler("admission").lambda_handler(event, FakeContext("iterate-admission")))


@pytest.fixture
def machine(aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    """A state machine admission can start (moto records the executions)."""
    import boto3

    role = boto3.client("iam", region_name=REGION).create_role(RoleName="r", AssumeRolePolicyDocument="{}")
    arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name="iterate-analysis",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn=role["Role"]["Arn"],
    )["stateMachineArn"]
    monkeypatch.setenv("ITERATE_STATE_MACHINE_ARN", arn)
    reset_caches()
    return str(arn)


def test_an_upload_is_queued_once_started_by_admission_and_released_when_it_ends(
    aws: dict[str, Any], machine: str
) -> None:
    import boto3

    # When an upload's event arrives, and again with another event id (S3 may send it twice)
    first = _admission(_event("uploads/alice/orders/a.csv", "v1", "e-1"))
    again = _admission(_event("uploads/alice/orders/a.csv", "v1", "e-2"))
    # Then one run is QUEUED, first in alice's queue; the repeat is a duplicate
    assert first["outcome"] == "queued" and again == {
        **again,
        "outcome": "duplicate",
        "runId": first["runId"],
    }
    repo = DynamoRunRepository(aws["table"], "alice")
    run = repo.require_run(first["runId"])
    assert run["status"] == "QUEUED" and run["trigger"] == "s3" and run["sizeBytes"] == 10
    assert OwnerQueue(aws["table"], "alice").place(run["queueKey"]) == 1
    # When admission takes it / Then its execution (named after the run) starts with the run request
    assert admit_queued() == [first["runId"]]
    sfn = boto3.client("stepfunctions", region_name=REGION)
    execution = sfn.describe_execution(
        executionArn=f"{machine.replace(':stateMachine:', ':execution:')}:{first['runId']}"
    )
    sent = json.loads(execution["input"])
    assert sent["trigger"] == "s3" and sent["owner"] == "alice" and sent["source"]["versionId"] == "v1"
    assert SlotLeases(aws["table"]).held("alice") == 1 and OwnerQueue(aws["table"], "alice").waiting() == 0
    # When the execution ends without the run recording it (it timed out) / Then the status rule frees the
    # slot and marks the run FAILED, so it never looks alive
    repo.transition(first["runId"], from_status="QUEUED", to_status="RUNNING")
    released = _admission(
        {
            "source": "aws.states",
            "detail-type": "Step Functions Execution Status Change",
            "detail": {"name": first["runId"], "status": "TIMED_OUT"},
        }
    )
    assert released == {"released": True} and SlotLeases(aws["table"]).held() == 0
    ended = repo.require_run(first["runId"])
    assert ended["status"] == "FAILED" and ended["error"] == "States.Timeout"


def test_an_uploads_intake_writes_all_of_its_records_or_none(aws: dict[str, Any], machine: str) -> None:
    import boto3

    from iterate.storage.admission import GLOBAL_PK, WAITING_PREFIX, waiting_owners

    table = aws["table"]
    waiting_key = {"PK": GLOBAL_PK, "SK": f"{WAITING_PREFIX}alice"}
    # Given alice's waiting counter broken (not a number), so the last write of her next intake fails
    table.put_item(Item={**waiting_key, "waiting": "many", "owner": "alice"})
    event = _event("uploads/alice/orders/a.csv", "v1", "e-1")
    # When her upload's event arrives / Then it fails, and nothing of it is left: no claim, no run, no
    # charge against her quota, no queue entry, no message
    with pytest.raises(Exception, match=r"(?i)validation|type"):
        _admission(event)
    items = table.scan()["Items"]
    assert [(i["PK"], i["SK"]) for i in items if i["PK"] != "GLOBAL#admission"] == []
    sqs = boto3.client("sqs", region_name=REGION)
    assert (
        sqs.get_queue_attributes(
            QueueUrl=ADMISSION_QUEUE_URL, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        == "0"
    )
    # When the event is delivered again once the counter is mended / Then the run is queued, charged once
    table.delete_item(Key=waiting_key)
    queued = _admission(event)
    assert queued["outcome"] == "queued"
    assert DailyUsage(table, "alice").today()["runs"] == 1 and waiting_owners(table)["alice"][0] == 1
    # And a retried delivery of the same event (its claim is this event's) queues nothing more
    assert _admission(event) == {**queued, "outcome": "queued"}
    assert DailyUsage(table, "alice").today()["runs"] == 1 and OwnerQueue(table, "alice").waiting() == 1
    assert admit_queued() == [queued["runId"]]


def test_a_run_cancelled_while_it_waited_is_dropped_by_admission(aws: dict[str, Any], machine: str) -> None:
    import boto3

    queued = _admission(_event("uploads/alice/orders/a.csv", "v1", "e-1"))
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.transition(queued["runId"], from_status="QUEUED", to_status="CANCELLED")
    # When its message comes up / Then nothing starts and no slot is held; the message is gone
    assert admit_queued() == [queued["runId"]]  # (deleted from the queue: dropped, not retried)
    sfn = boto3.client("stepfunctions", region_name=REGION)
    assert sfn.list_executions(stateMachineArn=machine)["executions"] == []
    assert SlotLeases(aws["table"]).held() == 0 and OwnerQueue(aws["table"], "alice").waiting() == 0
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=ADMISSION_QUEUE_URL, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


def test_an_upload_outside_an_owner_prefix_is_refused_and_not_retried(
    aws: dict[str, Any], machine: str
) -> None:
    answer = _admission(_event("uploads/loose.csv", "v1", "e-1"))
    assert answer["outcome"] == "rejected" and "InvalidUploadKeyError" in answer["reason"]


def test_a_batch_keeps_each_owners_order_and_stops_at_the_global_limit(
    aws: dict[str, Any], machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given limits of 1 per owner and 2 in all, and three uploads of alice then one of bob, one of carol
    monkeypatch.setenv("ITERATE_MAX_CONCURRENT_RUNS", "1")
    monkeypatch.setenv("ITERATE_GLOBAL_CONCURRENT_RUNS", "2")
    reset_caches()
    ids = [
        _admission(_event(f"uploads/{owner}/d/{n}.csv", "v1", f"e-{owner}-{n}"))["runId"]
        for owner, n in (("alice", 1), ("alice", 2), ("alice", 3), ("bob", 1), ("carol", 1))
    ]
    # When admission works through the queue / Then alice's first and bob's start; alice's others keep their
    # order behind her first, carol waits for a global slot
    assert admit_queued() == [ids[0], ids[3]]
    repo = DynamoRunRepository(aws["table"], "alice")
    places = [OwnerQueue(aws["table"], "alice").place(repo.require_run(i)["queueKey"]) for i in ids[1:3]]
    assert places == [1, 2]


def test_an_execution_aborted_by_hand_after_its_slots_were_freed_still_ends_its_run(
    aws: dict[str, Any], machine: str
) -> None:
    # Given a run RUNNING whose slots are gone (released already), its execution aborted in the console
    queued = _admission(_event("uploads/alice/orders/a.csv", "v1", "e-1"))
    assert admit_queued() == [queued["runId"]]
    repo = DynamoRunRepository(aws["table"], "alice")
    repo.transition(queued["runId"], from_status="QUEUED", to_status="RUNNING")
    SlotLeases(aws["table"]).release(queued["runId"])
    # When the execution-status event arrives (its input names the owner)
    answer = _admission(
        {
            "source": "aws.states",
            "detail-type": "Step Functions Execution Status Change",
            "detail": {
                "name": queued["runId"],
                "status": "ABORTED",
                "input": json.dumps({"trigger": "s3", "owner": "alice", "datasetId": "orders"}),
            },
        }
    )
    # Then nothing is released twice, and the run is FAILED saying how its execution ended
    assert answer == {"released": False}
    ended = repo.require_run(queued["runId"])
    assert ended["status"] == "FAILED" and ended["error"] == "ExecutionAborted"


def test_an_execution_aborted_or_timed_out_on_the_engine_path_leaves_none_of_its_tables(
    aws: dict[str, Any], machine: str
) -> None:
    import boto3

    from iterate.aws.engine_tables import glue_names, marks

    # Given two runs RUNNING on the engine path, each with its Glue tables registered
    glue = boto3.client("glue", region_name=REGION)
    glue.create_database(DatabaseInput={"Name": "iterate_engine"})
    repo = DynamoRunRepository(aws["table"], "alice")
    runs = []
    for n, status in enumerate(("ABORTED", "TIMED_OUT")):
        queued = _admission(_event(f"uploads/alice/orders/{n}.csv", f"v{n}", f"e-{n}"))
        runs.append((queued["runId"], status))
        for name in list(glue_names(queued["runId"]).values())[:2]:
            glue.create_table(
                DatabaseName="iterate_engine",
                TableInput={"Name": name, "Parameters": marks("alice", queued["runId"])},
            )
    assert sorted(admit_queued()) == sorted(r for r, _ in runs)
    for run_id, _ in runs:
        repo.transition(run_id, from_status="QUEUED", to_status="RUNNING")
    for run_id, status in runs:
        # When its execution ends without RecordFailure (stopped by hand, or past the run's timeout)
        _admission(
            {
                "source": "aws.states",
                "detail-type": "Step Functions Execution Status Change",
                "detail": {"name": run_id, "status": status, "input": json.dumps({"owner": "alice"})},
            }
        )
        # Then its tables are gone, and the other run's are still there until its own end
        left = {t["Name"] for t in glue.get_tables(DatabaseName="iterate_engine")["TableList"]}
        assert not any(name.startswith(glue_names(run_id)["stem"] + "_") for name in left)
    assert glue.get_tables(DatabaseName="iterate_engine")["TableList"] == []


def test_a_freed_slot_goes_to_the_waiting_owner_with_the_fewest_runs_not_the_first_message(
    aws: dict[str, Any], machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given limits of 2 per owner and 3 in all: alice holds 2 slots, bob 1; then alice queues a third run,
    # carol (none running) one after it
    monkeypatch.setenv("ITERATE_MAX_CONCURRENT_RUNS", "3")
    monkeypatch.setenv("ITERATE_GLOBAL_CONCURRENT_RUNS", "3")
    monkeypatch.setenv("ITERATE_ADMISSION_RETRY_S", "1")
    reset_caches()
    first = [
        _admission(_event(f"uploads/{o}/d/{n}.csv", "v1", f"e-{o}-{n}"))["runId"]
        for o, n in (("alice", 1), ("alice", 2), ("bob", 1))
    ]
    assert admit_queued() == first
    waiting = [
        _admission(_event(f"uploads/{o}/d/{n}.csv", "v1", f"e-{o}-{n}"))["runId"]
        for o, n in (("alice", 3), ("carol", 1))
    ]
    assert admit_queued(rounds=1) == []  # the deployment is full: both wait
    # When one of bob's slots frees (and the waiting messages come back)
    SlotLeases(aws["table"]).release(first[2])
    time.sleep(1.2)
    # Then carol's run takes it although alice's message came first: alice keeps waiting
    assert admit_queued(rounds=3) == [waiting[1]]
    slots = SlotLeases(aws["table"])
    assert (slots.held("carol"), slots.held("alice")) == (1, 2)
    assert DynamoRunRepository(aws["table"], "alice").require_run(waiting[0])["status"] == "QUEUED"


def test_waiting_owners_are_counted_once_per_queued_run_and_forgotten_when_their_queue_empties(
    aws: dict[str, Any],
) -> None:
    from iterate.storage.admission import waiting_owners

    alice, bob = OwnerQueue(aws["table"], "alice"), OwnerQueue(aws["table"], "bob")
    a1, a2 = alice.add("a1", 1), alice.add("a2", 2)
    alice.add("a1", 1)  # added again (a retried intake): counted once
    b1 = bob.add("b1", 3)
    # (each with when its waiting began: its first run queued)
    assert waiting_owners(aws["table"]) == {"alice": (2, 1), "bob": (1, 3)}
    alice.remove(a1)
    alice.remove(a1)  # removed again: counted once
    bob.remove(b1)
    assert waiting_owners(aws["table"]) == {"alice": (1, 1)}
    alice.remove(a2)
    assert waiting_owners(aws["table"]) == {}


def test_a_free_slot_is_kept_for_a_waiting_owner_with_fewer_runs() -> None:
    from iterate.aws.admission import FairShare

    # Given one free slot, alice running 2 and bob none, both waiting
    share = FairShare(free=1, running=Counter({"alice": 2}), waiting={"alice": 4, "bob": 1}, owner_limit=5)
    # Then alice's message leaves it to bob, whose message takes it
    assert not share.turn("alice") and share.turn("bob")
    share.started("bob")
    # And with no slot free, the lease decides (it refuses)
    assert share.free == 0 and share.waiting == {"alice": 4} and share.turn("alice")
    # Given two free slots and one owner ahead of alice, one slot is alice's
    assert FairShare(free=2, running=Counter({"alice": 2}), waiting={"alice": 1, "bob": 1}).turn("alice")
    # And an owner at its own limit is ahead of nobody (it cannot take a slot anyway)
    at_limit = FairShare(free=1, running=Counter({"alice": 3, "bob": 2}), waiting={"bob": 1}, owner_limit=2)
    assert at_limit.turn("alice")


def test_a_slot_freed_by_a_run_s_end_starts_the_fairest_waiting_run_at_once(
    aws: dict[str, Any], machine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    # Given a deployment of 2 slots held by alice, and bob's run then alice's third waiting
    monkeypatch.setenv("ITERATE_MAX_CONCURRENT_RUNS", "3")
    monkeypatch.setenv("ITERATE_GLOBAL_CONCURRENT_RUNS", "2")
    reset_caches()
    first = [_admission(_event(f"uploads/alice/d/{n}.csv", "v1", f"e-a-{n}"))["runId"] for n in (1, 2)]
    assert admit_queued() == first
    third = _admission(_event("uploads/alice/d/3.csv", "v1", "e-a-3"))["runId"]
    bobs = _admission(_event("uploads/bob/d/1.csv", "v1", "e-b-1"))["runId"]
    # When one of alice's runs ends (the execution-status event), before any queue batch comes
    _admission(
        {
            "source": "aws.states",
            "detail-type": "Step Functions Execution Status Change",
            "detail": {"name": first[0], "status": "SUCCEEDED"},
        }
    )
    # Then bob's run (no run in progress) has started at once, alice's third still waits
    sfn = boto3.client("stepfunctions", region_name=REGION)
    names = {e["name"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]}
    assert bobs in names and third not in names
    repo = DynamoRunRepository(aws["table"], "bob")
    assert repo.require_run(bobs).get("admittedAt") and OwnerQueue(aws["table"], "bob").waiting() == 0
    # And bob's message, when it comes, is dropped (no second start); alice's waits for a slot
    assert admit_queued() == [bobs]


def test_the_load_drivers_partition_queries_answer_as_moto_does(aws: dict[str, Any]) -> None:
    from awsenv import queries_by_partition

    # Given items in several partitions, some with the queried prefix
    table = aws["table"]
    for pk in ("A", "B", "C"):
        for n in range(5):
            table.put_item(Item={"PK": pk, "SK": f"{'QUEUE#' if n % 2 else 'X#'}{n}", "n": n})

    def ask() -> list[list[dict[str, Any]]]:
        return [
            table.query(
                KeyConditionExpression="PK = :pk AND begins_with(SK, :p)",
                ExpressionAttributeValues={":pk": pk, ":p": "QUEUE#"},
                ScanIndexForward=forward,
                Limit=limit,
            )["Items"]
            for pk in ("B", "Z")
            for forward in (True, False)
            for limit in (1, 10)
        ]

    # When the same queries are asked of moto and through the driver's partition reads / Then the answers agree
    plain = ask()
    with queries_by_partition():
        assert ask() == plain
    assert plain[1] == [{"PK": "B", "SK": "QUEUE#1", "n": 1}, {"PK": "B", "SK": "QUEUE#3", "n": 3}]


def test_the_load_drivers_sqs_without_queue_scans_answers_as_moto_does(aws: dict[str, Any]) -> None:
    import boto3
    from awsenv import sqs_without_queue_scans

    sqs = boto3.client("sqs", region_name=REGION)
    # Given the admission queue with messages sent, one received (in flight) and one deleted
    for n in range(4):
        sqs.send_message(
            QueueUrl=ADMISSION_QUEUE_URL,
            MessageBody=f"m{n}",
            MessageGroupId=f"g{n}",
            MessageDeduplicationId=f"d{n}",
        )
    received = sqs.receive_message(QueueUrl=ADMISSION_QUEUE_URL, MaxNumberOfMessages=2)["Messages"]
    sqs.delete_message(QueueUrl=ADMISSION_QUEUE_URL, ReceiptHandle=received[0]["ReceiptHandle"])

    def ask() -> tuple[dict[str, str], dict[str, str]]:
        every = sqs.get_queue_attributes(QueueUrl=ADMISSION_QUEUE_URL, AttributeNames=["All"])["Attributes"]
        counts = sqs.get_queue_attributes(
            QueueUrl=ADMISSION_QUEUE_URL,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return every, counts

    # When the queue's attributes are read from moto and through the driver's patch / Then they agree
    plain = ask()
    with sqs_without_queue_scans():
        assert ask() == plain
        # And a message sent again within the deduplication window is still dropped, a new one counted
        for dedup in ("d1", "d9"):
            sqs.send_message(
                QueueUrl=ADMISSION_QUEUE_URL,
                MessageBody="x",
                MessageGroupId="g9",
                MessageDeduplicationId=dedup,
            )
        assert ask()[1] == {"ApproximateNumberOfMessages": "3", "ApproximateNumberOfMessagesNotVisible": "1"}
    assert plain[1] == {"ApproximateNumberOfMessages": "2", "ApproximateNumberOfMessagesNotVisible": "1"}
