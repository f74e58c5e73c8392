"""Scale-up: place the backlog on free room, then booting nodes, then new nodes, group by group."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.domain.model import Node, Pod, Scheduling, Taint
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.domain.resources import CPU, GPU, MEMORY, Resources, format_amount
from shared.planner.context import Context, GroupView
from shared.planner.packing import Bins, Journal, Request


@dataclass
class Unit:
    """What is placed at once: one pod, or every pending pod of a gang (all-or-nothing)."""

    pods: list[Pod]
    requests: list[Request]
    gang: str | None = None
    order: int = 0  # position in First Fit Decreasing order
    gpus: int = 0
    millicores: int = 0

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


class _ExistingRoom:
    """Free room of registered nodes: which classes admit a pod, and the outcome of a placement."""

    def __init__(self, ctx: Context, classes: list[ExistingClass]) -> None:
        self.ctx = ctx
        self.classes = classes
        self._admitting: dict[int, list[Bins]] = {}
        self._uncordon = {id(cls.bins) for cls in classes if cls.uncordon}

    def targets(self, pod: Pod) -> list[Bins]:
        """Bins of the classes whose labels and taints admit the pod (cached per scheduling spec)."""
        found = self._admitting.get(id(pod.scheduling))
        if found is None:
            found = self._admitting[id(pod.scheduling)] = [
                cls.bins for cls in self.classes if pod.scheduling.admits(cls.labels, cls.taints)
            ]
        return found

    def record(self, pod: Pod, bins: Bins, index: int, result: ScaleUpResult) -> None:
        """The pod fits registered node `bins.ids[index]`: an existing outcome (maybe an uncordon)."""
        node = bins.ids[index] or ""
        group = self.ctx.group_of_node.get(node)
        result.busy_nodes.add(node)
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


@dataclass
class ScaleUpResult:
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    new_nodes: dict[str, int] = field(default_factory=dict)  # by group name
    uncordon: dict[str, str] = field(default_factory=dict)  # node -> group name ("" if unmanaged)
    busy_nodes: set[str] = field(default_factory=set)  # registered nodes receiving pods this run
    spare_bins: dict[str, int] = field(default_factory=dict)  # booting/new bins nothing was placed on
    saturated: set[str] = field(default_factory=set)  # groups at max with pods still waiting for them


def _size_key(unit: Unit) -> tuple[int, ...]:
    largest = max(unit.pods, key=lambda p: (p.requests.gpus, p.requests.get(CPU), p.requests.get(MEMORY)))
    r = largest.requests
    return (-r.gpus, -r.get(CPU), -r.get(MEMORY), -len(unit.pods))


def backlog_units(ctx: Context) -> tuple[list[Unit], dict[str, PodOutcome]]:
    """Pending pods that may trigger a scale-up, as units in First Fit Decreasing order.

    Pods ignored by policy (below the priority cutoff, too young) get their outcome here.
    """
    policy = ctx.config.policy
    skipped: dict[str, PodOutcome] = {}
    gangs: dict[str, list[Pod]] = {}
    singles: list[Pod] = []
    for pod in ctx.snapshot.pods:
        if not pod.is_pending_unschedulable:
            continue
        if policy.pod_priority_cutoff is not None and pod.priority < policy.pod_priority_cutoff:
            skipped[pod.key] = PodOutcome(
                pod.key,
                Outcome.UNHELPED,
                None,
                f"priority {pod.priority} is below the cutoff {policy.pod_priority_cutoff}",
                ReasonCode.BELOW_PRIORITY_CUTOFF,
                pod.requests.gpus,
            )
            continue
        if policy.new_pod_delay_seconds and not ctx.older_than(pod.created_at, policy.new_pod_delay_seconds):
            skipped[pod.key] = PodOutcome(
                pod.key,
                Outcome.UNHELPED,
                None,
                f"younger than {policy.new_pod_delay_seconds}s: left to the scheduler first",
                ReasonCode.TOO_YOUNG,
                pod.requests.gpus,
            )
            continue
        gang = pod.labels.get(policy.gang_label) if policy.gang_label else None
        if gang:
            gangs.setdefault(f"{pod.namespace}/{gang}", []).append(pod)
        else:
            singles.append(pod)
    units = [Unit([p], [ctx.request(p.requests)]) for p in singles]
    for gang_key, members in gangs.items():
        members.sort(key=lambda p: p.key)
        units.append(Unit(members, [ctx.request(p.requests) for p in members], gang=gang_key))
    units.sort(key=lambda u: (*_size_key(u), u.key))
    for order, unit in enumerate(units):
        unit.order = order
    return units, skipped


class _Admission:
    """Caches "does this scheduling spec admit these labels/taints" per distinct pair.

    Keyed by object identity: the parsers intern equal specs, and every pod outlives the run.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], bool] = {}

    def admits(
        self, scheduling: Scheduling, target_id: int, labels: dict[str, str], taints: tuple[Taint, ...]
    ) -> bool:
        key = (id(scheduling), target_id)
        hit = self._cache.get(key)
        if hit is None:
            hit = scheduling.admits(labels, taints)
            self._cache[key] = hit
        return hit


def _booting(ctx: Context, view: GroupView, node: Node, complete: dict[tuple[int, int], bool]) -> bool:
    """A registered node that cannot take pods yet but soon will (NotReady, or GPUs not advertised).

    `complete` caches, per (allocatable, shape) pair, whether the node advertises all its shape has.
    """
    if node.unschedulable:
        return False
    if node.ready:
        assert view.shape is not None
        key = (id(node.allocatable), id(view.shape))
        advertised = complete.get(key)
        if advertised is None:
            have = node.allocatable.as_dict()
            advertised = complete[key] = all(not value or have.get(name) for name, value in view.shape.items)
        if advertised:
            return False  # ready with everything its shape promises: in service
    return not ctx.older_than(node.created_at, ctx.config.policy.max_node_provision_seconds)


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


def _existing_classes(ctx: Context, booting: set[str], label_keys: frozenset[str]) -> list[ExistingClass]:
    """Registered nodes with room, grouped by what admission can see of them.

    Only label keys some pending pod refers to matter, so nodes that differ only in, say, their
    hostname label share a class and one admission test.
    """
    classes: dict[tuple[object, ...], ExistingClass] = {}
    for node in sorted(ctx.snapshot.nodes, key=lambda n: n.name):
        if not node.ready or node.name in booting:
            continue
        scaler_cordoned = node.cordoned_by_scaler and node.name in ctx.group_of_node
        if node.unschedulable and not scaler_cordoned:
            continue
        free = list(ctx.vector(node.allocatable))
        for pod in ctx.pods_on_node.get(node.name, ()):
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
    # Schedulable nodes first; uncordoning is the fallback before buying nodes.
    return sorted(classes.values(), key=lambda c: (c.uncordon, c.bins.ids[0] or ""))


def _group_bins(ctx: Context, view: GroupView, booting_nodes: list[str], target_id: int) -> GroupBins:
    assert view.shape is not None
    shape = ctx.vector(view.shape)
    free: list[list[int]] = []
    ids: list[str | None] = []
    for name in booting_nodes:
        room = list(shape)
        for pod in ctx.pods_on_node.get(name, ()):
            for dim, amount in ctx.request(pod.requests):
                room[dim] -= amount
        free.append(room)
        ids.append(name)
    live = len(view.asg.live_instances) if view.asg else 0
    # Desired above the instance count is capacity on its way, unless launches are failing.
    pending_slots = 0 if view.in_backoff else max(0, view.current_desired - live)
    for _ in range(len(view.unregistered) + pending_slots):
        free.append(list(shape))
        ids.append(None)
    can_grow = not view.in_backoff and view.unavailable_reason is None
    max_new = max(0, view.max_size - view.current_desired) if can_grow else 0
    return GroupBins(view, Bins(free, ids, shape, max_new), inflight=len(free), target_id=target_id)


def _place_unit(unit: Unit, targets: Callable[[Pod], list[Bins]]) -> list[tuple[Bins, int]] | None:
    """Place every pod of the unit on the first bins that admit and fit it; all or nothing."""
    journal = Journal() if len(unit.pods) > 1 else None
    placements: list[tuple[Bins, int]] = []
    for pod, request in zip(unit.pods, unit.requests, strict=True):
        for bins in targets(pod):
            index = bins.place(request, journal)
            if index is not None:
                placements.append((bins, index))
                break
        else:
            if journal is not None:
                journal.rollback()
            return None
    return placements


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
    assert view.shape is not None
    shape = ctx.vector(view.shape)
    totals = [0] * len(shape)
    gpus = millicores = 0
    for bucket in buckets:
        for dim, amount in enumerate(bucket.totals):
            totals[dim] += amount
        gpus += bucket.gpus
        millicores += bucket.millicores
    nodes = max((math.ceil(t / s) for t, s in zip(totals, shape, strict=True) if s and t), default=1)
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
    capacity = shape[dominant] * max(nodes, 1)
    waste = 1 - min(totals[dominant], capacity) / capacity if capacity else 1.0
    covered = min(totals[dominant], shape[dominant] * gb.inflight)
    return _Estimate(gb, buckets, new_nodes, cost_per_unit, covered, waste)


def _describe_size(resources: Resources) -> str:
    gpus = resources.gpus
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else str(resources)


def _diagnose(ctx: Context, unit: Unit) -> tuple[ReasonCode, str]:
    """Why no group could take this unit, summarised over all groups."""
    pod = unit.pods[0]
    request = Resources()
    for member in unit.pods:
        request = request.maximum(member.requests)
    reasons: list[str] = []
    codes: list[ReasonCode] = []
    for view in ctx.groups:
        name = view.name
        if not pod.scheduling.selects(view.config.labels):
            codes.append(ReasonCode.NO_MATCHING_GROUP)
            reasons.append(f"{name}: node selector/affinity does not match")
            continue
        untolerated = pod.scheduling.untolerated(view.taints)
        if untolerated:
            t = untolerated[0]
            codes.append(ReasonCode.NO_MATCHING_GROUP)
            reasons.append(f"{name}: taint {t.key}={t.value}:{t.effect} not tolerated")
            continue
        unavailable = view.unavailable_reason
        if unavailable:
            codes.append(ReasonCode.GROUP_UNAVAILABLE)
            reasons.append(f"{name}: {unavailable}")
            continue
        assert view.shape is not None
        too_big = request.exceeding(view.shape)
        if too_big:
            codes.append(ReasonCode.TOO_LARGE)
            shape = view.shape
            detail = ", ".join(
                f"{n} {format_amount(n, request.get(n))} > {format_amount(n, shape.get(n))}" for n in too_big
            )
            reasons.append(f"{name}: larger than a node ({detail})")
            continue
        if view.in_backoff:
            codes.append(ReasonCode.BACKOFF)
            until = view.state.backoff_until
            reasons.append(f"{name}: in capacity backoff until {until.isoformat() if until else '?'}")
            continue
        if unit.gang:
            codes.append(ReasonCode.GANG_DOES_NOT_FIT)
            reasons.append(
                f"{name}: gang of {len(unit.pods)} pods does not fit within max size {view.max_size}"
            )
            continue
        codes.append(ReasonCode.AT_MAX)
        reasons.append(f"{name}: at max size {view.max_size}")
    if not reasons:
        return ReasonCode.NO_MATCHING_GROUP, "no node groups configured"
    for code in (
        ReasonCode.AT_MAX,
        ReasonCode.GANG_DOES_NOT_FIT,
        ReasonCode.BACKOFF,
        ReasonCode.GROUP_UNAVAILABLE,
        ReasonCode.TOO_LARGE,
        ReasonCode.NO_MATCHING_GROUP,
    ):
        if code in codes:
            return code, f"{_describe_size(request)}: " + "; ".join(reasons)
    return codes[0], "; ".join(reasons)


def _fill_group(
    gb: GroupBins, units: list[Unit], result: ScaleUpResult, existing: _ExistingRoom
) -> list[Unit]:
    """First Fit Decreasing of `units` into the group's booting then new nodes; returns those placed.

    A gang may also use what is left of the free room of registered nodes: a member on an idle node
    and the others on new nodes is still the whole gang.
    """
    target = [gb.bins]
    placed: list[Unit] = []
    for unit in units:
        if unit.gang:
            placements = _place_unit(unit, lambda pod: [*existing.targets(pod), gb.bins])
        else:
            placements = _place_unit(unit, lambda _pod: target)
        if placements is None:
            continue
        placed.append(unit)
        for pod, (bins, index) in zip(unit.pods, placements, strict=True):
            if bins is not gb.bins:
                existing.record(pod, bins, index, result)
                continue
            if index < gb.inflight:
                node = gb.bins.ids[index]
                where = f"booting node {node}" if node else "a node that is launching"
                outcome, reason = Outcome.IN_FLIGHT, f"will run on {where} of {gb.view.name}"
                if node:
                    result.busy_nodes.add(node)
            else:
                outcome, reason = Outcome.SCALE_UP, f"needs a new {gb.view.name} node"
            result.outcomes[pod.key] = PodOutcome(
                pod.key, outcome, gb.view.name, reason, ReasonCode.PLACED, pod.requests.gpus
            )
    return placed


def plan_scale_up(ctx: Context) -> ScaleUpResult:
    """Decide where every backlog pod goes: free room, uncordon, booting nodes, or new nodes.

    Groups are chosen per priority tier (high first), then by the lowest estimated cost per GPU of
    the new nodes the pods at hand need, then less waste, then name. A group takes every pod it
    admits up to its max size; what is left spills to the next group. Gangs are all-or-nothing
    within one group (or within existing free room).
    """
    result = ScaleUpResult()
    units, skipped = backlog_units(ctx)
    result.outcomes.update(skipped)

    booting: dict[str, list[str]] = {}
    complete: dict[tuple[int, int], bool] = {}
    for view in ctx.groups:
        if view.shape is not None:
            booting[view.name] = [n.name for n in view.nodes if _booting(ctx, view, n, complete)]
    booting_names = {name for names in booting.values() for name in names}
    admission = _Admission()

    # 1. Free room on registered nodes (schedulable first, then scaler-cordoned ones).
    existing = _ExistingRoom(
        ctx, _existing_classes(ctx, booting_names, _referenced_label_keys(units)) if units else []
    )
    remaining: list[Unit] = []
    for unit in units:
        placements = _place_unit(unit, existing.targets) if existing.classes else None
        if placements is None:
            remaining.append(unit)
            continue
        for pod, (bins, index) in zip(unit.pods, placements, strict=True):
            existing.record(pod, bins, index, result)

    # 2. Booting and new nodes, one group at a time.
    group_bins: dict[str, GroupBins] = {}
    for position, view in enumerate(ctx.groups):
        if view.shape is not None and view.asg is not None:
            group_bins[view.name] = _group_bins(ctx, view, booting.get(view.name, []), position)

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
                admission.admits(sched, gb.target_id, gb.view.config.labels, gb.view.taints)
                for sched in bucket.schedulings
            )
        ]

    tiers = sorted({v.config.priority for v in ctx.groups}, reverse=True)
    for tier in tiers:
        candidates = [gb for gb in group_bins.values() if gb.view.config.priority == tier]
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
            units = sorted((u for b in best.buckets for u in b.units.values()), key=lambda u: u.order)
            placed = _fill_group(best.group_bins, units, result, existing)
            for unit in placed:
                buckets[unit.signature].add(unit, -1)

    remaining = sorted((u for b in buckets.values() for u in b.units.values()), key=lambda u: u.order)
    for gb in group_bins.values():
        if not gb.bins.can_open and not gb.view.in_backoff and admitted_buckets(gb):
            result.saturated.add(gb.view.name)
        result.new_nodes[gb.view.name] = gb.bins.opened
        result.spare_bins[gb.view.name] = sum(1 for count in gb.bins.placed if count == 0)

    diagnosis_cache: dict[tuple[object, ...], tuple[ReasonCode, str]] = {}
    for unit in remaining:
        cache_key = (unit.pods[0].scheduling, tuple(unit.requests), unit.gang)
        diagnosis = diagnosis_cache.get(cache_key)
        if diagnosis is None:
            diagnosis = diagnosis_cache[cache_key] = _diagnose(ctx, unit)
        code, reason = diagnosis
        for pod in unit.pods:
            result.outcomes[pod.key] = PodOutcome(
                pod.key, Outcome.UNHELPED, None, reason, code, pod.requests.gpus
            )
    return result
