"""The simulated ASGs and EC2 (`SimFleet`: not an implementation of the Fleet port): launches (capped by
capacity, sped up by warm pools), boot, removal."""

from __future__ import annotations

from shared.domain.safety import Backoff, is_counted, next_backoff
from shared.local.sim.entities import (
    BOOTING,
    GPUS_READY,
    REGISTER,
    SimGroup,
    SimInstance,
    SimNode,
    at,
    at_or_none,
    epoch_seconds,
)
from shared.local.sim.state import SimState
from shared.local.sim.store import SimStateStore
from shared.local.sim.world import BootModel, launchable, take_warm


class SimFleet:
    """Instances of every group from launch to termination, and the group's capacity backoff."""

    def __init__(self, state: SimState, store: SimStateStore) -> None:
        options = state.options
        self._state = state
        self._store = store
        self._boot = BootModel(options.boot_seconds, options.gpu_delay_seconds)
        # Warm pools start full: when each warm instance can next be taken.
        self.warm = {name: [0] * pool.size for name, pool in options.warm_pools.items()}
        self._instance_seq = 0

    def launch(self, group: SimGroup, now: int) -> bool:
        """Launch instances up to desired; False when EC2 had no capacity for all of them."""
        state = self._state
        while group.alive < group.desired:
            if not launchable(group.capacity, group.alive, 1):
                group.result.launch_failures += 1
                self.capacity_failure(group, now)
                return False
            self._instance_seq += 1
            instance_id = f"i-{self._instance_seq:017x}"
            instance = SimInstance(instance_id, group, now)
            group.instances[instance_id] = instance
            group.alive += 1
            group.asg_cache = None
            state.idle[BOOTING] += group.gpus_per_node
            group.result.launched += 1
            group.result.peak_nodes = max(group.result.peak_nodes, group.alive)
            state.events.push(self._registers_at(group, now), REGISTER, instance)
        return True

    def _registers_at(self, group: SimGroup, now: int) -> int:
        """When an instance launched now registers: sooner when taken from the group's warm pool."""
        options = self._state.options
        pool = options.warm_pools.get(group.name)
        if pool is not None and take_warm(self.warm[group.name], now, options.boot_seconds):
            return now + pool.boot_seconds
        return self._boot.registers_at(now)

    def capacity_failure(self, group: SimGroup, now: int) -> None:
        """Exponential backoff, as the state store records it (policy.backoff_*)."""
        previous = Backoff(group.failures, at_or_none(group.last_failure), at_or_none(group.backoff_until))
        if is_counted(previous, at(now)):
            return
        after = next_backoff(previous, at(now), self._state.policy)
        assert after.until is not None
        group.failures, group.last_failure = after.failures, now
        group.backoff_until = epoch_seconds(after.until)
        group.result.backoffs += 1

    def remove(self, instance: SimInstance, now: int) -> None:
        """The instance is terminated; its node, if it registered, leaves the cluster."""
        state = self._state
        group = instance.group
        del group.instances[instance.instance_id]
        group.alive -= 1
        group.asg_cache = None
        group.result.node_seconds += now - instance.launched_at
        node = instance.node
        if node is None:
            group.result.booting_gpu_seconds += (now - instance.launched_at) * group.gpus_per_node
            state.idle[BOOTING] -= group.gpus_per_node
        else:
            state.untally(node, now)
            group.result.pods_lost += node.pods  # jobs killed with their node (never, by re-validation)
            state.scheduler.remove(node.slot)
            del state.nodes[node.name]
            self._store.forget_node(node.name)
        self._store.forget_instance(instance.instance_id)

    def register(self, instance: SimInstance, now: int) -> None:
        """The instance booted: its Node registers (GPUs advertised now or after the device plugin)."""
        state = self._state
        group = instance.group
        if group.instances.get(instance.instance_id) is not instance:
            return  # terminated while booting
        # Names sort in launch order: the scheduler's ties and the planner's follow it.
        name = f"ip-{int(instance.instance_id[2:], 16):07d}.{group.name}"
        gpus_ready = state.options.gpu_delay_seconds == 0
        node = SimNode(name, instance, now, gpus_ready)
        instance.node = node
        state.nodes[name] = node
        state.scheduler.add(node.slot)
        state.idle[BOOTING] -= group.gpus_per_node
        state.tally(node)
        group.result.booting_gpu_seconds += (now - instance.launched_at) * group.gpus_per_node
        state.dirty = True
        state.last_progress = now
        if gpus_ready:
            state.capacity_grew = True
        else:
            state.events.push(self._boot.advertises_at(now), GPUS_READY, node)

    def advertise_gpus(self, node: SimNode, now: int) -> None:
        """The device plugin advertises the node's GPUs (unless it left meanwhile)."""
        state = self._state
        if node.name in state.nodes and not node.gpus_ready:
            state.untally(node, now)
            node.gpus_ready = True
            state.tally(node)
            state.scheduler.change(node.slot, allocatable=node.group.vector(True))
            node.forget_domain()
            state.dirty = True
            if node.cordoned_at is None:
                state.capacity_grew = True
