"""The EventBridge events the AWS-events function handles, as strict Powertools parser models.

    source            detail-type                                   detail fields read
    aws.autoscaling   EC2 Instance Launch Unsuccessful              AutoScalingGroupName, StatusMessage,
                                                                    Cause, StartTime (else the event time)
    aws.ec2           EC2 Spot Instance Interruption Warning        instance-id, instance-action
    aws.ec2           EC2 Instance Rebalance Recommendation         instance-id
    aws.ec2           EC2 Capacity Reservation Instance             instance-id, instance-action
                      Interruption Warning

Any other shape (another detail-type, not an object) is an UnsupportedEventError; a handled
detail-type whose fields have the wrong JSON types or sizes is a MalformedEventError naming them.
Strings are JSON strings (no numbers for names or times), times carry their zone, every string and
array is bounded; fields AWS adds later are ignored, and so is a null StatusMessage or Cause (only
their wording is read).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, cast

from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
)

from shared.controller.validation import describe_validation_error, preview
from shared.domain.errors import InputError

LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
# An interruptible Capacity Reservation whose owner reclaims it: two minutes' notice, as for Spot (EC2 user
# guide, "Monitor interruptible Capacity Reservations with EventBridge and CloudTrail").
RESERVATION_INTERRUPTION = "EC2 Capacity Reservation Instance Interruption Warning"
MAX_MESSAGE_CHARS = 2048  # StatusMessage and Cause are read for their kind and shown in reasons


class UnsupportedEventError(InputError):
    """Not an event this function handles: it is ignored."""


class MalformedEventError(InputError):
    """A handled detail-type with fields of the wrong type or size; `fields` names them."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


def _text(value: object) -> object:
    # Lax datetimes also take numbers (epoch seconds); an EventBridge time is always an ISO string.
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError("expected an ISO 8601 time as a JSON string")
    return value


EventTime = Annotated[AwareDatetime, BeforeValidator(_text)]
# Read only for their wording: a null is no message, not a reason to lose the failure.
Message = Annotated[
    StrictStr,
    BeforeValidator(lambda value: "" if value is None else value),
    AfterValidator(lambda text: text[:MAX_MESSAGE_CHARS]),
]


Name = Annotated[StrictStr, Field(max_length=128)]


class _StrictEventBridge(EventBridgeModel):
    """The EventBridge envelope with strict, bounded fields."""

    version: Annotated[StrictStr, Field(max_length=16)]
    id: Name
    source: Name
    account: Annotated[StrictStr, Field(pattern=r"^[0-9]{12}$")]
    time: EventTime
    region: Annotated[StrictStr, Field(max_length=32, pattern=r"^[a-z0-9-]+$")]
    resources: list[Annotated[StrictStr, Field(max_length=2048)]] = Field(
        default_factory=list, max_length=100
    )
    replay_name: Annotated[StrictStr, Field(max_length=256)] | None = Field(default=None, alias="replay-name")


class _Detail(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class LaunchUnsuccessfulDetail(_Detail):
    asg_name: Annotated[StrictStr, Field(min_length=1, max_length=255)] = Field(alias="AutoScalingGroupName")
    status_message: Message = Field(default="", alias="StatusMessage")
    cause: Message = Field(default="", alias="Cause")
    start_time: EventTime | None = Field(default=None, alias="StartTime")


class InstanceDetail(_Detail):
    instance_id: Annotated[StrictStr, Field(pattern=r"^i-[0-9a-f]{8,17}$")] = Field(alias="instance-id")
    instance_action: Annotated[StrictStr, Field(max_length=32)] = Field(default="", alias="instance-action")


class LaunchUnsuccessful(_StrictEventBridge):
    detail_type: Literal["EC2 Instance Launch Unsuccessful"] = Field(alias="detail-type")
    source: Literal["aws.autoscaling"]
    detail: LaunchUnsuccessfulDetail

    @property
    def failed_at(self) -> datetime:
        return self.detail.start_time or self.time


class SpotInterruption(_StrictEventBridge):
    detail_type: Literal["EC2 Spot Instance Interruption Warning"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: InstanceDetail


class ReservationInterruption(_StrictEventBridge):
    detail_type: Literal["EC2 Capacity Reservation Instance Interruption Warning"] = Field(
        alias="detail-type"
    )
    source: Literal["aws.ec2"]
    detail: InstanceDetail


class RebalanceRecommendation(_StrictEventBridge):
    detail_type: Literal["EC2 Instance Rebalance Recommendation"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: InstanceDetail


_Handled = LaunchUnsuccessful | SpotInterruption | ReservationInterruption | RebalanceRecommendation
_MODELS: dict[str, type[_Handled]] = {
    LAUNCH_UNSUCCESSFUL: LaunchUnsuccessful,
    SPOT_INTERRUPTION: SpotInterruption,
    RESERVATION_INTERRUPTION: ReservationInterruption,
    REBALANCE_RECOMMENDATION: RebalanceRecommendation,
}


def parse_aws_event(event: object) -> _Handled:
    """One of the handled events; UnsupportedEventError or MalformedEventError (naming the fields)."""
    detail_type = event.get("detail-type") if isinstance(event, Mapping) else None
    model = _MODELS.get(detail_type) if isinstance(detail_type, str) else None
    if model is None:
        what = (
            f"detail-type {preview(detail_type, 100)}" if isinstance(event, Mapping) else type(event).__name__
        )
        raise UnsupportedEventError(f"event: not handled here: {what}; handled: {', '.join(_MODELS)}")
    try:
        return parse(event=cast(dict[str, Any], event), model=model)
    except ValidationError as exc:
        message, fields = describe_validation_error(exc, f"event {detail_type}")
        raise MalformedEventError(message, fields) from exc
