"""What can invoke the reconcile function, as pydantic models (Powertools parser models where AWS has one).

    EventBridge schedule   {"detail-type": "Scheduled Event", "source": "aws.events", ...}
    SQS (wake-up queue)    {"Records": [{"eventSource": "aws:sqs", "body": <wake-up>, ...}, ...]}
    direct invoke          {} or {"trigger": "<name>"}  (e.g. `aws lambda invoke --payload '{}'`)

A wake-up body is what the webhook enqueues (functions/webhook/queue.py):
`{"source": "admission" | "events" | "poke", "cluster": "<name>", "reason": "...", "at": "<ISO 8601>"}`.

A message that is not such a wake-up for this cluster is acknowledged, not retried (`discard`): its
body decides the outcome, so every retry would fail alike, and on the FIFO queue each attempt would
hold up the cluster's message group (every later wake-up) for a visibility timeout, up to
MAX_RECEIVE_COUNT times before the dead-letter queue. Nothing is lost by dropping it: the reconcile
is level-triggered (a wake-up only says "run soon", and the schedule runs anyway), and the message
leaves an error log line (its id, the error, the start of its body) and the DiscardedWakeUps metric,
whose alarm tells an operator that a sender writes what this function cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel, SqsModel, SqsRecordModel
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from shared.constants import METRIC_DISCARDED_WAKE_UPS
from shared.domain.errors import InputError
from shared.formats.validation import format_validation_error
from shared.reporting import Reporter

SQS = "sqs"
SCHEDULE = "schedule"
# How much of a discarded message's body its log line keeps: a wake-up is a few hundred bytes, an SQS
# message up to 1 MiB.
LOGGED_BODY_CHARS = 2048


class ScheduledEvent(EventBridgeModel):
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    source: Literal["aws.events", "aws.scheduler"]


class SqsBatch(SqsModel):
    # Lambda never invokes with an empty batch: an empty Records is a hand-made event, not SQS's.
    Records: Annotated[list[SqsRecordModel], Field(min_length=1)]


class DirectInvoke(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trigger: Annotated[str, Field(min_length=1, max_length=100)] = "manual"

    @field_validator("trigger")
    @classmethod
    def _not_the_queue(cls, trigger: str) -> str:
        # "sqs" is the name of a batch's run; a direct invoke carries no messages to answer.
        if trigger == SQS:
            raise ValueError(f"{SQS!r} names the wake-up queue's runs; a direct invoke takes another name")
        return trigger


class WakeUp(BaseModel):
    """One message of the wake-up queue."""

    model_config = ConfigDict(strict=True)

    source: Literal["admission", "events", "poke"]
    cluster: str = Field(min_length=1, max_length=100)  # the config's cluster_name bound
    reason: str = Field(default="", max_length=1024)
    at: datetime = Field(strict=False)  # ISO 8601 text in JSON


_SQS = TypeAdapter(SqsBatch)
_SCHEDULE = TypeAdapter(ScheduledEvent)
_DIRECT = TypeAdapter(DirectInvoke)


def trigger_of(event: object) -> str:
    """ "sqs", "schedule" or the direct invoke's trigger name; InputError for anything else."""
    if not isinstance(event, Mapping):
        raise InputError(f"event: expected a JSON object, got {type(event).__name__}")
    try:
        if "Records" in event:
            _SQS.validate_python(event)
            return SQS
        if "detail-type" in event:
            _SCHEDULE.validate_python(event)
            return SCHEDULE
        return _DIRECT.validate_python(event).trigger
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, "event")) from exc


def validate_wake_up(body: str, cluster: str) -> WakeUp:
    """A wake-up message for `cluster`; InputError when malformed or meant for another cluster."""
    try:
        wake_up = WakeUp.model_validate_json(body)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, "message", WakeUp)) from exc
    if wake_up.cluster != cluster:
        raise InputError(f"message: cluster: {wake_up.cluster!r} is not this function's cluster {cluster!r}")
    return wake_up


def discard(reporter: Reporter, message_id: str, body: str, error: InputError) -> None:
    """Acknowledge a message no retry can make valid: an error log line and the DiscardedWakeUps metric."""
    reporter.log(
        "error",
        "wake-up discarded: no retry can make it valid",
        message_id=message_id,
        error=str(error),
        body=body[:LOGGED_BODY_CHARS],
    )
    reporter.metric(METRIC_DISCARDED_WAKE_UPS, 1)


def failed_from(event: Mapping[str, Any], first: int) -> dict[str, list[dict[str, str]]]:
    """The partial-batch response that hands record `first` and every later one back to the queue.

    A FIFO queue's consumer stops at the first failure and returns it with every message after it,
    so that the group's order holds (AWS Lambda developer guide, "Handling errors for an SQS event
    source in Lambda": partial batch responses with FIFO queues).
    """
    records = event.get("Records", ())[first:]
    return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
