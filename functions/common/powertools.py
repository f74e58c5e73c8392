"""The Powertools Logger and Tracer of the scaling functions (one per process).

Metrics go through `shared.observability.PowertoolsReporter`, which publishes EMF with exactly the
dimensions the dashboard and alarms use.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Tracer

from shared.constants import SERVICE_NAME

# SQS batches carry the first message's id; EventBridge events (schedule, AWS events) their own id;
# a direct invoke has none (the Lambda request id is logged anyway).
CORRELATION_ID_PATH = "Records[0].messageId || id"

logger = Logger(service=SERVICE_NAME)
tracer = Tracer(service=SERVICE_NAME)
