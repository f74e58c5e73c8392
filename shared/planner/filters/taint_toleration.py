"""TaintToleration: every NoSchedule/NoExecute taint must be tolerated; PreferNoSchedule only scores
(plugins/tainttoleration/taint_toleration.go)."""

from __future__ import annotations

from shared.domain.model import Scheduling, Taint
from shared.planner.filters.framework import Reason


def taint_toleration(scheduling: Scheduling, taints: tuple[Taint, ...]) -> Reason:
    """None when all hard taints are tolerated; else the scheduler's message for the first one."""
    untolerated = scheduling.untolerated(taints)
    if not untolerated:
        return None
    taint = untolerated[0]
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
