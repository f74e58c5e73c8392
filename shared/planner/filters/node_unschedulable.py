"""NodeUnschedulable: a cordoned node takes no new pod unless the pod tolerates
`node.kubernetes.io/unschedulable:NoSchedule` (plugins/nodeunschedulable/node_unschedulable.go)."""

from __future__ import annotations

from shared.domain.model import Scheduling, Taint, TaintEffect
from shared.planner.filters.framework import Reason

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", TaintEffect.NO_SCHEDULE)
REASON = "node(s) were unschedulable"


def node_unschedulable(scheduling: Scheduling, unschedulable: bool) -> Reason:
    """None when the node is schedulable or the pod tolerates the unschedulable taint."""
    if not unschedulable:
        return None
    if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in scheduling.tolerations):
        return None
    return REASON
