"""Ways in besides the API: the S3 Object Created rule and the schedule group, both handing runs to admission."""

from __future__ import annotations

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.storage import UPLOADS
from infra.nag import acknowledge


def upload_event_input() -> events.RuleTargetInput:
    """What admission receives: the S3 event reduced to what a run needs, in the event's own shape.

    The runtime parses it with `iterate.aws.payloads.ObjectCreatedEvent` (the unchanged event shape), so the
    transformer keeps the field names and drops the rest (requester, source IP) from execution history.
    """
    return events.RuleTargetInput.from_object(
        {
            "id": events.EventField.from_path("$.id"),
            "detail-type": "Object Created",
            "source": "aws.s3",
            "time": events.EventField.time,
            "detail": {
                "bucket": {"name": events.EventField.from_path("$.detail.bucket.name")},
                "object": {
                    "key": events.EventField.from_path("$.detail.object.key"),
                    "size": events.EventField.from_path("$.detail.object.size"),
                    "etag": events.EventField.from_path("$.detail.object.etag"),
                    "version-id": events.EventField.from_path("$.detail.object.version-id"),
                    "sequencer": events.EventField.from_path("$.detail.object.sequencer"),
                },
            },
        }
    )


def dead_letter_queue(scope: Construct, construct_id: str, of: str) -> sqs.Queue:
    """An encrypted, TLS-only queue keeping what could not be delivered for 14 days (each one has an alarm)."""
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(14),
    )
    acknowledge(queue, "AwsSolutions-SQS3", f"This queue is itself the dead-letter queue of {of}.")
    return queue


class TriggersConstruct(Construct):
    """EventBridge rule → the admission function (which queues the run), its DLQ, and the Scheduler group and
    role (schedules invoke the admission function too)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        admission: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        # Events EventBridge could not deliver to the admission function (throttling, permissions) land here.
        self.dlq = dead_letter_queue(self, "UploadEventsDlq", "the upload rule's target")
        self.upload_rule = events.Rule(
            self,
            "UploadCreated",
            description="S3 Object Created under uploads/ starts an analysis run",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [bucket.bucket_name]},
                    "object": {"key": [{"prefix": UPLOADS}]},
                },
            ),
        )
        self.upload_rule.add_target(
            targets.LambdaFunction(
                admission,
                event=upload_event_input(),
                dead_letter_queue=self.dlq,
                retry_attempts=8,
                max_event_age=Duration.hours(2),
            )
        )

        self.schedule_group = scheduler.ScheduleGroup(self, "Schedules")
        # The role each per-dataset schedule (created by the API function) assumes to start a re-analysis run.
        self.scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description="EventBridge Scheduler: queue Iterate re-analysis runs",
        )
        # The function itself (schedules invoke no version or alias).
        self.scheduler_role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[admission.function_arn])
        )
        # A scheduled re-analysis the scheduler could not start (after its retries) lands here, not nowhere.
        self.schedule_dlq = dead_letter_queue(self, "ScheduleDlq", "the per-dataset schedules")
        self.schedule_dlq.grant_send_messages(self.scheduler_role)

    def schedule_arn_pattern(self) -> str:
        """Every schedule in the group (schedules are named per dataset at run time)."""
        return Stack.of(self).format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.schedule_group.schedule_group_name}/*",
        )
