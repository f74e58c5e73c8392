"""The replay's state store (`SimStateStore`: the DynamoDB table in production, not an implementation of the
StateStore port): what the planner remembers between runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared.domain.model import GroupState, NodeState, PodMemory, ScalerState
from shared.domain.plan import Plan
from shared.local.sim.entities import SimGroup, at, at_or_none, epoch_seconds


class SimStateStore:
    """Idle-since per node, instances first seen, pod memory; a group's state lives on the group."""

    def __init__(self) -> None:
        self.idle_since: dict[str, NodeState] = {}
        self.idle_since_s: dict[str, int] = {}  # the same, as epoch seconds
        self.pod_memory: Mapping[str, PodMemory] = {}
        self.first_seen: dict[str, datetime] = {}
        self._last_plan_idle: Mapping[str, datetime] = {}

    def write(self, result: Plan) -> None:
        """The idle-since and first-seen maps are replaced by the plan's, as the controller stores them."""
        if result.idle_since != self._last_plan_idle:
            self._last_plan_idle = result.idle_since
            stored = self.idle_since
            fresh: dict[str, NodeState] = {}
            fresh_s: dict[str, int] = {}
            for name, since in result.idle_since.items():
                previous = stored.get(name)
                if previous is not None and previous.idle_since == since:
                    fresh[name] = previous
                    fresh_s[name] = self.idle_since_s[name]
                else:
                    fresh[name] = NodeState(since)
                    fresh_s[name] = epoch_seconds(since)
            self.idle_since = fresh
            self.idle_since_s = fresh_s
        self.first_seen = dict(result.instances_first_seen)
        self.pod_memory = result.pod_memory  # the ground-truth memory, stored as the real store does

    def forget_node(self, name: str) -> None:
        self.idle_since.pop(name, None)
        self.idle_since_s.pop(name, None)

    def forget_instance(self, instance_id: str) -> None:
        self.first_seen.pop(instance_id, None)

    def read(self, groups: list[SimGroup]) -> ScalerState:
        """What the planner reads back from the store."""
        states: dict[str, GroupState] = {}
        for group in groups:
            if (
                group.backoff_until is not None
                or group.last_scale_up is not None
                or group.last_scale_down
                or group.migrated_at
                or group.moved_jobs
            ):
                states[group.name] = GroupState(
                    backoff_until=at_or_none(group.backoff_until),
                    last_scale_up=at_or_none(group.last_scale_up),
                    last_scale_down=at_or_none(group.last_scale_down),
                    migrated_at=tuple(at(t) for t in group.migrated_at),
                    moved_jobs=group.moved_jobs,
                )
        return ScalerState(
            nodes=dict(self.idle_since),
            groups=states,
            instances_first_seen=dict(self.first_seen),
            pods=self.pod_memory,
        )
