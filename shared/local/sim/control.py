"""The simulated controller: each reconcile plans on a snapshot and applies the plan as the controller does,
through the controller's own rules (shared.domain.safety), never a copy of them.

Terminations first (re-validated by `termination_blocker` on the node and the pods on it now; a
terminated node disappears, desired drops by one when decrementing), then uncordons and cordons
(`cordon_blocker`), then attrition marks are lifted and put on (re-validated: a node still there, not
cordoned), then migrations are applied (shared.local.sim.migration), then desired is set to what
`desired_to_set` says (raised freely, lowered only to cancel instances not launched yet); the stored
state is written back.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from shared.config import ScalerConfig
from shared.domain.model import AsgState, Pod, Snapshot, Taint, TaintEffect
from shared.domain.plan import Plan, ReasonCode
from shared.domain.safety import cordon_blocker, desired_to_set, termination_blocker
from shared.local.sim.entities import INF, SimGroup, SimNode, at, epoch_seconds
from shared.local.sim.faults import FaultInjector
from shared.local.sim.fleet import SimFleet
from shared.local.sim.state import SimState
from shared.local.sim.store import SimStateStore


class SimController:
    """The controller in the replay: plan, re-validate, apply, store; and when the next plan can differ."""

    def __init__(
        self,
        state: SimState,
        store: SimStateStore,
        fleet: SimFleet,
        config: ScalerConfig,
        planner: Callable[[Snapshot, ScalerConfig, datetime], Plan],
    ) -> None:
        self._state = state
        self._store = store
        self._fleet = fleet
        self._config = config
        self._plan = planner
        self._cutoff = config.policy.pod_priority_cutoff
        self.plans = 0
        self.outcomes: dict[str, ReasonCode] = {}  # pod key -> the last plan's reason for it
        self.last_changed = False  # the last plan changed the world
        self.deadline: float = INF  # when a policy threshold is next crossed (after a no-op plan)
        self.migrate: Callable[[Plan, int], bool] | None = None  # applies the plan's migrations
        self.migration_due: Callable[[int], float] | None = None  # when the migration rule may decide anew
        self.stamp: Callable[[int], None] | None = None  # jobs' last checkpoints onto their pods
        self.faults: FaultInjector | None = None  # with GPU faults: applies repair's cordons

    def snapshot(self) -> Snapshot:
        """The simulated world as the controller reads it."""
        state = self._state
        asgs = {group.asg_name: self._asg(group) for group in state.groups}
        return Snapshot(
            pods=tuple(state.live_pods.values()),
            nodes=tuple([node.domain() for node in state.nodes.values()]),  # a list: no generator per node
            asgs=asgs,
            state=self._store.read(state.groups),
        )

    def _asg(self, group: SimGroup) -> AsgState:
        """The group's ASG as DescribeAutoScalingGroups would show it now (cached until it changes)."""
        if group.asg_cache is None:
            warm = self._fleet.warm
            group.asg_cache = AsgState(
                name=group.asg_name,
                min_size=group.min_size,
                max_size=group.max_size,
                desired=group.desired,
                instances=tuple(i.asg for i in group.instances.values()),
                warm_pool_size=len(warm[group.name]) if group.name in warm else None,
            )
        return group.asg_cache

    def _pods_on(self, node: SimNode) -> tuple[Pod, ...]:
        """The pods bound to `node` now, as the controller's fresh read lists them (none when idle)."""
        if not node.pods:
            return ()
        return tuple(p for p in self._state.live_pods.values() if p.node_name == node.name)

    def reconcile(self, now: int) -> None:
        state = self._state
        state.dirty = False
        state.unseen = 0
        state.epoch += 1
        for registered in state.nodes.values():
            registered.seen_idle = registered.pods == 0
        for job in state.pending:
            job.seen = state.epoch
        if self.stamp is not None:
            self.stamp(now)
        result = self._plan(self.snapshot(), self._config, at(now))
        self.plans += 1
        for outcome in result.pods:
            self.outcomes[outcome.pod] = outcome.code
        self._store.write(result)
        changed = self._terminate(result, now)
        if self.faults is not None:
            changed = self.faults.apply_repair_cordons(result, now) or changed
        changed = self._cordons(result, now) or changed
        changed = self._marks(result, now) or changed
        if self.migrate is not None and result.migrate:
            changed = self.migrate(result, now) or changed
        changed = self._desired(result, now) or changed
        self.last_changed = changed
        if changed:
            state.last_active = now
            self.deadline = INF
        else:
            self.deadline = self._next_deadline(now)

    def _terminate(self, result: Plan, now: int) -> bool:
        """Terminations, re-validated: an idle node still idle, an instance still there."""
        state = self._state
        changed = False
        for termination in result.terminate:
            group = state.group_by_name.get(termination.group)
            instance = group.instances.get(termination.instance_id) if group is not None else None
            if group is None or instance is None:
                continue
            node = instance.node
            if node is not None:
                pods = self._pods_on(node)
                if termination_blocker(termination, self._cutoff, at(now), None, node.domain(), pods):
                    if pods:
                        group.result.busy_terminations_refused += 1  # the re-validation keeps running jobs
                    continue
            self._fleet.remove(instance, now)
            changed = True
            if termination.decrement:
                group.desired = max(group.min_size, group.desired - 1)
                group.last_scale_down = now
                group.result.terminated += 1
                state.last_progress = now
            else:
                group.result.replaced += 1
        return changed

    def _cordons(self, result: Plan, now: int) -> bool:
        """Uncordons, then cordons (only of a node running nothing)."""
        state = self._state
        changed = False
        for action in result.uncordon:
            node = state.nodes.get(action.node)
            if node is None or node.cordoned_at is None:
                continue
            node.cordoned_at = None
            state.restyle(node)
            node.group.result.uncordons += 1
            changed = True
            if node.gpus_ready:
                state.capacity_grew = True
        for cordon in result.cordon:
            node = state.nodes.get(cordon.node)
            if node is None or cordon_blocker(
                self._cutoff, at(now), None, node.domain(), self._pods_on(node)
            ):
                continue
            node.cordoned_at = now
            state.restyle(node)
            node.group.result.cordons += 1
            changed = True
        return changed

    def _marks(self, result: Plan, now: int) -> bool:
        """Lift, then put on, the attrition taints, re-validated as the controller does."""
        state = self._state
        changed = False
        for action in result.unmark:
            node = state.nodes.get(action.node)
            if node is None or node.taint is None:
                continue
            state.untally(node, now)
            node.taint = None
            state.tally(node)
            state.restyle(node)
            node.group.result.unmarks += 1
            state.capacity_grew = True
            changed = True
        for mark in result.mark:
            node = state.nodes.get(mark.node)
            if node is None or node.taint is not None or node.cordoned_at is not None:
                continue
            state.untally(node, now)
            node.taint = Taint(mark.key, "", TaintEffect(mark.effect))
            state.tally(node)
            state.restyle(node)
            node.group.result.marks += 1
            changed = True
        return changed

    def _desired(self, result: Plan, now: int) -> bool:
        """Raise desired to the plan's value, or lower it only to cancel launches that have not happened."""
        changed = False
        for decision in result.groups:
            group = self._state.group_by_name.get(decision.name)
            if group is None:
                continue
            if decision.enter_backoff:
                self._fleet.capacity_failure(group, now)
                changed = True
            # Equal: nothing to set (desired_to_set says so too), and no ASG to describe for it.
            target = decision.desired
            desired = desired_to_set(target, self._asg(group)) if target != group.desired else None
            if desired is not None:
                if desired > group.desired:
                    group.last_scale_up = now
                    group.result.scale_ups += 1
                group.desired = desired
                group.asg_cache = None
                changed = True
            if group.alive < group.desired:
                self._fleet.launch(group, now)
                changed = True
        return changed

    def _next_deadline(self, now: int) -> float:
        """The earliest future time a policy threshold is crossed (INF: none)."""
        state = self._state
        policy = state.policy
        soonest: float = INF
        provision = policy.max_node_provision_seconds
        for group in state.groups:
            if group.backoff_until is not None and group.backoff_until > now:
                soonest = min(soonest, group.backoff_until)
        has_idle: set[int] = set()
        for node in state.nodes.values():
            if node.cordoned_at is not None:
                due = node.cordoned_at + policy.cordon_settle_seconds
                if due > now:
                    soonest = min(soonest, due)
                has_idle.add(node.group.index)
            elif node.pods == 0:
                since = self._store.idle_since_s.get(node.name)
                if since is not None:
                    due = since + node.group.idle_seconds
                    if due > now:
                        soonest = min(soonest, due)
                    has_idle.add(node.group.index)
            if not node.gpus_ready:
                due = node.created_at + provision
                if due > now:
                    soonest = min(soonest, due)
        if self.migration_due is not None:
            soonest = min(soonest, self.migration_due(now))
        return min(soonest, self._scale_down_delays(now, has_idle), self._pending_deadlines(now))

    def _scale_down_delays(self, now: int, has_idle: set[int]) -> float:
        """When the delays after a scale-up or scale-down end, for groups with idle nodes waiting."""
        policy = self._state.policy
        soonest: float = INF
        for group in self._state.groups:
            if group.index not in has_idle:
                continue
            for since, delay in (
                (group.last_scale_up, policy.scale_down_delay_after_add_seconds),
                (group.last_scale_down, policy.scale_down_delay_after_delete_seconds),
            ):
                if since is not None and since + delay > now:
                    soonest = min(soonest, since + delay)
        return soonest

    def _pending_deadlines(self, now: int) -> float:
        """When an unregistered instance's provisioning deadline or a new pod's delay ends."""
        policy = self._state.policy
        soonest: float = INF
        for first_seen in self._store.first_seen.values():
            due = epoch_seconds(first_seen) + policy.max_node_provision_seconds
            if due > now:
                soonest = min(soonest, due)
        if policy.new_pod_delay_seconds:
            for job in self._state.pending:
                due = job.job.submit + policy.new_pod_delay_seconds
                if due > now:
                    soonest = min(soonest, due)
        return soonest
