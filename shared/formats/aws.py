"""AWS CLI / API JSON (`aws autoscaling describe-auto-scaling-groups`) to domain objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import AsgInstance, AsgState


def asg_from_json(obj: Mapping[str, Any], region: str = "") -> AsgState:
    """One AutoScalingGroup element of DescribeAutoScalingGroups."""
    return AsgState(
        name=str(obj["AutoScalingGroupName"]),
        min_size=int(obj["MinSize"]),
        max_size=int(obj["MaxSize"]),
        desired=int(obj["DesiredCapacity"]),
        instances=tuple(
            AsgInstance(
                instance_id=str(i["InstanceId"]),
                lifecycle_state=str(i.get("LifecycleState") or "InService"),
                health_status=str(i.get("HealthStatus") or "Healthy"),
                availability_zone=str(i.get("AvailabilityZone") or ""),
                instance_type=str(i.get("InstanceType") or ""),
            )
            for i in obj.get("Instances") or ()
        ),
        tags={str(t["Key"]): str(t.get("Value") or "") for t in obj.get("Tags") or ()},
        region=region or _region_from_arn(obj.get("AutoScalingGroupARN")),
        spot_only=_spot_only(obj.get("MixedInstancesPolicy")),
        availability_zones=tuple(sorted({str(zone) for zone in obj.get("AvailabilityZones") or ()})),
    )


def _spot_only(policy: object) -> bool | None:
    if not isinstance(policy, Mapping):
        return None
    distribution = policy.get("InstancesDistribution") or {}
    base = int(distribution.get("OnDemandBaseCapacity") or 0)
    # AWS's default for the percentage above base is 100 (all on-demand).
    above = distribution.get("OnDemandPercentageAboveBaseCapacity")
    return base == 0 and above is not None and int(above) == 0


def _region_from_arn(arn: object) -> str:
    parts = arn.split(":") if isinstance(arn, str) else []
    return parts[3] if len(parts) > 3 else ""


def asgs_from_describe(document: object, source: str = "asgs") -> dict[str, AsgState]:
    """DescribeAutoScalingGroups output to ASG states by name; InputError naming the source."""
    if not isinstance(document, Mapping) or not isinstance(document.get("AutoScalingGroups"), list):
        raise InputError(f"{source}: expected the output of describe-auto-scaling-groups (AutoScalingGroups)")
    out: dict[str, AsgState] = {}
    for index, item in enumerate(document["AutoScalingGroups"]):
        try:
            asg = asg_from_json(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(f"{source}: AutoScalingGroups[{index}]: malformed group: {detail}") from exc
        if asg.min_size < 0 or asg.max_size < asg.min_size or not 0 <= asg.desired <= max(asg.max_size, 0):
            raise InputError(
                f"{source}: AutoScalingGroups[{index}] ({asg.name}): inconsistent sizes "
                f"min={asg.min_size} desired={asg.desired} max={asg.max_size}"
            )
        out[asg.name] = asg
    return out
