"""The Powertools Logger and Tracer of the scaling functions (one per process).

Metrics go through `shared.observability.PowertoolsReporter`, which publishes EMF with exactly the
dimensions the dashboard and alarms use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from shared.constants import ENV_TRACE_DISABLED, SERVICE_NAME

# SQS batches carry the first message's id; EventBridge events (schedule, AWS events) their own id;
# a direct invoke has none (the Lambda request id is logged anyway).
CORRELATION_ID_PATH = "Records[0].messageId || id"

logger = Logger(service=SERVICE_NAME)


class _NoTracer:
    """Stands in for the Powertools Tracer when tracing is off, so the X-Ray SDK is never imported."""

    def capture_lambda_handler(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        return handler

    def capture_method(self, method: Callable[..., Any]) -> Callable[..., Any]:
        return method


def _tracer() -> Any:
    if os.environ.get(ENV_TRACE_DISABLED, "").lower() in ("1", "true"):
        return _NoTracer()
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE_NAME)


tracer = _tracer()
