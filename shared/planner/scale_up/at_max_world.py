"""The world the at-max rule asks each gang about (scale_up.at_max): what it could ever start on.

Every gang of a run shares most of it: the registered nodes kept as they are (those of no managed
group, and those of a group that can never launch but may keep nodes), emptied of every pod but the
DaemonSet and mirror ones. They are read, classed and turned into simulation nodes once a run
(`Worlds`); each gang's world adds only its own: the nodes running its members (their room less
those members too), new empty nodes of every group that can launch, and the DRA devices the pods
outside it hold, released. A gang's placement is a trial (`Run.place_members(trial=True)`): the
shared room is left as it was found for the next gang.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain.constraints import PodAffinityTerm
from shared.domain.dra import DeviceId
from shared.domain.keys import namespaced_key
from shared.domain.model import Pod
from shared.planner.backlog import Unit
from shared.planner.context import Context, GroupView
from shared.planner.filters.framework import SimNode
from shared.planner.gangs import GangIndex
from shared.planner.ground_truth import Recall
from shared.planner.scale_up.groups import GroupBins, empty_at_max
from shared.planner.scale_up.registered import (
    ExistingClass,
    ExistingRoom,
    class_order,
    existing_classes,
    parked_nodes,
    referenced_label_keys,
)
from shared.planner.scale_up.run import Run, simulation
from shared.planner.simulation import SharedBound


@dataclass
class World:
    """What the gang could ever start on: every group that can launch, at its max size with its nodes
    new and empty (`groups`), and the registered nodes kept (`room`): those running its members
    (`holding`, per group name) and the shared ones, their room taken by the gang's own members and
    DaemonSet pods alone."""

    run: Run
    groups: list[GroupBins]
    room: ExistingRoom
    members: set[str]  # keys of the gang's running members
    holding: dict[str, int]


@dataclass
class _Shared:
    """The kept registered nodes every gang's world shares, built once a run."""

    names: set[str]  # kept nodes that run no waiting gang's members
    hosting: set[str]  # kept nodes that run some waiting gang's members: each gang's world adds them
    bound: dict[str, list[Pod]]  # what stays on every kept node: DaemonSet and mirror pods
    rest: dict[str, list[Pod]]  # the part of `bound` on nodes the shared room does not hold
    index: SharedBound  # the other part, on the shared room's nodes: indexed once for every world
    room: ExistingRoom
    nodes: dict[str, SimNode]
    label_keys: frozenset[str]


def launches(view: GroupView) -> bool:
    """Whether the group can ever launch a node: a known shape, an ASG, a max size above 0 and no
    growth blocked (a reservation it cannot launch into, an ended Capacity Block, its Launch process
    suspended). A capacity backoff ends, so it does not count; a group that is unavailable does."""
    return (
        view.shape is not None
        and view.template.free is not None
        and view.max_size > 0
        and view.unavailable_reason is None
        and view.capacity.growth_blocked is None
    )


def most_nodes(view: GroupView) -> int:
    """The most nodes the group can ever have: its max size, or fewer for a group that launches only
    into capacity reservations (a Capacity Block, a targeted reservation with no On-Demand fallback):
    their instances, used or free, whatever its max size."""
    capacity = view.capacity
    if capacity.reserved_only and capacity.reserved_total is not None:
        return min(view.max_size, capacity.reserved_total)
    return view.max_size


class Worlds:
    """Each gang's world, what they share read once a run (on the first question): the kept
    registered nodes, the running members of every gang by node (finding one gang's members reads
    every bound pod), and which pods hold each allocated DRA claim."""

    def __init__(self, ctx: Context, units: list[Unit]) -> None:
        self.ctx = ctx
        self._units = units
        self._running: dict[str, dict[str, list[Pod]]] | None = None
        self._shared: _Shared | None = None
        self._claims: dict[str, set[str]] | None = None  # claim key -> keys of the live pods holding it
        # Every bound pod, and by each of its labels: the pods a pod affinity term may be about.
        self._bound: list[Pod] | None = None
        self._by_label: dict[tuple[str, str], list[Pod]] = {}

    def running(self, gang: str | None) -> dict[str, list[Pod]]:
        """The gang's running members by node: they count toward it, and keep their node."""
        if not gang:
            return {}
        return self._members().get(gang, {})

    def _members(self) -> dict[str, dict[str, list[Pod]]]:
        if self._running is None:
            ctx = self.ctx
            index = GangIndex(ctx.config.policy, ctx.snapshot.pod_groups)
            self._running = {}
            for name, pods in ctx.pods_on_node.items():
                for pod in pods:
                    mark = index.mark(pod) if pod.labels or pod.annotations else None
                    if mark is not None:
                        self._running.setdefault(mark.key, {}).setdefault(name, []).append(pod)
        return self._running

    def candidates(self, term: PodAffinityTerm) -> Sequence[Pod]:
        """The bound pods the term may select (a superset: the caller still asks the term), read once
        a run: those carrying its selector's first matchLabels pair, else every bound pod. Asked for
        every waiting gang with pod affinity, so no gang reads every pod of the cluster again."""
        if self._bound is None:
            self._bound = [pod for pods in self.ctx.pods_on_node.values() for pod in pods]
            for pod in self._bound:
                for pair in pod.labels.items():
                    self._by_label.setdefault(pair, []).append(pod)
        selector = term.selector
        if selector is None:
            return ()  # a nil selector selects no pod
        if selector.match_labels:
            return self._by_label.get(selector.match_labels[0], ())
        return self._bound

    def kept(self) -> list[str]:
        """The registered nodes kept as they are, emptied (those leaving their ASG aside): those of
        no managed group, and those of a group that cannot launch for good but may keep nodes (an
        ASG and a max size above 0: growth blocked, or unavailable), at most its max size of them."""
        ctx, parked = self.ctx, parked_nodes(self.ctx)
        names = [
            n.name for n in ctx.snapshot.nodes if n.name not in ctx.group_of_node and n.name not in parked
        ]
        for view in ctx.groups:
            if view.asg is not None and view.max_size > 0 and not launches(view):
                names.extend(sorted(n.name for n in view.nodes if n.name not in parked)[: view.max_size])
        return names

    def _base(self) -> _Shared:
        if self._shared is None:
            ctx = self.ctx
            kept = self.kept()
            # Only the nodes running members of a gang that is asked about change from world to
            # world; a gang that runs whole is no world's: its nodes are emptied in every one.
            waiting = {unit.gang for unit in self._units if unit.gang}
            members = self._members()
            hosting = {name for gang in waiting for name in members.get(gang, ())}
            bound = {
                name: [p for p in ctx.pods_on_node.get(name, ()) if p.is_daemonset or p.is_mirror]
                for name in kept
            }
            names = set(kept) - hosting
            keys = referenced_label_keys([u for u in self._units if u.gang])
            sim = simulation(ctx, bound)
            others = {node.name for node in ctx.snapshot.nodes if node.name not in names}
            classes = existing_classes(ctx, excluded=others, label_keys=keys, sim=sim, bound=bound)
            room = ExistingRoom(ctx, classes, sim)
            rest = {name: pods for name, pods in bound.items() if name not in sim.nodes}
            index = SharedBound(bound, sim.nodes.keys())
            self._shared = _Shared(names, hosting & set(kept), bound, rest, index, room, sim.nodes, keys)
        return self._shared

    def world(self, unit: Unit) -> World:
        """The gang's world: the shared room, plus the nodes that run its members (and the kept ones
        that run other gangs' members, emptied), in a simulation of its own where only the pods kept
        on them are bound: pods that will have finished constrain nothing."""
        ctx, base = self.ctx, self._base()
        on_node = self.running(unit.gang)
        members = {pod.key for pods in on_node.values() for pod in pods}
        # The shared room's nodes and their pods are the same in every world: their pods are indexed
        # once a run, and this world binds only the others (unless it changes a shared node's pods).
        shared = base.index if base.index.names.isdisjoint(on_node) else None
        bound = dict(base.rest if shared is not None else base.bound)
        for name in on_node:
            bound[name] = _daemons(ctx, name) + [
                p for p in ctx.pods_on_node.get(name, ()) if p.key in members
            ]
        run = Run(ctx, simulation(ctx, bound, shared), Recall())
        run.sim.nodes.update(base.nodes)  # no index exists yet: add_node would only store them
        run.sim.release(self._released(unit, members))
        extra = base.hosting | set(on_node)
        added: list[ExistingClass] = []
        if extra:
            keys = base.label_keys | referenced_label_keys([unit])
            others = {node.name for node in ctx.snapshot.nodes if node.name not in extra}
            added = existing_classes(ctx, excluded=others, label_keys=keys, sim=run.sim, bound=bound)
        holding: dict[str, int] = {}
        for name in on_node:
            group = ctx.group_of_node.get(name)
            holding[group.name if group else ""] = holding.get(group.name if group else "", 0) + 1
        groups = [
            empty_at_max(ctx, view, holding.get(view.name, 0), position, most_nodes(view))
            for position, view in enumerate(ctx.groups)
            if launches(view)
        ]
        classes = sorted(base.room.classes + added, key=class_order) if added else base.room.classes
        room = ExistingRoom(ctx, classes, run.sim, known=base.room.node_of)
        return World(run, groups, room, members, holding)

    def _released(self, unit: Unit, members: set[str]) -> set[DeviceId]:
        """The DRA devices of allocated claims only pods outside the gang hold (DaemonSet and mirror
        pods aside): those pods will have finished, their devices free, in the world."""
        devices = self.ctx.devices
        if devices is None or not devices.allocated:
            return set()
        if self._claims is None:
            self._claims = {}
            for pods in self.ctx.pods_on_node.values():
                for pod in pods:
                    for key in claim_keys(pod):
                        self._claims.setdefault(key, set()).add(
                            "" if pod.is_daemonset or pod.is_mirror else pod.key
                        )
        gang = members | {pod.key for pod in unit.pods}
        pending = {key for pod in unit.pods for key in claim_keys(pod)}
        held = {
            key
            for key, pods in self._claims.items()
            if key not in pending and "" not in pods and not pods & gang
        }
        return {
            d
            for claim in self.ctx.snapshot.dra.claims
            if claim.allocated and claim.key in held
            for d in claim.devices
        }


def _daemons(ctx: Context, name: str) -> list[Pod]:
    return [p for p in ctx.pods_on_node.get(name, ()) if p.is_daemonset or p.is_mirror]


def claim_keys(pod: Pod) -> list[str]:
    """The keys of the ResourceClaims a pod holds: named, or generated from a template (its status)."""
    sources = pod.constraints.resource_claim_sources
    if not sources:
        return []
    statuses = dict(pod.resource_claim_statuses)
    names = [source.claim_name or statuses.get(source.name) for source in sources]
    return [namespaced_key(pod.namespace, name) for name in names if name]
