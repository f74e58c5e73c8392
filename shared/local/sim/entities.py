"""The simulated world's objects: options, figures, and the groups, instances, nodes, jobs and pods."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING

from shared.config import AttritionConfig, NodeGroupConfig, PolicyConfig
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgInstance,
    AsgState,
    Node,
    Pod,
    Taint,
)
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.local.sim.scheduler import DEFAULT_SCORING, NodeClass, PodRequest, Scoring, Slot
from shared.local.sim.trace import Job
from shared.local.sim.workload import Sizing
from shared.local.sim.world import WarmPool
from shared.planner.eks import KUBELET_DEFAULT_MAX_PODS as DEFAULT_MAX_PODS

if TYPE_CHECKING:
    from shared.local.sim.faults import FaultFigures

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INF = math.inf
NAMESPACE = "sim"
DEFAULT_ASG_MAX_SIZE = 1000  # the ASG's MaxSize when the config sets no max_size
STALL_SECONDS = 6 * 3600  # give up after this long without progress once no job runs or is to arrive

ARRIVE, FINISH, REGISTER, GPUS_READY = range(4)
NO_STRINGS: Mapping[str, str] = MappingProxyType({})
DIMS = (GPU, CPU, MEMORY, PODS)  # the scheduler's vector order: [gpus, millicores, bytes, pod slots]
# Why provisioned GPUs are idle (HELD: by attrition marks; BROKEN: on a node with a GPU fault, the
# withdrawn GPU included, whatever else holds the node).
BOOTING, EMPTY, FRAGMENTED, HELD, BROKEN = range(5)


def at(seconds: int) -> datetime:
    """Epoch seconds as an aware datetime."""
    return EPOCH + timedelta(seconds=seconds)


def epoch_seconds(when: datetime) -> int:
    """An aware datetime as whole epoch seconds."""
    return (when - EPOCH) // timedelta(seconds=1)


@dataclass(frozen=True)
class SimOptions:
    """How the world around the planner behaves (not the scaler config: that is the thing tested)."""

    boot_seconds: int = 300  # launch to Node registered
    gpu_delay_seconds: int = 0  # Node registered to GPUs advertised by the device plugin
    tick_seconds: int = 60  # the EventBridge schedule
    webhook_delay_seconds: int | None = None  # None: the config's deployment.webhook_queue_delay_seconds
    webhook: bool = True  # reconcile after job arrivals too
    capacity: Mapping[str, int] = field(default_factory=dict)  # group -> most instances EC2 gives
    sizing: Sizing | None = None  # None: default_sizing(config)
    asg_max_size: int = DEFAULT_ASG_MAX_SIZE
    every_tick: bool = False  # run the planner at every opportunity (no skipping)
    # Route each job without group/selector to the group of the smallest nodes that hold it whole
    # (the largest nodes for gangs), as an admission policy adding a nodeSelector by GPU count would.
    right_size: bool = False
    record_series: bool = True  # keep the time series for the plot
    stall_seconds: int = STALL_SECONDS
    scoring: Scoring = DEFAULT_SCORING  # how the simulated scheduler ranks feasible nodes
    # Pods carry their job's duration as the expected-runtime annotation (a user's exact estimate).
    runtime_estimates: bool = False
    warm_pools: Mapping[str, WarmPool] = field(default_factory=dict)  # group -> its ASG's warm pool
    # Migration of jobs that checkpoint (policy.migration): the share of jobs whose pods opt in
    # (picked deterministically), how often they save, and how long a moved job takes to start again.
    checkpointable: float = 0.0
    checkpoint_interval_seconds: int = 1800
    restart_seconds: int = 300
    # They also write backlog-scaler/last-checkpoint each time they save (the scaler then knows the
    # work a move loses instead of assuming the whole interval).
    last_checkpoint: bool = False
    gpu_failures_per_gpu_day: float = 0.0  # GPU faults (shared.local.sim.faults); 0: none
    fault_seed: int = 0  # the faults' draws: the same seed, the same faults


@dataclass
class GroupResult:
    """Figures of one node group over the replay."""

    name: str
    gpus_per_node: int
    price_per_hour: float | None
    node_seconds: int = 0  # instance running time, launch to termination (boot included)
    busy_gpu_seconds: int = 0
    launched: int = 0
    terminated: int = 0  # scale-down terminations (desired decremented)
    replaced: int = 0  # instances replaced (never registered in time)
    scale_ups: int = 0  # reconciles that raised desired
    cordons: int = 0
    uncordons: int = 0
    peak_nodes: int = 0  # most instances at once (booting included)
    launch_failures: int = 0
    backoffs: int = 0
    # Provisioned GPU time that ran nothing, by why (with busy time they sum to the provisioned):
    booting_gpu_seconds: int = 0  # launched, not registered or GPUs not advertised yet
    empty_gpu_seconds: int = 0  # on nodes running no pod (idle, or cordoned before termination)
    fragmented_gpu_seconds: int = 0  # free GPUs of nodes that run some pod (unmarked)
    held_gpu_seconds: int = 0  # free GPUs beside running pods on nodes marked for attrition
    broken_idle_gpu_seconds: int = 0  # GPUs of broken nodes that run nothing (the faulty one included)
    marks: int = 0  # attrition taints put on
    unmarks: int = 0  # attrition taints lifted
    busy_terminations_refused: int = 0  # planned terminations of nodes running pods, not applied
    pods_lost: int = 0  # pods still running on a node when it was terminated
    migrations: int = 0  # nodes emptied by moving jobs that checkpoint
    migration_lost_gpu_seconds: int = 0  # work since the moved jobs' last checkpoints, plus restarts
    evicted_not_movable: int = 0  # pods a migration evicted that had not opted in (must stay 0)


@dataclass
class Series:
    """Change points over time: pending GPUs, and per group provisioned and busy GPUs."""

    groups: tuple[str, ...]
    times: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    provisioned: list[list[int]] = field(default_factory=list)  # per group
    busy: list[list[int]] = field(default_factory=list)  # per group
    # Idle GPUs by cause: booting, empty, fragmented, held by marks, on broken nodes.
    idle: list[tuple[int, int, int, int, int]] = field(default_factory=list)


@dataclass
class SimResult:
    """Raw figures of one replay; `shared.local.sim.report` turns them into the report."""

    config_name: str
    options: SimOptions
    jobs: int
    pods: int
    started: int
    waits: list[int]  # seconds, one per started job, sorted
    ideal_gpu_seconds: int  # GPUs x duration of every job that started
    used_gpu_seconds: int  # GPU time of pods that ran
    groups: list[GroupResult]
    start: int
    end: int
    wall_seconds: float
    plans: int  # planner runs
    skipped: int  # reconcile opportunities skipped because the plan could not differ
    stalled: bool  # stopped early: nothing running or to arrive, and no progress for the stall limit
    not_started: dict[str, int]  # reason code -> jobs never started
    fractional_jobs: int
    series: Series | None
    sizing: Sizing
    webhook_delay_seconds: int | None
    attrition: AttritionConfig = field(default_factory=AttritionConfig)
    migration_enabled: bool = False  # policy.migration.enabled
    moves_per_job: list[int] = field(default_factory=list)  # moves of each job moved at least once
    restart_delays: list[int] = field(default_factory=list)  # eviction to productive again, sorted
    faults: FaultFigures | None = None  # with --gpu-failures-per-gpu-day only

    @property
    def provisioned_gpu_seconds(self) -> int:
        return sum(g.node_seconds * g.gpus_per_node for g in self.groups)


class SimGroup:
    """A node group: its simulated ASG, node shape, stored state and figures."""

    __slots__ = (
        "alive",
        "allocatable",
        "allocatable_booting",
        "asg_cache",
        "asg_name",
        "backoff_until",
        "busy_gpus",
        "capacity",
        "classes",
        "config",
        "desired",
        "failures",
        "free_shape",
        "gpus_per_node",
        "idle_seconds",
        "index",
        "instances",
        "labels",
        "last_failure",
        "last_scale_down",
        "last_scale_up",
        "max_size",
        "migrated_at",
        "min_size",
        "moved_jobs",
        "name",
        "result",
        "taints",
    )

    def __init__(
        self, index: int, config: NodeGroupConfig, shape: Resources, options: SimOptions, policy: PolicyConfig
    ) -> None:
        self.index = index
        self.config = config
        self.name: str = config.name
        self.asg_name: str = config.asg_name
        self.labels: Mapping[str, str] = MappingProxyType(dict(config.labels))
        self.taints = config.domain_taints
        if shape.get(PODS) == 0:
            shape = shape + Resources.of({PODS: DEFAULT_MAX_PODS})
        self.allocatable = shape
        self.allocatable_booting = Resources(tuple((k, v) for k, v in shape.items if k != GPU))
        self.free_shape = (shape.gpus, shape.get(CPU), shape.get(MEMORY), shape.get(PODS))
        self.gpus_per_node = shape.gpus
        self.idle_seconds: int = (
            config.idle_seconds if config.idle_seconds is not None else policy.idle_seconds
        )
        self.min_size = 0
        self.max_size: int = config.max_size if config.max_size is not None else options.asg_max_size
        self.desired = 0
        self.capacity: int | None = options.capacity.get(self.name)
        self.instances: dict[str, SimInstance] = {}  # alive ones
        self.alive = 0
        self.busy_gpus = 0
        self.last_scale_up: int | None = None
        self.last_scale_down: int | None = None
        self.migrated_at: list[int] = []  # migrations of the last hour (the per-hour budget)
        self.moved_jobs: dict[str, tuple[int, datetime]] = {}  # moves per job, as the store keeps them
        self.backoff_until: int | None = None
        self.failures = 0
        self.last_failure: int | None = None
        self.asg_cache: AsgState | None = None
        self.result = GroupResult(self.name, self.gpus_per_node, config.price_per_hour)
        self.classes: dict[tuple[Taint | None, bool], NodeClass] = {}

    def node_class(self, mark: Taint | None, cordoned: bool) -> NodeClass:
        """What the scheduler's static filters see of a node of the group (one object per kind)."""
        found = self.classes.get((mark, cordoned))
        if found is None:
            taints = self.taints if mark is None else (*self.taints, mark)
            found = self.classes[(mark, cordoned)] = NodeClass(self.labels, taints, cordoned)
        return found

    def vector(self, gpus_ready: bool) -> tuple[int, int, int, int]:
        """Allocatable as the scheduler's vector; no GPUs until the device plugin advertises them."""
        gpus, cpu, memory, pods = self.free_shape
        return (gpus if gpus_ready else 0, cpu, memory, pods)


class SimInstance:
    """An EC2 instance of a group; `node` once it registered."""

    __slots__ = ("asg", "group", "instance_id", "launched_at", "node")

    def __init__(self, instance_id: str, group: SimGroup, launched_at: int) -> None:
        self.instance_id = instance_id
        self.group = group
        self.launched_at = launched_at
        self.node: SimNode | None = None
        self.asg = AsgInstance(instance_id)


class SimNode:
    """A registered node: free room [gpus, millicores, bytes, pod slots], pods, cordon."""

    __slots__ = (
        "_domain",
        "accounted",
        "broken",
        "cordoned_at",
        "created_at",
        "free",
        "gpus_ready",
        "group",
        "instance",
        "name",
        "pods",
        "reported",
        "seen_idle",
        "slot",
        "taint",
    )

    def __init__(self, name: str, instance: SimInstance, created_at: int, gpus_ready: bool) -> None:
        self.name = name
        self.instance = instance
        self.group = instance.group
        self.created_at = created_at
        self.gpus_ready = gpus_ready
        self.cordoned_at: int | None = None
        self.taint: Taint | None = None  # the scaler's attrition mark, when it carries one
        vector = self.group.vector(gpus_ready)
        self.slot = Slot(name, (created_at, name), self.group.node_class(None, False), vector, list(vector))
        self.free = self.slot.free  # the scheduler's free room: [gpus, millicores, bytes, pod slots]
        self.pods = 0  # live pods bound here
        self.accounted = created_at  # GPU time of this node is accounted up to here
        self.seen_idle: bool | None = None  # idleness the last plan saw (None: not seen yet)
        self._domain: Node | None = None
        self.reported: Callable[[Node], Node] | None = None  # how a faulty node reports itself (faults.py)
        self.broken = False  # a GPU failed (faults.py): its idle GPUs are BROKEN, whatever else holds it

    def idle_gpus(self) -> tuple[int, int]:
        """(why, how many) of this node's GPUs run nothing right now."""
        if not self.gpus_ready:
            return BOOTING, self.group.gpus_per_node
        if self.broken:  # the withdrawn GPU is not in the scheduler's room: GPUs per node less those busy
            return BROKEN, self.group.gpus_per_node - self.slot.allocatable[0] + self.free[0]
        if self.pods == 0:
            return EMPTY, self.group.gpus_per_node
        return (HELD if self.taint is not None else FRAGMENTED), self.free[0]

    def account(self, now: int) -> None:
        """Add the unused GPU time since the last accounting to the group's waste figures."""
        elapsed = now - self.accounted
        if elapsed:
            result = self.group.result
            cause, gpus = self.idle_gpus()
            if cause == BOOTING:
                result.booting_gpu_seconds += elapsed * gpus
            elif cause == EMPTY:
                result.empty_gpu_seconds += elapsed * gpus
            elif cause == HELD:
                result.held_gpu_seconds += elapsed * gpus
            elif cause == BROKEN:
                result.broken_idle_gpu_seconds += elapsed * gpus
            else:
                result.fragmented_gpu_seconds += elapsed * gpus
            self.accounted = now

    def node_class(self) -> NodeClass:
        return self.group.node_class(self.taint, self.cordoned_at is not None)

    def forget_domain(self) -> None:
        """Its GPUs, cordon or mark changed: the domain Node is built anew when next read."""
        self._domain = None

    @property
    def schedulable(self) -> bool:
        return self.gpus_ready and self.cordoned_at is None

    def domain(self) -> Node:
        if self._domain is None:
            created = at(self.created_at)
            cordoned = self.cordoned_at is not None
            allocatable = self.group.allocatable if self.gpus_ready else self.group.allocatable_booting
            self._domain = Node(
                name=self.name,
                instance_id=self.instance.instance_id,
                allocatable=allocatable,
                # As the kubelet reports it: capacity = allocatable until a device is lost (faults.py).
                # Without it node repair could not tell lost GPUs and judged every node bad input.
                capacity=allocatable,
                labels=self.group.labels,
                annotations=(
                    MappingProxyType({ANNOTATION_CORDONED_AT: at(self.cordoned_at).isoformat()})
                    if self.cordoned_at is not None
                    else NO_STRINGS
                ),
                # The group's one list per kind of node, as the scheduler's class holds it: the
                # planner's per-run verdicts keyed by a list's identity then judge marked nodes once.
                taints=self.group.node_class(self.taint, cordoned).taints,
                unschedulable=cordoned,
                ready=True,
                ready_changed_at=created,
                created_at=created,
            )
            if self.reported is not None:
                self._domain = self.reported(self._domain)
        return self._domain


class SimJob:
    """A trace job with its pods, the groups its selector admits, start and finish."""

    __slots__ = (
        "allowed",
        "checkpoints",
        "created",
        "done",
        "evicted_at",
        "finish",
        "gpus",
        "index",
        "job",
        "moves",
        "pods",
        "requests",
        "runtime",
        "seen",
        "start",
        "vecs",
        "wait",
    )

    def __init__(self, index: int, job: Job) -> None:
        self.index = index
        self.job = job
        self.gpus = job.gpus
        self.pods: list[SimPod] = []
        self.vecs: list[tuple[int, int, int, int]] = []
        self.requests: list[PodRequest] = []
        self.allowed: tuple[bool, ...] = ()
        self.start: int | None = None
        self.finish: int | None = None
        self.seen = -1  # the plan (epoch) that last saw this job pending
        self.runtime = job.duration  # how long its next (or current) run takes
        self.done = 0  # work saved by checkpoints before it was moved
        self.moves = 0
        self.evicted_at: int | None = None  # moved and not running again yet
        self.checkpoints = False  # its pods opt in to migration (--checkpointable)
        self.created = job.submit  # its pods' creation time: the submit, or its last move
        self.wait: int | None = None  # the wait counted when it started (a move does not start it again)

    def work_begins(self, restart: int) -> int | None:
        """When the running job's run starts making progress: at its start, or after the `restart`
        for a job that was moved (None: not running)."""
        if self.start is None:
            return None
        return self.start + (restart if self.moves else 0)

    def saved_seconds(self, now: int, interval: int, restart: int) -> int:
        """Seconds of work the running job has saved in this run by `now`: a checkpoint every
        `interval` seconds of work since `work_begins`."""
        begins = self.work_begins(restart)
        if begins is None or interval <= 0:
            return 0
        productive = max(0, now - begins)
        return productive - productive % interval

    def last_save(self, now: int, interval: int, restart: int) -> int | None:
        """When the running job last saved its work (None: not yet in this run)."""
        begins = self.work_begins(restart)
        saved = self.saved_seconds(now, interval, restart)
        return begins + saved if begins is not None and saved else None


class SimPod:
    """One pod of a job: its pending domain Pod and the node it runs on."""

    __slots__ = ("gpus", "key", "node", "pending")

    def __init__(self, pending: Pod) -> None:
        self.pending = pending
        self.key = pending.key
        self.gpus = pending.requests.gpus
        self.node: SimNode | None = None


def at_or_none(seconds: int | None) -> datetime | None:
    return at(seconds) if seconds is not None else None


def running(pending: Pod, node_name: str) -> Pod:
    """The pending pod, bound to `node_name` and running."""
    return Pod(
        namespace=pending.namespace,
        name=pending.name,
        requests=pending.requests,
        phase="Running",
        node_name=node_name,
        scheduling=pending.scheduling,
        labels=pending.labels,
        annotations=pending.annotations,
        owner_kind=pending.owner_kind,
        owner_name=pending.owner_name,
        created_at=pending.created_at,
        uid=pending.uid,
    )
