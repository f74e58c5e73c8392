"""The planner's simulation of the scheduler for one run: every node it may count on (registered,
booting, launching, new) with its free room and host ports, the pods bound or placed on them, and
the per-domain counts the stateful filters read.

Like cluster-autoscaler's binpacking estimator, a pod placed by the plan is fed back into the
picture before the next one is judged (its ports, its labels for others' affinity and spread, its
own anti-affinity). Counts come from label postings, never from pairwise scans of pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Generic, TypeVar

from shared.domain.constraints import LabelSelector, PodAffinityTerm, SpreadConstraint
from shared.domain.dra import DeviceId
from shared.domain.model import Pod, Scheduling, Taint
from shared.planner.filters.dynamic_resources import Allocation, ClaimDemand, DeviceWorld, dynamic_resources
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.inter_pod_affinity import InterPodAffinityState, inter_pod_affinity
from shared.planner.filters.node_affinity import node_affinity
from shared.planner.filters.node_ports import node_ports, port_key
from shared.planner.filters.node_resources_fit import Request, node_resources_fit
from shared.planner.filters.node_unschedulable import node_unschedulable
from shared.planner.filters.pod_topology_spread import DomainCounts, SpreadState, pod_topology_spread
from shared.planner.filters.taint_toleration import taint_toleration
from shared.planner.filters.volume_binding import VolumeDemand, Volumes, volume_binding, volume_demand
from shared.planner.zones import unknown_zone_id

Pair = tuple[str, str]
T = TypeVar("T")


def static_reason(
    scheduling: Scheduling, labels: Mapping[str, str], taints: tuple[Taint, ...], unschedulable: bool
) -> Reason:
    """The filters that read only the node's labels, taints and cordon (one home for all paths), in
    kube-scheduler's order (the first that refuses gives the node's reason: default_plugins.go runs
    NodeUnschedulable, NodeName, TaintToleration, then NodeAffinity)."""
    return (
        node_unschedulable(scheduling, unschedulable)
        or taint_toleration(scheduling, taints)
        or node_affinity(scheduling, labels)
    )


def launch_affinity(scheduling: Scheduling, labels: Mapping[str, str], several_zones: bool) -> Reason:
    """NodeAffinity on a new node launched with `labels` (one of zones.launch_labels). On a group that
    spans several zones, a zone whose id is unknown refuses a pod that reads it (zones.unknown_zone_id)."""
    if several_zones:
        unknown = unknown_zone_id(scheduling, labels)
        if unknown:
            return unknown
    return node_affinity(scheduling, labels)


def launch_reasons(
    scheduling: Scheduling, launches: tuple[Mapping[str, str], ...], taints: tuple[Taint, ...]
) -> list[Reason]:
    """static_reason on a new node of a group in each zone it may launch in (zones.launch_labels, in
    their order; a new node is never cordoned). The one rule admission, placement, diagnosis and
    explain judge a new node by: a group takes a pod only if every zone admits it."""
    several = len(launches) > 1
    # TaintToleration before NodeAffinity, as static_reason: the taints are the same in every zone.
    untolerated = taint_toleration(scheduling, taints)
    return [untolerated or launch_affinity(scheduling, labels, several) for labels in launches]


def launch_reason(
    scheduling: Scheduling, launches: tuple[Mapping[str, str], ...], taints: tuple[Taint, ...]
) -> Reason:
    """The first refusal of launch_reasons (None: every zone the group may launch in admits the pod)."""
    for reason in launch_reasons(scheduling, launches, taints):
        if reason:
            return reason
    return None


def node_static_reason(scheduling: Scheduling, node: SimNode) -> Reason:
    """static_reason on a simulated node: a new node of a multi-zone group in every zone it may land in."""
    if node.launches:
        return launch_reason(scheduling, node.launches, node.taints)
    return static_reason(scheduling, node.labels, node.taints, node.unschedulable)


class SelectorIndex(Generic[T]):
    """Items keyed by a label selector, found from a pod's labels without testing every selector:
    each item is filed under one (key, value) its selector requires (a matchLabels pair, or each
    value of an In expression); selectors that require no pair are always candidates."""

    def __init__(self) -> None:
        self._by_pair: dict[Pair, list[T]] = {}
        self._always: list[T] = []

    def add(self, selector: LabelSelector | None, item: T) -> None:
        if selector is None:
            return  # a nil selector matches no pod
        if selector.match_labels:
            self._by_pair.setdefault(selector.match_labels[0], []).append(item)
            return
        for req in selector.match_expressions:
            if req.operator == "In":
                for value in req.values:
                    self._by_pair.setdefault((req.key, value), []).append(item)
                return
        self._always.append(item)

    def candidates(self, labels: Mapping[str, str]) -> list[T]:
        """Items whose selector may match `labels` (a superset: the caller still tests them)."""
        found = list(self._always)
        by_pair = self._by_pair
        for item in labels.items():
            hit = by_pair.get(item)
            if hit:
                found.extend(hit)
        return found


class PodIndex:
    """Live bound pods with their node's name, found by label pair (postings), and the required
    anti-affinity terms they carry: what a simulation's counts are built from."""

    def __init__(self) -> None:
        self.pods: list[tuple[Pod, str]] = []
        self.postings: dict[Pair, list[int]] = {}
        self.anti: list[tuple[PodAffinityTerm, str]] = []

    def add(self, pod: Pod, node_name: str) -> None:
        position = len(self.pods)
        self.pods.append((pod, node_name))
        postings = self.postings
        for item in pod.labels.items():  # every bound pod: no empty list made for setdefault
            found = postings.get(item)
            if found is None:
                postings[item] = [position]
            else:
                found.append(position)
        for term in pod.constraints.anti_affinity:
            self.anti.append((term, node_name))

    def candidates(self, selector: LabelSelector) -> Iterable[tuple[Pod, str]]:
        """The pods the selector may match (a superset: the caller still tests them)."""
        lists = [self.postings.get(item, []) for item in selector.match_labels]
        for req in selector.match_expressions:
            if req.operator == "In":
                lists.append(sorted({i for v in req.values for i in self.postings.get((req.key, v), ())}))
        if not lists:
            return self.pods
        smallest = min(lists, key=len)
        return (self.pods[i] for i in smallest)


class SharedBound:
    """The live pods bound to some nodes, indexed once for every simulation that holds those nodes
    with those pods on them: the at-max rule builds one world a gang, all keeping the same nodes and
    their DaemonSet pods, and indexing those again for each gang would cost each the cluster's size.
    Read, never changed; indexed on the first simulation that needs it."""

    def __init__(self, pods_on_node: Mapping[str, Iterable[Pod]], names: Collection[str]) -> None:
        self.names = frozenset(names)
        self._pods_on_node = pods_on_node
        self._index: PodIndex | None = None

    def index(self) -> PodIndex:
        if self._index is None:
            self._index = PodIndex()
            for name, pods in self._pods_on_node.items():  # in their order, as a simulation's own
                if name in self.names:
                    for pod in pods:
                        if not pod.is_terminal:
                            self._index.add(pod, name)
        return self._index


@dataclass(frozen=True)
class PodState:
    """Everything the filters precompute for one pod (CycleState of kube-scheduler's PreFilter)."""

    affinity: InterPodAffinityState | None
    spread: SpreadState | None
    volumes: VolumeDemand | None
    devices: ClaimDemand | None  # DRA claims

    @property
    def unverifiable(self) -> Reason:
        """DRA claims that fail the pod on every node (missing objects, selectors not compiling)."""
        return self.devices.unresolvable if self.devices is not None else None


def any_anti_affinity(bound: Iterable[Pod]) -> bool:
    """Whether a live pod among `bound` has required anti-affinity: then pending pods it repels must be
    judged node by node, however plain they are themselves."""
    for pod in bound:  # noqa: SIM110 - a loop, not any() over a generator: every bound pod, with a backlog
        if pod.constraints.anti_affinity and not pod.is_terminal:
            return True
    return False


def _spread_key(pod: Pod, constraint: SpreadConstraint, keys: tuple[str, ...]) -> tuple[object, ...]:
    scheduling = pod.scheduling
    return (
        constraint,
        pod.namespace,
        keys,
        (scheduling.node_selector, scheduling.affinity_terms)
        if constraint.node_affinity_policy == "Honor"
        else None,
        scheduling.tolerations if constraint.node_taints_policy == "Honor" else None,
    )


def _affinity_holds(scheduling: Scheduling, node: SimNode) -> bool:
    """NodeAffinity holds on the node (a new node of a multi-zone group: in every zone, launch_affinity)."""
    if not node.launches:
        return scheduling.selects(node.labels)
    return all(launch_affinity(scheduling, labels, True) is None for labels in node.launches)


@dataclass
class _SpreadIndex:
    constraint: SpreadConstraint
    namespace: str
    keys: tuple[str, ...]
    scheduling: Scheduling
    counts: DomainCounts
    eligible: set[str]

    def admits(self, node: SimNode) -> bool:
        if any(key not in node.labels for key in self.keys):
            return False
        policy = self.constraint
        if policy.node_affinity_policy == "Honor" and not _affinity_holds(self.scheduling, node):
            return False
        return not (policy.node_taints_policy == "Honor" and self.scheduling.untolerated(node.taints))

    def matches(self, pod: Pod) -> bool:
        selector = self.constraint.selector
        return pod.namespace == self.namespace and selector is not None and selector.matches(pod.labels)


class Simulation:
    """Nodes and placed pods of one planning run, and the filters over them."""

    def __init__(
        self,
        pods_on_node: Mapping[str, Iterable[Pod]],
        namespaces: Mapping[str, Mapping[str, str]],
        volumes: Volumes,
        devices: DeviceWorld | None = None,
        shared: SharedBound | None = None,
    ) -> None:
        """`shared`: nodes whose bound pods another simulation indexed (`pods_on_node` then holds
        only the others): they must be in `nodes` before `prepare`."""
        self.nodes: dict[str, SimNode] = {}
        # DRA: the cluster's devices; those allocated to claims or taken by pods placed this run,
        # and the shared claims this run allocated, by node.
        self.devices = devices
        self._in_use: set[tuple[str, str, str]] | None = None
        self._claim_nodes: dict[str, str] = {}
        self._namespaces = namespaces
        self._volumes = volumes
        self._bound = pods_on_node
        self._shared = shared
        self._own = PodIndex()
        self._affinity: dict[tuple[PodAffinityTerm, ...], Counter[Pair]] = {}
        self._anti: dict[PodAffinityTerm, Counter[Pair]] = {}
        self._existing_anti: dict[PodAffinityTerm, Counter[Pair]] = {}
        self._spread: dict[tuple[object, ...], _SpreadIndex] = {}
        self._eligibility: dict[tuple[object, ...], tuple[_SpreadIndex, list[_SpreadIndex]]] = {}
        self._state_of: dict[int, PodState] = {}  # by id(pod): pods outlive the run
        # The same counters, found from a placed pod's labels (see SelectorIndex).
        self._affinity_by_labels: SelectorIndex[tuple[tuple[PodAffinityTerm, ...], Counter[Pair]]] = (
            SelectorIndex()
        )
        self._anti_by_labels: SelectorIndex[tuple[PodAffinityTerm, Counter[Pair]]] = SelectorIndex()
        self._existing_by_labels: SelectorIndex[tuple[PodAffinityTerm, Counter[Pair]]] = SelectorIndex()
        self._spread_by_labels: SelectorIndex[_SpreadIndex] = SelectorIndex()
        self._states: dict[tuple[object, ...], PodState] = {}
        self._watched: dict[tuple[object, ...], bool] = {}
        self._undo: list[Callable[[], None]] | None = None
        self.active = False  # any inter-pod index exists: placements must be recorded

    # ------------------------------------------------------------------------------ nodes, pods

    def add_node(self, node: SimNode) -> None:
        """A node the plan may count on (new nodes included, as the scheduler will see them)."""
        self.nodes[node.name] = node
        for first, indexes in self._eligibility.values():
            # Indexes sharing keys and policies share one eligible set: one test per node.
            if first.admits(node):
                first.eligible.add(node.name)
                for index in indexes:
                    value = node.labels[index.constraint.topology_key]
                    if value not in index.counts.counts:
                        index.counts.add_domain(value)
        if self._undo is not None:
            self._undo.append(lambda: self._remove_node(node))

    def _remove_node(self, node: SimNode) -> None:
        del self.nodes[node.name]
        for first, _ in self._eligibility.values():
            first.eligible.discard(node.name)  # its domain stays: counts are only ever lower bounds

    def prepare(self, pending: Iterable[Pod]) -> None:
        """Index bound pods and build the counts every constrained pending pod will read."""
        constrained = [p for p in pending if not p.constraints.is_plain]
        shared = self._shared.index() if self._shared is not None else None
        # Without constrained pending pods only a bound pod's anti-affinity needs the indexes: ask
        # that first (most runs have neither) before listing every bound pod.
        if (
            not constrained
            and not (shared is not None and shared.anti)
            and not any_anti_affinity(pod for pod, _ in self._bound_pods())
        ):
            return
        self.active = True
        for pod, name in self._bound_pods():
            if not pod.is_terminal:
                self._own.add(pod, name)
        for term, name in chain(shared.anti if shared is not None else (), self._own.anti):
            self._count(self._existing_counter(term), (term.topology_key,), name)
        specs = {(p.namespace, id(p.constraints), id(p.scheduling)): p for p in constrained}
        domains: dict[tuple[object, ...], set[str]] = {}
        for pod in specs.values():  # replicas share their spec: build each index once
            self._build(pod)
            self._build_spread(pod, domains)

    def _bound_pods(self) -> Iterator[tuple[Pod, str]]:
        """The pods bound to the nodes in the simulation, with their node's name."""
        for name, pods in self._bound.items():
            if name in self.nodes:
                for pod in pods:
                    yield pod, name

    def _count(self, counter: Counter[Pair], keys: Iterable[str], node_name: str) -> None:
        """Count a pod on its node's topology pairs; a node without the key counts nowhere, as in
        interpodaffinity's updateWithAffinityTerms."""
        labels = self.nodes[node_name].labels
        for key in keys:
            value = labels.get(key)
            if value is not None:
                counter[(key, value)] += 1

    def _candidates(self, selector: LabelSelector | None) -> Iterable[tuple[Pod, str]]:
        """The bound pods the selector may match, on the shared nodes and on this simulation's own."""
        if selector is None:
            return ()
        if self._shared is None:
            return self._own.candidates(selector)
        return chain(self._shared.index().candidates(selector), self._own.candidates(selector))

    def _existing_counter(self, term: PodAffinityTerm) -> Counter[Pair]:
        counter = self._existing_anti.get(term)
        if counter is None:
            counter = self._existing_anti[term] = Counter()
            self._existing_by_labels.add(term.selector, (term, counter))
        return counter

    def _selects(self, term: PodAffinityTerm, pod: Pod) -> bool:
        return term.selects(pod.namespace, pod.labels, self._namespaces.get(pod.namespace))

    def _build(self, pod: Pod) -> None:
        constraints = pod.constraints
        if constraints.affinity and constraints.affinity not in self._affinity:
            counts: Counter[Pair] = Counter()
            terms = constraints.affinity
            for other, name in self._candidates(terms[0].selector):
                if all(self._selects(t, other) for t in terms):
                    self._count(counts, (t.topology_key for t in terms), name)
            self._affinity[terms] = counts
            self._affinity_by_labels.add(terms[0].selector, (terms, counts))
        for term in constraints.anti_affinity:
            if term not in self._anti:
                counts = Counter()
                for other, name in self._candidates(term.selector):
                    if self._selects(term, other):
                        self._count(counts, (term.topology_key,), name)
                self._anti[term] = counts
                self._anti_by_labels.add(term.selector, (term, counts))

    def _build_spread(self, pod: Pod, domains: dict[tuple[object, ...], set[str]]) -> None:
        """The counts of the pod's hard spread constraints; `domains`: the domains of the eligible
        nodes per eligible set and key, listed once for every workload that shares them."""
        hard = pod.constraints.hard_spread
        keys = tuple(sorted({c.topology_key for c in hard}))
        for constraint in hard:
            key = _spread_key(pod, constraint, keys)
            if key in self._spread:
                continue
            index = _SpreadIndex(constraint, pod.namespace, keys, pod.scheduling, DomainCounts(), set())
            shared_key = key[2:]  # keys and the policies' parts: what eligibility depends on
            shared = self._eligibility.get(shared_key)
            if shared is None:
                index.eligible.update(name for name, node in self.nodes.items() if index.admits(node))
                shared = self._eligibility[shared_key] = (index, [])
            index.eligible = shared[0].eligible
            shared[1].append(index)
            topology_key = constraint.topology_key
            found = domains.get((shared_key, topology_key))
            if found is None:
                found = domains[(shared_key, topology_key)] = {
                    self.nodes[name].labels[topology_key] for name in index.eligible
                }
            index.counts.add_domains(found)
            for other, name in self._candidates(constraint.selector):
                if name in index.eligible and index.matches(other):
                    index.counts.increment(self.nodes[name].labels[constraint.topology_key])
            self._spread[key] = index
            self._spread_by_labels.add(constraint.selector, index)

    # ------------------------------------------------------------------------------ filters

    def state(self, pod: Pod) -> PodState:
        """PreFilter of the stateful filters for `pod` (cached per pod and per distinct pod spec)."""
        found = self._state_of.get(id(pod))
        if found is not None:
            return found
        key = (
            pod.namespace,
            id(pod.constraints),
            id(pod.scheduling),
            frozenset(pod.labels.items()),
            pod.resource_claim_statuses,  # DRA: each pod's own generated claims
        )
        found = self._states.get(key)
        if found is None:
            found = self._states[key] = self._prefilter(pod)
        self._state_of[id(pod)] = found
        return found

    def _prefilter(self, pod: Pod) -> PodState:
        constraints = pod.constraints
        existing = tuple(
            (term.topology_key, counts)
            for term, counts in self._existing_by_labels.candidates(pod.labels)
            if self._selects(term, pod)
        )
        affinity: InterPodAffinityState | None = None
        if constraints.affinity or constraints.anti_affinity or existing:
            affinity = InterPodAffinityState(
                affinity=constraints.affinity,
                affinity_counts=self._affinity.get(constraints.affinity, Counter()),
                matches_own_affinity=all(self._selects(t, pod) for t in constraints.affinity),
                anti_affinity=tuple((t.topology_key, self._anti[t]) for t in constraints.anti_affinity),
                existing_anti=existing,
            )
        spread: SpreadState | None = None
        hard = constraints.hard_spread
        if hard:
            keys = tuple(sorted({c.topology_key for c in hard}))
            spread = SpreadState(
                keys,
                tuple(
                    (
                        c,
                        self._spread[_spread_key(pod, c, keys)].counts,
                        1 if c.selector is not None and c.selector.matches(pod.labels) else 0,
                    )
                    for c in hard
                ),
            )
        volumes = (
            volume_demand(pod.namespace, constraints.claims, self._volumes) if constraints.claims else None
        )
        return PodState(affinity, spread, volumes, dynamic_resources(self.devices, pod))

    def is_plain(self, pod: Pod) -> bool:
        """No constraint of its own and no placed pod's anti-affinity about it: the fast path."""
        if not pod.constraints.is_plain:
            return False
        return not (self._existing_anti and self.state(pod).affinity is not None)

    def static(self, pod: Pod, state: PodState, node: SimNode) -> Reason:
        """Filters that depend on the node alone: they never change during the run."""
        return (
            state.unverifiable
            or node_static_reason(pod.scheduling, node)
            or (volume_binding(state.volumes, node.labels) if state.volumes is not None else None)
            or (self._devices_static(state.devices, node) if state.devices is not None else None)
        )

    def _devices_static(self, demand: ClaimDemand, node: SimNode) -> Reason:
        return demand.unresolvable if self.devices is None else self.devices.static(demand, node)

    def allocation(self, demand: ClaimDemand, node: SimNode) -> Allocation | str:
        """DynamicResources Filter: devices for the pod's claims on `node`, given this run's use."""
        if self.devices is None:
            return demand.unresolvable or ""
        if self._in_use is None:
            self._in_use = set(self.devices.allocated)
        return self.devices.allocate(demand, node, self._in_use, self._claim_nodes)

    def release(self, devices: Iterable[DeviceId]) -> None:
        """DRA: devices allocated to claims that count as free in this simulation (the at-max rule's
        world, where the pods holding them have finished)."""
        if self.devices is not None:
            self._in_use = set(self.devices.allocated).difference(devices)

    def dynamic(
        self, pod: Pod, state: PodState, node: SimNode, request: Request, dims: tuple[str, ...]
    ) -> Reason:
        """Filters whose answer changes as pods are placed: room, ports, inter-pod rules."""
        return (
            node_resources_fit(request, node.free, dims)
            or (node_ports(pod.constraints.host_ports, node.ports) if pod.constraints.host_ports else None)
            or (inter_pod_affinity(state.affinity, node.labels) if state.affinity is not None else None)
            or (pod_topology_spread(state.spread, node.labels) if state.spread is not None else None)
            or (self._devices_dynamic(state.devices, node) if state.devices is not None else None)
        )

    def _devices_dynamic(self, demand: ClaimDemand, node: SimNode) -> Reason:
        if not demand.claims:
            return None
        found = self.allocation(demand, node)
        return found if isinstance(found, str) else None

    # ------------------------------------------------------------------------------ placement

    def watched(self, pod: Pod) -> bool:
        """Whether placing the pod changes what a filter answers for another pod."""
        if not self.active:
            return False
        if not pod.constraints.is_plain:
            return True
        key = (pod.namespace, frozenset(pod.labels.items()))
        found = self._watched.get(key)
        if found is None:
            found = self._watched[key] = (
                any(
                    all(self._selects(t, pod) for t in terms)
                    for terms, _ in self._affinity_by_labels.candidates(pod.labels)
                )
                or any(self._selects(t, pod) for t, _ in self._anti_by_labels.candidates(pod.labels))
                or any(index.matches(pod) for index in self._spread_by_labels.candidates(pod.labels))
            )
        return found

    def record(self, pod: Pod, node: SimNode, request: Request | None = None) -> None:
        """The plan places `pod` on `node`: take its room (when `request` is given), ports and counts."""
        undo: list[Callable[[], None]] = []
        if request is not None:
            free = node.free
            for dim, amount in request:
                free[dim] -= amount
            undo.append(lambda: _give_back(free, request))
        for port in pod.constraints.host_ports:
            key = port_key(port)
            if key not in node.ports:
                node.ports.add(key)
                undo.append(lambda key=key: node.ports.discard(key))  # type: ignore[misc]
        demand = self.state(pod).devices if pod.constraints.resource_claims else None
        if demand is not None and demand.claims:
            self._take_devices(demand, node, undo)
        if self.active and self.watched(pod):
            for counter, by in self._count_updates(pod, node):
                for pair in by:
                    counter[pair] += 1
                undo.append(lambda counter=counter, by=by: _decrement(counter, by))  # type: ignore[misc]
            for index in self._spread_by_labels.candidates(pod.labels):
                if node.name in index.eligible and index.matches(pod):
                    value = node.labels[index.constraint.topology_key]
                    index.counts.increment(value)
                    undo.append(lambda index=index, value=value: index.counts.increment(value, -1))  # type: ignore[misc]
        if self._undo is not None:
            self._undo.extend(undo)

    def _take_devices(self, demand: ClaimDemand, node: SimNode, undo: list[Callable[[], None]]) -> None:
        """The devices the pod's claims take on `node`, and its shared claims now allocated there."""
        found = self.allocation(demand, node)
        if isinstance(found, str) or self._in_use is None:
            return  # placed against the filter's answer (a caller's bug): nothing to take
        in_use, claim_nodes = self._in_use, self._claim_nodes
        in_use.update(found.devices)
        for key in found.claims:
            claim_nodes[key] = node.name
        undo.append(lambda: in_use.difference_update(found.devices))
        undo.append(lambda: _forget(claim_nodes, found.claims))

    def _count_updates(self, pod: Pod, node: SimNode) -> list[tuple[Counter[Pair], list[Pair]]]:
        """The counters a placed pod counts in, with the topology pairs of its node."""
        labels = node.labels
        updates: list[tuple[Counter[Pair], list[Pair]]] = []
        for terms, counter in self._affinity_by_labels.candidates(pod.labels):
            if all(self._selects(t, pod) for t in terms):
                updates.append((counter, _pairs((t.topology_key for t in terms), labels)))
        for term, counter in self._anti_by_labels.candidates(pod.labels):
            if self._selects(term, pod):
                updates.append((counter, _pairs((term.topology_key,), labels)))
        for term in pod.constraints.anti_affinity:
            if term not in self._existing_anti:
                self._states.clear()  # a new existing anti-affinity term: prefilters must see it
                self._state_of.clear()
                self._watched.clear()
            updates.append((self._existing_counter(term), _pairs((term.topology_key,), labels)))
        return updates

    def checkpoint(self) -> None:
        """Start recording undo steps (a gang is placed all or nothing)."""
        self._undo = []

    def commit(self) -> None:
        self._undo = None

    def rollback(self) -> None:
        """Undo every placement and node since the checkpoint, newest first."""
        steps, self._undo = self._undo or [], None
        for step in reversed(steps):
            step()


def _pairs(keys: Iterable[str], labels: Mapping[str, str]) -> list[Pair]:
    return [(key, labels[key]) for key in keys if key in labels]


def _give_back(free: list[int], request: Request) -> None:
    for dim, amount in request:
        free[dim] += amount


def _forget(claim_nodes: dict[str, str], claims: tuple[str, ...]) -> None:
    for key in claims:
        del claim_nodes[key]


def _decrement(counter: Counter[Pair], pairs: list[Pair]) -> None:
    for pair in pairs:
        counter[pair] -= 1
