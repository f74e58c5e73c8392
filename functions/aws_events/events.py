"""The EventBridge events the AWS-events function handles, as Powertools parser models.

    source            detail-type                                   detail fields read
    aws.autoscaling   EC2 Instance Launch Unsuccessful              AutoScalingGroupName, StatusMessage,
                                                                    Cause, StartTime (else the event time)
    aws.ec2           EC2 Spot Instance Interruption Warning        instance-id, instance-action
    aws.ec2           EC2 Instance Rebalance Recommendation         instance-id

Any other detail-type is an InputError naming the ones accepted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, cast

from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.config import format_validation_error
from shared.domain.errors import InputError

LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"


class _Detail(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class LaunchUnsuccessfulDetail(_Detail):
    asg_name: str = Field(alias="AutoScalingGroupName", min_length=1)
    status_message: str = Field(default="", alias="StatusMessage")
    cause: str = Field(default="", alias="Cause")
    start_time: datetime | None = Field(default=None, alias="StartTime")


class InstanceDetail(_Detail):
    instance_id: str = Field(alias="instance-id", pattern=r"^i-[0-9a-f]+$")
    instance_action: str = Field(default="", alias="instance-action")


class LaunchUnsuccessful(EventBridgeModel):
    detail_type: Literal["EC2 Instance Launch Unsuccessful"] = Field(alias="detail-type")
    source: Literal["aws.autoscaling"]
    detail: LaunchUnsuccessfulDetail

    @property
    def failed_at(self) -> datetime:
        return self.detail.start_time or self.time


class SpotInterruption(EventBridgeModel):
    detail_type: Literal["EC2 Spot Instance Interruption Warning"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: InstanceDetail


class RebalanceRecommendation(EventBridgeModel):
    detail_type: Literal["EC2 Instance Rebalance Recommendation"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: InstanceDetail


AwsEvent = Annotated[
    LaunchUnsuccessful | SpotInterruption | RebalanceRecommendation, Field(discriminator="detail_type")
]


_Handled = LaunchUnsuccessful | SpotInterruption | RebalanceRecommendation


def parse_aws_event(event: object) -> _Handled:
    """One of the handled events; InputError naming the bad field or the unsupported detail-type."""
    try:
        return parse(event=cast(dict[str, Any], event), model=cast(type[_Handled], AwsEvent))
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, "event")) from exc
