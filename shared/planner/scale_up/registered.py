"""Free room of registered nodes: classes of nodes one admission test covers, and the outcome of
placing a pod there (cluster-autoscaler's first step: pods that fit existing nodes need nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter

from shared.domain.model import Pod, Taint
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.planner.backlog import Unit
from shared.planner.context import Context
from shared.planner.filters.framework import SimNode
from shared.planner.filters.node_ports import port_key
from shared.planner.packing import Bins, Request, fits
from shared.planner.scale_up.result import Placed
from shared.planner.simulation import Simulation, any_anti_affinity


@dataclass
class ExistingClass:
    """Registered nodes sharing labels and taints: one admission test covers them all."""

    labels: dict[str, str]
    taints: tuple[Taint, ...]
    bins: Bins
    uncordon: bool = False  # nodes cordoned by the scaler: placing a pod means uncordoning one
    first: str = ""  # its first node by name, one without room for any pending pod included
    # Cordoned nodes the plan uncordons anyway (existing_classes' `uncordoning`): once schedulable they
    # are room like any other, in name order.
    uncordoned_anyway: bool = False


class ExistingRoom:
    """Free room of registered nodes: which classes admit a pod, and the outcome of a placement."""

    def __init__(
        self,
        ctx: Context,
        classes: list[ExistingClass],
        sim: Simulation,
        known: Mapping[tuple[int, int], SimNode] | None = None,
    ) -> None:
        """`known`: the nodes of classes another room already mapped (the at-max rule's shared
        room): copied, not rebuilt node by node."""
        self.ctx = ctx
        self.classes = classes
        self.sim = sim
        self._admitting: dict[int, list[Bins]] = {}
        self._uncordon = {id(cls.bins) for cls in classes if cls.uncordon}
        self.node_of: dict[tuple[int, int], SimNode] = dict(known) if known else {}
        for cls in classes:
            if known and (id(cls.bins), 0) in known:
                continue
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

    def record(self, pod: Pod, bins: Bins, index: int, placed: Placed) -> None:
        """The pod fits registered node `bins.ids[index]`: an existing outcome (maybe an uncordon)."""
        node = bins.ids[index] or ""
        group = self.ctx.group_of_node.get(node)
        placed.busy_nodes.add(node)
        placed.counted_on[pod.key] = node
        if id(bins) in self._uncordon:
            placed.uncordon[node] = group.name if group else ""
            reason = f"fits on {node}, which the scaler had cordoned: uncordoning it"
        else:
            reason = f"fits free room on {node}; the scheduler will place it"
        placed.outcomes[pod.key] = PodOutcome(
            pod.key,
            Outcome.EXISTING,
            group.name if group else None,
            reason,
            ReasonCode.PLACED,
            pod.requests.gpus,
        )


def referenced_label_keys(units: list[Unit]) -> frozenset[str]:
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


def bound_ports(pods: list[Pod]) -> set[tuple[str, str, int]]:
    """Host ports the pods hold (a fresh set: placements add to it). Few pods ask for any."""
    ports: set[tuple[str, str, int]] = set()
    for pod in pods:
        if pod.constraints.host_ports:
            ports.update(port_key(p) for p in pod.constraints.host_ports)
    return ports


_NAME = attrgetter("name")  # a node's name, read in C: no lambda frame per node of every run


def least_request(units: list[Unit], ctx: Context) -> Request | None:
    """What every pending pod asks at least, per dimension (None when that is nothing), when a node
    without that much room plays no part in the run: every pending pod is plain (no inter-pod rule,
    port, volume or DRA claim of its own) and no bound pod has anti-affinity, so a node matters only
    as room, and room for none of them never becomes room (bins only lose room during a run)."""
    if any(not p.constraints.is_plain for unit in units for p in unit.pods):
        return None
    if any(any_anti_affinity(pods) for pods in ctx.pods_on_node.values()):  # no generator per pod
        return None
    least: dict[int, int] | None = None
    for request in {r for unit in units for r in unit.requests}:
        asked = dict(request)
        least = asked if least is None else {d: min(a, asked[d]) for d, a in least.items() if d in asked}
    return tuple(sorted(least.items())) if least else None


def existing_classes(
    ctx: Context,
    *,
    excluded: set[str],
    label_keys: frozenset[str],
    sim: Simulation,
    least: Request | None = None,
    uncordoning: frozenset[str] = frozenset(),
    bound: Mapping[str, list[Pod]] | None = None,
) -> list[ExistingClass]:
    """Registered nodes with room (but the `excluded` ones), grouped by what admission can see.

    Only label keys some pending pod refers to matter, so nodes that differ only in, say, their
    hostname label share a class and one admission test. Each node also joins the simulation, but
    one without room for `least` (see least_request): it could take no pending pod, and nothing
    else reads it. Its name still orders its class, so first fit meets the nodes as before.
    Nodes the plan uncordons anyway (`uncordoning`, plan_scale_up) are ordered as schedulable ones.
    `bound`: the pods taking each node's room (default: all; the at-max rule keeps a gang's own).
    """
    classes: dict[tuple[object, ...], ExistingClass] = {}
    keys = sorted(label_keys)  # few keys, many labels per node: look the keys up, in key order
    # Classes tell taint lists apart by value, but a Taint hashes in Python: each list object is
    # hashed once, mapped to the first equal list seen, whose id keys the class (a group's nodes
    # share their list, the planner's copies of marked nodes too: attrition._TAINT_LISTS).
    first_equal: dict[tuple[Taint, ...], tuple[Taint, ...]] = {}
    same_taints: dict[int, int] = {}  # id(taints) -> id of the first equal list (the nodes live all call)
    # The labels pending pods look at, per label mapping: a group's nodes share theirs.
    visible_of: dict[int, tuple[tuple[str, str], ...]] = {}
    on_node = ctx.pods_on_node if bound is None else bound
    for node in sorted(ctx.snapshot.nodes, key=_NAME):
        if not node.ready or node.name in excluded:
            continue
        # unschedulable first: a field, where cordoned_by_scaler is a property call
        scaler_cordoned = node.unschedulable and node.cordoned_by_scaler and node.name in ctx.group_of_node
        if node.unschedulable and not scaler_cordoned:
            continue
        pods = on_node.get(node.name, [])
        free = ctx.room(node.allocatable, pods)
        labels = node.labels
        visible = visible_of.get(id(labels))
        if visible is None:
            visible = visible_of[id(labels)] = tuple([(k, labels[k]) for k in keys if k in labels])
        taints = same_taints.get(id(node.taints))
        if taints is None:
            taints = same_taints[id(node.taints)] = id(first_equal.setdefault(node.taints, node.taints))
        anyway = scaler_cordoned and node.name in uncordoning
        key = (visible, taints, scaler_cordoned, anyway)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = ExistingClass(
                dict(visible), node.taints, Bins([], []), scaler_cordoned, node.name, anyway
            )
        if least is not None and not fits(least, free):
            continue
        cls.bins.free.append(free)
        cls.bins.ids.append(node.name)
        cls.bins.placed.append(0)
        # A scaler-cordoned node is judged schedulable: the plan uncordons it to use it.
        sim.add_node(SimNode(node.name, node.labels, node.taints, free, False, bound_ports(pods)))
    return sorted((c for c in classes.values() if c.bins.ids), key=class_order)


def class_order(cls: ExistingClass) -> tuple[bool, str]:
    """Schedulable nodes first (and those uncordoned anyway), by name; uncordoning is the fallback
    before buying nodes."""
    return (cls.uncordon and not cls.uncordoned_anyway, cls.first)


def parked_nodes(ctx: Context) -> set[str]:
    """Registered nodes that are never free room, however idle they look: those whose instance is
    in Standby or leaving its group (Terminating, Terminating:Wait under a lifecycle hook,
    Detaching), and those of a group whose Capacity Block is about to end (they are being cordoned)."""
    ending = {n.name for v in ctx.groups if v.capacity.block_cordon for n in v.nodes}
    parked = {i.instance_id for asg in ctx.snapshot.asgs.values() for i in asg.instances if not i.is_live}
    if parked:
        ending.update(n.name for n in ctx.snapshot.nodes if n.instance_id in parked)
    return ending
