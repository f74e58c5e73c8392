"""Groups filled in turn: plain pods First Fit Decreasing into the cheapest group for the pods at
hand (cluster-autoscaler's binpacking estimator), then constrained pods one at a time."""

from __future__ import annotations

from shared.domain.model import Pod
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.planner.backlog import Bucket, Unit
from shared.planner.packing import Bins, Request
from shared.planner.scale_up.estimate import estimate
from shared.planner.scale_up.groups import GroupBins, past_reservation
from shared.planner.scale_up.registered import ExistingRoom
from shared.planner.scale_up.result import Placed
from shared.planner.scale_up.run import Run
from shared.planner.zones import guarantees_zone, placement_zone_binding

Buckets = dict[tuple[int, ...], Bucket]


def buckets_of(run: Run, units: list[Unit]) -> Buckets:
    """Units by the scheduling specs of their members (one admission test per group and bucket)."""
    buckets: Buckets = {}
    dims = len(run.ctx.dims)
    for unit in units:
        requeue(buckets, unit, dims)
    return buckets


def requeue(buckets: Buckets, unit: Unit, dims: int) -> None:
    """Put the unit in the bucket of its signature (made on first use)."""
    signature = unit.signature
    bucket = buckets.get(signature)
    if bucket is None:
        schedulings = tuple({id(p.scheduling): p.scheduling for p in unit.pods}.values())
        bucket = buckets[signature] = Bucket(schedulings, totals=[0] * dims)
    bucket.add(unit)


def zone_bound(run: Run, pods: list[Pod]) -> bool:
    """A pod must run in particular zones by a zone spread, pod (anti-)affinity over a zone or its
    volumes (plain pods have none; selectors and node affinity are judged by admission, against every
    zone of the group)."""
    for pod in pods:
        state = run.sim.state(pod)
        if placement_zone_binding(pod, state.volumes, state.affinity) is not None:
            return True
    return False


def may_take(run: Run, gb: GroupBins, unit: Unit, pods: list[Pod], *, zone_free: bool | None = None) -> bool:
    """Neither refused by the scheduler in this group nor bound to zones the group may miss
    (`zone_free`: the group may launch outside one zone, when the caller knows it already)."""
    refused = run.recalled.refused
    if refused and any(gb.view.name in refused.get(p.key, ()) for p in pods):
        return False
    if unit.plain:
        return True  # the fast path: no zone binding (see zone_bound)
    if zone_free is None:
        zone_free = not guarantees_zone(gb.view.capacity.zones, gb.view.labels)
    return not (zone_free and zone_bound(run, pods))


def record_placement(
    *, unit: Unit, pod: Pod, bins: Bins, index: int, gb: GroupBins | None, room: ExistingRoom, placed: Placed
) -> None:
    """The outcome of one pod placed on free room, a booting or launching node, or a new node."""
    if gb is None or bins is not gb.bins:
        room.record(pod, bins, index, placed)
        return
    name = gb.view.name
    if index < gb.inflight:
        node = gb.bins.ids[index]
        where = f"booting node {node}" if node else "a node that is launching"
        outcome, reason = Outcome.IN_FLIGHT, f"will run on {where} of {name}"
        if node:
            placed.busy_nodes.add(node)
    else:
        outcome, reason = Outcome.SCALE_UP, f"needs a new {name} node"
        placed.scaled_up_in[pod.key] = name
        if unit.gang and not unit.label:  # a gang, not a provisioning request (named apart)
            placed.gangs_bought.setdefault(name, {}).setdefault(unit.gang, []).append(pod.key)
    placed.outcomes[pod.key] = PodOutcome(
        pod.key, outcome, name, reason, ReasonCode.PLACED, pod.requests.gpus
    )


def fill_group(
    run: Run, gb: GroupBins, units: list[Unit], room: ExistingRoom, *, into: Placed | None = None
) -> tuple[list[Unit], Placed]:
    """First Fit Decreasing of `units` into the group's booting then new nodes: the units placed,
    and where their pods went (recorded in `into` when given, else in a new Placed).

    A gang may also use what is left of the free room of registered nodes: a member on an idle node
    and the others on new nodes is still the whole gang. Pods the scheduler refused in this group
    are not placed here.
    """
    single, gang = run.places(gb, room)
    refused, fast, bins = run.recalled.refused, run.fast, gb.bins
    zone_free = not guarantees_zone(gb.view.capacity.zones, gb.view.labels)
    # Requests that found no room here: bins only lose room during a fill (a gang's rollback
    # returns them to an earlier state) and no more may open, so they never will.
    no_room: set[Request] = set()
    placed = Placed() if into is None else into
    done: list[Unit] = []
    for unit in units:
        if unit.plain and not unit.gang:  # most of the backlog: plain single pods, kept lean
            request = unit.requests[0]
            if request in no_room:
                continue
            pod = unit.pods[0]
            if refused and gb.view.name in refused.get(pod.key, ()):
                continue
            index = fast(pod, request, bins, None, gb)
            if index is None:
                no_room.add(request)
                continue
            placements = [(pod, bins, index)]
        elif may_take(run, gb, unit, unit.pods, zone_free=zone_free):
            found = run.place_unit(unit, gang if unit.gang else single)
            if found is None:
                continue
            placements = found
        else:
            continue
        done.append(unit)
        for pod, where, index in placements:
            record_placement(unit=unit, pod=pod, bins=where, index=index, gb=gb, room=room, placed=placed)
    return done, placed


def fill_by_cost(
    run: Run, groups: list[GroupBins], buckets: Buckets, room: ExistingRoom
) -> tuple[list[GroupBins], Placed]:
    """Plain pods fill the tier's groups First Fit Decreasing, the cheapest group for the pods at
    hand first. Returns the groups in the order they were chosen, and where the pods went."""
    candidates = list(groups)
    chosen: list[GroupBins] = []
    placed = Placed()
    while candidates and any(b.units for b in buckets.values()):
        estimates = [
            estimate(run.ctx, gb, admitted)
            for gb in candidates
            if (gb.inflight or gb.bins.max_new)
            and (
                admitted := [
                    b for b in buckets.values() if b.units and run.admission.group(gb, b.schedulings)
                ]
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
        done, step = fill_group(run, best.group_bins, ordered, room)
        placed.merge(step)
        for unit in done:
            buckets[unit.signature].add(unit, -1)
        if past_reservation(best.group_bins):
            candidates.append(best.group_bins)
    return chosen, placed


def place_constrained(run: Run, ranked: list[GroupBins], buckets: Buckets, room: ExistingRoom) -> Placed:
    """Constrained pods one at a time, each to the first group of `ranked` that takes it.

    Spread and affinity depend on where the other pods went: a zone group that took what its
    skew allows can take more once the other zones have grown, so groups are not filled in turn.
    """
    leftovers = sorted(
        (u for b in buckets.values() for u in b.units.values() if not u.plain), key=lambda u: u.order
    )
    placed = Placed()
    for unit in leftovers:
        for gb in ranked:
            if not run.admission.group(gb, (p.scheduling for p in unit.pods)):
                continue
            # One unit per call, ~7,000 calls in a spread backlog: record straight into `placed`.
            done, _ = fill_group(run, gb, [unit], room, into=placed)
            if done:
                buckets[unit.signature].add(unit, -1)
                break
    return placed


def fill_tiers(
    run: Run, groups: list[GroupBins], buckets: Buckets, room: ExistingRoom
) -> tuple[list[GroupBins], Placed]:
    """Priority tiers, high first (cluster-autoscaler's priority expander): in each, plain pods by
    cost, then constrained pods. Returns every group in the order the tiers ranked them."""
    ranked: list[GroupBins] = []
    placed = Placed()
    for tier in sorted({gb.view.config.priority for gb in groups}, reverse=True):
        tier_groups = [gb for gb in groups if gb.view.config.priority == tier]
        chosen, step = fill_by_cost(run, tier_groups, buckets, room)
        placed.merge(step)
        tier_ranked = chosen + [gb for gb in tier_groups if gb not in chosen]
        placed.merge(place_constrained(run, tier_ranked, buckets, room))
        ranked += tier_ranked
    return ranked, placed
