"""Dashboard and alarms on the scaler's metrics (EMF, namespace METRICS_NAMESPACE) and functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from shared.constants import (
    FUNCTION_RECONCILE,
    METRIC_ACTION_FAILURES,
    METRIC_CAPACITY_FAILURES,
    METRIC_DESIRED,
    METRIC_DIMENSION_CLUSTER,
    METRIC_DIMENSION_GROUP,
    METRIC_DISCARDED_WAKE_UPS,
    METRIC_IN_SERVICE,
    METRIC_MODEL_ERRORS,
    METRIC_NODES_REPAIRED,
    METRIC_NODES_ROTATED,
    METRIC_OLDEST_PENDING_AGE,
    METRIC_PENDING_GPUS,
    METRIC_PENDING_PODS,
    METRIC_RECONCILE_DURATION,
    METRIC_REPAIR_PAUSED,
    METRIC_SCALE_DOWNS,
    METRIC_SCALE_UPS,
    METRIC_UNHEALTHY_NODES,
    METRIC_UNHELPED_PODS,
    METRICS_NAMESPACE,
)

ONE_MINUTE = cdk.Duration.minutes(1)
FIVE_MINUTES = cdk.Duration.minutes(5)
CAPACITY_FAILURE_WINDOW = cdk.Duration.minutes(30)
WIDGET_WIDTH = 12  # two graphs a row (the dashboard is 24 wide)


class Observability(Construct):
    """The scaler's alarms (to the notification topic) and its dashboard, built step by step."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        group_names: Sequence[str],
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queue: sqs.IQueue,
        failed_invocations: sqs.IQueue,
        topic: sns.ITopic,
        oldest_pending_seconds: int,
        capacity_failures: int,
        schedule_minutes: int,
    ) -> None:
        super().__init__(scope, id)
        self.cluster_name = cluster_name
        self._action = cw_actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []
        self._build_function_alarms(functions, schedule_minutes)
        self._build_queue_alarms(dead_letter_queue, failed_invocations)
        self._build_backlog_alarms(oldest_pending_seconds)
        self._build_group_alarms(group_names, capacity_failures)
        self.dashboard = self._build_dashboard(group_names, functions, dead_letter_queue, failed_invocations)

    def _alarm(self, alarm_id: str, **props: object) -> cloudwatch.Alarm:
        """An alarm that notifies the topic when it fires and when it clears."""
        created = cloudwatch.Alarm(self, alarm_id, **props)  # type: ignore[arg-type]
        created.add_alarm_action(self._action)
        created.add_ok_action(self._action)
        self.alarms.append(created)
        return created

    def _build_function_alarms(
        self, functions: Mapping[str, lambda_.IFunction], schedule_minutes: int
    ) -> None:
        for name, function in functions.items():
            # The schedule runs reconcile every minute; one failed run is healed by the next, so it
            # alarms on failures in two consecutive periods. The others alarm on the first failure.
            periods = 2 if name == FUNCTION_RECONCILE else 1
            self._alarm(
                f"{_pascal(name)}Errors",
                alarm_description=f"backlog-scaler {self.cluster_name}: the {name} function failed",
                metric=function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        # Three missed ticks (at least 15 min; CloudWatch evaluates at most a day).
        silence_minutes = min(max(15, schedule_minutes * 3), 1440)
        self._alarm(
            "ReconcileNotRunning",
            alarm_description=(
                f"backlog-scaler {self.cluster_name}: reconcile has not run for {silence_minutes} minutes"
            ),
            metric=functions[FUNCTION_RECONCILE].metric_invocations(
                period=cdk.Duration.minutes(silence_minutes), statistic="Sum"
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )

    def _build_queue_alarms(self, dead_letter_queue: sqs.IQueue, failed_invocations: sqs.IQueue) -> None:
        for alarm_id, description, queue in (
            ("DeadLetterQueueNotEmpty", "triggers failed repeatedly and were parked", dead_letter_queue),
            (
                "FailedInvocationsNotEmpty",
                "an AWS event (launch failure, spot warning) failed every attempt and was parked in the "
                "failed-invocations queue",
                failed_invocations,
            ),
        ):
            self._alarm(
                alarm_id,
                alarm_description=f"backlog-scaler {self.cluster_name}: {description}",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=FIVE_MINUTES, statistic="Maximum"
                ),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        # A wake-up no retry could make valid is acknowledged rather than parked (it would hold up the
        # cluster's FIFO message group meanwhile): this alarm is what tells the operator, and the
        # reconcile function's error log line names the message.
        self._alarm_on_any(
            "DiscardedWakeUps",
            METRIC_DISCARDED_WAKE_UPS,
            "a wake-up message was malformed or meant for another cluster and was discarded; the reconcile "
            "function's logs name it",
        )

    def _build_backlog_alarms(self, oldest_pending_seconds: int) -> None:
        self._alarm(
            "OldestPendingPod",
            alarm_description=(
                f"backlog-scaler {self.cluster_name}: a GPU pod has been pending longer than "
                f"{oldest_pending_seconds} s"
            ),
            metric=self.cluster_metric(METRIC_OLDEST_PENDING_AGE, "Maximum", FIVE_MINUTES),
            threshold=oldest_pending_seconds,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # One write that failed on one object (AccessDenied on an ASG without the cluster tag, a 403 or
        # NamespaceTerminating eviction, a throttled write) is isolated and the run goes on, so the
        # function succeeds: this alarm is what tells the operator (the notification says which).
        self._alarm_on_any(
            "ActionFailures",
            METRIC_ACTION_FAILURES,
            "a write failed on an object (ASG, node or pod) and was skipped; the run's notification and "
            "logs name it",
        )

    def _alarm_on_any(self, id: str, metric_name: str, description: str) -> None:
        """An alarm as soon as the cluster's metric counts one in five minutes."""
        self._alarm(
            id,
            alarm_description=f"backlog-scaler {self.cluster_name}: {description}",
            metric=self.cluster_metric(metric_name, "Sum", FIVE_MINUTES),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _build_group_alarms(self, group_names: Sequence[str], capacity_failures: int) -> None:
        for group in group_names:
            self._alarm(
                f"CapacityFailures-{group}",
                alarm_description=(
                    f"backlog-scaler {self.cluster_name}: group {group} failed to get capacity "
                    f"{capacity_failures} or more times in 30 minutes"
                ),
                metric=self.group_metric(METRIC_CAPACITY_FAILURES, group, "Sum", CAPACITY_FAILURE_WINDOW),
                threshold=capacity_failures,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        for group in group_names:
            self._alarm(
                f"RepairPaused-{group}",
                alarm_description=(
                    f"backlog-scaler {self.cluster_name}: node repair paused in group {group}: more of its "
                    "nodes are unhealthy than policy.repair.max_unhealthy_fraction (a bad AMI, driver or "
                    "zone?); "
                    "the plan's repair[] names them"
                ),
                metric=self.group_metric(METRIC_REPAIR_PAUSED, group, "Maximum", FIVE_MINUTES),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

    def _build_dashboard(
        self,
        group_names: Sequence[str],
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queue: sqs.IQueue,
        failed_invocations: sqs.IQueue,
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"BacklogScaler-{self.cluster_name}-{cdk.Stack.of(self).region}",
            default_interval=cdk.Duration.hours(3),
        )
        dashboard.add_widgets(*self._backlog_widgets())
        dashboard.add_widgets(*self._group_widgets(group_names))
        dashboard.add_widgets(
            *self._scaling_widgets(group_names),
            *self._function_widgets(functions, dead_letter_queue, failed_invocations),
        )
        dashboard.add_widgets(*self._lifecycle_widgets(group_names, WIDGET_WIDTH))
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24),
        )
        return dashboard

    def _backlog_widgets(self) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Backlog: pending pods",
                left=[
                    self.cluster_metric(METRIC_PENDING_PODS, "Maximum", ONE_MINUTE, "pending"),
                    self.cluster_metric(METRIC_UNHELPED_PODS, "Maximum", ONE_MINUTE, "no group can help"),
                    self.cluster_metric(METRIC_MODEL_ERRORS, "Sum", ONE_MINUTE, "fits the scheduler refuted"),
                    self.cluster_metric(METRIC_ACTION_FAILURES, "Sum", ONE_MINUTE, "writes that failed"),
                ],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Pending GPUs and oldest pending pod",
                left=[self.cluster_metric(METRIC_PENDING_GPUS, "Maximum", ONE_MINUTE, "GPUs")],
                right=[self.cluster_metric(METRIC_OLDEST_PENDING_AGE, "Maximum", ONE_MINUTE, "oldest (s)")],
                width=WIDGET_WIDTH,
            ),
        ]

    def _group_widgets(self, group_names: Sequence[str]) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title=f"{group}: desired vs in service",
                left=[
                    self.group_metric(METRIC_DESIRED, group, "Maximum", ONE_MINUTE, "desired"),
                    self.group_metric(METRIC_IN_SERVICE, group, "Maximum", ONE_MINUTE, "in service"),
                ],
                width=WIDGET_WIDTH,
            )
            for group in group_names
        ]

    def _scaling_widgets(self, group_names: Sequence[str]) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Scale actions",
                left=[
                    self.group_metric(metric, group, "Sum", FIVE_MINUTES, f"{group} {label}")
                    for group in group_names
                    for metric, label in ((METRIC_SCALE_UPS, "up"), (METRIC_SCALE_DOWNS, "down"))
                ],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Capacity failures",
                left=[
                    self.group_metric(METRIC_CAPACITY_FAILURES, group, "Sum", FIVE_MINUTES, group)
                    for group in group_names
                ],
                width=WIDGET_WIDTH,
            ),
        ]

    def _function_widgets(
        self,
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queue: sqs.IQueue,
        failed_invocations: sqs.IQueue,
    ) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Function errors and parked triggers",
                left=[
                    function.metric_errors(period=FIVE_MINUTES, statistic="Sum", label=f"{name} errors")
                    for name, function in functions.items()
                ],
                right=[
                    dead_letter_queue.metric_approximate_number_of_messages_visible(
                        period=FIVE_MINUTES, statistic="Maximum", label="DLQ messages"
                    ),
                    failed_invocations.metric_approximate_number_of_messages_visible(
                        period=FIVE_MINUTES, statistic="Maximum", label="failed AWS events"
                    ),
                    self.cluster_metric(METRIC_DISCARDED_WAKE_UPS, "Sum", FIVE_MINUTES, "discarded wake-ups"),
                ],
                width=WIDGET_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Duration",
                left=[
                    self.cluster_metric(METRIC_RECONCILE_DURATION, "p90", FIVE_MINUTES, "reconcile p90"),
                    *(
                        function.metric_duration(
                            period=FIVE_MINUTES, statistic="Maximum", label=f"{name} max"
                        )
                        for name, function in functions.items()
                    ),
                ],
                width=WIDGET_WIDTH,
            ),
        ]

    def _lifecycle_widgets(self, group_names: Sequence[str], width: int) -> list[cloudwatch.IWidget]:
        """The node lifecycle row: unhealthy nodes (room not counted), and nodes repaired and rotated."""
        return [
            cloudwatch.GraphWidget(
                title="Unhealthy nodes (repair paused: right)",
                left=[
                    self.group_metric(METRIC_UNHEALTHY_NODES, group, "Maximum", ONE_MINUTE, group)
                    for group in group_names
                ],
                right=[
                    self.group_metric(METRIC_REPAIR_PAUSED, group, "Maximum", ONE_MINUTE, f"{group} paused")
                    for group in group_names
                ],
                width=width,
            ),
            cloudwatch.GraphWidget(
                title="Nodes repaired and rotated",
                left=[
                    self.group_metric(metric, group, "Sum", FIVE_MINUTES, f"{group} {label}")
                    for group in group_names
                    for metric, label in (
                        (METRIC_NODES_REPAIRED, "repaired"),
                        (METRIC_NODES_ROTATED, "rotated"),
                    )
                ],
                width=width,
            ),
        ]

    def cluster_metric(
        self, name: str, statistic: str, period: cdk.Duration, label: str | None = None
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={METRIC_DIMENSION_CLUSTER: self.cluster_name},
            statistic=statistic,
            period=period,
            label=label,
        )

    def group_metric(
        self, name: str, group: str, statistic: str, period: cdk.Duration, label: str | None = None
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={METRIC_DIMENSION_CLUSTER: self.cluster_name, METRIC_DIMENSION_GROUP: group},
            statistic=statistic,
            period=period,
            label=label,
        )


def _pascal(name: str) -> str:
    """`force_scale_down` -> `ForceScaleDown` (for construct ids)."""
    return name.title().replace("_", "")
