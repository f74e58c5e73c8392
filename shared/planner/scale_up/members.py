"""Step 4: gangs no single group holds, member by member.

A gang is all-or-nothing as a whole, but the scheduler places each member on its own: an MPIJob's
launcher on a CPU node beside its GPU workers, a Ray head beside its workers. Coscheduling's Permit
(scheduler-plugins `pkg/coscheduling`) and Volcano's gang plugin (`JobReady`: allocated members >=
minAvailable) hold the pods until enough members have a node, wherever those nodes are. So each
member goes where the scheduler would put it: free room of any registered node that admits it
(nodes of no managed group too), booting capacity, or new nodes of the first group, in the order
the tiers ranked them, that admits it. Nothing is kept unless the gang's minimum has a place; an
elastic gang (minimum below its replicas) keeps every member beyond it that fits.
"""

from __future__ import annotations

from shared.domain.model import Pod
from shared.planner.backlog import Unit
from shared.planner.packing import Bins, Journal, Request
from shared.planner.scale_up.fill import Buckets, may_take, record_placement, requeue
from shared.planner.scale_up.groups import GroupBins, PlaceOne
from shared.planner.scale_up.registered import ExistingRoom
from shared.planner.scale_up.result import Placed
from shared.planner.scale_up.run import Run


def place_anywhere(run: Run, ranked: list[GroupBins], room: ExistingRoom, unit: Unit) -> PlaceOne:
    """One member on free room, else on the first ranked group that admits it alone (the at-max rule
    places a gang in the world it could ever start in the same way)."""
    existing = run.existing(room)

    def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
        found = existing(pod, request, journal)
        if found is not None:
            return found
        for gb in ranked:
            if not run.admission.group(gb, (pod.scheduling,)) or not may_take(run, gb, unit, [pod]):
                continue
            found = run.places(gb, room)[0](pod, request, journal)
            if found is not None:
                return found
        return None

    return place_one


def place_gang_members(run: Run, ranked: list[GroupBins], buckets: Buckets, room: ExistingRoom) -> Placed:
    """Gangs still waiting once every tier had its turn, each member placed on its own; a gang
    whose minimum finds no place keeps waiting and remembers the first member that found none."""
    gangs = sorted((u for b in buckets.values() for u in b.units.values() if u.gang), key=lambda u: u.order)
    by_bins = {id(gb.bins): gb for gb in ranked}
    placed = Placed()
    for unit in gangs:
        placements, unit.missing = run.place_members(
            unit, place_anywhere(run, ranked, room, unit), minimum=unit.needed
        )
        if placements is None:
            continue
        buckets[unit.signature].add(unit, -1)
        for pod, bins, index in placements:
            gb = by_bins.get(id(bins))
            record_placement(unit=unit, pod=pod, bins=bins, index=index, gb=gb, room=room, placed=placed)
        left = [(p, r) for p, r in zip(unit.pods, unit.requests, strict=True) if p.key not in placed.outcomes]
        if left:  # an elastic gang runs without them: each still gets its own reason
            extra = Unit(
                [p for p, _ in left], [r for _, r in left], gang=unit.gang, label=unit.label, order=unit.order
            )
            extra.minimum, extra.extra = 0, True
            requeue(buckets, extra, len(run.ctx.dims))
    return placed
