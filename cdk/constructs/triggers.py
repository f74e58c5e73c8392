"""What makes the functions run: the schedule, the wake-up queue and AWS events."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

QUEUE_BATCH_SIZE = 10  # one reconcile answers any number of wake-ups; the FIFO maximum


class Triggers(Construct):
    """Schedule + queue -> reconcile; ASG launch failures and spot warnings -> aws_events."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        reconcile: lambda_.IFunction,
        aws_events: lambda_.IFunction,
        queue: sqs.IQueue,
        schedule_minutes: int,
        asg_names: Sequence[str],
    ) -> None:
        super().__init__(scope, id)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="backlog-scaler: periodic reconcile (level-triggered safety net)",
            schedule=events.Schedule.rate(cdk.Duration.minutes(schedule_minutes)),
            # A tick that could not run is not retried: the next tick does the same work.
            targets=[targets.LambdaFunction(reconcile, retry_attempts=0)],
        )
        reconcile.add_event_source(
            event_sources.SqsEventSource(queue, batch_size=QUEUE_BATCH_SIZE, report_batch_item_failures=True)
        )
        # Failed launches of the configured groups start capacity backoff and spill-over at once.
        # Only groups in the stack's region are seen (EventBridge is regional).
        self.launch_failures = events.Rule(
            self,
            "LaunchFailures",
            description="backlog-scaler: EC2 Instance Launch Unsuccessful in the scaler's groups",
            # The stack's account and region only: an event forwarded from another account's or
            # region's bus may name an ASG of the same name that is not ours.
            event_pattern=events.EventPattern(
                account=[cdk.Stack.of(self).account],
                region=[cdk.Stack.of(self).region],
                source=["aws.autoscaling"],
                detail_type=["EC2 Instance Launch Unsuccessful"],
                detail={"AutoScalingGroupName": list(asg_names)},
            ),
            targets=[
                targets.LambdaFunction(aws_events, retry_attempts=2, max_event_age=cdk.Duration.hours(1))
            ],
        )
        self.spot_warnings = self._build_spot_warnings(aws_events)

    def _build_spot_warnings(self, aws_events: lambda_.IFunction) -> events.Rule:
        # Spot events name an instance, not a group; the function ignores instances of other groups.
        return events.Rule(
            self,
            "SpotWarnings",
            description="backlog-scaler: spot and reservation interruption warnings, rebalance hints",
            event_pattern=events.EventPattern(
                account=[cdk.Stack.of(self).account],
                region=[cdk.Stack.of(self).region],
                source=["aws.ec2"],
                detail_type=[
                    "EC2 Spot Instance Interruption Warning",
                    "EC2 Capacity Reservation Instance Interruption Warning",
                    "EC2 Instance Rebalance Recommendation",
                ],
            ),
            # A spot warning gives two minutes; delivering it later helps no one.
            targets=[
                targets.LambdaFunction(aws_events, retry_attempts=2, max_event_age=cdk.Duration.minutes(2))
            ],
        )
