"""Scale-up: place the backlog on free room, then booting nodes, then new nodes, group by group."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shared.domain.model import Node, Pod, PodMemory, Scheduling, Taint
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.domain.resources import CPU, GPU, MEMORY, Resources, format_amount
from shared.planner.context import Context, GroupView
from shared.planner.filters.framework import NodeKind, SimNode
from shared.planner.filters.inter_pod_affinity import ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from shared.planner.filters.node_ports import REASON as PORTS_TAKEN
from shared.planner.filters.node_ports import port_key
from shared.planner.filters.node_resources_fit import node_resources_fit
from shared.planner.filters.pod_topology_spread import SpreadState, allowed_domains
from shared.planner.filters.volume_binding import Volumes, volume_binding
from shared.planner.ground_truth import Recall, recall, remember
from shared.planner.packing import Bins, Journal, Request
from shared.planner.simulation import PodState, Simulation, static_reason
from shared.planner.template import is_startup_taint

# Filter answers that can only get worse as a run places pods: a node failing one of them for a
# pod spec is skipped for that spec for the rest of the run (until a gang rollback).
_PERMANENT = frozenset({ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, PORTS_TAKEN})


@dataclass
class Unit:
    """What is placed at once: one pod, or every pending pod of a gang (all-or-nothing)."""

    pods: list[Pod]
    requests: list[Request]
    gang: str | None = None
    order: int = 0  # position in First Fit Decreasing order
    gpus: int = 0
    millicores: int = 0
    plain: bool = True  # every member takes the class-based fast path

    def __post_init__(self) -> None:
        self.gpus = sum(p.requests.gpus for p in self.pods)
        self.millicores = sum(p.requests.get(CPU) for p in self.pods)

    @property
    def key(self) -> str:
        return self.pods[0].key

    @property
    def signature(self) -> tuple[int, ...]:
        """Identity of the distinct scheduling specs of the members (what admission depends on)."""
        return tuple(sorted({id(p.scheduling) for p in self.pods}))


@dataclass
class Bucket:
    """Remaining units sharing one signature, with their summed requests (for cost estimates)."""

    schedulings: tuple[Scheduling, ...]
    units: dict[int, Unit] = field(default_factory=dict)  # by order
    totals: list[int] = field(default_factory=list)
    gpus: int = 0
    millicores: int = 0

    def add(self, unit: Unit, sign: int = 1) -> None:
        for request in unit.requests:
            for dim, amount in request:
                self.totals[dim] += sign * amount
        self.gpus += sign * unit.gpus
        self.millicores += sign * unit.millicores
        if sign > 0:
            self.units[unit.order] = unit
        else:
            del self.units[unit.order]


@dataclass
class ExistingClass:
    """Registered nodes sharing labels and taints: one admission test covers them all."""

    labels: dict[str, str]
    taints: tuple[Taint, ...]
    bins: Bins
    uncordon: bool = False  # nodes cordoned by the scaler: placing a pod means uncordoning one


@dataclass
class _Candidates:
    """Nodes of one scope that pass the static filters for one pod spec."""

    pod: Pod
    nodes: list[tuple[SimNode, Bins, int]]
    by_domain: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # key -> value -> indices

    def domains(self, key: str) -> dict[str, list[int]]:
        """Candidate indices per value of a topology key (nodes without the key are in none)."""
        found = self.by_domain.get(key)
        if found is None:
            found = self.by_domain[key] = {}
            for index, (node, _, _) in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    found.setdefault(value, []).append(index)
        return found

    def append(self, item: tuple[SimNode, Bins, int]) -> None:
        self.nodes.append(item)
        for key, values in self.by_domain.items():
            value = item[0].labels.get(key)
            if value is not None:
                values.setdefault(value, []).append(len(self.nodes) - 1)


@dataclass
class _Progress:
    """Where the live candidates start for one request: nodes before `start` (per domain when the
    scan goes domain by domain) and in `dead` failed a filter whose answer only gets worse during
    the run (room, ports, anti-affinity)."""

    start: int = 0
    dead: set[int] = field(default_factory=set)  # failed the pod's own rules (ports, anti-affinity)
    full: set[int] = field(default_factory=set)  # no room for the request: shared by every spec
    starts: dict[str, int] = field(default_factory=dict)

    def is_dead(self, index: int) -> bool:
        return index in self.full or index in self.dead

    def kill(self, index: int, reason: str) -> None:
        (self.full if reason.startswith(("Insufficient", "Too many")) else self.dead).add(index)


class _Placer:
    """Per-node placement through the filters, for pods the class-based fast path cannot take."""

    def __init__(self, ctx: Context, sim: Simulation) -> None:
        self.ctx = ctx
        self.sim = sim
        self._candidates: dict[tuple[object, ...], _Candidates] = {}
        self._progress: dict[tuple[object, ...], _Progress] = {}
        self._full: dict[tuple[object, ...], set[int]] = {}

    def forget(self) -> None:
        """After a rollback nodes have regained room and opened ones are gone: start afresh."""
        self._candidates.clear()
        self._progress.clear()
        self._full.clear()

    def place(
        self,
        pod: Pod,
        request: Request,
        scope: object,
        nodes: Callable[[], list[tuple[SimNode, Bins, int]]],
        excluded: frozenset[str],
    ) -> tuple[Bins, int] | None:
        """First node of `nodes` (static filters cached per scope and spec) that passes every filter."""
        # Static filters read the pod's node constraints, volumes and DRA claims; never its labels
        # nor its inter-pod rules, so all the replicas of all the apps of a spec share one list.
        constraints = pod.constraints
        key = (id(scope), pod.namespace, id(pod.scheduling), constraints.claims, constraints.resource_claims)
        state = self.sim.state(pod)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = _Candidates(
                pod, [item for item in nodes() if self.sim.static(pod, state, item[0]) is None]
            )
        # What makes a node dead for good: the request's size, the pod's own constraints, and the
        # existing anti-affinity terms that match its labels (not the labels themselves).
        existing = tuple(id(c) for _, c in state.affinity.existing_anti) if state.affinity else ()
        progress = self._progress.get((key, id(constraints), request, existing))
        if progress is None:
            full = self._full.setdefault((key, request), set())
            progress = self._progress[(key, id(constraints), request, existing)] = _Progress(full=full)
        listed = found.nodes
        dims = self.ctx.dims
        allowed = _allowed_domains(state.spread) if state.spread is not None else ()
        if allowed:
            # Zone-like spread: scan only the domains within max skew, each from its own start.
            key_name, values = allowed[0]
            buckets = found.domains(key_name)
            for value in sorted(values):
                indices = buckets.get(value)
                if not indices:
                    continue
                where = self._scan(pod, request, state, listed, indices, progress, value, excluded, allowed)
                if where is not None:
                    return where
            return None
        index = progress.start
        while index < len(listed):
            if progress.is_dead(index):
                if index == progress.start:
                    progress.start += 1
                index += 1
                continue
            node, bins, position = listed[index]
            if node.name in excluded:
                index += 1
                continue
            reason = self.sim.dynamic(pod, state, node, request, dims)
            if reason is None:
                return bins, position
            if reason in _PERMANENT or reason.startswith(("Insufficient", "Too many")):
                progress.kill(index, reason)
                if index == progress.start:
                    progress.start += 1
            index += 1
        return None

    def _scan(
        self,
        pod: Pod,
        request: Request,
        state: PodState,
        listed: list[tuple[SimNode, Bins, int]],
        indices: list[int],
        progress: _Progress,
        domain: str,
        excluded: frozenset[str],
        allowed: tuple[tuple[str, frozenset[str]], ...],
    ) -> tuple[Bins, int] | None:
        """First fit over the candidates of one domain, skipping dead ones for good."""
        dims = self.ctx.dims
        start = position_in = progress.starts.get(domain, 0)
        while position_in < len(indices):
            index = indices[position_in]
            node, bins, position = listed[index]
            dead = progress.is_dead(index)
            if dead or node.name in excluded or (len(allowed) > 1 and _outside(node.labels, allowed)):
                if dead and position_in == start:
                    start += 1
                position_in += 1
                continue
            reason = self.sim.dynamic(pod, state, node, request, dims)
            if reason is None:
                progress.starts[domain] = start
                return bins, position
            if reason in _PERMANENT or reason.startswith(("Insufficient", "Too many")):
                progress.kill(index, reason)
                if position_in == start:
                    start += 1
            position_in += 1
        progress.starts[domain] = start
        return None

    def add(self, scope: object, item: tuple[SimNode, Bins, int]) -> None:
        """A node opened this run joins the candidates of every spec cached for the scope."""
        for key, found in self._candidates.items():
            if key[0] == id(scope) and self.sim.static(found.pod, self.sim.state(found.pod), item[0]) is None:
                found.append(item)


def _allowed_domains(state: SpreadState) -> tuple[tuple[str, frozenset[str]], ...]:
    """Per zone-like spread key, the domains within max skew now: nodes elsewhere are skipped
    without running the filters (hostname domains are single nodes and left to the filter)."""
    return tuple((key, frozenset(values)) for key, values in allowed_domains(state))


def _outside(labels: Mapping[str, str], allowed: tuple[tuple[str, frozenset[str]], ...]) -> bool:
    for key, values in allowed:  # noqa: SIM110 (an explicit loop: called once per candidate node)
        if labels.get(key) not in values:
            return True
    return False


class _ExistingRoom:
    """Free room of registered nodes: which classes admit a pod, and the outcome of a placement."""

    def __init__(self, ctx: Context, classes: list[ExistingClass], sim: Simulation) -> None:
        self.ctx = ctx
        self.classes = classes
        self.sim = sim
        self._admitting: dict[int, list[Bins]] = {}
        self._uncordon = {id(cls.bins) for cls in classes if cls.uncordon}
        self.node_of: dict[tuple[int, int], SimNode] = {}
        for cls in classes:
            for index, name in enumerate(cls.bins.ids):
                assert name is not None
                self.node_of[(id(cls.bins), index)] = sim.nodes[name]

    def targets(self, pod: Pod) -> list[Bins]:
        """Bins of the classes whose labels and taints admit the pod (cached per scheduling spec)."""
        found = self._admitting.get(id(pod.scheduling))
        if found is None:
            found = self._admitting[id(pod.scheduling)] = [
                cls.bins for cls in self.classes if pod.scheduling.admits(cls.labels, cls.taints)
            ]
        return found

    def nodes(self, pod: Pod) -> list[tuple[SimNode, Bins, int]]:
        """Every registered node of the admitting classes, schedulable classes first."""
        return [
            (self.node_of[(id(bins), index)], bins, index)
            for bins in self.targets(pod)
            for index in range(len(bins.free))
        ]

    def record(self, pod: Pod, bins: Bins, index: int, result: ScaleUpResult) -> None:
        """The pod fits registered node `bins.ids[index]`: an existing outcome (maybe an uncordon)."""
        node = bins.ids[index] or ""
        group = self.ctx.group_of_node.get(node)
        result.busy_nodes.add(node)
        result.counted_on[pod.key] = node
        if id(bins) in self._uncordon:
            result.uncordon[node] = group.name if group else ""
            reason = f"fits on {node}, which the scaler had cordoned: uncordoning it"
        else:
            reason = f"fits free room on {node}; the scheduler will place it"
        result.outcomes[pod.key] = PodOutcome(
            pod.key,
            Outcome.EXISTING,
            group.name if group else None,
            reason,
            ReasonCode.PLACED,
            pod.requests.gpus,
        )


@dataclass
class GroupBins:
    view: GroupView
    bins: Bins
    inflight: int  # bins [0, inflight) are booting nodes; later ones are new
    target_id: int  # admission cache key of the group
    nodes: list[SimNode] = field(default_factory=list)  # one per bin, same order
    _probe: SimNode | None = None
    places: dict[bool, Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]] = field(
        default_factory=dict
    )  # placement functions, single pods and gangs (built once per run)

    def items(self) -> list[tuple[SimNode, Bins, int]]:
        return [(node, self.bins, index) for index, node in enumerate(self.nodes)]

    def probe(self, ctx: Context) -> SimNode:
        """A new node of the group as the filters see it before it is opened (never placed on)."""
        if self._probe is None:
            assert self.bins.new_shape is not None
            self._probe = _new_node(ctx, self.view, -1, list(self.bins.new_shape), NodeKind.NEW)
        return self._probe


@dataclass
class ScaleUpResult:
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    new_nodes: dict[str, int] = field(default_factory=dict)  # by group name
    uncordon: dict[str, str] = field(default_factory=dict)  # node -> group name ("" if unmanaged)
    busy_nodes: set[str] = field(default_factory=set)  # registered nodes receiving pods this run
    spare_bins: dict[str, int] = field(default_factory=dict)  # booting/new bins nothing was placed on
    saturated: set[str] = field(default_factory=set)  # groups at max with pods still waiting for them
    counted_on: dict[str, str] = field(default_factory=dict)  # pod -> registered node it is counted on
    scaled_up_in: dict[str, str] = field(default_factory=dict)  # pod -> group grown for it
    recalled: Recall = field(default_factory=Recall)
    pending: list[Pod] = field(default_factory=list)

    def pod_memory(self, now: datetime) -> dict[str, PodMemory]:
        """The memory of pending pods to store for the next run."""
        return remember(self.pending, self.recalled, self.counted_on, self.scaled_up_in, now)


def _size_key(unit: Unit) -> tuple[int, ...]:
    largest = max(unit.pods, key=lambda p: (p.requests.gpus, p.requests.get(CPU), p.requests.get(MEMORY)))
    r = largest.requests
    return (-r.gpus, -r.get(CPU), -r.get(MEMORY), -len(unit.pods))


def _skip(pod: Pod, reason: str, code: ReasonCode, outcome: Outcome = Outcome.UNHELPED) -> PodOutcome:
    return PodOutcome(pod.key, outcome, None, reason, code, pod.requests.gpus)


def backlog_units(ctx: Context) -> tuple[list[Unit], dict[str, PodOutcome], list[Pod]]:
    """Pending pods that may trigger a scale-up, as units in First Fit Decreasing order.

    Pods ignored by policy (below the priority cutoff, too young) and pods the scheduler is
    already preempting for (nominated to a node) get their outcome here. Also returns every pod
    of the backlog that is planned (the ones whose memory is kept).
    """
    policy = ctx.config.policy
    skipped: dict[str, PodOutcome] = {}
    gangs: dict[str, list[Pod]] = {}
    singles: list[Pod] = []
    for pod in ctx.snapshot.pods:
        if not pod.is_pending_unschedulable:
            continue
        if policy.pod_priority_cutoff is not None and pod.priority < policy.pod_priority_cutoff:
            reason = f"priority {pod.priority} is below the cutoff {policy.pod_priority_cutoff}"
            skipped[pod.key] = _skip(pod, reason, ReasonCode.BELOW_PRIORITY_CUTOFF)
            continue
        if pod.nominated_node:
            # The scheduler preempts victims on that node for this pod; room is on its way.
            reason = f"nominated for {pod.nominated_node} by preemption: the scheduler is freeing room there"
            group = ctx.group_of_node.get(pod.nominated_node)
            skipped[pod.key] = PodOutcome(
                pod.key,
                Outcome.EXISTING,
                group.name if group else None,
                reason,
                ReasonCode.NOMINATED,
                pod.requests.gpus,
            )
            continue
        if policy.new_pod_delay_seconds and not ctx.older_than(pod.created_at, policy.new_pod_delay_seconds):
            reason = f"younger than {policy.new_pod_delay_seconds}s: left to the scheduler first"
            skipped[pod.key] = _skip(pod, reason, ReasonCode.TOO_YOUNG)
            continue
        gang = pod.labels.get(policy.gang_label) if policy.gang_label else None
        if gang:
            gangs.setdefault(f"{pod.namespace}/{gang}", []).append(pod)
        else:
            singles.append(pod)
    units = [Unit([p], [ctx.request(p.requests)]) for p in singles]
    for gang_key, members in gangs.items():
        # Largest member first, as First Fit Decreasing places single pods: a replan after the
        # plan was applied must pack the gang the same way.
        members.sort(key=lambda p: (-p.requests.gpus, -p.requests.get(CPU), -p.requests.get(MEMORY), p.key))
        units.append(Unit(members, [ctx.request(p.requests) for p in members], gang=gang_key))
    units.sort(key=lambda u: (*_size_key(u), u.key))
    for order, unit in enumerate(units):
        unit.order = order
    return units, skipped, [p for u in units for p in u.pods]


class _Admission:
    """Caches "does this scheduling spec admit these labels/taints" per distinct pair.

    Keyed by object identity: the parsers intern equal specs, and every pod outlives the run.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], bool] = {}

    def admits(
        self, scheduling: Scheduling, target_id: int, labels: Mapping[str, str], taints: tuple[Taint, ...]
    ) -> bool:
        key = (id(scheduling), target_id)
        hit = self._cache.get(key)
        if hit is None:
            hit = scheduling.admits(labels, taints)
            self._cache[key] = hit
        return hit


def _booting(ctx: Context, view: GroupView, node: Node, complete: dict[tuple[int, int], bool]) -> bool:
    """A registered node that cannot take pods yet but soon will: NotReady, GPUs not advertised, or
    still carrying a startup taint. `complete` caches, per (allocatable, shape) pair, whether the
    node advertises all its shape has."""
    if node.unschedulable:
        return False
    policy = ctx.config.policy
    if node.ready and not any(is_startup_taint(t, policy) for t in node.taints):
        assert view.shape is not None
        key = (id(node.allocatable), id(view.shape))
        advertised = complete.get(key)
        if advertised is None:
            have = node.allocatable.as_dict()
            advertised = complete[key] = all(not value or have.get(name) for name, value in view.shape.items)
        if advertised:
            return False  # ready with everything its shape promises: in service
    return not ctx.older_than(node.created_at, policy.max_node_provision_seconds)


def _referenced_label_keys(units: list[Unit]) -> frozenset[str]:
    """Node label keys any pending pod's selector or affinity looks at."""
    keys: set[str] = set()
    seen: set[int] = set()
    for unit in units:
        for pod in unit.pods:
            scheduling = pod.scheduling
            if id(scheduling) in seen:
                continue
            seen.add(id(scheduling))
            keys.update(key for key, _ in scheduling.node_selector)
            keys.update(req.key for term in scheduling.affinity_terms for req in term)
    return frozenset(keys)


def _bound_ports(pods: list[Pod]) -> set[tuple[str, str, int]]:
    return {port_key(p) for pod in pods for p in pod.constraints.host_ports}


def _existing_classes(
    ctx: Context, booting: set[str], label_keys: frozenset[str], sim: Simulation
) -> list[ExistingClass]:
    """Registered nodes with room, grouped by what admission can see of them.

    Only label keys some pending pod refers to matter, so nodes that differ only in, say, their
    hostname label share a class and one admission test. Each node also joins the simulation.
    """
    classes: dict[tuple[object, ...], ExistingClass] = {}
    for node in sorted(ctx.snapshot.nodes, key=lambda n: n.name):
        if not node.ready or node.name in booting:
            continue
        scaler_cordoned = node.cordoned_by_scaler and node.name in ctx.group_of_node
        if node.unschedulable and not scaler_cordoned:
            continue
        free = list(ctx.vector(node.allocatable))
        bound = ctx.pods_on_node.get(node.name, [])
        for pod in bound:
            for dim, amount in ctx.request(pod.requests):
                free[dim] -= amount
        visible = {k: v for k, v in node.labels.items() if k in label_keys}
        key = (tuple(sorted(visible.items())), node.taints, scaler_cordoned)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = ExistingClass(visible, node.taints, Bins([], []), scaler_cordoned)
        cls.bins.free.append(free)
        cls.bins.ids.append(node.name)
        cls.bins.placed.append(0)
        group = ctx.group_of_node.get(node.name)
        sim.add_node(
            SimNode(
                node.name,
                node.labels,
                node.taints,
                free,
                False,
                _bound_ports(bound),
                group.name if group else None,
            )
        )
    # Schedulable nodes first; uncordoning is the fallback before buying nodes.
    return sorted(classes.values(), key=lambda c: (c.uncordon, c.bins.ids[0] or ""))


def _new_node(ctx: Context, view: GroupView, index: int, free: list[int], kind: NodeKind) -> SimNode:
    template = view.template
    return SimNode(
        f"template-{view.name}-{index}",
        template.node_labels(index),
        template.taints,
        free,
        ports=set(template.ports),
        group=view.name,
        kind=kind,
    )


def _group_bins(
    ctx: Context, view: GroupView, booting_nodes: list[Node], target_id: int, sim: Simulation
) -> GroupBins:
    assert view.shape is not None
    template = view.template
    shape = ctx.vector(view.shape)
    overhead = ctx.request(template.overhead)
    new_free = list(shape)
    for dim, amount in overhead:
        new_free[dim] -= amount
    policy = ctx.config.policy
    gb = GroupBins(view, Bins([], [], tuple(new_free)), 0, target_id)
    for node in booting_nodes:
        advertised = all(not v or node.allocatable.get(n) for n, v in view.shape.items)
        room = list(ctx.vector(node.allocatable)) if advertised else list(shape)
        bound = ctx.pods_on_node.get(node.name, [])
        running = {p.owner_name for p in bound if p.is_daemonset}
        for pod in bound:
            for dim, amount in ctx.request(pod.requests):
                room[dim] -= amount
        for ds in template.daemonsets:  # DaemonSet pods that will still land on it
            if ds.name not in running:
                for dim, amount in ctx.request(ds.pod.requests):
                    room[dim] -= amount
        gb.bins.free.append(room)
        gb.bins.ids.append(node.name)
        taints = tuple(t for t in node.taints if not is_startup_taint(t, policy))
        sim_node = SimNode(
            node.name, node.labels, taints, room, False, _bound_ports(bound), view.name, NodeKind.BOOTING
        )
        gb.nodes.append(sim_node)
        sim.add_node(sim_node)
    live = len(view.asg.live_instances) if view.asg else 0
    # Desired above the instance count is capacity on its way, unless launches are failing.
    pending_slots = 0 if view.in_backoff else max(0, view.current_desired - live)
    for _ in range(len(view.unregistered) + pending_slots):
        room = list(new_free)
        gb.bins.free.append(room)
        gb.bins.ids.append(None)
        sim_node = _new_node(ctx, view, len(gb.nodes), room, NodeKind.LAUNCHING)
        gb.nodes.append(sim_node)
        sim.add_node(sim_node)
    gb.bins.placed = [0] * len(gb.bins.free)
    gb.inflight = len(gb.bins.free)
    can_grow = not view.in_backoff and view.unavailable_reason is None
    gb.bins.max_new = max(0, view.max_size - view.current_desired) if can_grow else 0
    return gb


class _Run:
    """One scale-up run: the simulation, both placement paths, and the undo of gang attempts."""

    def __init__(self, ctx: Context, sim: Simulation, recalled: Recall) -> None:
        self.ctx = ctx
        self.sim = sim
        self.placer = _Placer(ctx, sim)
        self.recalled = recalled

    def _excluded(self, pod: Pod) -> frozenset[str]:
        return self.recalled.distrusted.get(pod.key, frozenset())

    def place_unit(
        self, unit: Unit, place_one: Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]
    ) -> list[tuple[Bins, int]] | None:
        """Place every pod of the unit; all or nothing."""
        journal = Journal() if len(unit.pods) > 1 else None
        if journal is not None:
            self.sim.checkpoint()
        placements: list[tuple[Bins, int]] = []
        for pod, request in zip(unit.pods, unit.requests, strict=True):
            where = place_one(pod, request, journal)
            if where is None:
                if journal is not None:
                    self.sim.rollback()
                    journal.rollback()
                    self.placer.forget()
                return None
            placements.append(where)
        if journal is not None:
            self.sim.commit()
        return placements

    def _record(
        self, pod: Pod, node: SimNode, bins: Bins, index: int, request: Request, journal: Journal | None
    ) -> None:
        if journal is not None:
            journal.touch(bins, index)
        self.sim.record(pod, node, request)
        bins.placed[index] += 1

    def existing(
        self, room: _ExistingRoom
    ) -> Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]:
        """Placement on registered nodes' free room."""

        def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
            if self.sim.is_plain(pod) and pod.key not in self.recalled.distrusted:
                for bins in room.targets(pod):
                    index = bins.place(request, journal)
                    if index is not None:
                        if self.sim.watched(pod):
                            self.sim.record(pod, room.node_of[(id(bins), index)])
                        return bins, index
                return None
            found = self.placer.place(pod, request, room, lambda: room.nodes(pod), self._excluded(pod))
            if found is not None:
                bins, index = found
                self._record(pod, room.node_of[(id(bins), index)], bins, index, request, journal)
            return found

        return place_one

    def group(
        self, gb: GroupBins, room: _ExistingRoom, gang: bool
    ) -> Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]:
        """Placement on a group's booting, launching and new nodes (a gang may also use free room)."""
        existing = self.existing(room)

        def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
            if gang:
                found = existing(pod, request, journal)
                if found is not None:
                    return found
            if self.sim.is_plain(pod):
                opened = gb.bins.opened
                index = gb.bins.place(request, journal)
                if index is None:
                    return None
                if gb.bins.opened > opened:
                    self.open_bin(gb, gb.bins.free[index])
                if self.sim.watched(pod):
                    self.sim.record(pod, gb.nodes[index])
                return gb.bins, index
            found = self.placer.place(pod, request, gb, gb.items, frozenset())
            if found is None:
                found = self._open_for(gb, pod, request, journal)
                if found is None:
                    return None
            bins, index = found
            self._record(pod, gb.nodes[index], bins, index, request, journal)
            return found

        return place_one

    def open_bin(self, gb: GroupBins, free: list[int]) -> SimNode:
        """A bin just opened for a new node: the node joins the simulation."""
        del gb.nodes[len(gb.bins.free) - 1 :]  # drop nodes of bins a rollback removed
        node = _new_node(self.ctx, gb.view, len(gb.nodes), free, NodeKind.NEW)
        gb.nodes.append(node)
        self.sim.add_node(node)
        self.placer.add(gb, (node, gb.bins, len(gb.nodes) - 1))
        return node

    def _open_for(
        self, gb: GroupBins, pod: Pod, request: Request, journal: Journal | None
    ) -> tuple[Bins, int] | None:
        bins = gb.bins
        if not bins.can_open or bins.new_shape is None:
            return None
        probe = gb.probe(self.ctx)
        state = self.sim.state(pod)
        if self.sim.static(pod, state, probe) or self.sim.dynamic(pod, state, probe, request, self.ctx.dims):
            return None
        free = list(bins.new_shape)
        if journal is not None:
            journal.opening(bins)
        bins.free.append(free)
        bins.ids.append(None)
        bins.placed.append(0)
        bins.opened += 1
        self.open_bin(gb, free)
        return bins, len(bins.free) - 1


@dataclass
class _Estimate:
    group_bins: GroupBins
    buckets: list[Bucket]
    new_nodes: int
    cost_per_unit: float
    in_flight_used: int  # demand the group's booting nodes would cover
    waste: float

    @property
    def rank(self) -> tuple[float, int, float, str]:
        """Cheapest per GPU first; on a tie, the group whose booting nodes cover more of the demand."""
        return (self.cost_per_unit, -self.in_flight_used, self.waste, self.group_bins.view.name)


def _estimate(ctx: Context, gb: GroupBins, buckets: list[Bucket]) -> _Estimate:
    """Rough cost of serving the buckets' units from this group: a lower bound on nodes from the
    summed requests, less the booting nodes it already has, times its price, per GPU demanded."""
    view = gb.view
    shape = gb.bins.new_shape
    assert shape is not None
    totals = [0] * len(shape)
    gpus = millicores = 0
    for bucket in buckets:
        for dim, amount in enumerate(bucket.totals):
            totals[dim] += amount
        gpus += bucket.gpus
        millicores += bucket.millicores
    nodes = max((math.ceil(t / s) for t, s in zip(totals, shape, strict=True) if s > 0 and t), default=1)
    nodes = min(nodes, gb.inflight + gb.bins.max_new)
    new_nodes = max(0, nodes - gb.inflight)
    demand = gpus if gpus else millicores / 1000
    price = view.config.price_per_hour
    if new_nodes == 0:
        cost_per_unit = 0.0
    elif price is None:
        cost_per_unit = math.inf  # unpriced groups come after priced ones in the same tier
    else:
        cost_per_unit = price * new_nodes / demand if demand else 0.0
    dominant = ctx.dim_index[GPU] if gpus and GPU in ctx.dim_index else ctx.dim_index.get(CPU, 0)
    capacity = max(shape[dominant], 0) * max(nodes, 1)
    waste = 1 - min(totals[dominant], capacity) / capacity if capacity else 1.0
    covered = min(totals[dominant], max(shape[dominant], 0) * gb.inflight)
    return _Estimate(gb, buckets, new_nodes, cost_per_unit, covered, waste)


def _describe_size(resources: Resources) -> str:
    gpus = resources.gpus
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else str(resources)


def _amounts(names: tuple[str, ...], resources: Resources) -> str:
    """Amounts as a manifest would spell them ("515m cpu", "2.5Gi memory")."""
    parts = []
    for name in names:
        value = resources.get(name)
        text = f"{value}m" if name == CPU and value % 1000 else format_amount(name, value)
        parts.append(f"{text} {name}")
    return ", ".join(parts)


# The most actionable reason first: a group that could take the pod but cannot grow, then what the
# scheduler refused, then what is wrong with the pod for every group.
_CODE_ORDER = (
    ReasonCode.AT_MAX,
    ReasonCode.GANG_DOES_NOT_FIT,
    ReasonCode.BACKOFF,
    ReasonCode.SCHEDULER_REJECTED,
    ReasonCode.GROUP_UNAVAILABLE,
    ReasonCode.FILTERED,
    ReasonCode.DAEMONSET_OVERHEAD,
    ReasonCode.TOO_LARGE,
    ReasonCode.UNVERIFIABLE,
    ReasonCode.NO_MATCHING_GROUP,
)


def _diagnose_group(
    ctx: Context, sim: Simulation, view: GroupView, unit: Unit, request: Resources, refused: bool
) -> tuple[ReasonCode, str]:
    """Why this group did not take the unit, in the scheduler's words where a filter said no."""
    pod = unit.pods[0]
    template = view.template
    labels = template.node_labels(0)
    state = sim.state(pod)
    blocked = static_reason(pod.scheduling, labels, template.taints, False)
    if blocked:
        return ReasonCode.NO_MATCHING_GROUP, blocked
    if view.unavailable_reason:
        return ReasonCode.GROUP_UNAVAILABLE, view.unavailable_reason
    if state.unverifiable:
        return ReasonCode.UNVERIFIABLE, state.unverifiable
    if state.volumes is not None:
        volume = volume_binding(state.volumes, labels)
        if volume:
            code = ReasonCode.UNVERIFIABLE if state.volumes.unresolvable else ReasonCode.FILTERED
            return code, volume
    assert view.shape is not None and template.free is not None
    too_big = request.exceeding(view.shape)
    if too_big:
        shape = view.shape
        detail = ", ".join(
            f"{n} {format_amount(n, request.get(n))} > {format_amount(n, shape.get(n))}" for n in too_big
        )
        return ReasonCode.TOO_LARGE, f"larger than a node ({detail}; {template.source})"
    squeezed = request.exceeding(template.free)
    if squeezed:
        count = len(template.daemonsets)
        return (
            ReasonCode.DAEMONSET_OVERHEAD,
            f"{count} DaemonSet(s) need {_amounts(squeezed, template.overhead)} on every {view.name} node; "
            f"{_amounts(squeezed, template.free)} left for pods",
        )
    if refused:
        said = pod.scheduler_message or "no message"
        return ReasonCode.SCHEDULER_REJECTED, f"the scheduler refused capacity bought for it ({said})"
    if not pod.constraints.is_plain or state.affinity is not None:
        probe = _new_node(ctx, view, 0, list(ctx.vector(template.free)), NodeKind.NEW)
        for member, member_request in zip(unit.pods, unit.requests, strict=True):
            reason = sim.dynamic(member, sim.state(member), probe, member_request, ctx.dims)
            if reason and not reason.startswith(("Insufficient", "Too many")):
                return ReasonCode.FILTERED, reason
    if view.in_backoff:
        until = view.state.backoff_until
        return ReasonCode.BACKOFF, f"in capacity backoff until {until.isoformat() if until else '?'}"
    if unit.gang:
        return (
            ReasonCode.GANG_DOES_NOT_FIT,
            f"gang of {len(unit.pods)} pods does not fit within max size {view.max_size}",
        )
    return ReasonCode.AT_MAX, f"at max size {view.max_size}"


def _diagnose(
    ctx: Context, sim: Simulation, unit: Unit, refused: frozenset[str]
) -> tuple[ReasonCode, str, dict[str, ReasonCode]]:
    """Why no group could take this unit: one reason per group, the overall code, codes by group."""
    request = Resources()
    for member in unit.pods:
        request = request.maximum(member.requests)
    by_group: dict[str, ReasonCode] = {}
    reasons: list[str] = []
    for view in ctx.groups:
        code, reason = _diagnose_group(ctx, sim, view, unit, request, view.name in refused)
        by_group[view.name] = code
        reasons.append(f"{view.name}: {reason}")
    if not reasons:
        return ReasonCode.NO_MATCHING_GROUP, "no node groups configured", by_group
    codes = set(by_group.values())
    code = next(c for c in _CODE_ORDER if c in codes)
    return code, f"{_describe_size(request)}: " + "; ".join(reasons), by_group


def _fill_group(
    run: _Run, gb: GroupBins, units: list[Unit], result: ScaleUpResult, room: _ExistingRoom
) -> list[Unit]:
    """First Fit Decreasing of `units` into the group's booting then new nodes; returns those placed.

    A gang may also use what is left of the free room of registered nodes: a member on an idle node
    and the others on new nodes is still the whole gang. Pods the scheduler refused in this group
    are not placed here.
    """
    refused = run.recalled.refused
    if not gb.places:
        gb.places[False] = run.group(gb, room, gang=False)
        gb.places[True] = run.group(gb, room, gang=True)
    single, gang = gb.places[False], gb.places[True]
    bins = gb.bins
    placed: list[Unit] = []
    for unit in units:
        if refused and any(gb.view.name in refused.get(p.key, ()) for p in unit.pods):
            continue
        if unit.plain and not unit.gang:
            # The fast path, inline: most of the backlog is plain single pods.
            opened = bins.opened
            index = bins.place(unit.requests[0])
            if index is None:
                continue
            if bins.opened > opened:
                run.open_bin(gb, bins.free[index])
            if run.sim.active and run.sim.watched(unit.pods[0]):
                run.sim.record(unit.pods[0], gb.nodes[index])
            placements: list[tuple[Bins, int]] | None = [(bins, index)]
        else:
            placements = run.place_unit(unit, gang if unit.gang else single)
        if placements is None:
            continue
        placed.append(unit)
        for pod, (bins, index) in zip(unit.pods, placements, strict=True):
            if bins is not gb.bins:
                room.record(pod, bins, index, result)
                continue
            if index < gb.inflight:
                node = gb.bins.ids[index]
                where = f"booting node {node}" if node else "a node that is launching"
                outcome, reason = Outcome.IN_FLIGHT, f"will run on {where} of {gb.view.name}"
                if node:
                    result.busy_nodes.add(node)
            else:
                outcome, reason = Outcome.SCALE_UP, f"needs a new {gb.view.name} node"
                result.scaled_up_in[pod.key] = gb.view.name
            result.outcomes[pod.key] = PodOutcome(
                pod.key, outcome, gb.view.name, reason, ReasonCode.PLACED, pod.requests.gpus
            )
    return placed


def _simulation(ctx: Context) -> Simulation:
    snapshot = ctx.snapshot
    return Simulation(
        ctx.pods_on_node,
        snapshot.namespaces,
        Volumes.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes),
    )


def _recall(ctx: Context, pending: list[Pod]) -> Recall:
    policy = ctx.config.policy

    def holds(pod: Pod, node: Node) -> bool:
        free = list(ctx.vector(node.allocatable))
        for other in ctx.pods_on_node.get(node.name, ()):
            if other.is_daemonset or other.is_mirror:
                for dim, amount in ctx.request(other.requests):
                    free[dim] -= amount
        taints = tuple(t for t in node.taints if not is_startup_taint(t, policy))
        return (
            static_reason(pod.scheduling, node.labels, taints, False) is None
            and node_resources_fit(ctx.request(pod.requests), free, ctx.dims) is None
        )

    return recall(
        pending,
        ctx.snapshot.state.pods,
        {n.name: n for n in ctx.snapshot.nodes},
        {name: view.name for name, view in ctx.group_of_node.items()},
        ctx.now,
        policy.scheduler_retry_seconds,
        policy.scheduler_refusal_ttl_seconds,
        holds,
    )


def plan_scale_up(ctx: Context) -> ScaleUpResult:
    """Decide where every backlog pod goes: free room, uncordon, booting nodes, or new nodes.

    Every node is judged by kube-scheduler's filters (shared.planner.filters); pods placed earlier
    in the run count for later ones. Groups are chosen per priority tier (high first), then by the
    lowest estimated cost per GPU of the new nodes the pods at hand need, then less waste, then
    name. A group takes every pod it admits up to its max size; what is left spills to the next
    group. Gangs are all-or-nothing within one group (or within existing free room). Fits the
    scheduler has refuted are not counted again (shared.planner.ground_truth).
    """
    result = ScaleUpResult()
    units, skipped, pending = backlog_units(ctx)
    result.outcomes.update(skipped)
    result.pending = pending
    result.recalled = recalled = _recall(ctx, pending)
    sim = _simulation(ctx)
    run = _Run(ctx, sim, recalled)

    booting: dict[str, list[Node]] = {}
    complete: dict[tuple[int, int], bool] = {}
    for view in ctx.groups:
        if view.shape is not None:
            booting[view.name] = [n for n in view.nodes if _booting(ctx, view, n, complete)]
    booting_names = {node.name for nodes in booting.values() for node in nodes}
    admission = _Admission()

    # 1. Free room on registered nodes (schedulable first, then scaler-cordoned ones).
    classes = _existing_classes(ctx, booting_names, _referenced_label_keys(units), sim) if units else []
    group_bins: dict[str, GroupBins] = {}
    for position, view in enumerate(ctx.groups):
        if view.shape is not None and view.asg is not None:
            group_bins[view.name] = _group_bins(ctx, view, booting.get(view.name, []), position, sim)
    sim.prepare(pending)
    for unit in units:
        unit.plain = all(sim.is_plain(p) and p.key not in recalled.distrusted for p in unit.pods)
    room = _ExistingRoom(ctx, classes, sim)
    place_existing = run.existing(room)
    remaining: list[Unit] = []
    for unit in units:
        if not classes:
            placements = None
        elif unit.plain and not unit.gang:
            placements = _place_plain(unit, room, sim)
        else:
            placements = run.place_unit(unit, place_existing)
        if placements is None:
            remaining.append(unit)
            continue
        for pod, (bins, index) in zip(unit.pods, placements, strict=True):
            room.record(pod, bins, index, result)

    # 2. Booting and new nodes, one group at a time.
    buckets: dict[tuple[int, ...], Bucket] = {}
    for unit in remaining:
        signature = unit.signature
        bucket = buckets.get(signature)
        if bucket is None:
            schedulings = tuple({id(p.scheduling): p.scheduling for p in unit.pods}.values())
            bucket = buckets[signature] = Bucket(schedulings, totals=[0] * len(ctx.dims))
        bucket.add(unit)

    def admitted_buckets(gb: GroupBins) -> list[Bucket]:
        return [
            bucket
            for bucket in buckets.values()
            if bucket.units
            and all(
                admission.admits(sched, gb.target_id, gb.view.labels, gb.view.taints)
                for sched in bucket.schedulings
            )
        ]

    tiers = sorted({v.config.priority for v in ctx.groups}, reverse=True)
    for tier in tiers:
        candidates = [gb for gb in group_bins.values() if gb.view.config.priority == tier]
        ranked = list(candidates)  # the tier's groups, in the order the cost estimates chose them
        chosen: list[GroupBins] = []
        while candidates and any(b.units for b in buckets.values()):
            estimates = [
                _estimate(ctx, gb, admitted)
                for gb in candidates
                if (gb.inflight or gb.bins.max_new) and (admitted := admitted_buckets(gb))
            ]
            if not estimates:
                break
            best = min(estimates, key=lambda e: e.rank)
            candidates.remove(best.group_bins)
            chosen.append(best.group_bins)
            # Plain pods fill the chosen group First Fit Decreasing; constrained ones wait for the
            # pass below, where each tries the tier's groups in this order.
            ordered = sorted(
                (u for b in best.buckets for u in b.units.values() if u.plain), key=lambda u: u.order
            )
            for unit in _fill_group(run, best.group_bins, ordered, result, room):
                buckets[unit.signature].add(unit, -1)
        # Spread and affinity depend on where the other pods went: a zone group that took what
        # its skew allows can take more once the other zones have grown. So constrained pods go
        # one at a time, each to the cheapest group of the tier that takes it.
        groups_in_order = chosen + [gb for gb in ranked if gb not in chosen]
        leftovers = sorted(
            (u for b in buckets.values() for u in b.units.values() if not u.plain), key=lambda u: u.order
        )
        for unit in leftovers:
            for gb in groups_in_order:
                if not all(
                    admission.admits(p.scheduling, gb.target_id, gb.view.labels, gb.view.taints)
                    for p in unit.pods
                ):
                    continue
                if _fill_group(run, gb, [unit], result, room):
                    buckets[unit.signature].add(unit, -1)
                    break

    for gb in group_bins.values():
        result.new_nodes[gb.view.name] = gb.bins.opened
        result.spare_bins[gb.view.name] = sum(1 for count in gb.bins.placed if count == 0)
    _report_unplaced(ctx, sim, buckets, recalled, result)
    return result


def _place_plain(unit: Unit, room: _ExistingRoom, sim: Simulation) -> list[tuple[Bins, int]] | None:
    """The fast path on registered nodes: first fit over the classes that admit the pod."""
    pod, request = unit.pods[0], unit.requests[0]
    for bins in room.targets(pod):
        index = bins.place(request)
        if index is not None:
            if sim.active and sim.watched(pod):
                sim.record(pod, room.node_of[(id(bins), index)])
            return [(bins, index)]
    return None


def _report_unplaced(
    ctx: Context,
    sim: Simulation,
    buckets: dict[tuple[int, ...], Bucket],
    recalled: Recall,
    result: ScaleUpResult,
) -> None:
    """A reason for every pod left over; a group that could take one but is at max is saturated."""
    remaining = sorted((u for b in buckets.values() for u in b.units.values()), key=lambda u: u.order)
    cache: dict[tuple[object, ...], tuple[ReasonCode, str, dict[str, ReasonCode]]] = {}
    for unit in remaining:
        pod = unit.pods[0]
        refused = recalled.refused.get(pod.key, frozenset())
        key = (
            pod.namespace,
            id(pod.scheduling),
            id(pod.constraints),
            frozenset(pod.labels.items()),
            tuple(unit.requests),
            unit.gang,
            refused,
        )
        diagnosis = cache.get(key)
        if diagnosis is None:
            diagnosis = cache[key] = _diagnose(ctx, sim, unit, refused)
        code, reason, by_group = diagnosis
        for name, group_code in by_group.items():
            if group_code in (ReasonCode.AT_MAX, ReasonCode.GANG_DOES_NOT_FIT):
                result.saturated.add(name)
        for member in unit.pods:
            result.outcomes[member.key] = PodOutcome(
                member.key, Outcome.UNHELPED, None, reason, code, member.requests.gpus
            )
