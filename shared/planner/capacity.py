"""What an Auto Scaling group can really deliver this run: the AWS rules the planner must not
trust blindly (pure; `now` is passed in).

- Suspended processes (SuspendProcesses): with Launch suspended the group adds no instance, so it
  cannot grow and launches it was asked for never come; with Terminate suspended the scaler only
  cordons there (an instance would not leave).
- Launches that never come: desired above the instances for longer than
  `max_node_provision_seconds` is a capacity failure, as cluster-autoscaler treats a scale-up
  whose nodes have not registered by its ExpectedAddTime (clusterstate.go): the group backs off,
  desired is set back and the backlog spills. The clock restarts whenever desired is raised (as
  CA's RegisterScaleUp resets ExpectedAddTime); it is kept in the stored first-seen map under a
  per-group key, so no new state is needed.
- Capacity reservations (ODCRs and Capacity Blocks for ML): free reserved instances are already
  paid for, so their marginal price is zero; a group that can launch only into its reservations
  grows at most by what is free. A Capacity Block's instances are terminated by EC2 from 30
  minutes before its end; within `reservation_end_margin_seconds` of the end the group takes no
  scale-up and its nodes are cordoned (Karpenter drains 10 minutes before EC2 reclaims).
- Zones: a group guarantees a zone only when it launches in exactly one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.config import PolicyConfig
from shared.domain.model import AsgState, CapacityReservation

LAUNCH_CLOCK_PREFIX = "launches:"  # key prefix of the launch clocks in the first-seen map
# ASG CapacityReservationPreference that falls back to On-Demand once reservations are full.
PREFERENCE_RESERVATIONS_FIRST = "capacity-reservations-first"
PREFERENCE_RESERVATIONS_ONLY = "capacity-reservations-only"
PREFERENCE_NONE = "none"


@dataclass(frozen=True)
class GroupCapacity:
    """The AWS-side facts of one group for this run."""

    growth_blocked: str | None = None  # why the group cannot grow (None: it can, within max)
    terminate_blocked: str | None = None  # why nothing is terminated there (cordons only)
    launches_overdue: str | None = None  # launches that never came: a capacity failure
    launch_clock: datetime | None = None  # since when launches have been awaited (None: none are)
    reserved_free: int | None = None  # free reserved instances (None: no reservation)
    reserved_only: bool = False  # launches only into its reservations
    # Instances of the reservations it launches into, used or free (None: no reservation): a group
    # that launches only there never holds more nodes than that, whatever its max size.
    reserved_total: int | None = None
    block_cordon: str | None = None  # a Capacity Block ends soon: cordon every node of the group
    zones: tuple[str, ...] = ()

    @property
    def reservations_note(self) -> str:
        if self.reserved_free is None:
            return ""
        only = ", launches only there" if self.reserved_only else ", then On-Demand"
        return f"{self.reserved_free} free reserved instance(s){only}"


def launch_clock_key(asg_name: str) -> str:
    return f"{LAUNCH_CLOCK_PREFIX}{asg_name}"


def shortfall(asg: AsgState) -> int:
    """Nodes the group was asked for that have no instance yet (desired minus live, in nodes)."""
    return max(0, asg.desired - len(asg.live_instances))


def group_capacity(
    asg: AsgState | None,
    first_seen: Mapping[str, datetime],
    policy: PolicyConfig,
    now: datetime,
    instance_type: str = "",
) -> GroupCapacity:
    """The facts of one group; `first_seen` is the stored first-seen map (it holds the launch clocks).

    The reservations are those the fleet adapter attached to the group (its own target ids and the
    configured `capacity_reservation_ids` of its launch template); `instance_type` is the configured
    one, for a group whose ASG names no instance types of its own."""
    if asg is None:
        return GroupCapacity()
    blocked: list[str] = []
    if asg.launch_suspended:
        blocked.append("its Launch process is suspended: it adds no instance")
    if asg.units is not None and not asg.units.per_node:
        blocked.append(
            f"its desired capacity is counted in {asg.units.capacity_type} and the size of its instance types"
            " is unknown"
        )
    clock, overdue = _launch_clock(asg, first_seen, policy, now)
    types = asg.instance_types or ((instance_type,) if instance_type else ())
    active = [r for r in asg.reservations if r.state == "active" and _launches_into(asg, types, r)]
    free, total, only, cordon = _reservations(asg, active, policy, now, blocked)
    if asg.reservations and only and not free:
        blocked.extend(_mismatches(asg, types))
    return GroupCapacity(
        growth_blocked="; ".join(blocked) or None,
        terminate_blocked="its Terminate process is suspended: nodes are cordoned, never terminated"
        if asg.terminate_suspended
        else None,
        launches_overdue=overdue,
        launch_clock=clock,
        reserved_free=free,
        reserved_total=total,
        reserved_only=only,
        block_cordon=cordon,
        zones=asg.availability_zones,
    )


def _launch_clock(
    asg: AsgState, first_seen: Mapping[str, datetime], policy: PolicyConfig, now: datetime
) -> tuple[datetime | None, str | None]:
    missing = shortfall(asg)
    if not missing or asg.launch_suspended:
        return None, None
    since = first_seen.get(launch_clock_key(asg.name), now)
    deadline = policy.max_node_provision_seconds
    if now - since < timedelta(seconds=deadline):
        return since, None
    return since, (
        f"{missing} launch(es) asked for since {since.isoformat()} produced no instance within {deadline}s"
    )


def _launches_into(asg: AsgState, types: tuple[str, ...], reservation: CapacityReservation) -> bool:
    """Whether an instance of the group can run in the reservation: EC2 uses a reservation for
    instances of its instance type, platform, tenancy and Availability Zone (EC2 User Guide,
    "Capacity Reservations"); type and zone are what a group's instances can differ in here. An
    unknown list of the group's matches anything."""
    type_ok = not types or reservation.instance_type in types
    zone_ok = not asg.availability_zones or reservation.availability_zone in asg.availability_zones
    return type_ok and zone_ok


def _mismatches(asg: AsgState, types: tuple[str, ...]) -> list[str]:
    """Why reservations attached to the group give it nothing: their type or zone is not the group's."""
    launches = (
        f"{', '.join(types) or 'its instance types'} in {', '.join(asg.availability_zones) or 'its zones'}"
    )
    return [
        f"capacity reservation {r.reservation_id} holds {r.instance_type} in {r.availability_zone}, but the"
        f" group launches {launches}"
        for r in asg.reservations
        if not _launches_into(asg, types, r)
    ]


def _reservations(
    asg: AsgState,
    active: list[CapacityReservation],
    policy: PolicyConfig,
    now: datetime,
    blocked: list[str],
) -> tuple[int | None, int | None, bool, str | None]:
    """Free reserved instances, all the usable reserved instances (used or free), whether the group
    launches only into them, and a block-end cordon."""
    if not asg.reservations or asg.reservation_preference == PREFERENCE_NONE:
        return None, None, False, None
    blocks = [r for r in asg.reservations if r.is_capacity_block]
    # A Capacity Block is launched into only (its market type). A launch targeting a full
    # reservation fails (ReservationCapacityExceeded) unless the group's preference falls back to
    # On-Demand; an open reservation never restricts a launch (instances run On-Demand beyond it).
    only = bool(blocks) or asg.reservation_preference == PREFERENCE_RESERVATIONS_ONLY
    if asg.reservation_preference != PREFERENCE_RESERVATIONS_FIRST:
        only = only or all(r.match_criteria == "targeted" for r in asg.reservations)
    margin = timedelta(seconds=policy.reservation_end_margin_seconds)
    usable = [r for r in active if not (r.is_capacity_block and r.end is not None and now >= r.end - margin)]
    free = sum(max(0, r.available) for r in usable)
    total = sum(max(0, r.total) for r in usable)
    cordon = None
    active_blocks = [r for r in active if r.is_capacity_block and r.end is not None]
    if active_blocks and not any(r.is_capacity_block for r in usable):
        end = max(r.end for r in active_blocks if r.end is not None)
        cordon = (
            f"Capacity Block {', '.join(r.reservation_id for r in active_blocks)} ends at {end.isoformat()}"
        )
        blocked.append(f"{cordon}: no scale-up within its last {policy.reservation_end_margin_seconds}s")
    elif only and not free:
        ids = ", ".join(r.reservation_id for r in asg.reservations)
        blocked.append(f"no free instance in its capacity reservation(s) {ids}")
    return free, total, only, cordon


def next_launch_clock(asg: AsgState, capacity: GroupCapacity, desired: int, now: datetime) -> datetime | None:
    """The launch clock to store after a plan that leaves the group at `desired` nodes: restarted
    when the plan raises desired, kept while launches are still awaited, dropped otherwise."""
    if desired > asg.desired:
        return now
    if asg.launch_suspended or desired <= len(asg.live_instances) or capacity.launches_overdue:
        return None
    return capacity.launch_clock
