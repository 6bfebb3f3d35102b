"""Monitoring: alarms on failed runs, undeliverable upload events and function errors, plus a dashboard."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct


class MonitoringConstruct(Construct):
    """Alarms without actions (wire an SNS topic or chat integration per deployment) and one dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine: sfn.IStateMachine,
        dlq: sqs.IQueue,
        functions: dict[str, lambda_.IFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        period = Duration.minutes(5)
        self.alarms: list[cw.Alarm] = [
            state_machine.metric_failed(period=period).create_alarm(
                self,
                "RunsFailed",
                threshold=1,
                evaluation_periods=1,
                alarm_description="An analysis run failed (see RecordFailure's reason in the run record)",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            state_machine.metric_timed_out(period=period).create_alarm(
                self,
                "RunsTimedOut",
                threshold=1,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
            dlq.metric_approximate_number_of_messages_visible(period=period).create_alarm(
                self,
                "UploadEventsUndelivered",
                threshold=1,
                evaluation_periods=1,
                alarm_description="Uploads whose event could not start a run: replay them from the DLQ",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        ]
        for name, fn in functions.items():
            self.alarms.append(
                fn.metric_errors(period=period).create_alarm(
                    self,
                    f"{name.title().replace('_', '')}Errors",
                    threshold=5,
                    evaluation_periods=1,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                )
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
            ),
            cw.GraphWidget(
                title="Function errors",
                left=[fn.metric_errors(period=period) for fn in functions.values()],
            ),
            cw.GraphWidget(
                title="Function duration (p90)",
                left=[fn.metric_duration(period=period, statistic="p90") for fn in functions.values()],
            ),
        )
