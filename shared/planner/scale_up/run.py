"""One scale-up run: the simulation every placement feeds, the plain-pod fast path, the per-node
path through the scheduler's filters, and the undo of gang attempts (all or nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.domain.model import Node, Pod, Scheduling
from shared.planner.backlog import Unit
from shared.planner.context import Context
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.node_resources_fit import node_resources_fit
from shared.planner.filters.volume_binding import Volumes
from shared.planner.ground_truth import Recall, Verdicts, recall
from shared.planner.packing import Bins, Journal, Request
from shared.planner.placement import Placer, template_node
from shared.planner.scale_up.groups import GroupBins, PlaceOne
from shared.planner.scale_up.registered import ExistingRoom
from shared.planner.simulation import PodState, SharedBound, Simulation, static_reason
from shared.planner.template import is_startup_taint


class Admission:
    """Caches "does a new node of this group admit this scheduling spec" per distinct pair.

    Keyed by object identity: the parsers intern equal specs, and every pod outlives the run.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], bool] = {}

    def group(self, gb: GroupBins, schedulings: Iterable[Scheduling]) -> bool:
        """Whether a new node of the group, in whichever zone it launches, admits every one of the
        scheduling specs (GroupView.admits)."""
        cache, target, view = self._cache, gb.target_id, gb.view
        for scheduling in schedulings:
            key = (id(scheduling), target)
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = view.admits(scheduling)
            if not hit:
                return False
        return True


class Run:
    """The simulation and both placement paths of one run."""

    def __init__(self, ctx: Context, sim: Simulation, recalled: Recall) -> None:
        self.ctx = ctx
        self.sim = sim
        self.placer = Placer(ctx, sim)
        self.recalled = recalled
        self.admission = Admission()
        # The static filters' answer on each group's probe node, per pod state: they read only the
        # node and the pod's spec (a PodState settles it; kept in the entry so its id is not reused).
        self._probe_static: dict[tuple[int, int], tuple[PodState, Reason]] = {}

    def _excluded(self, pod: Pod) -> frozenset[str]:
        return self.recalled.distrusted.get(pod.key, frozenset())

    def place_unit(self, unit: Unit, place_one: PlaceOne) -> list[tuple[Pod, Bins, int]] | None:
        """Place every pod of the unit; all or nothing."""
        return self.place_members(unit, place_one, minimum=len(unit.pods))[0]

    def place_members(
        self, unit: Unit, place_one: PlaceOne, *, minimum: int, trial: bool = False
    ) -> tuple[list[tuple[Pod, Bins, int]] | None, Pod | None]:
        """Place the unit's pods, at least `minimum` of them (an elastic gang keeps every member
        beyond it that fits, as Volcano binds a job once minAvailable members are allocated), or
        none. Returns the placements (None when too few fit) and the first member with no place.
        `trial`: only the answer counts, every placement is undone (the at-max rule's shared room)."""
        journal = Journal() if len(unit.pods) > 1 or trial else None
        if journal is not None:
            self.sim.checkpoint()
        placements: list[tuple[Pod, Bins, int]] = []
        missing: Pod | None = None
        for pod, request in zip(unit.pods, unit.requests, strict=True):
            where = place_one(pod, request, journal)
            if where is not None:
                placements.append((pod, *where))
                continue
            missing = missing or pod
            if minimum == len(unit.pods):
                break  # all or nothing: no need to try the others
        if len(placements) < minimum or trial:
            if journal is not None:
                self.sim.rollback()
                journal.rollback()
                self.placer.forget()
            return (placements if len(placements) >= minimum else None), missing
        if journal is not None:
            self.sim.commit()
        return placements, missing

    def fast(
        self,
        pod: Pod,
        request: Request,
        bins: Bins,
        journal: Journal | None,
        gb: GroupBins | None = None,
        room: ExistingRoom | None = None,
    ) -> int | None:
        """The one plain-pod fast path (no inter-pod rule of its own): first fit into `bins` (a
        group's `gb`, or a class of the registered `room`). A bin it opens becomes a template node;
        the simulation records the pod only when another pod's rules look at it."""
        opened = bins.opened
        index = bins.place(request, journal)
        if index is None:
            return None
        if gb is not None and bins.opened > opened:
            self.open_bin(gb, bins.free[index])
        if self.sim.active and self.sim.watched(pod):
            if gb is not None:
                self.sim.record(pod, gb.nodes[index])
            elif room is not None:
                self.sim.record(pod, room.node_of[(id(bins), index)])
        return index

    def _record(
        self, pod: Pod, node: SimNode, bins: Bins, index: int, request: Request, journal: Journal | None
    ) -> None:
        if journal is not None:
            journal.touch(bins, index)
        self.sim.record(pod, node, request)
        bins.placed[index] += 1

    def existing(self, room: ExistingRoom) -> PlaceOne:
        """Placement on registered nodes' free room."""

        def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
            if self.sim.is_plain(pod) and pod.key not in self.recalled.distrusted:
                for bins in room.targets(pod):
                    index = self.fast(pod, request, bins, journal, room=room)
                    if index is not None:
                        return bins, index
                return None
            found = self.placer.place(pod, request, room, lambda: room.nodes(pod), self._excluded(pod))
            if found is not None:
                bins, index = found
                self._record(pod, room.node_of[(id(bins), index)], bins, index, request, journal)
            return found

        return place_one

    def group(self, gb: GroupBins, room: ExistingRoom, *, gang: bool) -> PlaceOne:
        """Placement on a group's booting, launching and new nodes (a gang may also use free room)."""
        existing = self.existing(room)

        def place_one(pod: Pod, request: Request, journal: Journal | None) -> tuple[Bins, int] | None:
            if gang:
                found = existing(pod, request, journal)
                if found is not None:
                    return found
            if self.sim.is_plain(pod):
                index = self.fast(pod, request, gb.bins, journal, gb=gb)
                return None if index is None else (gb.bins, index)
            found = self.placer.place(pod, request, gb, gb.items, frozenset())
            if found is None:
                found = self._open_for(gb, pod, request, journal)
                if found is None:
                    return None
            bins, index = found
            self._record(pod, gb.nodes[index], bins, index, request, journal)
            return found

        return place_one

    def places(self, gb: GroupBins, room: ExistingRoom) -> tuple[PlaceOne, PlaceOne]:
        """The group's placement functions for single pods and for gangs, built once per run."""
        if not gb.places:
            gb.places[False] = self.group(gb, room, gang=False)
            gb.places[True] = self.group(gb, room, gang=True)
        return gb.places[False], gb.places[True]

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
        probe = gb.probe()
        state = self.sim.state(pod)
        known = self._probe_static.get((id(gb), id(state)))
        if known is None or known[0] is not state:
            known = self._probe_static[(id(gb), id(state))] = (state, self.sim.static(pod, state, probe))
        if known[1] or self.sim.dynamic(pod, state, probe, request, self.ctx.dims):
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


def simulation(
    ctx: Context, bound: Mapping[str, Iterable[Pod]] | None = None, shared: SharedBound | None = None
) -> Simulation:
    """The scheduler's filters over every node the run may count on (nodes join as steps add them).
    `bound`: the pods on each node the filters see (default: every live pod; the at-max rule's world
    keeps only a gang's own members and the DaemonSet pods); `shared`: those of the nodes every
    world keeps, indexed once a run (`bound` then holds only the others)."""
    snapshot = ctx.snapshot
    return Simulation(
        ctx.pods_on_node if bound is None else bound,
        snapshot.namespaces,
        Volumes.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes),
        devices=ctx.devices,
        shared=shared,
    )


def recall_refusals(ctx: Context, pending: list[Pod]) -> Recall:
    """What the scheduler said of the backlog since the last runs (shared.planner.ground_truth)."""
    if not pending:
        return Recall()  # what recall finds for no pod, without indexing every node for it
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
            and _holds_devices(ctx, pod, SimNode(node.name, node.labels, taints, free))
        )

    verdicts = Verdicts(
        ctx.nodes_by_name,
        {name: view.name for name, view in ctx.group_of_node.items()},
        ctx.now,
        policy.scheduler_retry_seconds,
        policy.scheduler_refusal_ttl_seconds,
        holds,
    )
    return recall(pending, ctx.snapshot.state.pods, verdicts)


def _holds_devices(ctx: Context, pod: Pod, node: SimNode) -> bool:
    """Whether the node's own ResourceSlices can serve the pod's DRA claims, every device free (the
    node running only its DaemonSet pods). A node that came up publishing no slices (its DRA driver
    is not running) or other devices holds nothing: the group that bought it is refused for the pod,
    rather than bought again on the template's devices every run."""
    devices = ctx.devices
    if devices is None or not pod.constraints.resource_claim_sources:
        return True
    demand = devices.demand(pod)
    if devices.static(demand, node) is not None:
        return False
    return not isinstance(devices.allocate(demand, node, set(), {}), str)
