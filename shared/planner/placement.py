"""Per-node placement through kube-scheduler's filters, for pods the class-based fast path cannot
take (inter-pod rules, host ports, volumes, refuted fits).

Candidates that pass the static filters are listed once per pod spec and scope (the registered
nodes, or one group's nodes); a node that fails a filter whose answer only gets worse during the
run is skipped for good, and zone-like spread scans only the domains within skew.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shared.domain.model import Pod
from shared.planner.context import Context, GroupView
from shared.planner.filters.dynamic_resources import CANNOT_ALLOCATE, NOT_AVAILABLE
from shared.planner.filters.framework import SimNode
from shared.planner.filters.inter_pod_affinity import ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from shared.planner.filters.node_ports import REASON as PORTS_TAKEN
from shared.planner.filters.pod_topology_spread import allowed_domains
from shared.planner.packing import Bins, Request
from shared.planner.simulation import PodState, Simulation

# Filter answers that can only get worse as a run places pods: a node failing one of them for a
# pod spec is skipped for that spec for the rest of the run (until a gang rollback).
_PERMANENT = frozenset({ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, PORTS_TAKEN, NOT_AVAILABLE})
Domains = list[tuple[str, set[str]]]  # per zone-like topology key, the domains a pod may go to
_NO_DOMAINS: Domains = []


def _permanent(reason: str) -> bool:
    # DRA: devices are only ever taken during a run, so "cannot allocate" stays true (its
    # details vary with the request, hence the prefix).
    return reason in _PERMANENT or reason.startswith(("Insufficient", "Too many", CANNOT_ALLOCATE))


def template_node(view: GroupView, index: int, free: list[int]) -> SimNode:
    """The index-th new (or launching) node of a group as the filters see it: its own hostname, and
    the labels it may carry in each zone of a group that spans several (GroupView.launch_labels)."""
    template = view.template
    launches = view.launch_labels
    return SimNode(
        f"template-{view.name}-{index}",
        template.node_labels(index),
        template.taints,
        free,
        ports=set(template.ports),
        group=view.name,
        launches=launches if len(launches) > 1 else (),
    )


@dataclass
class _Candidates:
    """Nodes of one scope that pass the static filters for one pod spec."""

    pod: Pod
    nodes: list[tuple[SimNode, Bins, int]]
    by_domain: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # key -> value -> indices

    def domains(self, key: str) -> dict[str, list[int]]:
        """Candidate indices per value of a topology key (nodes without the key are in none)."""
        found = self.by_domain.get(key)
        if found is None:
            found = self.by_domain[key] = {}
            for index, (node, _, _) in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    found.setdefault(value, []).append(index)
        return found

    def append(self, item: tuple[SimNode, Bins, int]) -> None:
        self.nodes.append(item)
        for key, values in self.by_domain.items():
            value = item[0].labels.get(key)
            if value is not None:
                values.setdefault(value, []).append(len(self.nodes) - 1)


@dataclass
class _Progress:
    """Where the live candidates start for one request: nodes before `start` (per domain when the
    scan goes domain by domain) and in `dead` failed a filter whose answer only gets worse during
    the run (room, ports, anti-affinity)."""

    start: int = 0
    dead: set[int] = field(default_factory=set)  # failed the pod's own rules (ports, anti-affinity)
    full: set[int] = field(default_factory=set)  # no room for the request: shared by every spec
    starts: dict[str, int] = field(default_factory=dict)
    # Per (topology key, domain), how many candidates from the first are all in `full`: shared by
    # every spec too, so the 50th workload of a size does not walk again the nodes 49 filled.
    full_starts: dict[tuple[str, str], int] = field(default_factory=dict)

    def is_dead(self, index: int) -> bool:
        return index in self.full or index in self.dead

    def first_live(self, key: str, domain: str, indices: list[int]) -> int:
        """Where the scan of a domain starts: past the dead candidates it already knows."""
        full, shared = self.full, self.full_starts.get((key, domain), 0)
        while shared < len(indices) and indices[shared] in full:
            shared += 1
        self.full_starts[(key, domain)] = shared
        return max(shared, self.starts.get(domain, 0))

    def kill(self, index: int, reason: str) -> None:
        (self.full if reason.startswith(("Insufficient", "Too many")) else self.dead).add(index)


class Placer:
    """Per-node placement through the filters, for pods the class-based fast path cannot take."""

    def __init__(self, ctx: Context, sim: Simulation) -> None:
        self.ctx = ctx
        self.sim = sim
        self._candidates: dict[tuple[object, ...], _Candidates] = {}
        self._progress: dict[tuple[object, ...], _Progress] = {}
        self._full: dict[tuple[object, ...], tuple[set[int], dict[tuple[str, str], int]]] = {}
        # What _lookup found per scope, pod state and request. A PodState settles every part of
        # its keys (namespace, scheduling, constraints, DRA claims, existing anti-affinity); the
        # state is kept in the entry, so its id cannot be reused while the entry is there.
        self._found: dict[tuple[int, int, Request], tuple[PodState, _Candidates, _Progress]] = {}

    def forget(self) -> None:
        """After a rollback nodes have regained room and opened ones are gone: start afresh."""
        self._candidates.clear()
        self._progress.clear()
        self._full.clear()
        self._found.clear()

    def place(
        self,
        pod: Pod,
        request: Request,
        scope: object,
        nodes: Callable[[], list[tuple[SimNode, Bins, int]]],
        excluded: frozenset[str],
    ) -> tuple[Bins, int] | None:
        """First node of `nodes` (static filters cached per scope and spec) that passes every filter."""
        state = self.sim.state(pod)
        known = self._found.get((id(scope), id(state), request))
        if known is not None and known[0] is state:
            found, progress = known[1], known[2]
        else:
            found, progress = self._lookup(pod, request, scope, nodes, state)
            self._found[(id(scope), id(state), request)] = (state, found, progress)
        listed = found.nodes
        dims = self.ctx.dims
        # Per zone-like spread key, the domains within max skew now: nodes elsewhere are skipped
        # without running the filters (hostname domains are single nodes and left to the filter).
        allowed = allowed_domains(state.spread) if state.spread is not None else _NO_DOMAINS
        if allowed:
            # Zone-like spread: scan only the domains within max skew, each from its own start.
            key_name, values = allowed[0]
            buckets = found.domains(key_name)
            for value in sorted(values):
                indices = buckets.get(value)
                if not indices:
                    continue
                where = self._scan(pod, request, state, listed, indices, progress, value, excluded, allowed)
                if where is not None:
                    return where
            return None
        index = progress.start
        while index < len(listed):
            if progress.is_dead(index):
                if index == progress.start:
                    progress.start += 1
                index += 1
                continue
            node, bins, position = listed[index]
            if node.name in excluded:
                index += 1
                continue
            reason = self.sim.dynamic(pod, state, node, request, dims)
            if reason is None:
                return bins, position
            if _permanent(reason):
                progress.kill(index, reason)
                if index == progress.start:
                    progress.start += 1
            index += 1
        return None

    def _lookup(
        self,
        pod: Pod,
        request: Request,
        scope: object,
        nodes: Callable[[], list[tuple[SimNode, Bins, int]]],
        state: PodState,
    ) -> tuple[_Candidates, _Progress]:
        """The nodes passing the pod's static filters and how far earlier pods of its kind got in them."""
        # Static filters read the pod's node constraints, volumes and DRA claims; never its labels
        # nor its inter-pod rules, so all the replicas of all the apps of a spec share one list.
        constraints = pod.constraints
        devices = state.devices.key if state.devices is not None else None  # resolved DRA claims
        key = (id(scope), pod.namespace, id(pod.scheduling), constraints.claims, devices)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = _Candidates(
                pod, [item for item in nodes() if self.sim.static(pod, state, item[0]) is None]
            )
        # What makes a node dead for good: the request's size, the pod's own constraints, and the
        # existing anti-affinity terms that match its labels (not the labels themselves).
        existing = tuple(id(c) for _, c in state.affinity.existing_anti) if state.affinity else ()
        progress = self._progress.get((key, id(constraints), request, existing))
        if progress is None:
            full, full_starts = self._full.setdefault((key, request), (set(), {}))
            progress = self._progress[(key, id(constraints), request, existing)] = _Progress(
                full=full, full_starts=full_starts
            )
        return found, progress

    def _scan(
        self,
        pod: Pod,
        request: Request,
        state: PodState,
        listed: list[tuple[SimNode, Bins, int]],
        indices: list[int],
        progress: _Progress,
        domain: str,
        excluded: frozenset[str],
        allowed: Domains,
    ) -> tuple[Bins, int] | None:
        """First fit over the candidates of one domain, skipping dead ones for good."""
        dims = self.ctx.dims
        start = position_in = progress.first_live(allowed[0][0], domain, indices)
        while position_in < len(indices):
            index = indices[position_in]
            node, bins, position = listed[index]
            dead = progress.is_dead(index)
            if dead or node.name in excluded or (len(allowed) > 1 and _outside(node.labels, allowed)):
                if dead and position_in == start:
                    start += 1
                position_in += 1
                continue
            reason = self.sim.dynamic(pod, state, node, request, dims)
            if reason is None:
                progress.starts[domain] = start
                return bins, position
            if _permanent(reason):
                progress.kill(index, reason)
                if position_in == start:
                    start += 1
            position_in += 1
        progress.starts[domain] = start
        return None

    def add(self, scope: object, item: tuple[SimNode, Bins, int]) -> None:
        """A node opened this run joins the candidates of every spec cached for the scope."""
        for key, found in self._candidates.items():
            if key[0] == id(scope) and self.sim.static(found.pod, self.sim.state(found.pod), item[0]) is None:
                found.append(item)


def _outside(labels: Mapping[str, str], allowed: Domains) -> bool:
    for key, values in allowed:  # noqa: SIM110 (an explicit loop: called once per candidate node)
        if labels.get(key) not in values:
            return True
    return False
