"""Consolidation by attrition on the apply side: the plan's marks lifted and put on, through the applier.

Lifts first (they give room back, never destructive; a node that is gone is skipped by the applier's
policy), then marks, each re-validated on a fresh read of its node (`attrition.mark_blocker`: gone,
cordoned, not Ready, protected) and applied with that read's resourceVersion, so a node changed in
between is a conflict, skipped until the next run decides again. Nodes a forced scale-down drains are
left alone. A mark never evicts anything.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.controller.applier import Applier
from shared.domain.model import Node, Pod, Taint, TaintEffect
from shared.domain.plan import Plan
from shared.planner.attrition import mark_blocker
from shared.reporting import ActionKind, ActionStatus

FreshRead = Callable[[str], "tuple[Node | None, tuple[Pod, ...]] | str"]  # a node and its pods, or why not


def apply_marks(applier: Applier, plan: Plan, draining: frozenset[str], fresh: FreshRead) -> None:
    """Lift the plan's unmarks, then put on its marks, each re-validated on `fresh(node)`."""
    for lift in plan.unmark:
        if lift.node not in draining:
            applier.unmark(lift.node, lift.key, lift.group, lift.reason)
    for mark in plan.mark:
        if mark.node in draining:
            continue
        read = fresh(mark.node)
        node = None if isinstance(read, str) else read[0]
        blocker = read if isinstance(read, str) else mark_blocker(*read)
        if blocker or node is None:
            applier.note(
                ActionKind.MARK, mark.node, mark.group, mark.reason, ActionStatus.SKIPPED, blocker or ""
            )
            continue
        applier.mark(node, Taint(mark.key, "", TaintEffect(mark.effect)), mark.group, mark.reason)
