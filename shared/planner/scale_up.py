"""Scale-up: place the backlog on free room, then booting nodes, then new nodes, group by group."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shared.domain.model import Node, Pod, PodMemory, Scheduling, Taint
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.domain.resources import CPU, GPU
from shared.planner.backlog import Bucket, Unit, backlog_units
from shared.planner.context import Context, GroupView
from shared.planner.diagnosis import diagnose
from shared.planner.filters.framework import SimNode
from shared.planner.filters.node_ports import port_key
from shared.planner.filters.node_resources_fit import node_resources_fit
from shared.planner.filters.volume_binding import Volumes
from shared.planner.ground_truth import Recall, recall, remember
from shared.planner.packing import Bins, Journal, Request
from shared.planner.placement import Placer, template_node
from shared.planner.simulation import Simulation, static_reason
from shared.planner.template import is_startup_taint
from shared.planner.zones import guarantees_zone, zone_binding


@dataclass
class ExistingClass:
    """Registered nodes sharing labels and taints: one admission test covers them all."""

    labels: dict[str, str]
    taints: tuple[Taint, ...]
    bins: Bins
    uncordon: bool = False  # nodes cordoned by the scaler: placing a pod means uncordoning one


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
    reserved_left: int = 0  # new nodes that launch into free reserved capacity (marginal price 0)
    beyond_reserved: int = 0  # more new nodes at the group's price once the reservation is used
    places: dict[bool, Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]] = field(
        default_factory=dict
    )  # placement functions, single pods and gangs (built once per run)

    def items(self) -> list[tuple[SimNode, Bins, int]]:
        return [(node, self.bins, index) for index, node in enumerate(self.nodes)]

    def probe(self, ctx: Context) -> SimNode:
        """A new node of the group as the filters see it before it is opened (never placed on)."""
        if self._probe is None:
            assert self.bins.new_shape is not None
            self._probe = template_node(self.view, -1, list(self.bins.new_shape))
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
    # group -> gang -> its members (stand-ins too) on new nodes of the group, for the group's reason
    gangs_bought: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    recalled: Recall = field(default_factory=Recall)
    pending: list[Pod] = field(default_factory=list)

    def pod_memory(self, now: datetime) -> dict[str, PodMemory]:
        """The memory of pending pods to store for the next run."""
        return remember(self.pending, self.recalled, self.counted_on, self.scaled_up_in, now)


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
        # A scaler-cordoned node is judged schedulable: the plan uncordons it to use it.
        sim.add_node(SimNode(node.name, node.labels, node.taints, free, False, _bound_ports(bound)))
    # Schedulable nodes first; uncordoning is the fallback before buying nodes.
    return sorted(classes.values(), key=lambda c: (c.uncordon, c.bins.ids[0] or ""))


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
        sim_node = SimNode(node.name, node.labels, taints, room, False, _bound_ports(bound))
        gb.nodes.append(sim_node)
        sim.add_node(sim_node)
    live = len(view.asg.live_instances) if view.asg else 0
    # Desired above the instance count is capacity on its way, unless launches are failing or
    # the group's Launch process is suspended.
    launching = not view.in_backoff and not (view.asg is not None and view.asg.launch_suspended)
    pending_slots = max(0, view.current_desired - live) if launching else 0
    for _ in range(len(view.unregistered) + pending_slots):
        room = list(new_free)
        gb.bins.free.append(room)
        gb.bins.ids.append(None)
        sim_node = template_node(view, len(gb.nodes), room)
        gb.nodes.append(sim_node)
        sim.add_node(sim_node)
    gb.bins.placed = [0] * len(gb.bins.free)
    gb.inflight = len(gb.bins.free)
    can_grow = (
        not view.in_backoff and view.unavailable_reason is None and view.capacity.growth_blocked is None
    )
    gb.bins.max_new = max(0, view.max_size - view.current_desired) if can_grow else 0
    _reserve(gb, pending_slots)
    return gb


def _reserve(gb: GroupBins, pending_slots: int) -> None:
    """Split a reservation group's new nodes: first those free reserved capacity takes (launches
    already asked for take theirs first), then, unless it launches only into its reservations,
    the rest at its price (filled only after cheaper groups had their turn)."""
    capacity = gb.view.capacity
    if capacity.reserved_free is None:
        return
    free = max(0, capacity.reserved_free - pending_slots)
    gb.reserved_left = min(gb.bins.max_new, free)
    if not gb.reserved_left and not capacity.reserved_only:
        return  # nothing reserved is left: an On-Demand group at its price
    gb.beyond_reserved = 0 if capacity.reserved_only else gb.bins.max_new - gb.reserved_left
    gb.bins.max_new = gb.reserved_left


class _Run:
    """One scale-up run: the simulation, both placement paths, and the undo of gang attempts."""

    def __init__(self, ctx: Context, sim: Simulation, recalled: Recall) -> None:
        self.ctx = ctx
        self.sim = sim
        self.placer = Placer(ctx, sim)
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
        node = template_node(gb.view, len(gb.nodes), free)
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
    paid = new_nodes - min(new_nodes, gb.reserved_left)  # reserved capacity is already paid for
    if paid == 0:
        cost_per_unit = 0.0
    elif price is None:
        cost_per_unit = math.inf  # unpriced groups come after priced ones in the same tier
    else:
        cost_per_unit = price * paid / demand if demand else 0.0
    dominant = ctx.dim_index[GPU] if gpus and GPU in ctx.dim_index else ctx.dim_index.get(CPU, 0)
    capacity = max(shape[dominant], 0) * max(nodes, 1)
    waste = 1 - min(totals[dominant], capacity) / capacity if capacity else 1.0
    covered = min(totals[dominant], max(shape[dominant], 0) * gb.inflight)
    return _Estimate(gb, buckets, new_nodes, cost_per_unit, covered, waste)


def _fill_group(
    run: _Run, gb: GroupBins, units: list[Unit], result: ScaleUpResult, room: _ExistingRoom
) -> list[Unit]:
    """First Fit Decreasing of `units` into the group's booting then new nodes; returns those placed.

    A gang may also use what is left of the free room of registered nodes: a member on an idle node
    and the others on new nodes is still the whole gang. Pods the scheduler refused in this group
    are not placed here.
    """
    refused = run.recalled.refused
    zone_free = not guarantees_zone(gb.view.capacity.zones, gb.view.labels)
    if not gb.places:
        gb.places[False] = run.group(gb, room, gang=False)
        gb.places[True] = run.group(gb, room, gang=True)
    single, gang = gb.places[False], gb.places[True]
    bins = gb.bins
    placed: list[Unit] = []
    for unit in units:
        if refused and any(gb.view.name in refused.get(p.key, ()) for p in unit.pods):
            continue
        if zone_free and not unit.plain and _zone_bound(run, unit):
            continue  # its nodes may launch in another zone (shared.planner.zones)
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
                if unit.gang and not unit.label:  # a gang, not a provisioning request (named apart)
                    result.gangs_bought.setdefault(gb.view.name, {}).setdefault(unit.gang, []).append(pod.key)
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

    booting = _booting_nodes(ctx)
    booting_names = {node.name for nodes in booting.values() for node in nodes}
    excluded = booting_names | _parked_nodes(ctx)
    classes = _existing_classes(ctx, excluded, _referenced_label_keys(units), sim) if units else []
    group_bins: dict[str, GroupBins] = {}
    for position, view in enumerate(ctx.groups):
        if view.shape is not None and view.asg is not None:
            group_bins[view.name] = _group_bins(ctx, view, booting.get(view.name, []), position, sim)
    sim.prepare(pending)  # every node the run may count on is known: build the per-domain counts
    for unit in units:
        unit.plain = all(sim.is_plain(p) and p.key not in recalled.distrusted for p in unit.pods)
    room = _ExistingRoom(ctx, classes, sim)

    remaining = _place_on_registered(run, units, room, result)
    remaining = [u for u in remaining if not u.existing_only]  # check-capacity requests never buy nodes
    buckets = _buckets(ctx, remaining)
    admission = _Admission()
    for tier in sorted({v.config.priority for v in ctx.groups}, reverse=True):
        tier_groups = [gb for gb in group_bins.values() if gb.view.config.priority == tier]
        chosen = _fill_by_cost(run, tier_groups, buckets, admission, result, room)
        ranked = chosen + [gb for gb in tier_groups if gb not in chosen]
        _place_constrained(run, ranked, buckets, admission, result, room)

    for gb in group_bins.values():
        result.new_nodes[gb.view.name] = gb.bins.opened
        result.spare_bins[gb.view.name] = sum(1 for count in gb.bins.placed if count == 0)
    _report_unplaced(ctx, sim, buckets, recalled, result)
    return result


def _parked_nodes(ctx: Context) -> set[str]:
    """Registered nodes that are never free room, however idle they look: those whose instance is
    in Standby or leaving its group (Terminating, Terminating:Wait under a lifecycle hook,
    Detaching), and those of a group whose Capacity Block is about to end (they are being cordoned)."""
    ending = {n.name for v in ctx.groups if v.capacity.block_cordon for n in v.nodes}
    parked = {i.instance_id for asg in ctx.snapshot.asgs.values() for i in asg.instances if not i.is_live}
    if parked:
        ending.update(n.name for n in ctx.snapshot.nodes if n.instance_id in parked)
    return ending


def _booting_nodes(ctx: Context) -> dict[str, list[Node]]:
    """Registered nodes of each group that cannot take pods yet but soon will."""
    complete: dict[tuple[int, int], bool] = {}
    return {
        view.name: [n for n in view.nodes if _booting(ctx, view, n, complete)]
        for view in ctx.groups
        if view.shape is not None
    }


def _place_on_registered(
    run: _Run, units: list[Unit], room: _ExistingRoom, result: ScaleUpResult
) -> list[Unit]:
    """Step 1: free room on registered nodes (schedulable first, then scaler-cordoned ones).
    Returns the units left for booting and new nodes."""
    place_existing = run.existing(room)
    remaining: list[Unit] = []
    for unit in units:
        if not room.classes:
            placements = None
        elif unit.plain and not unit.gang:
            placements = _place_plain(unit, room, run.sim)
        else:
            placements = run.place_unit(unit, place_existing)
        if placements is None:
            remaining.append(unit)
            continue
        for pod, (bins, index) in zip(unit.pods, placements, strict=True):
            room.record(pod, bins, index, result)
    return remaining


def _buckets(ctx: Context, units: list[Unit]) -> dict[tuple[int, ...], Bucket]:
    """Units by the scheduling specs of their members (one admission test per group and bucket)."""
    buckets: dict[tuple[int, ...], Bucket] = {}
    for unit in units:
        signature = unit.signature
        bucket = buckets.get(signature)
        if bucket is None:
            schedulings = tuple({id(p.scheduling): p.scheduling for p in unit.pods}.values())
            bucket = buckets[signature] = Bucket(schedulings, totals=[0] * len(ctx.dims))
        bucket.add(unit)
    return buckets


def _admits(admission: _Admission, gb: GroupBins, schedulings: Iterable[Scheduling]) -> bool:
    return all(admission.admits(s, gb.target_id, gb.view.labels, gb.view.taints) for s in schedulings)


def _fill_by_cost(
    run: _Run,
    groups: list[GroupBins],
    buckets: dict[tuple[int, ...], Bucket],
    admission: _Admission,
    result: ScaleUpResult,
    room: _ExistingRoom,
) -> list[GroupBins]:
    """Step 2: plain pods fill the tier's groups First Fit Decreasing, the cheapest group for the
    pods at hand first. Returns the groups in the order they were chosen."""
    candidates = list(groups)
    chosen: list[GroupBins] = []
    while candidates and any(b.units for b in buckets.values()):
        estimates = [
            _estimate(run.ctx, gb, admitted)
            for gb in candidates
            if (gb.inflight or gb.bins.max_new)
            and (
                admitted := [b for b in buckets.values() if b.units and _admits(admission, gb, b.schedulings)]
            )
        ]
        if not estimates:
            break
        best = min(estimates, key=lambda e: e.rank)
        candidates.remove(best.group_bins)
        if all(c is not best.group_bins for c in chosen):  # a reservation group may come back at its price
            chosen.append(best.group_bins)
        ordered = sorted(
            (u for b in best.buckets for u in b.units.values() if u.plain), key=lambda u: u.order
        )
        for unit in _fill_group(run, best.group_bins, ordered, result, room):
            buckets[unit.signature].add(unit, -1)
        if _past_reservation(best.group_bins):
            candidates.append(best.group_bins)
    return chosen


def _zone_bound(run: _Run, unit: Unit) -> bool:
    """A member must run in particular zones (plain pods never are: their selector is checked
    against the template's labels, which carry no zone for a multi-zone group)."""
    return any(zone_binding(p, run.sim.state(p).volumes) is not None for p in unit.pods)


def _past_reservation(gb: GroupBins) -> bool:
    """Once its free reserved capacity is used, a group that falls back to On-Demand competes
    again at its price: returns True when it was opened up for that."""
    if not gb.beyond_reserved or gb.bins.opened < gb.bins.max_new:
        return False
    gb.bins.max_new += gb.beyond_reserved
    gb.beyond_reserved = 0
    gb.reserved_left = 0
    return True


def _place_constrained(
    run: _Run,
    ranked: list[GroupBins],
    buckets: dict[tuple[int, ...], Bucket],
    admission: _Admission,
    result: ScaleUpResult,
    room: _ExistingRoom,
) -> None:
    """Step 3: constrained pods one at a time, each to the first group of `ranked` that takes it.

    Spread and affinity depend on where the other pods went: a zone group that took what its
    skew allows can take more once the other zones have grown, so groups are not filled in turn.
    """
    leftovers = sorted(
        (u for b in buckets.values() for u in b.units.values() if not u.plain), key=lambda u: u.order
    )
    for unit in leftovers:
        for gb in ranked:
            if _admits(admission, gb, (p.scheduling for p in unit.pods)) and _fill_group(
                run, gb, [unit], result, room
            ):
                buckets[unit.signature].add(unit, -1)
                break


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
            diagnosis = cache[key] = diagnose(ctx, sim, unit, refused)
        code, reason, by_group = diagnosis
        for name, group_code in by_group.items():
            if group_code in (ReasonCode.AT_MAX, ReasonCode.GANG_DOES_NOT_FIT):
                result.saturated.add(name)
        for member in unit.pods:
            result.outcomes[member.key] = PodOutcome(
                member.key, Outcome.UNHELPED, None, reason, code, member.requests.gpus
            )
