"""GPU faults in the replay (`simulate --gpu-failures-per-gpu-day RATE`): broken nodes, and the real
planner's repair replacing them.

Rate: the Llama 3 paper (Meta, "The Llama 3 Herd of Models", 2024, section 3.3.4) reports 419
unexpected interruptions in 54 days of pre-training on 16,384 H100 GPUs, 58.7 % of them GPU
faults (faulty GPUs, HBM3, SRAM, NVLink...): about one GPU fault per 3,600 GPU-days
(`LLAMA3_FAULTS_PER_GPU_DAY`). The default rate is 0: no fault, and the replay is exactly the one
without this module.

What a fault does, as on a real node:
- When: each node draws its time to fault once, when it registers, from an exponential law with
  rate GPUs x RATE per day (faults of distinct GPUs are independent). The draw comes from a random
  generator seeded by (seed, node name), so a replay is reproducible and a node's fault does not
  move when another node comes or goes.
- The jobs running on the node fail, every pod of them (a gang fails whole, as NCCL does), and are
  resubmitted: they wait again as pending pods and restart from scratch, a moved job from the
  checkpoint its last move kept (the GPU time of the run killed is lost work).
- The node reports it the way the EKS node monitoring agent and the NVIDIA device plugin do:
  `AcceleratedHardwareReady=False` from the fault on, and the faulty GPU withdrawn from
  `status.allocatable` (`status.capacity` keeps it). Its other GPUs still take pods: kube-scheduler
  reads neither the condition nor the planner's judgement.
- Repair is the real planner's (shared.planner.repair, through `shared.planner.plan`): its room is no
  longer counted; past `policy.repair.toleration_seconds` an idle broken node is terminated (the
  controller's `termination_blocker`, as for any termination), a busy one is cordoned and tainted
  `backlog-scaler/unhealthy:NoSchedule` (`apply_repair_cordons`, as shared.controller.repair does)
  and replaced once empty. With `policy.repair.enabled: false` the broken node stays until the end.

Faults happen while the trace is live (a job to arrive, run or wait): once it is over nothing is
drawn any more, so the replay ends as it would without faults.
"""

from __future__ import annotations

import heapq
import random
from bisect import insort
from dataclasses import dataclass, field, replace

from shared.config import RepairConfig
from shared.domain.model import Node, NodeCondition
from shared.domain.plan import Plan, RepairAction
from shared.domain.resources import GPU, Resources
from shared.local.sim.binding import Binder
from shared.local.sim.entities import INF, SimJob, SimNode, at
from shared.local.sim.state import SimState
from shared.planner.repair import repair_taint

LLAMA3_FAULTS_PER_GPU_DAY = 1 / 3600
SECONDS_PER_DAY = 86400
FAULT_CONDITION = "AcceleratedHardwareReady"
FAULT_REASON = "GpuFault"  # as the agent's reason names the failing subsystem

_FAULT, _DUE = range(2)  # entries of the injector's own clock: a node's fault, its toleration's end


@dataclass
class FaultFigures:
    """What faults cost over one replay (the report's `faults` section)."""

    rate_per_gpu_day: float
    seed: int
    faults: int = 0  # nodes whose GPU failed
    repaired: int = 0  # broken nodes terminated (their replacement launched when the group needed it)
    repair_cordons: int = 0  # busy broken nodes cordoned and tainted for health
    jobs_restarted: int = 0  # runs killed by a fault, resubmitted and started again from scratch
    lost_work_gpu_seconds: int = 0  # GPU time those runs had done, redone (counted in the GPU time used)
    broken_gpu_seconds: int = 0  # GPUs of broken nodes x time from the fault to termination (or the end)
    # Repair's circuit breaker (policy.repair.max_unhealthy_fraction): per group, how long the plans
    # paused its repair, and the planner's reason the first time; broken nodes it kept at least once.
    max_unhealthy_fraction: float = 0.2
    paused_seconds: dict[str, int] = field(default_factory=dict)
    paused_reasons: dict[str, str] = field(default_factory=dict)
    paused_nodes: set[str] = field(default_factory=set)


def fault_rng(seed: int, node_name: str) -> random.Random:
    """The node's own generator: its draw depends on nothing else in the replay."""
    return random.Random(f"{seed}:{node_name}")


def reports_fault(node: Node, since: int) -> Node:
    """`node` as a node with one faulty GPU reports itself: the condition False, one GPU withdrawn."""
    capacity = node.allocatable
    condition = NodeCondition(
        FAULT_CONDITION, "False", at(since), FAULT_REASON, "a GPU failed (simulated fault)"
    )
    allocatable = Resources.of((k, v - 1 if k == GPU else v) for k, v in capacity.items)
    return replace(
        node,
        allocatable=allocatable,
        capacity=capacity,
        conditions=(*node.conditions, condition),
    )


class FaultInjector:
    """Draws, injects and accounts GPU faults; applies the planner's repair cordons in the replay."""

    def __init__(
        self,
        state: SimState,
        binder: Binder,
        jobs: list[SimJob],
        rate: float,
        seed: int,
        repair: RepairConfig,
    ) -> None:
        self._state = state
        self._binder = binder
        self._jobs = jobs
        self._toleration = repair.toleration_seconds
        self._clock: list[tuple[int, int, int, SimNode]] = []  # (when, seq, kind, node)
        self._seq = 0
        self._broken: dict[str, tuple[SimNode, int]] = {}  # node name -> (node, fault time), alive
        self._paused_since: dict[str, int] = {}  # group -> when its repair pause began
        self.figures = FaultFigures(rate, seed, max_unhealthy_fraction=repair.max_unhealthy_fraction)

    def _push(self, when: int, kind: int, node: SimNode) -> None:
        self._seq += 1
        heapq.heappush(self._clock, (when, self._seq, kind, node))

    def arm(self, node: SimNode | None, now: int) -> None:
        """A node registered: draw when its GPUs fail."""
        if node is None:
            return
        rate = node.group.gpus_per_node * self.figures.rate_per_gpu_day / SECONDS_PER_DAY
        if rate > 0:
            after = fault_rng(self.figures.seed, node.name).expovariate(rate)
            self._push(now + max(1, int(after)), _FAULT, node)

    def next_time(self) -> float:
        """When the next fault or toleration end happens (INF: none, or the trace is over)."""
        state = self._state
        if not self._clock or not (state.events.job_events or state.pending or state.arrived):
            return INF
        return self._clock[0][0]

    def due(self, now: int) -> None:
        """Faults and toleration ends at `now`."""
        clock = self._clock
        while clock and clock[0][0] <= now:
            _, _, kind, node = heapq.heappop(clock)
            if self._state.nodes.get(node.name) is not node:
                continue  # terminated before its fault
            if kind == _DUE:
                self._state.dirty = True  # the repair is due: the next reconcile must plan
            elif node.gpus_ready:
                self._fail(node, now)
            else:
                self._push(now + 1, _FAULT, node)  # the device plugin has not advertised yet

    def _fail(self, node: SimNode, now: int) -> None:
        state = self._state
        self.figures.faults += 1
        for job in self._jobs_on(node):
            self._restart(job, now)
        state.untally(node, now)
        free = list(node.slot.allocatable)
        free[0] -= 1
        state.scheduler.change(node.slot, allocatable=tuple(free))
        node.broken = True
        state.tally(node)
        node.reported = lambda domain: reports_fault(domain, now)
        node.forget_domain()
        self._broken[node.name] = (node, now)
        state.dirty = True
        state.last_active = now
        self._push(now + self._toleration, _DUE, node)

    def _jobs_on(self, node: SimNode) -> list[SimJob]:
        return [job for job in self._jobs if any(pod.node is node for pod in job.pods)]

    def _restart(self, job: SimJob, now: int) -> None:
        """The job failed: its pods leave their nodes and wait again, from scratch (Binder.finish's
        bookkeeping undone, the start taken back)."""
        state = self._state
        assert job.start is not None
        ran = now - job.start
        for pod, vec in zip(job.pods, job.vecs, strict=True):
            node = pod.node
            assert node is not None
            state.untally(node, now)
            state.live_pods[pod.key] = pod.pending
            pod.node = None
            state.scheduler.give(node.slot, vec)
            node.pods -= 1
            state.tally(node)
            node.group.busy_gpus -= vec[0]
            # Used, for work that is lost: GPU time the pods ran, as the report's `used` counts it.
            node.group.result.busy_gpu_seconds += vec[0] * ran
            self._binder.used_gpu_seconds += vec[0] * ran
            self.figures.lost_work_gpu_seconds += vec[0] * ran
            if node.pods == 0 and node.seen_idle is not None:
                state.unseen += -1 if node.seen_idle else 1
            if node.schedulable:
                state.capacity_grew = True
        self._binder.started -= 1
        # The wait counted when it first started: a moved job's start is that of its run since the move.
        assert job.wait is not None
        self._binder.waits.remove(job.wait)
        job.wait = None  # not started until it runs again (the ideal counts only started jobs)
        job.start = job.finish = None
        state.pending_gpus += job.gpus
        state.unseen += 1  # the backlog grew
        insort(state.pending, job, key=lambda j: (j.job.submit, j.index))  # oldest first, as loaded
        state.dirty = True
        self.figures.jobs_restarted += 1

    @staticmethod
    def live(job: SimJob, now: int) -> bool:
        """Whether a job's finish event is its current run's (a restarted job's old one is stale)."""
        return job.finish == now and job.pods[0].node is not None

    def apply_repair_cordons(self, result: Plan, now: int) -> bool:
        """The plan's cordons of busy broken nodes (taint, then cordon, as the controller does); and
        broken nodes the plan's terminations removed are counted repaired, its repair pauses timed."""
        state = self._state
        changed = False
        self._note_pauses(result, now)
        for decision in result.repair:
            node = state.nodes.get(decision.node)
            if decision.action is not RepairAction.CORDON or node is None or node.cordoned_at is not None:
                continue
            state.untally(node, now)
            node.taint = repair_taint()
            node.cordoned_at = now
            state.tally(node)
            state.restyle(node)
            self.figures.repair_cordons += 1
            changed = True
        for name, (node, since) in list(self._broken.items()):
            if state.nodes.get(name) is not node:
                del self._broken[name]
                self.figures.repaired += 1
                self.figures.broken_gpu_seconds += (now - since) * node.group.gpus_per_node
        return changed

    def _note_pauses(self, result: Plan, now: int) -> None:
        """Time the groups whose repair the plan pauses, and keep the broken nodes the pause holds."""
        figures = self.figures
        for decision in result.repair:
            if decision.action is RepairAction.PAUSED:
                figures.paused_nodes.add(decision.node)
                figures.paused_reasons.setdefault(decision.group, decision.reason)
        paused = result.repair_paused
        for group in paused:
            self._paused_since.setdefault(group, now)
        for group in [g for g in self._paused_since if g not in paused]:
            self._end_pause(group, now)

    def _end_pause(self, group: str, now: int) -> None:
        since = self._paused_since.pop(group)
        seconds = self.figures.paused_seconds
        seconds[group] = seconds.get(group, 0) + max(0, now - since)

    def finish(self, end: int) -> FaultFigures:
        """The figures at the end of the replay (nodes still broken, pauses still on, count up to `end`)."""
        for node, since in self._broken.values():
            self.figures.broken_gpu_seconds += max(0, end - since) * node.group.gpus_per_node
        self._broken.clear()
        for group in list(self._paused_since):
            self._end_pause(group, end)
        return self.figures
