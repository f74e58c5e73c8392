"""AWS events: a failed launch backs its group off at once; a spot interruption warning holds its node.

Both then reconcile, so the same invocation spills the backlog to other groups (launch failure) or
plans around the node going away (interruption). Events about other groups or instances are ignored.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from enum import StrEnum

from shared import constants
from shared.controller import force_scale_down
from shared.controller.applier import Applier
from shared.controller.deps import Deps
from shared.controller.gather import foreign_reason, ours
from shared.controller.orchestrator import reconcile
from shared.controller.report import PodEvents, ReconcileResult, RunStatus
from shared.domain.errors import LeaseHeldError
from shared.domain.model import GroupState, Node
from shared.domain.operations import FailureKind
from shared.planner.rotation import ROTATION_TAINT_KEY, rebalance_taint
from shared.reporting import ActionKind, ActionRecord, ActionStatus


class InterruptionKind(StrEnum):
    SPOT_INTERRUPTION = "spot-interruption"
    RESERVATION_INTERRUPTION = "reservation-interruption"  # an interruptible Capacity Reservation reclaimed
    REBALANCE_RECOMMENDATION = "rebalance-recommendation"


def handle_capacity_event(
    deps: Deps,
    events: PodEvents,
    asg_name: str,
    at: datetime,
    kind: FailureKind,
    message: str,
    region: str | None = None,
) -> ReconcileResult:
    """An "EC2 Instance Launch Unsuccessful" event: back the group off now, then reconcile.

    Any failed launch backs off (the event is a launch failure by definition; `kind` is reported).
    A failure inside the group's current backoff belongs to the episode already counted. The backoff
    is one conditional write of its own: it needs no lease and must not wait for one. `region`: the
    event's; an ASG name is unique only within a region, so a group of another region is not it.
    """
    group = _group_of(deps, asg_name, region)
    if group is None:
        where = f" in {region}" if region else ""
        return _ignored(deps, f"launch failure of {asg_name}{where}, not a group of this cluster")
    applier = deps.applier(None)  # unleased: the backoff is one conditional write of its own
    current = deps.ports.state.load().groups.get(group, GroupState())
    reason = f"{kind}: {message}"
    if current.backoff_until is not None and at < current.backoff_until:
        until = current.backoff_until.isoformat()
        applier.note(
            ActionKind.BACKOFF,
            group,
            group,
            reason,
            ActionStatus.SKIPPED,
            f"already backing off until {until}",
        )
    elif applier.back_off(group, at, reason, deps.config.policy) is not None and not applier.dry_run:
        deps.reporter.metric(constants.METRIC_CAPACITY_FAILURES, 1, group=group)
    result = reconcile(deps, events, f"launch-unsuccessful {asg_name}")
    return replace(
        result, actions=tuple(applier.records) + result.actions, errors=tuple(applier.errors) + result.errors
    )


def handle_interruption(
    deps: Deps, events: PodEvents, instance_id: str, at: datetime, kind: InterruptionKind
) -> ReconcileResult:
    """A spot or interruptible-reservation interruption warning cordons the instance's node and holds
    it (the planner then buys room for its pods ahead); a rebalance recommendation marks it for
    rotation (no new pods, replaced once empty). Both reconcile.

    The hold is a drain intent that evicts nothing: the planner must not uncordon the node, and
    EC2 reclaims the instance within two minutes anyway.
    """
    trigger = f"{kind} {instance_id}"
    asgs = deps.ports.fleet.describe_groups([g.asg_name for g in deps.config.node_groups])
    owner = next(
        (a.name for a in asgs.values() if any(i.instance_id == instance_id for i in a.live_instances)), None
    )
    group = _group_of(deps, owner, None) if owner else None
    if group is None or owner is None:
        return _ignored(deps, f"{kind} for {instance_id}, not an instance of this cluster's groups")
    cluster = deps.config.cluster_name
    if owner in ours(asgs, cluster)[1]:  # left alone whole: no hold, no mark that no run would lift
        return _ignored(deps, f"{kind} for {instance_id}: {foreign_reason(owner, cluster)}")
    node = next((n for n in deps.ports.cluster.list_nodes() if n.instance_id == instance_id), None)
    records: tuple[ActionRecord, ...] = ()
    errors: tuple[str, ...] = ()
    if node is not None:
        now = deps.clock.now()
        with deps.lease(wait=True) as guard:
            applier = deps.applier(guard)
            try:
                if kind is InterruptionKind.REBALANCE_RECOMMENDATION:
                    _mark_rebalance(applier, node, group, at)
                else:
                    force_scale_down.hold_interrupted(applier, deps, node, group, at, now)
            except LeaseHeldError as exc:
                applier.lease_lost(exc)
        records, errors = tuple(applier.records), tuple(applier.errors)
    result = reconcile(deps, events, trigger)
    return replace(result, actions=records + result.actions, errors=errors + result.errors)


def _mark_rebalance(applier: Applier, node: Node, group: str, at: datetime) -> None:
    """An EC2 rebalance recommendation: no new pods land on the node (the rotation mark, its value
    naming the cause, so later runs rotate it: replaced once empty); nothing is evicted."""
    reason = f"EC2 rebalance recommendation at {at.isoformat()}: replaced once empty"
    if any(t.key == ROTATION_TAINT_KEY for t in node.taints):
        applier.note(
            ActionKind.MARK, node.name, group, reason, ActionStatus.SKIPPED, "already marked for rotation"
        )
        return
    applier.mark(node, rebalance_taint(), group, reason)


def _group_of(deps: Deps, asg_name: str, region: str | None) -> str | None:
    config = deps.config
    return next(
        (
            g.name
            for g in config.node_groups
            if g.asg_name == asg_name and (region is None or config.region_of(g) == region)
        ),
        None,
    )


def _ignored(deps: Deps, detail: str) -> ReconcileResult:
    deps.reporter.log("info", "event ignored", detail=detail)
    deps.reporter.flush()
    return ReconcileResult("aws-event", RunStatus.IGNORED, deps.dry_run, deps.clock.now(), detail=detail)
