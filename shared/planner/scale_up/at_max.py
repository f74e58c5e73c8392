"""Whether a gang with no place could ever start in a group: the one rule that decides if a group at
its max size is saturated by the gang (its idle nodes kept for it) or not.

The gang is placed whole on the group grown to its max size with every node new and empty, by the
run's own placement (`Run.group`, `Run.place_members`): each member through the scheduler's filters
(anti-affinity, host ports, spread, devices), fed back before the next is judged. Members a node of
the group never admits (an MPIJob's CPU launcher beside GPU workers) run elsewhere, as
`place_gang_members` puts them, and are not asked of this group. If the members it must hold have
no place even so, no node the group keeps or frees will ever start the gang: cluster-autoscaler
lets no pod it cannot help keep an unneeded node, and neither does this.
"""

from __future__ import annotations

from dataclasses import replace

from shared.domain.constraints import PodAffinityTerm
from shared.domain.model import Node, Pod
from shared.planner.backlog import Unit
from shared.planner.context import Context, GroupView
from shared.planner.gangs import GangIndex, nodes_needed
from shared.planner.ground_truth import Recall
from shared.planner.packing import Bins, Journal, Request
from shared.planner.scale_up.groups import GroupBins, empty_at_max
from shared.planner.scale_up.registered import ExistingRoom
from shared.planner.scale_up.run import Run, simulation

_ROOM = ("Insufficient", "Too many")  # the filters' words for room, not for a rule


def never_starts(ctx: Context, view: GroupView, unit: Unit) -> str | None:
    """Why the gang can never start in the group, even at its max size with every node empty: "needs
    17 a100 nodes, more than the group's max size 16", or the rule that keeps its members apart.
    None when it could (idle nodes kept for it will serve it). Asked only of gangs that found no
    place, once per group at its max size: one placement of at most the gang's members."""
    if view.shape is None:
        return None  # a shape still being learnt proves nothing
    held = _held_by(ctx, view, unit)
    if held is None or _another_group_takes(ctx, view, held):
        return None
    run = Run(ctx, simulation(ctx), Recall())
    holding = _holding(ctx, view, unit)
    gb = empty_at_max(ctx, view, holding, run.sim)
    run.sim.prepare(held.pods)
    place = run.group(gb, ExistingRoom(ctx, [], run.sim), gang=False)
    placed: list[Pod] = []
    refusal: list[str | None] = []

    def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
        found = place(pod, request, journal)
        if found is not None:
            placed.append(pod)
        elif not refusal:  # before the rollback: the nodes as the member found them
            refusal.append(_rule(run, gb, pod, request))
        return found

    placements, _ = run.place_members(held, place_one, minimum=held.needed)
    if placements is not None:
        return None
    rule = refusal[0] if refusal else None
    return _too_big(ctx, view, held, len(holding)) or _cause(view, held, len(placed), rule)


def _held_by(ctx: Context, view: GroupView, unit: Unit) -> Unit | None:
    """The members the group must hold for the gang to start (those its nodes admit; the others run
    elsewhere), with how many of them must have a place; None when none need to. Their required
    pod affinity to pods outside the gang counts as met (`_outsiders_met`)."""
    admits = {id(s): view.admits(s) for s in {id(p.scheduling): p.scheduling for p in unit.pods}.values()}
    here = [(p, r) for p, r in zip(unit.pods, unit.requests, strict=True) if admits[id(p.scheduling)]]
    needed = unit.needed - (len(unit.pods) - len(here))
    if needed <= 0:
        return None
    held = Unit(_outsiders_met(ctx, unit, [p for p, _ in here]), [r for _, r in here], gang=unit.gang)
    held.minimum = needed if needed < len(here) else None
    return held


def _rule(run: Run, gb: GroupBins, pod: Pod, request: Request) -> str | None:
    """The scheduler's words for what keeps the member off every node of the group at its max size
    (a node with room it may not use, or a new node it would not take), None when room alone does."""
    sim, dims = run.sim, run.ctx.dims
    state = sim.state(pod)
    for node, _, _ in gb.items():
        said = sim.static(pod, state, node) or sim.dynamic(pod, state, node, request, dims)
        if said and not said.startswith(_ROOM):
            return said
    if gb.bins.can_open:
        probe = gb.probe()
        said = sim.static(pod, state, probe) or sim.dynamic(pod, state, probe, request, dims)
        if said and not said.startswith(_ROOM):
            return said
    return None


def _another_group_takes(ctx: Context, view: GroupView, held: Unit) -> bool:
    """Whether another group's node could take one of the members the group must hold: the planner
    places each member where the scheduler would, across groups (two groups, one per zone; an MPIJob's
    launcher), and this check places the gang on one group: no proof then (its group stays saturated,
    as before the check: keeping idle nodes costs less than giving them back and buying them again)."""
    for other in ctx.groups:
        if other is view or other.template.free is None:
            continue
        for pod, request in zip(held.pods, held.requests, strict=True):
            if other.admits(pod.scheduling) and nodes_needed(ctx, other, [request]) is not None:
                return True
    return False


def _holding(ctx: Context, view: GroupView, unit: Unit) -> list[Node]:
    """The group's nodes that run members of the gang: they count toward it, and keep their node."""
    if not unit.gang:
        return []
    index = GangIndex(ctx.config.policy, ctx.snapshot.pod_groups)
    found = []
    for node in view.nodes:
        for pod in ctx.pods_on_node.get(node.name, ()):
            mark = index.mark(pod) if pod.labels or pod.annotations else None
            if mark is not None and mark.key == unit.gang:
                found.append(node)
                break
    return found


def _too_big(ctx: Context, view: GroupView, held: Unit, holding: int) -> str | None:
    """Why the gang's requests alone never fit the group at its max size, beside the `holding` nodes
    its running members keep (None: they would)."""
    needed = nodes_needed(ctx, view, held.requests[: held.needed])
    if needed is None:
        return f"a member does not fit an empty {view.name} node"
    if needed + holding > view.max_size:
        nodes = f"{needed} {view.name} node{'s' if needed != 1 else ''}"
        beside = f" beside the {holding} its running members hold" if holding else ""
        return f"needs {nodes}{beside}, more than the group's max size {view.max_size}"
    return None


def _outsiders_met(ctx: Context, unit: Unit, members: list[Pod]) -> list[Pod]:
    """The members without the required pod affinity terms that live pods outside the gang answer (the
    pods kube-scheduler counts for a term, filtering.go): this empty world holds none of them, so
    they count as met. Only a relaxation: a gang that still has no place never starts there, and the
    terms its own members answer are kept. The pods are read once, each spec judged once."""
    if not any(member.constraints.affinity for member in members):
        return members
    gang = {pod.key for pod in unit.pods}
    namespaces = ctx.snapshot.namespaces
    outsiders = [pod for pods in ctx.pods_on_node.values() for pod in pods if pod.key not in gang]
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
                    term.selects(p.namespace, p.labels, namespaces.get(p.namespace)) for p in outsiders
                )
            )
        same = len(found) == len(terms)
        relaxed.append(
            member if same else replace(member, constraints=replace(member.constraints, affinity=found))
        )
    return relaxed


def _cause(view: GroupView, held: Unit, placed: int, rule: str | None) -> str:
    """The reason a gang whose requests fit the group at its max size gives when it still never
    starts there: the rule that keeps its members apart."""
    rules = rule or "anti-affinity, host ports, spread, devices"
    return (
        f"never starts in {view.name}: its members' own rules keep them apart ({rules}); at the group's"
        f" max size {view.max_size}, every node empty, {placed} of the {held.needed} members it must"
        " hold have a place"
    )
