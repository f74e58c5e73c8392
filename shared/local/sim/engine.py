"""The discrete-event replay: simulated ASGs, nodes, scheduler and state store around the real planner.

What is simulated, and how it mirrors production:
- ASGs: `desired` and instances. An instance launched at t registers as a Node at t + boot_seconds;
  its GPUs are advertised `gpu_delay_seconds` later (until then the planner sees a booting node).
  An optional capacity cap per group makes launches beyond it fail; the group then backs off
  exponentially as the state store does (policy.backoff_*), and the planner spills to other groups.
- Scheduler: shared.local.sim.scheduler, the one the demo uses too: the planner's filters decide
  where a pod fits, kube-scheduler's scores (`SimOptions.scoring`: least-allocated, most-allocated
  or first-fit, with TaintToleration's PreferNoSchedule score) where it goes; oldest job first, a
  job's pods all-or-nothing (gang scheduling). Unplaced pods are Pending with
  PodScheduled=False/Unschedulable, the backlog the planner reads. Pods tolerate the groups' taints,
  not the scaler's attrition mark.
- Pods run for their job's duration once placed, then succeed and leave the node.
- Reconcile: on the schedule (every tick_seconds, at multiples of it, like EventBridge) and after
  job arrivals (the webhook, after the queue delay). It calls `shared.planner.plan` on a Snapshot of
  the simulated world and applies the plan like the controller: terminations first (a terminated
  node disappears, desired drops by one when decrementing), then cordons/uncordons, then attrition
  marks are lifted and put on (re-validated: a node still there, not cordoned), then desired is
  raised to the plan's value, or lowered only to cancel instances not launched yet; the stored state
  (idle-since, instances first seen, last scale-up, backoff) is written back.

Speed: domain objects are built directly and cached per pod/node/ASG, so a Snapshot is a few tuple
copies. A reconcile whose plan cannot differ from the last one is skipped: the planner reads only
the snapshot and the clock, so when no planner-visible fact changed (the backlog, a node's idleness,
nodes, instances, cordons, marks; with attrition on, any pod bound or finished), the last plan
changed nothing, and no time threshold of the policy (idle, cordon settle, delay after scale-up,
provisioning deadline, pod delay, backoff end) has been crossed, the plan would be the same no-op.
`every_tick=True` turns the skipping off (tests compare).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from shared.config import AttritionConfig, NodeGroupConfig, PolicyConfig, ScalerConfig
from shared.domain.errors import ConfigError
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgInstance,
    AsgState,
    GroupState,
    Node,
    NodeState,
    Pod,
    PodMemory,
    ScalerState,
    Scheduling,
    Snapshot,
    Taint,
    TaintEffect,
    Toleration,
)
from shared.domain.plan import Plan, ReasonCode
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.local.sim.scheduler import DEFAULT_SCORING, NodeClass, PodRequest, Scheduler, Scoring, Slot
from shared.local.sim.trace import Job, Trace
from shared.local.sim.workload import Sizing, default_sizing
from shared.local.sim.world import BootModel, WarmPool, launchable, take_warm
from shared.planner import plan as plan_fn
from shared.planner.attrition import ANNOTATION_EXPECTED_RUNTIME
from shared.planner.eks import KUBELET_DEFAULT_MAX_PODS as DEFAULT_MAX_PODS
from shared.planner.safety import Backoff, is_counted, next_backoff

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INF = math.inf
NAMESPACE = "sim"
DEFAULT_ASG_MAX_SIZE = 1000  # the ASG's MaxSize when the config sets no max_size
STALL_SECONDS = 6 * 3600  # give up after this long without progress once no job runs or is to arrive

_ARRIVE, _FINISH, _REGISTER, _GPUS_READY = range(4)
_NO_STRINGS: Mapping[str, str] = MappingProxyType({})
DIMS = (GPU, CPU, MEMORY, PODS)  # the scheduler's vector order: [gpus, millicores, bytes, pod slots]
BOOTING, EMPTY, FRAGMENTED, HELD = range(4)  # why provisioned GPUs are idle (HELD: by attrition marks)


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
    marks: int = 0  # attrition taints put on
    unmarks: int = 0  # attrition taints lifted
    busy_terminations_refused: int = 0  # planned terminations of nodes running pods, not applied
    pods_lost: int = 0  # pods still running on a node when it was terminated


@dataclass
class Series:
    """Change points over time: pending GPUs, and per group provisioned and busy GPUs."""

    groups: tuple[str, ...]
    times: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    provisioned: list[list[int]] = field(default_factory=list)  # per group
    busy: list[list[int]] = field(default_factory=list)  # per group
    idle: list[tuple[int, int, int, int]] = field(default_factory=list)  # booting, empty, fragm., held


@dataclass
class SimResult:
    """Raw figures of one replay; `shared.local.sim.report` turns them into the report."""

    config_name: str
    options: SimOptions
    jobs: int
    pods: int
    started: int
    waits: list[int]  # seconds, one per started job, sorted
    ideal_gpu_seconds: int  # every job's GPUs x duration
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

    @property
    def provisioned_gpu_seconds(self) -> int:
        return sum(g.node_seconds * g.gpus_per_node for g in self.groups)


class _Group:
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
        "min_size",
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
        self.instances: dict[str, _Instance] = {}  # alive ones
        self.alive = 0
        self.busy_gpus = 0
        self.last_scale_up: int | None = None
        self.last_scale_down: int | None = None
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


class _Instance:
    """An EC2 instance of a group; `node` once it registered."""

    __slots__ = ("asg", "group", "instance_id", "launched_at", "node")

    def __init__(self, instance_id: str, group: _Group, launched_at: int) -> None:
        self.instance_id = instance_id
        self.group = group
        self.launched_at = launched_at
        self.node: _Node | None = None
        self.asg = AsgInstance(instance_id)


class _Node:
    """A registered node: free room [gpus, millicores, bytes, pod slots], pods, cordon."""

    __slots__ = (
        "_domain",
        "accounted",
        "cordoned_at",
        "created_at",
        "free",
        "gpus_ready",
        "group",
        "instance",
        "name",
        "pods",
        "seen_idle",
        "slot",
        "taint",
    )

    def __init__(self, name: str, instance: _Instance, created_at: int, gpus_ready: bool) -> None:
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

    def idle_gpus(self) -> tuple[int, int]:
        """(why, how many) of this node's GPUs run nothing right now."""
        if not self.gpus_ready:
            return BOOTING, self.group.gpus_per_node
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
            else:
                result.fragmented_gpu_seconds += elapsed * gpus
            self.accounted = now

    def node_class(self) -> NodeClass:
        return self.group.node_class(self.taint, self.cordoned_at is not None)

    @property
    def schedulable(self) -> bool:
        return self.gpus_ready and self.cordoned_at is None

    def domain(self) -> Node:
        if self._domain is None:
            created = at(self.created_at)
            cordoned = self.cordoned_at is not None
            self._domain = Node(
                name=self.name,
                instance_id=self.instance.instance_id,
                allocatable=self.group.allocatable if self.gpus_ready else self.group.allocatable_booting,
                labels=self.group.labels,
                annotations=(
                    MappingProxyType({ANNOTATION_CORDONED_AT: at(self.cordoned_at).isoformat()})
                    if self.cordoned_at is not None
                    else _NO_STRINGS
                ),
                taints=self.group.taints if self.taint is None else (*self.group.taints, self.taint),
                unschedulable=cordoned,
                ready=True,
                ready_changed_at=created,
                created_at=created,
            )
        return self._domain


class _Job:
    """A trace job with its pods, the groups its selector admits, start and finish."""

    __slots__ = ("allowed", "finish", "gpus", "index", "job", "pods", "requests", "seen", "start", "vecs")

    def __init__(self, index: int, job: Job) -> None:
        self.index = index
        self.job = job
        self.gpus = job.gpus
        self.pods: list[_Pod] = []
        self.vecs: list[tuple[int, int, int, int]] = []
        self.requests: list[PodRequest] = []
        self.allowed: tuple[bool, ...] = ()
        self.start: int | None = None
        self.finish: int | None = None
        self.seen = -1  # the plan (epoch) that last saw this job pending


class _Pod:
    """One pod of a job: its pending domain Pod and the node it runs on."""

    __slots__ = ("gpus", "key", "node", "pending")

    def __init__(self, pending: Pod) -> None:
        self.pending = pending
        self.key = pending.key
        self.gpus = pending.requests.gpus
        self.node: _Node | None = None


class Simulation:
    """One replay of a trace against one scaler config. `run()` once."""

    def __init__(
        self,
        trace: Trace,
        config: ScalerConfig,
        options: SimOptions | None = None,
        *,
        config_name: str = "config",
        progress: Callable[[int, int, int], None] | None = None,
        planner: Callable[[Snapshot, ScalerConfig, datetime], Plan] = plan_fn,
    ) -> None:
        self.options = options = options or SimOptions()
        self.config = config
        self.config_name = config_name
        self.trace = trace
        self._progress = progress
        self._plan = planner
        policy = config.policy
        self._policy = policy
        self._groups: list[_Group] = []
        for index, group_config in enumerate(config.node_groups):
            shape = group_config.shape
            if shape is None:
                raise ConfigError(
                    f"simulate: node group {group_config.name!r} needs `allocatable` (in production the "
                    "shape comes from EC2 instance type data, which the simulator does not read)"
                )
            self._groups.append(_Group(index, group_config, shape, options, policy))
        self._group_by_name = {g.name: g for g in self._groups}
        self._sizing = options.sizing or default_sizing(config)
        unknown = set(options.capacity) - set(self._group_by_name)
        if unknown:
            raise ConfigError(f"simulate: --capacity names unknown group(s): {', '.join(sorted(unknown))}")
        self._webhook_delay = (
            options.webhook_delay_seconds
            if options.webhook_delay_seconds is not None
            else config.deployment.webhook_queue_delay_seconds
        )
        self._tick = options.tick_seconds
        self._boot = BootModel(options.boot_seconds, options.gpu_delay_seconds)
        # Warm pools start full: when each warm instance can next be taken.
        self._warm = {name: [0] * pool.size for name, pool in options.warm_pools.items()}
        if set(self._warm) - set(self._group_by_name):
            unknown_pools = ", ".join(sorted(set(self._warm) - set(self._group_by_name)))
            raise ConfigError(f"simulate: warm pools of unknown group(s): {unknown_pools}")
        if self._tick <= 0 or options.boot_seconds < 0 or options.gpu_delay_seconds < 0:
            raise ConfigError("simulate: tick must be > 0 and boot/GPU delays >= 0")

        # The world.
        self._heap: list[tuple[int, int, int, Any]] = []
        self._seq = 0
        self._jobs: list[_Job] = []
        self._live_pods: dict[str, Pod] = {}  # key -> current domain Pod (pending or running)
        self._nodes: dict[str, _Node] = {}
        self._scheduler = Scheduler(DIMS, options.scoring)
        # With attrition the plan reads every node's free GPUs, not only its idleness: any bind or
        # finish may change the marks, so the reconcile after it is not skipped.
        self._steers = config.policy.attrition.enabled
        self._idle = [0, 0, 0, 0]  # idle GPUs right now by cause (BOOTING, EMPTY, FRAGMENTED, HELD)
        # Batch pods tolerate the groups' own taints (the GPU taint), never the scaler's mark.
        self._tolerations = tuple(
            sorted(
                {Toleration(t.key, "Exists", "", str(t.effect)) for g in self._groups for t in g.taints},
                key=lambda t: (t.key, t.effect),
            )
        )
        self._pending: list[_Job] = []  # FIFO
        self._arrived: list[_Job] = []  # arrived at this instant, not tried by the scheduler yet
        self._capacity_grew = False
        self._instance_seq = 0
        self._pending_gpus = 0
        # Stored state (the DynamoDB table).
        self._idle_since: dict[str, NodeState] = {}
        self._pod_memory: Mapping[str, PodMemory] = {}
        self._idle_since_s: dict[str, int] = {}
        self._first_seen: dict[str, datetime] = {}
        self._last_plan_idle: Mapping[str, datetime] = {}
        # Reconcile bookkeeping.
        self._now = 0
        self._last_tick = -1
        self._webhook_at: int | None = None
        # When a plan can differ from the last one: `_dirty` (nodes, instances changed) or `_unseen`
        # (backlog members or node idleness differ from what the last plan saw; changes that were
        # undone before any plan saw them cancel out).
        self._dirty = True
        self._unseen = 0
        self._epoch = 0
        self._last_changed = False
        self._deadline: float = INF
        self._plans = 0
        self._skipped = 0
        self._last_progress = 0  # last job start or finish, node registration or scale-down
        self._job_events = 0  # arrivals and finishes still in the heap
        self._last_active = 0
        self._outcomes: dict[str, ReasonCode] = {}
        self._started = 0
        self._used_gpu_seconds = 0
        self._waits: list[int] = []
        self._series = Series(tuple(g.name for g in self._groups)) if options.record_series else None
        self._schedulings: dict[tuple[tuple[str, str], ...], Scheduling] = {}
        self._allowed: dict[tuple[tuple[str, str], ...], tuple[bool, ...]] = {}
        self._load(trace)

    # Setup

    def _scheduling(self, selector: tuple[tuple[str, str], ...]) -> tuple[Scheduling, tuple[bool, ...]]:
        scheduling = self._schedulings.get(selector)
        if scheduling is None:
            scheduling = self._schedulings[selector] = Scheduling(
                node_selector=selector, tolerations=self._tolerations
            )
            self._allowed[selector] = tuple(scheduling.selects(g.labels) for g in self._groups)
        return scheduling, self._allowed[selector]

    def _load(self, trace: Trace) -> None:
        gang_label = self._policy.gang_label
        for index, job in enumerate(trace.jobs):
            selector = job.selector
            group: _Group | None = None
            if job.group is not None:
                group = self._group_by_name.get(job.group)
                if group is None:
                    raise ConfigError(
                        f"{trace.source}: job {job.job_id}: unknown node group {job.group!r}; "
                        f"configured: {', '.join(self._group_by_name)}"
                    )
            elif self.options.right_size and not selector:
                group = self._right_size(job.gpus)
            if group is not None:
                selector = tuple(sorted({**dict(selector), **group.labels}.items()))
            scheduling, allowed = self._scheduling(selector)
            sim_job = _Job(index, job)
            sim_job.allowed = allowed
            per_node = max(
                (g.gpus_per_node for g in self._groups if allowed[g.index]),
                default=max(g.gpus_per_node for g in self._groups),
            )
            sizes = self._sizing.split(job, per_node)
            base = f"j{index:07d}"
            gang = base if len(sizes) > 1 else None
            labels = MappingProxyType({gang_label: gang}) if gang and gang_label else _NO_STRINGS
            created = at(job.submit)
            annotations = (
                MappingProxyType({ANNOTATION_EXPECTED_RUNTIME: str(job.duration)})
                if self.options.runtime_estimates
                else _NO_STRINGS
            )
            for k, size in enumerate(sizes):
                name = f"{base}-{k}" if gang else base
                pod = Pod(
                    namespace=NAMESPACE,
                    name=name,
                    requests=size.resources(),
                    phase="Pending",
                    scheduling=scheduling,
                    labels=labels,
                    annotations=annotations,
                    owner_kind="Job",
                    created_at=created,
                    unschedulable=True,
                    uid=name,
                )
                sim_job.pods.append(_Pod(pod))
                vec = (size.gpus, size.cpu_millicores, size.memory_bytes, 1)
                sim_job.vecs.append(vec)
                sim_job.requests.append(PodRequest(scheduling, vec))
            self._jobs.append(sim_job)
            self._push(job.submit, _ARRIVE, sim_job)

    def _right_size(self, gpus: int) -> _Group:
        """The group of the fewest GPUs per node that still holds `gpus` whole (then cheapest per GPU)."""

        def price_per_gpu(group: _Group) -> float:
            price = group.config.price_per_hour
            return price / group.gpus_per_node if price is not None and group.gpus_per_node else INF

        fitting = [g for g in self._groups if g.gpus_per_node >= gpus]
        if fitting:
            return min(fitting, key=lambda g: (g.gpus_per_node, price_per_gpu(g), g.index))
        return min(self._groups, key=lambda g: (-g.gpus_per_node, price_per_gpu(g), g.index))

    def _push(self, when: int, kind: int, payload: Any) -> None:
        if kind in (_ARRIVE, _FINISH):
            self._job_events += 1
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, payload))

    # The loop

    def run(self) -> SimResult:
        """Replay until every job finished and the fleet settled (or nothing can change any more)."""
        wall = time.perf_counter()
        heap = self._heap
        tick = self._tick
        every = self.options.every_tick
        start = heap[0][0] if heap else 0
        self._now = self._last_progress = self._last_active = start
        iterations = 0
        stalled = False
        stall_limit = self._stall_limit()
        while True:
            next_event = heap[0][0] if heap else INF
            # The next scheduled reconcile that can matter: the next tick when the plan may differ
            # (or always, with every_tick), else the tick at or after the next policy threshold.
            may_differ = self._dirty or self._unseen != 0 or self._last_changed
            if may_differ or (every and (heap or self._deadline < INF)):
                next_tick: float = _align(max(self._now, self._last_tick + 1), tick)
            elif self._deadline < INF:
                next_tick = _align(max(int(self._deadline), self._last_tick + 1), tick)
            else:
                next_tick = INF
            next_hook = self._webhook_at if self._webhook_at is not None else INF
            now_f = min(next_event, next_tick, next_hook)
            if now_f == INF:
                break
            now = int(now_f)
            if not self._job_events and now - self._last_progress > stall_limit:
                stalled = True
                break
            self._now = now
            while heap and heap[0][0] == now:
                _, _, kind, payload = heapq.heappop(heap)
                self._handle(kind, payload, now)
            if self._capacity_grew or self._arrived:
                self._schedule(now)
            if now in (next_tick, next_hook):
                if now == next_tick:
                    self._last_tick = now
                if now == next_hook:
                    self._webhook_at = None
                if every or self._last_changed or self._dirty or self._unseen or now >= self._deadline:
                    self._reconcile(now)
                    if self._capacity_grew:
                        self._schedule(now)
                else:
                    self._skipped += 1
            if self._series is not None:
                self._record(now)
            iterations += 1
            if self._progress is not None and iterations % 2000 == 0:
                self._progress(now, self._started, len(self._jobs))
        end = self._last_active
        for group in self._groups:
            for instance in group.instances.values():
                group.result.node_seconds += end - instance.launched_at
                if instance.node is None:
                    group.result.booting_gpu_seconds += (end - instance.launched_at) * group.gpus_per_node
                else:
                    instance.node.account(end)
        if self._progress is not None:
            self._progress(end, self._started, len(self._jobs))
        not_started: dict[str, int] = {}
        for job in self._pending:
            code = self._outcomes.get(job.pods[0].key)
            reason = str(code) if code is not None else "NeverPlanned"
            not_started[reason] = not_started.get(reason, 0) + 1
        self._waits.sort()
        return SimResult(
            config_name=self.config_name,
            options=self.options,
            jobs=len(self._jobs),
            pods=sum(len(j.pods) for j in self._jobs),
            started=self._started,
            waits=self._waits,
            ideal_gpu_seconds=sum(j.job.gpu_seconds for j in self._jobs),
            used_gpu_seconds=self._used_gpu_seconds,
            groups=[g.result for g in self._groups],
            start=start,
            end=end,
            wall_seconds=time.perf_counter() - wall,
            plans=self._plans,
            skipped=self._skipped,
            stalled=stalled,
            not_started=not_started,
            fractional_jobs=sum(1 for j in self._jobs if j.job.fractional),
            series=self._series,
            sizing=self._sizing,
            webhook_delay_seconds=self._webhook_delay if self.options.webhook else None,
            attrition=self._policy.attrition,
        )

    def _stall_limit(self) -> int:
        """How long without progress, once no job is running or to arrive, before giving up.

        Longer than any wait the policy itself imposes, so a slow scale-down is never cut short.
        """
        policy = self._policy
        slowest = (
            max(g.idle_seconds for g in self._groups)
            + policy.scale_down_delay_after_add_seconds
            + policy.cordon_settle_seconds
            + policy.scale_down_delay_after_delete_seconds
            + policy.max_node_provision_seconds
            + self._tick
        )
        return max(self.options.stall_seconds, 2 * slowest)

    def _handle(self, kind: int, payload: Any, now: int) -> None:
        self._last_active = now
        if kind in (_ARRIVE, _FINISH):
            self._job_events -= 1
        if kind == _ARRIVE:
            self._arrived.append(payload)
            if self.options.webhook and (self._webhook_at is None or self._webhook_at < now):
                self._webhook_at = now + self._webhook_delay
        elif kind == _FINISH:
            self._finish(payload, now)
        elif kind == _REGISTER:
            self._register(payload, now)
        else:
            node: _Node = payload
            if node.name in self._nodes and not node.gpus_ready:
                self._untally(node, now)
                node.gpus_ready = True
                self._tally(node)
                self._scheduler.change(node.slot, allocatable=node.group.vector(True))
                node._domain = None
                self._dirty = True
                if node.cordoned_at is None:
                    self._capacity_grew = True

    # Scheduler

    def _untally(self, node: _Node, now: int) -> None:
        """Before a node changes: account its idle time so far and take it out of the idle tally."""
        node.account(now)
        cause, gpus = node.idle_gpus()
        self._idle[cause] -= gpus

    def _tally(self, node: _Node) -> None:
        cause, gpus = node.idle_gpus()
        self._idle[cause] += gpus

    def _place(self, job: _Job) -> list[_Node] | None:
        """The nodes the scheduler binds the job's pods to, all or nothing (not yet bound)."""
        slots = self._scheduler.place(job.requests, keep=False)
        if slots is None:
            return None
        return [self._nodes[slot.name] for slot in slots]

    def _schedule(self, now: int) -> None:
        """Bind what fits: every pending job after capacity grew, else only the new arrivals."""
        if self._capacity_grew:
            queue = self._pending + self._arrived if self._arrived else self._pending
            self._pending = []
        else:
            queue = self._arrived
        self._arrived = []
        self._capacity_grew = False
        # Single pods that did not fit: any later pod at least as large (same groups) fails too.
        failed: list[tuple[tuple[bool, ...], tuple[int, int, int, int]]] = []
        still: list[_Job] = []
        for job in queue:
            placed = None
            first = job.vecs[0]
            if not _dominated(job.allowed, first, failed):
                placed = self._place(job)
                if placed is None and len(job.vecs) == 1:
                    failed.append((job.allowed, first))
            if placed is None:
                if not self._is_known_pending(job):
                    self._mark_pending(job)
                still.append(job)
            else:
                self._bind(job, placed, now)
        self._pending.extend(still)

    def _is_known_pending(self, job: _Job) -> bool:
        return job.pods[0].key in self._live_pods

    def _mark_pending(self, job: _Job) -> None:
        for pod in job.pods:
            self._live_pods[pod.key] = pod.pending
        self._pending_gpus += job.gpus
        self._unseen += 1  # the backlog grew

    def _bind(self, job: _Job, nodes: list[_Node], now: int) -> None:
        was_pending = self._is_known_pending(job)
        if was_pending:
            self._pending_gpus -= job.gpus
            # The backlog shrank; if no plan saw this job pending, it cancels its own arrival.
            self._unseen += 1 if job.seen == self._epoch else -1
        for pod, node, vec in zip(job.pods, nodes, job.vecs, strict=True):
            self._untally(node, now)
            self._scheduler.take(node.slot, vec)
            if node.pods == 0 and node.seen_idle is not None:
                self._unseen += 1 if node.seen_idle else -1  # an idle node became busy
            node.pods += 1
            self._tally(node)
            self._dirty = self._dirty or self._steers
            node.group.busy_gpus += vec[0]
            pod.node = node
            self._live_pods[pod.key] = _running(pod.pending, node.name)
        job.start = now
        job.finish = now + job.job.duration
        self._started += 1
        self._waits.append(now - job.job.submit)
        self._last_progress = now
        self._push(job.finish, _FINISH, job)

    def _finish(self, job: _Job, now: int) -> None:
        duration = job.job.duration
        for pod, vec in zip(job.pods, job.vecs, strict=True):
            node = pod.node
            assert node is not None
            self._untally(node, now)
            del self._live_pods[pod.key]
            pod.node = None
            self._scheduler.give(node.slot, vec)
            node.pods -= 1
            self._tally(node)
            self._dirty = self._dirty or self._steers
            g = vec[0]
            node.group.busy_gpus -= g
            node.group.result.busy_gpu_seconds += g * duration
            self._used_gpu_seconds += g * duration
            if node.pods == 0 and node.seen_idle is not None:
                self._unseen += -1 if node.seen_idle else 1  # the node became idle
            if node.schedulable:
                self._capacity_grew = True
        self._last_progress = now

    # ASG

    def _register(self, instance: _Instance, now: int) -> None:
        group = instance.group
        if group.instances.get(instance.instance_id) is not instance:
            return  # terminated while booting
        # Names sort in launch order: the scheduler's ties and the planner's follow it.
        name = f"ip-{int(instance.instance_id[2:], 16):07d}.{group.name}"
        gpus_ready = self.options.gpu_delay_seconds == 0
        node = _Node(name, instance, now, gpus_ready)
        instance.node = node
        self._nodes[name] = node
        self._scheduler.add(node.slot)
        self._idle[BOOTING] -= group.gpus_per_node
        self._tally(node)
        group.result.booting_gpu_seconds += (now - instance.launched_at) * group.gpus_per_node
        self._dirty = True
        self._last_progress = now
        if gpus_ready:
            self._capacity_grew = True
        else:
            self._push(self._boot.advertises_at(now), _GPUS_READY, node)

    def _launch(self, group: _Group, now: int) -> bool:
        """Launch instances up to desired; False when EC2 had no capacity for all of them."""
        while group.alive < group.desired:
            if not launchable(group.capacity, group.alive, 1):
                group.result.launch_failures += 1
                self._capacity_failure(group, now)
                return False
            self._instance_seq += 1
            instance_id = f"i-{self._instance_seq:017x}"
            instance = _Instance(instance_id, group, now)
            group.instances[instance_id] = instance
            group.alive += 1
            group.asg_cache = None
            self._idle[BOOTING] += group.gpus_per_node
            group.result.launched += 1
            group.result.peak_nodes = max(group.result.peak_nodes, group.alive)
            self._push(self._registers_at(group, now), _REGISTER, instance)
        return True

    def _registers_at(self, group: _Group, now: int) -> int:
        """When an instance launched now registers: sooner when taken from the group's warm pool."""
        pool = self.options.warm_pools.get(group.name)
        if pool is not None and take_warm(self._warm[group.name], now, self.options.boot_seconds):
            return now + pool.boot_seconds
        return self._boot.registers_at(now)

    def _capacity_failure(self, group: _Group, now: int) -> None:
        """Exponential backoff, as the state store records it (policy.backoff_*)."""
        previous = Backoff(group.failures, _at_or_none(group.last_failure), _at_or_none(group.backoff_until))
        if is_counted(previous, at(now)):
            return
        after = next_backoff(previous, at(now), self._policy)
        assert after.until is not None
        group.failures, group.last_failure = after.failures, now
        group.backoff_until = epoch_seconds(after.until)
        group.result.backoffs += 1

    def _remove_instance(self, instance: _Instance, now: int) -> None:
        group = instance.group
        del group.instances[instance.instance_id]
        group.alive -= 1
        group.asg_cache = None
        group.result.node_seconds += now - instance.launched_at
        node = instance.node
        if node is None:
            group.result.booting_gpu_seconds += (now - instance.launched_at) * group.gpus_per_node
            self._idle[BOOTING] -= group.gpus_per_node
        else:
            self._untally(node, now)
            group.result.pods_lost += node.pods  # jobs killed with their node (never, by re-validation)
            self._scheduler.remove(node.slot)
            del self._nodes[node.name]
            self._idle_since.pop(node.name, None)
            self._idle_since_s.pop(node.name, None)
        self._first_seen.pop(instance.instance_id, None)

    # Reconcile

    def _snapshot(self) -> Snapshot:
        asgs: dict[str, AsgState] = {}
        groups: dict[str, GroupState] = {}
        for group in self._groups:
            if group.asg_cache is None:
                group.asg_cache = AsgState(
                    name=group.asg_name,
                    min_size=group.min_size,
                    max_size=group.max_size,
                    desired=group.desired,
                    instances=tuple(i.asg for i in group.instances.values()),
                    warm_pool_size=len(self._warm[group.name]) if group.name in self._warm else None,
                )
            asgs[group.asg_name] = group.asg_cache
            if group.backoff_until is not None or group.last_scale_up is not None or group.last_scale_down:
                groups[group.name] = GroupState(
                    backoff_until=_at_or_none(group.backoff_until),
                    last_scale_up=_at_or_none(group.last_scale_up),
                    last_scale_down=_at_or_none(group.last_scale_down),
                )
        return Snapshot(
            pods=tuple(self._live_pods.values()),
            nodes=tuple(node.domain() for node in self._nodes.values()),
            asgs=asgs,
            state=ScalerState(
                nodes=dict(self._idle_since),
                groups=groups,
                instances_first_seen=dict(self._first_seen),
                pods=self._pod_memory,
            ),
        )

    def _reconcile(self, now: int) -> None:
        self._dirty = False
        self._unseen = 0
        self._epoch += 1
        for registered in self._nodes.values():
            registered.seen_idle = registered.pods == 0
        for job in self._pending:
            job.seen = self._epoch
        when = at(now)
        result = self._plan(self._snapshot(), self.config, when)
        self._plans += 1
        for outcome in result.pods:
            self._outcomes[outcome.pod] = outcome.code
        changed = False

        # The state store: idle-since and first-seen maps are replaced by the plan's.
        if result.idle_since != self._last_plan_idle:
            self._last_plan_idle = result.idle_since
            stored = self._idle_since
            fresh: dict[str, NodeState] = {}
            fresh_s: dict[str, int] = {}
            for name, since in result.idle_since.items():
                previous = stored.get(name)
                if previous is not None and previous.idle_since == since:
                    fresh[name] = previous
                    fresh_s[name] = self._idle_since_s[name]
                else:
                    fresh[name] = NodeState(since)
                    fresh_s[name] = epoch_seconds(since)
            self._idle_since = fresh
            self._idle_since_s = fresh_s
        self._first_seen = dict(result.instances_first_seen)
        self._pod_memory = result.pod_memory  # the ground-truth memory, stored as the real store does

        # Terminations first, re-validated: an idle node still idle, an instance still there.
        for termination in result.terminate:
            group = self._group_by_name.get(termination.group)
            instance = group.instances.get(termination.instance_id) if group is not None else None
            if group is None or instance is None:
                continue
            node = instance.node
            if node is not None and node.pods:
                group.result.busy_terminations_refused += 1  # the re-validation keeps running jobs
                continue
            if node is not None and termination.decrement and node.cordoned_at is None:
                continue
            self._remove_instance(instance, now)
            changed = True
            if termination.decrement:
                group.desired = max(group.min_size, group.desired - 1)
                group.last_scale_down = now
                group.result.terminated += 1
                self._last_progress = now
            else:
                group.result.replaced += 1
        for action in result.uncordon:
            node = self._nodes.get(action.node)
            if node is None or node.cordoned_at is None:
                continue
            node.cordoned_at = None
            self._restyle(node)
            node.group.result.uncordons += 1
            changed = True
            if node.gpus_ready:
                self._capacity_grew = True
        for action in result.cordon:
            node = self._nodes.get(action.node)
            if node is None or node.cordoned_at is not None or node.pods:
                continue
            node.cordoned_at = now
            self._restyle(node)
            node.group.result.cordons += 1
            changed = True
        changed = self._apply_marks(result, now) or changed

        # Desired: raise to the plan's value, or lower only to cancel launches that have not happened.
        for decision in result.groups:
            group = self._group_by_name.get(decision.name)
            if group is None:
                continue
            if decision.enter_backoff:
                self._capacity_failure(group, now)
                changed = True
            target = decision.desired
            if target > group.desired:
                group.desired = target
                group.last_scale_up = now
                group.result.scale_ups += 1
                group.asg_cache = None
                changed = True
            elif target < group.desired:
                lowered = max(target, group.alive)
                if lowered != group.desired:
                    group.desired = lowered
                    group.asg_cache = None
                    changed = True
            if group.alive < group.desired:
                self._launch(group, now)
                changed = True
        self._last_changed = changed
        if changed:
            self._last_active = now
            self._deadline = INF
        else:
            self._deadline = self._next_deadline(now)

    def _restyle(self, node: _Node) -> None:
        """Its cordon or mark changed: the scheduler and the planner see it anew."""
        node._domain = None
        self._scheduler.change(node.slot, node_class=node.node_class())

    def _apply_marks(self, result: Plan, now: int) -> bool:
        """Lift, then put on, the attrition taints, re-validated as the controller does."""
        changed = False
        for action in result.unmark:
            node = self._nodes.get(action.node)
            if node is None or node.taint is None:
                continue
            self._untally(node, now)
            node.taint = None
            self._tally(node)
            self._restyle(node)
            node.group.result.unmarks += 1
            self._capacity_grew = True
            changed = True
        for mark in result.mark:
            node = self._nodes.get(mark.node)
            if node is None or node.taint is not None or node.cordoned_at is not None:
                continue
            self._untally(node, now)
            node.taint = Taint(mark.key, "", TaintEffect(mark.effect))
            self._tally(node)
            self._restyle(node)
            node.group.result.marks += 1
            changed = True
        return changed

    def _next_deadline(self, now: int) -> float:
        """The earliest future time a policy threshold is crossed (INF: none)."""
        policy = self._policy
        soonest: float = INF
        provision = policy.max_node_provision_seconds
        for group in self._groups:
            if group.backoff_until is not None and group.backoff_until > now:
                soonest = min(soonest, group.backoff_until)
        has_idle: set[int] = set()
        for node in self._nodes.values():
            if node.cordoned_at is not None:
                due = node.cordoned_at + policy.cordon_settle_seconds
                if due > now:
                    soonest = min(soonest, due)
                has_idle.add(node.group.index)
            elif node.pods == 0:
                since = self._idle_since_s.get(node.name)
                if since is not None:
                    due = since + node.group.idle_seconds
                    if due > now:
                        soonest = min(soonest, due)
                    has_idle.add(node.group.index)
            if not node.gpus_ready:
                due = node.created_at + provision
                if due > now:
                    soonest = min(soonest, due)
        for group in self._groups:
            if group.index not in has_idle:
                continue
            for since, delay in (
                (group.last_scale_up, policy.scale_down_delay_after_add_seconds),
                (group.last_scale_down, policy.scale_down_delay_after_delete_seconds),
            ):
                if since is not None and since + delay > now:
                    soonest = min(soonest, since + delay)
        for first_seen in self._first_seen.values():
            due = epoch_seconds(first_seen) + provision
            if due > now:
                soonest = min(soonest, due)
        if policy.new_pod_delay_seconds:
            for job in self._pending:
                due = job.job.submit + policy.new_pod_delay_seconds
                if due > now:
                    soonest = min(soonest, due)
        return soonest

    def _record(self, now: int) -> None:
        series = self._series
        assert series is not None
        provisioned = [g.alive * g.gpus_per_node for g in self._groups]
        busy = [g.busy_gpus for g in self._groups]
        booting, empty, fragmented, held = self._idle
        idle = (booting, empty, fragmented, held)
        if (
            series.times
            and series.pending[-1] == self._pending_gpus
            and series.provisioned[-1] == provisioned
            and series.busy[-1] == busy
            and series.idle[-1] == idle
        ):
            return
        if series.times and series.times[-1] == now:
            series.pending[-1] = self._pending_gpus
            series.provisioned[-1] = provisioned
            series.busy[-1] = busy
            series.idle[-1] = idle
            return
        series.times.append(now)
        series.pending.append(self._pending_gpus)
        series.provisioned.append(provisioned)
        series.busy.append(busy)
        series.idle.append(idle)


def _at_or_none(seconds: int | None) -> datetime | None:
    return at(seconds) if seconds is not None else None


def _dominated(
    allowed: tuple[bool, ...],
    vec: tuple[int, int, int, int],
    failed: list[tuple[tuple[bool, ...], tuple[int, int, int, int]]],
) -> bool:
    for other_allowed, f in failed:
        if (
            other_allowed is allowed
            and vec[0] >= f[0]
            and vec[1] >= f[1]
            and vec[2] >= f[2]
            and vec[3] >= f[3]
        ):
            return True
    return False


def _align(seconds: int, tick: int) -> int:
    """The first multiple of `tick` at or after `seconds`."""
    return -(-seconds // tick) * tick


def _running(pending: Pod, node_name: str) -> Pod:
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
        created_at=pending.created_at,
        uid=pending.uid,
    )


def simulate(
    trace: Trace,
    config: ScalerConfig,
    options: SimOptions | None = None,
    *,
    config_name: str = "config",
    progress: Callable[[int, int, int], None] | None = None,
) -> SimResult:
    """Replay `trace` against `config`; see the module docstring for what is simulated."""
    return Simulation(trace, config, options, config_name=config_name, progress=progress).run()
