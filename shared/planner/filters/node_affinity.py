"""NodeAffinity: nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity
(plugins/nodeaffinity/node_affinity.go; nodeSelectorTerms are ORed, expressions ANDed, and an
empty term list matches nothing, which the parser never produces)."""

from __future__ import annotations

from collections.abc import Mapping

from shared.domain.model import Scheduling
from shared.planner.filters.framework import Reason

REASON = "node(s) didn't match Pod's node affinity/selector"


def node_affinity(scheduling: Scheduling, labels: Mapping[str, str]) -> Reason:
    """None when the node's labels satisfy the pod's selector and required affinity."""
    return None if scheduling.selects(labels) else REASON
