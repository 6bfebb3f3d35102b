"""Admission: the FIFO queue every run waits on (one message group per owner), its dead-letter queue, the
admitter's event sources (the queue, the upload rule, schedules, the execution-status rule)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.constructs.triggers import dead_letter_queue
from infra.nag import acknowledge

# SQS's ceiling: a message received this often goes to the DLQ. Admission shortens a waiting message's
# visibility from 15 s up to 5 minutes the longer it waits (iterate.aws.admission), so 1,000 receives is
# days of waiting: the DLQ only catches a message admission cannot read.
MAX_RECEIVES = 1000
# Six times the admission function's timeout (AWS's advice for an SQS event source).
ADMISSION_TIMEOUT_S = 60
QUEUE_VISIBILITY_S = 6 * ADMISSION_TIMEOUT_S


class AdmissionConstruct(Construct):
    """The admission queue and the wiring of the admission function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.Function,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "AdmissionDlq",
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dlq, "AwsSolutions-SQS3", "This queue is itself the admission queue's dead-letter queue."
        )
        self.queue = sqs.Queue(
            self,
            "AdmissionQueue",
            fifo=True,
            content_based_deduplication=False,  # the run id is each message's deduplication id
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            visibility_timeout=Duration.seconds(QUEUE_VISIBILITY_S),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=MAX_RECEIVES),
        )
        function.add_event_source(
            sources.SqsEventSource(self.queue, batch_size=10, report_batch_item_failures=True)
        )
        self.queue.grant(function, "sqs:ChangeMessageVisibility")
        self.queue.grant_send_messages(function)
        function.add_environment("ITERATE_ADMISSION_QUEUE_URL", self.queue.queue_url)
        function.add_environment("ITERATE_STATE_MACHINE_ARN", state_machine.state_machine_arn)
        state_machine.grant_start_execution(function)
        # Upload and schedule events the function failed on (after Lambda's two retries) land here.
        self.events_dlq = dead_letter_queue(self, "AdmissionEventsDlq", "the admission function's events")
        function.configure_async_invoke(
            retry_attempts=2,
            max_event_age=Duration.hours(2),
            on_failure=destinations.SqsDestination(self.events_dlq),
        )
        # Every execution that ends gives its run slots back here too (a no-op after Report or RecordFailure):
        # the release a timed-out or aborted execution never made.
        self.ended_rule = events.Rule(
            self,
            "ExecutionEnded",
            description="An analysis execution ended: release its run slots",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=["Step Functions Execution Status Change"],
                detail={
                    "stateMachineArn": [state_machine.state_machine_arn],
                    "status": ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"],
                },
            ),
        )
        self.ended_rule.add_target(
            targets.LambdaFunction(function, dead_letter_queue=self.events_dlq, retry_attempts=8)
        )

    def allow_queueing(self, function: lambda_.IFunction) -> None:
        """`function` may queue runs (the API, the fix worker)."""
        self.queue.grant_send_messages(function)
        function.add_environment("ITERATE_ADMISSION_QUEUE_URL", self.queue.queue_url)
