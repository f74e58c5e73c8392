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


class Observability(Construct):
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
        action = cw_actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []

        def alarm(alarm_id: str, **props: object) -> cloudwatch.Alarm:
            created = cloudwatch.Alarm(self, alarm_id, **props)  # type: ignore[arg-type]
            created.add_alarm_action(action)
            created.add_ok_action(action)
            self.alarms.append(created)
            return created

        for name, function in functions.items():
            # The schedule runs reconcile every minute; one failed run is healed by the next, so it
            # alarms on failures in two consecutive periods. The others alarm on the first failure.
            periods = 2 if name == FUNCTION_RECONCILE else 1
            alarm(
                f"{_pascal(name)}Errors",
                alarm_description=f"backlog-scaler {cluster_name}: the {name} function failed",
                metric=function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        # Three missed ticks (at least 15 min; CloudWatch evaluates at most a day).
        silence_minutes = min(max(15, schedule_minutes * 3), 1440)
        alarm(
            "ReconcileNotRunning",
            alarm_description=(
                f"backlog-scaler {cluster_name}: reconcile has not run for {silence_minutes} minutes"
            ),
            metric=functions[FUNCTION_RECONCILE].metric_invocations(
                period=cdk.Duration.minutes(silence_minutes), statistic="Sum"
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )

        def queue_not_empty(alarm_id: str, description: str, queue: sqs.IQueue) -> None:
            alarm(
                alarm_id,
                alarm_description=f"backlog-scaler {cluster_name}: {description}",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=FIVE_MINUTES, statistic="Maximum"
                ),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        queue_not_empty(
            "DeadLetterQueueNotEmpty", "triggers failed repeatedly and were parked", dead_letter_queue
        )
        queue_not_empty(
            "FailedInvocationsNotEmpty",
            "an AWS event (launch failure, spot warning) failed every attempt and was parked in the "
            "failed-invocations queue",
            failed_invocations,
        )
        alarm(
            "OldestPendingPod",
            alarm_description=(
                f"backlog-scaler {cluster_name}: a GPU pod has been pending longer than "
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
        alarm(
            "ActionFailures",
            alarm_description=(
                f"backlog-scaler {cluster_name}: a write failed on an object (ASG, node or pod) and was "
                "skipped; the run's notification and logs name it"
            ),
            metric=self.cluster_metric(METRIC_ACTION_FAILURES, "Sum", FIVE_MINUTES),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        for group in group_names:
            alarm(
                f"CapacityFailures-{group}",
                alarm_description=(
                    f"backlog-scaler {cluster_name}: group {group} failed to get capacity "
                    f"{capacity_failures} or more times in 30 minutes"
                ),
                metric=self.group_metric(METRIC_CAPACITY_FAILURES, group, "Sum", CAPACITY_FAILURE_WINDOW),
                threshold=capacity_failures,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        for group in group_names:
            alarm(
                f"RepairPaused-{group}",
                alarm_description=(
                    f"backlog-scaler {cluster_name}: node repair paused in group {group}: more of its nodes "
                    "are unhealthy than policy.repair.max_unhealthy_fraction (a bad AMI, driver or zone?); "
                    "the plan's repair[] names them"
                ),
                metric=self.group_metric(METRIC_REPAIR_PAUSED, group, "Maximum", FIVE_MINUTES),
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"BacklogScaler-{cluster_name}-{cdk.Stack.of(self).region}",
            default_interval=cdk.Duration.hours(3),
        )
        width = 12
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Backlog: pending pods",
                left=[
                    self.cluster_metric(METRIC_PENDING_PODS, "Maximum", ONE_MINUTE, "pending"),
                    self.cluster_metric(METRIC_UNHELPED_PODS, "Maximum", ONE_MINUTE, "no group can help"),
                    self.cluster_metric(METRIC_MODEL_ERRORS, "Sum", ONE_MINUTE, "fits the scheduler refuted"),
                    self.cluster_metric(METRIC_ACTION_FAILURES, "Sum", ONE_MINUTE, "writes that failed"),
                ],
                width=width,
            ),
            cloudwatch.GraphWidget(
                title="Pending GPUs and oldest pending pod",
                left=[self.cluster_metric(METRIC_PENDING_GPUS, "Maximum", ONE_MINUTE, "GPUs")],
                right=[self.cluster_metric(METRIC_OLDEST_PENDING_AGE, "Maximum", ONE_MINUTE, "oldest (s)")],
                width=width,
            ),
        )
        self.dashboard.add_widgets(
            *(
                cloudwatch.GraphWidget(
                    title=f"{group}: desired vs in service",
                    left=[
                        self.group_metric(METRIC_DESIRED, group, "Maximum", ONE_MINUTE, "desired"),
                        self.group_metric(METRIC_IN_SERVICE, group, "Maximum", ONE_MINUTE, "in service"),
                    ],
                    width=width,
                )
                for group in group_names
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Scale actions",
                left=[
                    self.group_metric(metric, group, "Sum", FIVE_MINUTES, f"{group} {label}")
                    for group in group_names
                    for metric, label in ((METRIC_SCALE_UPS, "up"), (METRIC_SCALE_DOWNS, "down"))
                ],
                width=width,
            ),
            cloudwatch.GraphWidget(
                title="Capacity failures",
                left=[
                    self.group_metric(METRIC_CAPACITY_FAILURES, group, "Sum", FIVE_MINUTES, group)
                    for group in group_names
                ],
                width=width,
            ),
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
                ],
                width=width,
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
                width=width,
            ),
        )
        self.dashboard.add_widgets(*self._lifecycle_widgets(group_names, width))
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24),
        )

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
