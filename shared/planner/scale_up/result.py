"""What scale-up decides: where each backlog pod goes, and what that asks of nodes and groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from shared.domain.model import Pod, PodMemory
from shared.domain.plan import PodOutcome
from shared.planner.ground_truth import Recall, remember


@dataclass
class Placed:
    """What one step placed: each step returns its own, `plan_scale_up` merges them in order."""

    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    uncordon: dict[str, str] = field(default_factory=dict)  # node -> group name ("" if unmanaged)
    busy_nodes: set[str] = field(default_factory=set)  # registered nodes receiving pods this run
    counted_on: dict[str, str] = field(default_factory=dict)  # pod -> registered node it is counted on
    scaled_up_in: dict[str, str] = field(default_factory=dict)  # pod -> group grown for it
    # group -> gang -> its members (stand-ins too) on new nodes of the group, for the group's reason
    gangs_bought: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def merge(self, other: Placed) -> None:
        """Add what a later step placed (no pod is placed by two steps)."""
        self.outcomes.update(other.outcomes)
        self.uncordon.update(other.uncordon)
        self.busy_nodes |= other.busy_nodes
        self.counted_on.update(other.counted_on)
        self.scaled_up_in.update(other.scaled_up_in)
        for group, gangs in other.gangs_bought.items():
            mine = self.gangs_bought.setdefault(group, {})
            for gang, members in gangs.items():
                mine.setdefault(gang, []).extend(members)


@dataclass
class ScaleUpResult(Placed):
    new_nodes: dict[str, int] = field(default_factory=dict)  # by group name
    spare_bins: dict[str, int] = field(default_factory=dict)  # booting/new bins nothing was placed on
    saturated: set[str] = field(default_factory=set)  # groups at max with pods still waiting for them
    recalled: Recall = field(default_factory=Recall)
    pending: list[Pod] = field(default_factory=list)

    def pod_memory(self, now: datetime) -> dict[str, PodMemory]:
        """The memory of pending pods to store for the next run."""
        return remember(self.pending, self.recalled, self.counted_on, self.scaled_up_in, now)
