"""Regression alerts: Iterate.IssueRegressed events from the default bus to an SNS topic, e-mailed when asked."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from iterate.aws.payloads import EVENT_SOURCE, REGRESSION_DETAIL_TYPE


class RegressionAlertsConstruct(Construct):
    """A rule for the report step's regression events, and the topic it publishes to (users may subscribe
    anything; `email` adds an e-mail subscription, confirmed by the mail AWS sends)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, email: str | None, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        # A key of our own: EventBridge can publish to a topic encrypted with it (not with the AWS-managed one).
        key = kms.Key(
            self,
            "RegressionsKey",
            description="Iterate regression topic encryption",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
            )
        )
        self.topic = sns.Topic(
            self, "Regressions", display_name="Iterate regressions", master_key=key, enforce_ssl=True
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self.rule = events.Rule(
            self,
            "IssueRegressed",
            description="A re-analysis found issues new or worse than the previous run's",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[REGRESSION_DETAIL_TYPE]),
        )
        self.rule.add_target(targets.SnsTopic(self.topic))
