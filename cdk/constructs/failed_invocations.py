"""Where an asynchronously invoked function's event goes when Lambda gives up on it.

EventBridge invokes aws_events asynchronously: after Lambda's own retries (two) or the event's maximum
age, the event would be dropped silently. The on-failure destination keeps it (with the error) for an
operator, and Observability alarms when it is not empty. A standard queue: Lambda destinations refuse
FIFO queues, so the trigger queue's FIFO dead-letter queue cannot serve.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdk.nag import acknowledge


class FailedInvocations(Construct):
    """An SQS queue (SQS-managed SSE, TLS only) and the Lambda on-failure destination that fills it."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),  # SQS's maximum: time to read and replay by hand
        )
        # The destination grants the function sqs:SendMessage on this queue and nothing else.
        self.destination = destinations.SqsDestination(self.queue)
        acknowledge(
            self.queue,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter queue: the on-failure destination of an asynchronously "
            "invoked function; nothing consumes it, so it needs no dead-letter queue of its own.",
        )
