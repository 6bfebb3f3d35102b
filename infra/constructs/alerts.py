"""Regression alerts: Iterate.IssueRegressed events from the default bus to an SNS topic, e-mailed when asked."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.constructs.monitoring import encrypted_topic
from iterate.aws.payloads import EVENT_SOURCE, REGRESSION_DETAIL_TYPE


class RegressionAlertsConstruct(Construct):
    """A rule for the report step's regression events, and the topic it publishes to (users may subscribe
    anything; `email` adds an e-mail subscription, confirmed by the mail AWS sends)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, email: str | None, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = encrypted_topic(
            self,
            "Regressions",
            display_name="Iterate regressions",
            publisher="events.amazonaws.com",
            removal_policy=removal_policy,
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
