"""Monitoring: alarms on runs, investigations, functions, the API and the table, sent to one SNS topic; a dashboard."""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from iterate.aws.payloads import (
    METRICS_NAMESPACE,
    METRICS_SERVICE,
    SYSTEM_FAILURE_METRIC,
    USER_FAILURE_METRIC,
)

# The operations the functions call (iterate.storage.dynamo): the table's error metrics are per operation.
TABLE_OPERATIONS = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
)
# Throttles of the sandbox are expected under load (they wait with backoff, in the ASL and the adapter);
# only a sustained stream of them says its concurrency setting is too low for the traffic.
SANDBOX_THROTTLES_PER_5_MIN = 25


def encrypted_topic(
    scope: Construct, name: str, *, display_name: str, publisher: str, removal_policy: RemovalPolicy
) -> sns.Topic:
    """An SNS topic `name`, TLS only, encrypted with a rotated key of its own (`<name>Key`) that the AWS
    service `publisher` may use: a service cannot publish to a topic encrypted with the AWS-managed key."""
    key = kms.Key(
        scope,
        f"{name}Key",
        description=f"{display_name}: topic encryption",
        enable_key_rotation=True,
        removal_policy=removal_policy,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(publisher)],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" is this key
        )
    )
    return sns.Topic(scope, name, display_name=display_name, master_key=key, enforce_ssl=True)


def allow_budgets(topic: sns.Topic, key: kms.IKey) -> None:
    """AWS Budgets may publish to `topic` (its policy) and use its key (the key policy)."""
    budgets = iam.ServicePrincipal("budgets.amazonaws.com")
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[budgets],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
        )
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[budgets], actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"]
        )
    )


def run_failure_metric(name: str, period: Duration) -> cw.Metric:
    """A RecordFailure count (iterate.aws.steps.record_failure), as Powertools publishes it."""
    return cw.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": METRICS_SERVICE},
        statistic="Sum",
        period=period,
    )


class MonitoringConstruct(Construct):
    """Every alarm notifies `self.topic` (alarm and back to OK); an e-mail subscription when one is given.
    The monthly cost budget notifies the same topic."""

    def _budget(self, monthly_usd: float) -> budgets.CfnBudget:
        """The account's monthly cost budget: the topic hears at 80% forecast and at 100% actual."""
        key = self.topic.master_key
        assert key is not None
        allow_budgets(self.topic, key)
        notify = [budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=self.topic.topic_arn)]
        return budgets.CfnBudget(
            self,
            "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_usd, unit="USD"),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=share,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=notify,
                )
                for kind, share in (("FORECASTED", 80), ("ACTUAL", 100))
            ],
        )

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine: sfn.IStateMachine,
        investigations_arn: str,
        dlqs: dict[str, tuple[sqs.IQueue, str]],
        functions: dict[str, lambda_.IFunction],
        api: apigw.RestApi,
        table: dynamodb.ITable,
        alarm_email: str | None,
        removal_policy: RemovalPolicy,
        admission_queue: sqs.IQueue | None = None,
        monthly_budget_usd: float | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        period = Duration.minutes(5)
        self.topic = encrypted_topic(
            self,
            "Alarms",
            display_name="Iterate alarms",
            publisher="cloudwatch.amazonaws.com",
            removal_policy=removal_policy,
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        if monthly_budget_usd is not None:
            self.budget = self._budget(monthly_budget_usd)
        self.alarms: list[cw.Alarm] = []

        def alarm(
            name: str,
            metric: cw.IMetric,
            *,
            threshold: float,
            description: str,
            periods: int = 1,
            comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        ) -> None:
            created = cw.Alarm(
                self,
                name,
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=comparison,
                alarm_description=description,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            created.add_alarm_action(cw_actions.SnsAction(self.topic))
            created.add_ok_action(cw_actions.SnsAction(self.topic))
            self.alarms.append(created)

        # Runs. A run that fails on its input (a bad file, a key outside uploads/<owner>/<dataset>/, a dataset
        # with no upload, a cancel) is the user's: RecordFailure counts it as RunsFailedUser, and the alarm
        # watches every other failed execution, those that never reached RecordFailure included.
        failed = state_machine.metric_failed(period=period, statistic="Sum")
        user_failed = run_failure_metric(USER_FAILURE_METRIC, period)
        alarm(
            "RunsFailed",
            cw.MathExpression(
                expression="FILL(failed, 0) - FILL(user, 0)",
                using_metrics={"failed": failed, "user": user_failed},
                label="Runs failed on a system error",
                period=period,
            ),
            threshold=1,
            description="An analysis run failed on a system error, not on its input: see its record's error "
            "and reason (GET /runs/{id}), and the step function's errors",
        )
        alarm(
            "RunsTimedOut",
            state_machine.metric_timed_out(period=period),
            threshold=1,
            description="An analysis run timed out",
        )
        alarm(
            "RunsThrottled",
            state_machine.metric_throttled(period=period),
            threshold=1,
            description="Step Functions throttled the start of runs (StartExecution or state transitions)",
        )
        # The Map's child executions publish under "<machine>/<Map label>": one investigation whose own
        # step failed (not a failed proof, which is a recorded attempt) fails its child.
        alarm(
            "InvestigationsFailed",
            cw.Metric(
                namespace="AWS/States",
                metric_name="ExecutionsFailed",
                dimensions_map={"StateMachineArn": investigations_arn},
                statistic="Sum",
                period=period,
            ),
            threshold=3,
            description="Investigations of the Map (child executions) failed: see the investigate function's errors",
        )
        if admission_queue is not None:
            # Runs wait in the admission queue by design; one waiting over an hour says the deployment's run
            # limit is too low for the traffic, or runs are not giving their slots back.
            alarm(
                "AdmissionBacklogOld",
                admission_queue.metric_approximate_age_of_oldest_message(period=period, statistic="Maximum"),
                threshold=3600,
                periods=3,
                description="A queued run has waited for a run slot for over an hour",
            )
        # Dead-letter queues: whatever lands in one was not done and waits for a person.
        for name, (queue, description) in dlqs.items():
            alarm(
                name,
                queue.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum"),
                threshold=1,
                description=description,
            )
        # Functions
        for name, fn in functions.items():
            pascal = name.title().replace("_", "")
            alarm(
                f"{pascal}Errors",
                fn.metric_errors(period=period),
                threshold=5,
                description=f"The {name} function raised errors",
            )
            sandbox = name == "sandbox"
            alarm(
                f"{pascal}Throttles",
                fn.metric_throttles(period=period),
                threshold=SANDBOX_THROTTLES_PER_5_MIN if sandbox else 1,
                periods=3 if sandbox else 1,
                description=(
                    "The sandbox stays throttled: raise its concurrency (iterate:sandbox_reserved_concurrency)"
                    if sandbox
                    else f"The {name} function was throttled (account concurrency exhausted?)"
                ),
            )
        # API
        alarm(
            "Api5xx",
            api.metric_server_error(period=period, statistic="Sum"),
            threshold=5,
            description="The API answered 5xx (function errors, timeouts or integration failures)",
        )
        alarm(
            "ApiLatency",
            api.metric_latency(period=period, statistic="p99"),
            threshold=10_000,
            periods=3,
            comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description="The API's p99 latency stayed above 10 s (API Gateway gives up at 29 s)",
        )
        # Table
        alarm(
            "TableSystemErrors",
            table.metric_system_errors_for_operations(operations=list(TABLE_OPERATIONS), period=period),
            threshold=1,
            description="DynamoDB answered 5xx on the table",
        )
        alarm(
            "TableThrottles",
            table.metric_throttled_requests_for_operations(operations=list(TABLE_OPERATIONS), period=period),
            threshold=1,
            description="DynamoDB throttled requests on the table",
        )
        alarm(
            "TableUserErrors",
            table.metric_user_errors(period=period),
            threshold=5,
            description="DynamoDB 4xx in this account and region (AccessDenied from a missing permission, "
            "validation errors); failed conditional writes are not counted here",
        )

        self.dashboard = cw.Dashboard(self, "Dashboard")
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Runs",
                left=[
                    state_machine.metric_started(period=period),
                    state_machine.metric_succeeded(period=period),
                    state_machine.metric_failed(period=period),
                ],
                right=[
                    run_failure_metric(USER_FAILURE_METRIC, period),
                    run_failure_metric(SYSTEM_FAILURE_METRIC, period),
                ],
            ),
            cw.GraphWidget(
                title="Function errors and throttles",
                left=[fn.metric_errors(period=period) for fn in functions.values()],
                right=[fn.metric_throttles(period=period) for fn in functions.values()],
            ),
            cw.GraphWidget(
                title="Function duration (p90)",
                left=[fn.metric_duration(period=period, statistic="p90") for fn in functions.values()],
            ),
            cw.GraphWidget(
                title="API",
                left=[api.metric_server_error(period=period), api.metric_client_error(period=period)],
                right=[api.metric_latency(period=period, statistic="p99")],
            ),
        )
