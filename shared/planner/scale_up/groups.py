"""Each managed group as bins: its booting and launching nodes first, then new nodes up to its max
(cluster-autoscaler's estimator starts from the template node of the group the same way)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from shared.domain.model import Node, Pod
from shared.planner.context import Context, GroupView
from shared.planner.filters.framework import SimNode
from shared.planner.packing import Bins, Journal, Request
from shared.planner.placement import template_node
from shared.planner.scale_up.registered import bound_ports
from shared.planner.simulation import Simulation
from shared.planner.template import has_startup_taint, is_startup_taint

PlaceOne = Callable[[Pod, Request, Journal | None], tuple[Bins, int] | None]


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
    places: dict[bool, PlaceOne] = field(default_factory=dict)  # single pods and gangs, built once

    def items(self) -> list[tuple[SimNode, Bins, int]]:
        """The group's nodes with their bins. Only those whose bin is still there: a gang's rollback
        removes the bins it opened, and their nodes stay in `nodes` until the next bin is opened
        (open_bin), so a later placement must not meet them."""
        live = len(self.bins.free)
        return [(node, self.bins, index) for index, node in enumerate(self.nodes[:live])]

    def probe(self) -> SimNode:
        """A new node of the group as the filters see it before it is opened (never placed on)."""
        if self._probe is None:
            assert self.bins.new_shape is not None
            self._probe = template_node(self.view, -1, list(self.bins.new_shape))
        return self._probe


class _Booting:
    """Whether a registered node cannot take pods yet but soon will: NotReady, GPUs not advertised, or
    still carrying a startup taint. Asked of every node of every run, so what nodes share is judged
    once per run: startup taints per taint tuple (a group's nodes share theirs), and whether a node
    advertises all its shape has per (allocatable, shape) pair."""

    def __init__(self, ctx: Context) -> None:
        policy = ctx.config.policy
        self.policy = policy
        # Created after this instant: younger than the provisioning deadline (Context.older_than).
        self.born_after = ctx.now - timedelta(seconds=policy.max_node_provision_seconds)
        self.starting: dict[int, bool] = {}  # id(taints) -> has a startup taint (taints live all run)
        self.complete: dict[int, dict[int, bool]] = {}  # id(shape) -> id(allocatable) -> advertised

    def of(self, view: GroupView) -> list[Node]:
        """The group's registered nodes that are booting (one loop, no call per node: every node of
        every run passes here)."""
        shape = view.shape
        assert shape is not None
        starting, born_after = self.starting, self.born_after
        # Per shape, by allocatable alone: no key tuple built per node.
        complete = self.complete.setdefault(id(shape), {})
        found: list[Node] = []
        for node in view.nodes:
            if node.unschedulable:
                continue
            if node.ready:
                started = starting.get(id(node.taints))
                if started is None:
                    started = starting[id(node.taints)] = has_startup_taint(node.taints, self.policy)
                if not started:
                    advertised = complete.get(id(node.allocatable))
                    if advertised is None:
                        have = node.allocatable.as_dict()
                        advertised = all(not value or have.get(name) for name, value in shape.items)
                        complete[id(node.allocatable)] = advertised
                    if advertised:
                        continue  # ready with everything its shape promises: in service
            if node.created_at is None or node.created_at > born_after:
                found.append(node)
        return found


def booting_nodes(ctx: Context) -> dict[str, list[Node]]:
    """Registered nodes of each group that cannot take pods yet but soon will."""
    booting = _Booting(ctx)
    return {view.name: booting.of(view) for view in ctx.groups if view.shape is not None}


def all_group_bins(ctx: Context, booting: dict[str, list[Node]], sim: Simulation) -> dict[str, GroupBins]:
    """Bins of every group the planner can grow (known shape, ASG found), in config order."""
    return {
        view.name: group_bins(
            ctx, view, booting_nodes=booting.get(view.name, []), target_id=position, sim=sim
        )
        for position, view in enumerate(ctx.groups)
        if view.shape is not None and view.asg is not None
    }


def _booting_bin(
    ctx: Context, view: GroupView, node: Node, shape: tuple[int, ...]
) -> tuple[list[int], SimNode]:
    """Room left on a booting node once its bound pods and its DaemonSets still to come are in."""
    assert view.shape is not None
    advertised = all(not v or node.allocatable.get(n) for n, v in view.shape.items)
    room = list(ctx.vector(node.allocatable)) if advertised else list(shape)
    bound = ctx.pods_on_node.get(node.name, [])
    running = {p.owner_name for p in bound if p.is_daemonset}
    for pod in bound:
        for dim, amount in ctx.request(pod.requests):
            room[dim] -= amount
    for ds in view.template.daemonsets:  # DaemonSet pods that will still land on it
        if ds.name not in running:
            for dim, amount in ctx.request(ds.pod.requests):
                room[dim] -= amount
    taints = tuple(t for t in node.taints if not is_startup_taint(t, ctx.config.policy))
    return room, SimNode(node.name, node.labels, taints, room, False, bound_ports(bound))


def group_bins(
    ctx: Context, view: GroupView, *, booting_nodes: list[Node], target_id: int, sim: Simulation
) -> GroupBins:
    """The group's booting nodes, then its launching ones, then room to open new ones."""
    assert view.shape is not None
    shape = ctx.vector(view.shape)
    new_free = new_node_room(ctx, view)
    gb = GroupBins(view, Bins([], [], new_free), 0, target_id)
    for node in booting_nodes:
        room, sim_node = _booting_bin(ctx, view, node, tuple(shape))
        gb.bins.free.append(room)
        gb.bins.ids.append(node.name)
        gb.nodes.append(sim_node)
        sim.add_node(sim_node)
    for _ in range(inflight_slots(view)):
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
    _reserve(gb, _pending_slots(view))
    return gb


def new_node_room(ctx: Context, view: GroupView) -> tuple[int, ...]:
    """Room on a new node of the group once its DaemonSet pods are in (the group's shape is known)."""
    assert view.shape is not None
    room = list(ctx.vector(view.shape))
    for dim, amount in ctx.request(view.template.overhead):
        room[dim] -= amount
    return tuple(room)


def empty_at_max(
    ctx: Context, view: GroupView, kept: int, target_id: int, size: int | None = None
) -> GroupBins:
    """The group grown to its max size (`size` when it can never have that many nodes: at_max_world.
    most_nodes) with every node new and empty, but `kept` of its nodes (those that run members of the
    gang asked about: they stay as they are, counted as registered room): no booting or launching
    node (what a gang needs of the group, however long its other nodes take to free up). No node
    joins the simulation until the placement opens one."""
    most = view.max_size if size is None else size
    return GroupBins(view, Bins([], [], new_node_room(ctx, view), max_new=max(0, most - kept)), 0, target_id)


def _pending_slots(view: GroupView) -> int:
    """Launches asked for and not begun: desired above the instance count is capacity on its way,
    unless launches are failing or the group's Launch process is suspended."""
    live = len(view.asg.live_instances) if view.asg else 0
    launching = not view.in_backoff and not (view.asg is not None and view.asg.launch_suspended)
    return max(0, view.current_desired - live) if launching else 0


def inflight_slots(view: GroupView) -> int:
    """The group's bins after its booting nodes: instances without a node, then launches not begun."""
    return len(view.unregistered) + _pending_slots(view)


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


def past_reservation(gb: GroupBins) -> bool:
    """Once its free reserved capacity is used, a group that falls back to On-Demand competes
    again at its price: returns True when it was opened up for that."""
    if not gb.beyond_reserved or gb.bins.opened < gb.bins.max_new:
        return False
    gb.bins.max_new += gb.beyond_reserved
    gb.beyond_reserved = 0
    gb.reserved_left = 0
    return True
