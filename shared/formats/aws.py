"""AWS CLI / API JSON to domain objects: `aws autoscaling describe-auto-scaling-groups`,
`aws ec2 describe-subnets`, `aws ec2 describe-capacity-reservations` (boto3 gives the same shapes,
with datetimes where the CLI prints ISO 8601 strings)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import AsgInstance, AsgState, CapacityReservation, CapacityUnits, nodes_for_units
from shared.formats.lifecycle import launch_template_ref

# DesiredCapacityType values that count each instance by its size, not by one (attribute-based
# instance type selection); "units" counts WeightedCapacity (1 per instance without weights).
SIZE_CAPACITY_TYPES = frozenset({"vcpu", "memory-mib"})


def asg_from_json(obj: Mapping[str, Any], region: str = "") -> AsgState:
    """One AutoScalingGroup element of DescribeAutoScalingGroups; sizes in nodes (see `with_units`)."""
    policy = obj.get("MixedInstancesPolicy")
    overrides = _overrides(policy)
    reservation = obj.get("CapacityReservationSpecification") or {}
    target = reservation.get("CapacityReservationTarget") or {}
    warm_pool = obj.get("WarmPoolConfiguration")
    asg = AsgState(
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
                weighted_capacity=_int_or_none(i.get("WeightedCapacity")),
                launch_template=launch_template_ref(i),
                launch_configuration=str(i.get("LaunchConfigurationName") or ""),
            )
            for i in obj.get("Instances") or ()
        ),
        tags={str(t["Key"]): str(t.get("Value") or "") for t in obj.get("Tags") or ()},
        region=region or _region_from_arn(obj.get("AutoScalingGroupARN")),
        spot_only=_spot_only(policy),
        availability_zones=tuple(sorted({str(zone) for zone in obj.get("AvailabilityZones") or ()})),
        instance_types=tuple(dict.fromkeys(name for name, _ in overrides)),
        type_weights={name: weight for name, weight in overrides if weight is not None},
        suspended_processes=frozenset(
            str(p["ProcessName"]) for p in obj.get("SuspendedProcesses") or () if p.get("ProcessName")
        ),
        subnet_ids=tuple(s.strip() for s in str(obj.get("VPCZoneIdentifier") or "").split(",") if s.strip()),
        warm_pool_size=int(obj.get("WarmPoolSize") or 0) if isinstance(warm_pool, Mapping) else None,
        reservation_preference=str(reservation.get("CapacityReservationPreference") or ""),
        reservation_ids=tuple(str(r) for r in target.get("CapacityReservationIds") or ()),
        launch_template=launch_template_ref(obj),
        launch_configuration=str(obj.get("LaunchConfigurationName") or ""),
    )
    capacity_type = str(obj.get("DesiredCapacityType") or "units")
    if asg.type_weights or capacity_type in SIZE_CAPACITY_TYPES:
        return with_units(asg, _per_node(asg, capacity_type), capacity_type)
    return asg


def with_units(asg: AsgState, per_node: int, capacity_type: str = "") -> AsgState:
    """The group with its sizes in nodes, from its sizes in units and the units of one template node.

    The units -> nodes direction of the weighted-capacity rule (`AsgState.units_for` is the other):
    called by the parser, and by the fleet adapter once instance type data tells how many vCPUs or
    MiB one node of a vcpu / memory-mib group counts for.
    """
    raw = asg.units or CapacityUnits(asg.desired, asg.min_size, asg.max_size, per_node)
    units = CapacityUnits(
        raw.desired, raw.min_size, raw.max_size, per_node, capacity_type or raw.capacity_type
    )
    sized = replace(asg, units=units)
    live = [sized.instance_units(i) for i in sized.live_instances]
    desired = nodes_for_units(units.desired, live, per_node)
    return replace(
        sized,
        desired=desired,
        min_size=min(nodes_for_units(units.min_size, live, per_node), desired),
        # Never below what the group has or is launching: AWS may overshoot the maximum by less
        # than one instance's weight.
        max_size=max(nodes_for_units(units.max_size, live, per_node, round_up=False), desired, len(live)),
    )


def _overrides(policy: object) -> list[tuple[str, int | None]]:
    """(instance type, WeightedCapacity) of each MixedInstancesPolicy override naming a type."""
    if not isinstance(policy, Mapping):
        return []
    template = policy.get("LaunchTemplate") or {}
    return [
        (str(o["InstanceType"]), _int_or_none(o.get("WeightedCapacity")))
        for o in template.get("Overrides") or ()
        if o.get("InstanceType")
    ]


def _per_node(asg: AsgState, capacity_type: str) -> int:
    """Units of one template node: the smallest weight of the group's types, the template being its
    smallest shape. vcpu / memory-mib groups: what their smallest live instance counts for, else 0
    (unknown until instance type data tells; the fleet adapter fills it in)."""
    if capacity_type not in SIZE_CAPACITY_TYPES:
        weights = [asg.type_weights.get(t, 1) for t in asg.instance_types] or [1]
        return min(weights)
    seen = [i.weighted_capacity for i in asg.live_instances if i.weighted_capacity]
    return min(seen) if seen else 0


def _int_or_none(value: object) -> int | None:
    if value is None or value == "":
        return None
    return int(str(value))


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


def subnet_zones(document: Mapping[str, Any]) -> dict[str, str]:
    """Zone of each subnet in a DescribeSubnets output (`aws ec2 describe-subnets`)."""
    return {str(s["SubnetId"]): str(s["AvailabilityZone"]) for s in document.get("Subnets") or ()}


def capacity_reservation_from_json(obj: Mapping[str, Any]) -> CapacityReservation:
    """One CapacityReservations element of DescribeCapacityReservations."""
    return CapacityReservation(
        reservation_id=str(obj["CapacityReservationId"]),
        instance_type=str(obj.get("InstanceType") or ""),
        availability_zone=str(obj.get("AvailabilityZone") or ""),
        total=int(obj.get("TotalInstanceCount") or 0),
        available=int(obj.get("AvailableInstanceCount") or 0),
        state=str(obj.get("State") or ""),
        reservation_type=str(obj.get("ReservationType") or "default"),
        start=_time(obj.get("StartDate")),
        end=_time(obj.get("EndDate")) if obj.get("EndDateType") != "unlimited" else None,
        match_criteria=str(obj.get("InstanceMatchCriteria") or "open"),
    )


def capacity_reservations_from_describe(
    document: object, source: str = "reservations"
) -> dict[str, CapacityReservation]:
    """DescribeCapacityReservations output to reservations by id; InputError naming the source."""
    if not isinstance(document, Mapping) or not isinstance(document.get("CapacityReservations"), list):
        raise InputError(
            f"{source}: expected the output of describe-capacity-reservations (CapacityReservations)"
        )
    out: dict[str, CapacityReservation] = {}
    for index, item in enumerate(document["CapacityReservations"]):
        try:
            reservation = capacity_reservation_from_json(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(
                f"{source}: CapacityReservations[{index}]: malformed reservation: {exc}"
            ) from exc
        out[reservation.reservation_id] = reservation
    return out


def reservation_ids_of(asg: AsgState, configured: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The reservations a group launches into: its own CapacityReservationTarget's, then those the
    config names for it (`node_groups[].capacity_reservation_ids`, by ASG name), each once."""
    return tuple(dict.fromkeys((*asg.reservation_ids, *configured.get(asg.name, ()))))


def with_reservations(
    groups: Mapping[str, AsgState],
    reservations: Mapping[str, CapacityReservation],
    configured: Mapping[str, Sequence[str]],
) -> dict[str, AsgState]:
    """Each group with the described reservations it launches into; ids not described are left out
    (a reservation that no longer exists holds no capacity)."""
    return {
        name: replace(
            asg,
            reservations=tuple(
                reservations[r] for r in reservation_ids_of(asg, configured) if r in reservations
            ),
        )
        for name, asg in groups.items()
    }


def _time(value: object) -> datetime | None:
    """A boto3 datetime or the CLI's ISO 8601 string, as an aware UTC datetime."""
    if value is None or value == "":
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
