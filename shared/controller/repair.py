"""Node health repair on the apply side: busy unhealthy nodes cordoned and tainted, through the applier.

The plan's `repair[]` decides (shared.planner.repair); replacements are ordinary terminations of the
plan (re-validated by `safety.termination_blocker`: never a busy node) and recovered nodes are lifted
by the plan's uncordon and unmark. What is left here is the cordon of a busy unhealthy node: re-read,
tainted `backlog-scaler/unhealthy:NoSchedule` with that read's resourceVersion (a node changed in
between is a conflict, decided again next run), then cordoned; each step is skipped when already
done, so a half-applied cordon completes on the next run. A Warning Event on the node says why. The
node's pods are never evicted. Nodes a forced scale-down drains are left alone.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from shared.controller.applier import Applier
from shared.controller.attrition import FreshRead
from shared.domain.model import Node
from shared.domain.operations import ClusterEvent, EventType, ObjectRef
from shared.domain.plan import Plan, RepairAction, RepairDecision
from shared.planner.repair import health_tainted, repair_taint
from shared.reporting import ActionKind, ActionStatus

EVENT_UNHEALTHY = "NodeUnhealthy"


def cordon_unhealthy(
    applier: Applier, plan: Plan, draining: frozenset[str], fresh: FreshRead, at: datetime
) -> tuple[ClusterEvent, ...]:
    """Cordon and taint the plan's busy unhealthy nodes; the Warning Events to record about them."""
    events: list[ClusterEvent] = []
    for decision in plan.repair:
        if decision.action is not RepairAction.CORDON or decision.node in draining:
            continue
        read = fresh(decision.node)
        node = None if isinstance(read, str) else read[0]
        blocker = read if isinstance(read, str) else _blocker(decision, node)
        if blocker or node is None:
            applier.note(
                ActionKind.CORDON,
                decision.node,
                decision.group,
                decision.reason,
                ActionStatus.SKIPPED,
                blocker or "",
            )
            continue
        if _cordon(applier, node, decision, at):
            events.append(
                ClusterEvent(
                    ObjectRef("Node", node.name), EVENT_UNHEALTHY, decision.reason, EventType.WARNING
                )
            )
    return tuple(events)


def _blocker(decision: RepairDecision, node: Node | None) -> str | None:
    if node is None:
        return "the node is gone"
    if node.instance_id != decision.instance_id:
        return f"the node now belongs to instance {node.instance_id}"
    if node.unschedulable and health_tainted(node):
        return "it is already cordoned for health"
    return None


def _cordon(applier: Applier, node: Node, decision: RepairDecision, at: datetime) -> bool:
    """Taint (if missing), then cordon (if not cordoned); True when both are in place (or dry run)."""
    if not health_tainted(node) and not applier.mark(node, repair_taint(), decision.group, decision.reason):
        return False
    if node.unschedulable:
        return True
    # The taint changed the node's resourceVersion: the cordon goes without a precondition (it only
    # makes the node unschedulable, which the taint already made it for new pods).
    unversioned = replace(node, resource_version="")
    return applier.cordon(unversioned, decision.group, decision.reason, at, retry_conflict=False)
