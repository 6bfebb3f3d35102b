"""Operations in the template: alarms someone receives (every dead-letter queue, system-caused run failures only),
and the fix worker invoked asynchronously, never retried, its failures in a dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra_helpers import Synth, actions_of

pytestmark = pytest.mark.infra


def _resource_ids(resource: Any) -> set[str]:
    resources = resource if isinstance(resource, list) else [resource]
    return {r["Fn::GetAtt"][0] for r in resources}


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {k: a["Properties"] for k, a in synth.of_type("AWS::CloudWatch::Alarm").items()}


def test_every_dead_letter_queue_has_an_alarm_on_the_alarm_topic(synth: Synth) -> None:
    # Given every dead-letter queue of the stack (every queue but the admission queue, whose runs wait there
    # by design: its own alarm is on the age of its oldest message)
    all_queues = synth.of_type("AWS::SQS::Queue")
    (admission_queue,) = [k for k, q in all_queues.items() if "RedrivePolicy" in q["Properties"]]
    queues = set(all_queues) - {admission_queue}
    assert len(queues) == 5  # upload events, scheduled runs, fix jobs, admission, admission events
    # Then each has an alarm on its visible messages, at the first message, sent to the alarm topic
    watched = {
        a["Dimensions"][0]["Value"]["Fn::GetAtt"][0]: a
        for a in _alarms(synth).values()
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    assert set(watched) == queues
    (backlog,) = [
        a for a in _alarms(synth).values() if a.get("MetricName") == "ApproximateAgeOfOldestMessage"
    ]
    assert backlog["Dimensions"][0]["Value"]["Fn::GetAtt"][0] == admission_queue
    assert backlog["Threshold"] == 3600
    (topic,) = [
        k
        for k, t in synth.of_type("AWS::SNS::Topic").items()
        if t["Properties"]["DisplayName"] == "Iterate alarms"
    ]
    for alarm in watched.values():
        assert alarm["Threshold"] == 1 and alarm["AlarmActions"] == [{"Ref": topic}], alarm


def test_the_run_failure_alarm_fires_on_system_failures_only(synth: Synth) -> None:
    from iterate.aws.payloads import USER_ERRORS, USER_FAILURE_METRIC, failure_metric

    # Given the run-failure alarm: failed executions less those RecordFailure counted as the user's
    (runs,) = [a for a in _alarms(synth).values() if "system error" in a.get("AlarmDescription", "")]
    metrics = {m["Id"]: m for m in runs["Metrics"]}
    (expression,) = [m["Expression"] for m in metrics.values() if "Expression" in m]
    assert expression == "FILL(failed, 0) - FILL(user, 0)" and runs["Threshold"] == 1
    failed, user = metrics["failed"]["MetricStat"], metrics["user"]["MetricStat"]
    assert (
        failed["Metric"]["Namespace"] == "AWS/States" and failed["Metric"]["MetricName"] == "ExecutionsFailed"
    )
    assert (user["Metric"]["Namespace"], user["Metric"]["MetricName"]) == ("Iterate", USER_FAILURE_METRIC)
    assert user["Metric"]["Dimensions"] == [{"Name": "service", "Value": "iterate"}]
    assert failed["Stat"] == user["Stat"] == "Sum" and failed["Period"] == user["Period"]
    # And the user's failures are the bad file and the owner's own acts; anything else is the system's
    assert {failure_metric(e) for e in USER_ERRORS} == {USER_FAILURE_METRIC}
    assert failure_metric("States.TaskFailed") != USER_FAILURE_METRIC
    assert failure_metric("States.ExceedToleratedFailureThreshold") != USER_FAILURE_METRIC


def test_the_fix_route_invokes_only_the_worker_which_is_never_retried_and_fails_into_its_dlq(
    synth: Synth,
) -> None:
    route, worker = synth.function_id("fix"), synth.function_id("fix_worker")
    # Given the route's role: it may invoke exactly the worker (no version or alias wildcard), write no object
    invokes = [
        s for s in synth.statements_of_role(synth.role_of(route)) if "lambda:InvokeFunction" in actions_of(s)
    ]
    assert [s["Resource"] for s in invokes] == [{"Fn::GetAtt": [worker, "Arn"]}]
    assert not [
        a
        for s in synth.statements_of_role(synth.role_of(route))
        for a in actions_of(s)
        if a == "s3:PutObject"
    ]
    env = synth.resources[route]["Properties"]["Environment"]["Variables"]
    assert env["ITERATE_FIX_WORKER_FUNCTION"] == {"Ref": worker}
    # Then the worker's asynchronous invocations are not retried (a retry would write a second version) and a
    # failed or expired one goes to the fix jobs' queue, which the worker's role may send to
    (config,) = [
        c["Properties"]
        for c in synth.of_type("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": worker}
    ]
    assert config["MaximumRetryAttempts"] == 0 and config["MaximumEventAgeInSeconds"] == 3600
    dlq = config["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    assert synth.resources[dlq]["Type"] == "AWS::SQS::Queue"
    sends = [s for s in synth.statements_of_role(synth.role_of(worker)) if "sqs:SendMessage" in actions_of(s)]
    (admission_queue,) = [
        k for k, q in synth.of_type("AWS::SQS::Queue").items() if "RedrivePolicy" in q["Properties"]
    ]
    sent_to = {r for s in sends for r in json.dumps(s["Resource"]).split('"') if r in (dlq, admission_queue)}
    assert sent_to == {dlq, admission_queue}
    assert all(_resource_ids(s["Resource"]) <= {dlq, admission_queue} for s in sends)
    # And it outlives API Gateway's 29 s by far, and queues the run on the version (admission starts it)
    props = synth.resources[worker]["Properties"]
    assert props["Timeout"] == 900 and "ITERATE_ADMISSION_QUEUE_URL" in props["Environment"]["Variables"]
    assert not [
        s for s in synth.statements_of_role(synth.role_of(worker)) if "states:StartExecution" in actions_of(s)
    ]
