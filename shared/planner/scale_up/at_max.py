"""Whether a gang with no place could ever start: the one rule that decides if the groups at their
max size it could use are saturated by it (their idle nodes kept for it) or not.

One question per gang, answered once a run whatever the number of groups at their max: could the
gang start if every group that can ever launch grew to its max size with its nodes empty, and every
pod that is not a member of the gang (DaemonSet pods excepted) had finished? That world holds
(`at_max_world`, its shared part built once a run):
- each managed group with a known shape, an ASG, a max size above 0 and nothing that keeps it from
  launching for good (unavailable, growth blocked: a reservation it cannot launch into, an ended
  Capacity Block, its Launch process suspended; capacity backoff ends: it does not count), grown to
  its max size, every node new and empty but the nodes that run members of the gang;
- a group that cannot launch but has an ASG and a max size above 0: its registered nodes not
  leaving, at most its max size of them, and no new node; a group of max size 0 or without an ASG
  holds nothing;
- those nodes, and the registered nodes of no managed group (the planner places members on their
  free room too), each with its allocatable less only the gang's running members and its DaemonSet
  and mirror pods, the DRA devices of claims only pods outside the gang hold free. The running
  members stay on them in the simulation, under their nodes' real names, so their anti-affinity,
  host ports, spread and devices constrain the pending members.
The pending members are placed there as the planner places a gang (`place_anywhere`, member by
member across free room and groups, at least the gang's minimum), each through the scheduler's
filters, as a trial that leaves the shared room as it was. Every member is asked but one no managed
group (launching or not) and no kept registered node admits: whoever serves it (another autoscaler)
is not judged here; a member only a group that cannot launch admits is asked, and fails when that
group's nodes have no room. Required pod affinity to pods outside the gang counts as met, those pods
being gone (`_outsiders_met`).

A gang with a place there will start once the jobs in its way end: every group at its max that
admits any of its members keeps its idle nodes for it (giving them back would buy them again;
diagnosis.gang_saturates). A gang without one never starts, however
long its groups wait: cluster-autoscaler lets no pod it cannot help keep an unneeded node, and
neither does this; every group says why ("needs 5 nodes of a100-a and a100-b, more than the max
sizes of a100-a (2) and a100-b (2) together" only when that count holds whatever the order of the
members, or the rule that keeps the members apart, or that first fit found no place for them all).
Only the keeping of idle nodes hangs on it: no busy node is cordoned for it.
"""

from __future__ import annotations

from dataclasses import replace

from shared.domain.constraints import PodAffinityTerm
from shared.domain.model import Pod
from shared.planner.backlog import Unit
from shared.planner.context import Context, GroupView
from shared.planner.diagnosis import NeverStarts
from shared.planner.filters.framework import SimNode
from shared.planner.gangs import nodes_needed
from shared.planner.packing import Bins, Journal, Request, fits
from shared.planner.scale_up.at_max_world import World, Worlds, most_nodes
from shared.planner.scale_up.groups import GroupBins
from shared.planner.scale_up.members import place_anywhere

_ROOM = ("Insufficient", "Too many")  # the filters' words for room, not for a rule


class GangsAtMax:
    """The at-max rule for the gangs of one run (`units`: those left without a place). What every
    gang's world shares is read once, on the first question (`Worlds`)."""

    def __init__(self, ctx: Context, units: list[Unit]) -> None:
        self.ctx = ctx
        self.worlds = Worlds(ctx, units)

    def never_starts(self, unit: Unit) -> NeverStarts:
        """The rule for one gang, as diagnosis asks it of each group at its max size: why the gang
        can never start ("needs 17 a100 nodes, more than the group's max size 16", or the rule that
        keeps its members apart), the same for every group, or None when it could (every such group
        is saturated). Answered once, when a group first asks: one placement of the members."""
        answer: list[str | None] = []

        def of(view: GroupView) -> str | None:
            del view  # one answer for the gang: the groups are judged together
            if not answer:
                answer.append(_verdict(self, unit))
            return answer[0]

        return of


def _verdict(gangs: GangsAtMax, unit: Unit) -> str | None:
    """Why the gang has no place in the world it could ever start in (None: it has one)."""
    ctx = gangs.ctx
    world = gangs.worlds.world(unit)
    held = _held(ctx, gangs.worlds, world, unit)
    if held is None:
        return None  # no member the world admits must have a place: nothing to prove
    run = world.run
    run.sim.prepare(held.pods)
    held.plain = all(run.sim.is_plain(pod) for pod in held.pods)
    place = place_anywhere(run, world.groups, world.room, held)
    placed: list[Pod] = []
    refusal: list[str | None] = []

    def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
        found = place(pod, request, journal)
        if found is not None:
            placed.append(pod)
        elif not refusal:  # before the rollback: the nodes as the member found them
            refusal.append(_rule(world, pod, request))
        return found

    placements, missing = run.place_members(held, place_one, minimum=held.needed, trial=True)
    if placements is not None:
        return None
    rule = refusal[0] if refusal else None
    return _too_big(ctx, world, held) or _cause(world, held, len(placed), rule, missing)


def _held(ctx: Context, worlds: Worlds, world: World, unit: Unit) -> Unit | None:
    """The pending members asked, with how many of them must have a place; None when none need to.
    Every member is asked but one no managed group admits (whether it can launch or not) and no
    registered node kept admits: whoever serves it (another autoscaler) is not judged here. A member
    only a group that cannot launch admits is asked, and fails when that group's nodes have no room.
    Their required pod affinity to pods outside the gang counts as met (`_outsiders_met`)."""
    specs = {id(p.scheduling): p for p in unit.pods}
    admits = {
        key: bool(world.room.targets(pod)) or any(view.admits(pod.scheduling) for view in ctx.groups)
        for key, pod in specs.items()
    }
    here = [(p, r) for p, r in zip(unit.pods, unit.requests, strict=True) if admits[id(p.scheduling)]]
    needed = unit.needed - (len(unit.pods) - len(here))
    if needed <= 0:
        return None
    gang = {pod.key for pod in unit.pods} | world.members
    pods = _outsiders_met(ctx, worlds, gang, [p for p, _ in here])
    held = Unit(pods, [r for _, r in here], gang=unit.gang)
    held.minimum = needed if needed < len(here) else None
    return held


def _rule(world: World, pod: Pod, request: Request) -> str | None:
    """The scheduler's words for what keeps the member off every node of the world that admits it
    (a node with room it may not use, or a new node it would not take), None when room alone does."""
    sim, dims = world.run.sim, world.run.ctx.dims
    state = sim.state(pod)
    nodes: list[SimNode] = [node for node, _, _ in world.room.nodes(pod)]
    for gb in world.groups:
        if gb.view.admits(pod.scheduling):
            nodes.extend(node for node, _, _ in gb.items())
            if gb.bins.can_open:
                nodes.append(gb.probe())
    for node in nodes:
        said = sim.static(pod, state, node) or sim.dynamic(pod, state, node, request, dims)
        if said and not said.startswith(_ROOM):
            return said
    return None


def _too_big(ctx: Context, world: World, held: Unit) -> str | None:
    """Why the gang's requests alone never fit the world (None: they would, a rule keeps the members
    apart): the members placed by requests only, first fit on the kept nodes' room, then on new
    nodes of the first group that admits each; the nodes the first left over needs are counted in
    the groups that admit it, beside those its running members hold."""
    rooms = {id(c.bins): Bins([list(f) for f in c.bins.free], list(c.bins.ids)) for c in world.room.classes}
    new = {id(gb): Bins([], [], gb.bins.new_shape, max_new=gb.bins.max_new) for gb in world.groups}
    placed, left = 0, []
    for pod, request in zip(held.pods, held.requests, strict=True):
        if any(rooms[id(b)].place(request) is not None for b in world.room.targets(pod)) or any(
            gb.view.admits(pod.scheduling) and new[id(gb)].place(request) is not None for gb in world.groups
        ):
            placed += 1
        else:
            left.append((pod, request))
    if placed >= held.needed:
        return None
    pod, request = left[0]
    admitting = [gb for gb in world.groups if gb.view.admits(pod.scheduling)]
    short = [gb for gb in admitting if _takes(gb, pod, request)]
    if not short:
        if admitting:
            return f"a member does not fit an empty {admitting[0].view.name} node"
        return _nowhere(ctx, pod)
    views = [gb.view for gb in short]
    if any(gb.bins.new_shape != short[0].bins.new_shape for gb in short):
        return None  # nodes of several shapes: no one count to give, the cause says what it can
    needed = _needed_at_least(ctx, world, held, short)
    if needed is None:
        return f"a member does not fit an empty {views[0].name} node"
    if needed <= sum(gb.bins.max_new for gb in short):
        return None  # first fit fell short, not the max sizes: the cause says so
    return _beyond(views, needed, sum(world.holding.get(v.name, 0) for v in views))


def _needed_at_least(ctx: Context, world: World, held: Unit, short: list[GroupBins]) -> int | None:
    """How many new nodes of the `short` groups (one shape) the gang needs at least, whatever the
    order of its members: those no kept node has room for and no other group takes go there, but
    for as many of the others as could run elsewhere. A bound, never first fit's count (first fit
    may fill a node with a member that could have gone elsewhere; nor, when only some of members of
    several sizes must run, the count of the largest of them); None when one fits no such node."""
    ids = {id(gb) for gb in short}
    only = [
        r
        for p, r in zip(held.pods, held.requests, strict=True)
        if not any(fits(r, free) for bins in world.room.targets(p) for free in bins.free)
        and all(id(gb) in ids for gb in world.groups if _takes(gb, p, r))
    ]
    elsewhere = len(held.pods) - len(only)
    count = max(0, held.needed - elsewhere)
    view = short[0].view
    if count == len(only) or all(r == only[0] for r in only):
        return nodes_needed(ctx, view, only[:count])
    # Only some of members of several sizes must run there: which ones hangs on the order (first
    # fit takes the largest first). Whichever they are, each dimension holds at least the `count`
    # smallest asks in it, so the nodes hold at least that much room.
    assert view.template.free is not None  # a group that can launch
    room = ctx.vector(view.template.free)
    asks: dict[int, list[int]] = {}
    for request in only:
        for dim, amount in request:
            asks.setdefault(dim, []).append(amount)
    least = 0
    for dim, amounts in asks.items():
        total = sum(sorted(amounts + [0] * (len(only) - len(amounts)))[:count])
        if total and room[dim] > 0:
            least = max(least, -(-total // room[dim]))
    return least


def _nowhere(ctx: Context, pod: Pod) -> str:
    """Why a member no group that can launch admits has no place: the registered nodes that may run
    it lack room, and the groups that admit it (if any) can never launch for it."""
    stuck = [view for view in ctx.groups if view.admits(pod.scheduling)]
    if not stuck:
        return "a member needs more room than the nodes of no group that may run it have"
    why = _listed([f"{v.name} ({_cannot_launch(v)})" for v in stuck])
    return f"a member has no room on the nodes that may run it, and no group that admits it can launch: {why}"


def _cannot_launch(view: GroupView) -> str:
    if view.max_size <= 0:
        return f"max size {view.max_size}"
    return view.unavailable_reason or view.capacity.growth_blocked or "shape unknown"


def _takes(gb: GroupBins, pod: Pod, request: Request) -> bool:
    """Whether a new node of the group admits the member and has room for it, empty."""
    shape = gb.bins.new_shape
    return shape is not None and gb.view.admits(pod.scheduling) and fits(request, shape)


def _beyond(views: list[GroupView], needed: int, holding: int) -> str:
    """ "needs 17 a100 nodes, more than the group's max size 16", or for several groups "needs 5
    nodes of a100-a and a100-b, more than the max sizes of a100-a (2) and a100-b (2) together"."""
    beside = f" beside the {holding} its running members hold" if holding else ""
    if len(views) == 1:
        nodes = f"{needed} {views[0].name} node{'s' if needed != 1 else ''}"
        return f"needs {nodes}{beside}, more than {_the_most(views[0])}"
    names = _listed([v.name for v in views])
    sizes = _listed([f"{v.name} ({_most(v)})" for v in views])
    return f"needs {needed} nodes of {names}{beside}, more than the max sizes of {sizes} together"


def _most(view: GroupView) -> str:
    """The most nodes a group can ever have, as reasons give it: its max size, or "2 reserved" for a
    group that launches only into capacity reservations holding fewer instances (most_nodes)."""
    most = most_nodes(view)
    return str(most) if most == view.max_size else f"{most} reserved"


def _the_most(view: GroupView) -> str:
    most = most_nodes(view)
    if most == view.max_size:
        return f"the group's max size {most}"
    return f"the {most} instances of the group's capacity reservations (max size {view.max_size})"


def _listed(items: list[str], last: str = "and") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {last} {items[-1]}"


def _outsiders_met(ctx: Context, worlds: Worlds, gang: set[str], members: list[Pod]) -> list[Pod]:
    """The members without the required pod affinity terms that live pods outside the gang (keys
    `gang`: its pending and running members) answer (the pods kube-scheduler counts for a term,
    filtering.go): the world holds none of them, so they count as met. Only a relaxation: a gang
    that still has no place never starts, and the terms its own members answer are kept. Each
    spec is judged once, on the pods the term may select (`Worlds.candidates`, indexed once a run)."""
    if not any(member.constraints.affinity for member in members):
        return members
    namespaces = ctx.snapshot.namespaces
    kept: dict[int, tuple[PodAffinityTerm, ...]] = {}
    relaxed = []
    for member in members:
        terms = member.constraints.affinity
        found = kept.get(id(member.constraints))
        if found is None:
            found = kept[id(member.constraints)] = tuple(
                term
                for term in terms
                if not any(
                    p.key not in gang and term.selects(p.namespace, p.labels, namespaces.get(p.namespace))
                    for p in worlds.candidates(term)
                )
            )
        same = len(found) == len(terms)
        relaxed.append(
            member if same else replace(member, constraints=replace(member.constraints, affinity=found))
        )
    return relaxed


def _cause(world: World, held: Unit, placed: int, rule: str | None, missing: Pod | None) -> str:
    """The reason a gang whose requests fit the world still gives when it never starts: the rule
    that keeps its members apart, in the groups that admit the first member left without a place."""
    views = [gb.view for gb in world.groups if missing is not None and gb.view.admits(missing.scheduling)]
    apart = (
        f"its members' own rules keep them apart ({rule})"
        if rule
        else "placed one by one as the scheduler would, first fit, its members find no place together"
    )
    if not views:
        return (
            f"never starts on the nodes that may run it: {apart}; with only the gang's own pods on"
            f" them, {placed} of the {held.needed} members that must run have a place"
        )
    holding = sum(world.holding.get(v.name, 0) for v in views)
    empty = f"every node empty but the {holding} its running members hold" if holding else "every node empty"
    if len(views) == 1:
        at, hold = _the_most(views[0]), "it must hold"
    else:
        sizes = _listed([f"{v.name} ({_most(v)})" for v in views])
        at, hold = f"the max sizes of {sizes}", "they must hold"
    where = _listed([v.name for v in views], "or")
    return (
        f"never starts in {where}: {apart}; at {at}, {empty}, {placed} of the {held.needed} members"
        f" {hold} have a place"
    )
