"""The wake-up queue: webhook and AWS-event triggers coalesce here before a reconcile run."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# A message that failed this often is parked in the DLQ (and alarms). Five, as AWS advises for Lambda
# consumers, because a receive also counts when reconcile's reserved concurrency of 1 throttles the
# poller; the poller retries a throttled batch within the visibility timeout, so five is rarely reached.
MAX_RECEIVE_COUNT = 5
# Head room over the consumer's timeout before a received batch becomes visible again.
VISIBILITY_MARGIN = cdk.Duration.minutes(1)


class TriggerQueue(Construct):
    """SQS FIFO queue + FIFO DLQ, both encrypted (SQS-managed SSE) and TLS-only.

    FIFO with explicit deduplication ids (content-based deduplication off): senders put a time bucket
    in the id so a storm of triggers becomes one reconcile.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        consumer_timeout: cdk.Duration,
        delivery_delay: cdk.Duration,
    ) -> None:
        super().__init__(scope, id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            fifo=True,
            content_based_deduplication=False,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            fifo=True,
            content_based_deduplication=False,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # FIFO queues take no per-message delay, so the "let the scheduler try the pod first"
            # delay of the webhook is the queue's delivery delay.
            delivery_delay=delivery_delay,
            # Just above the consumer's timeout (Lambda requires >= it). Not AWS's general "six times":
            # a batch in flight holds up its FIFO message group, and a wake-up that failed is better
            # retried (or parked) within minutes; the schedule covers anything lost meanwhile.
            visibility_timeout=cdk.Duration.seconds(
                consumer_timeout.to_seconds() + VISIBILITY_MARGIN.to_seconds()
            ),
            # Long enough for MAX_RECEIVE_COUNT attempts to end in the DLQ rather than expire unseen.
            retention_period=cdk.Duration.days(1),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=MAX_RECEIVE_COUNT, queue=self.dead_letter_queue
            ),
        )
