"""Indexes the planner builds once per run: groups with their shapes and limits, nodes by group,
pods by node, and the resource dimension order used by the packing vectors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from shared.config import NodeGroupConfig, ScalerConfig
from shared.domain.model import (
    TERMINAL_PHASES,
    AsgInstance,
    AsgState,
    GroupState,
    Node,
    Pod,
    Scheduling,
    Snapshot,
    Taint,
)
from shared.domain.resources import PODS, Resources
from shared.planner.capacity import GroupCapacity, group_capacity
from shared.planner.filters.dynamic_resources import DeviceWorld, device_world
from shared.planner.simulation import launch_reason
from shared.planner.template import Template, build_template
from shared.planner.zones import NO_ZONE_IDS, launch_labels, zone_ids_of


@dataclass
class GroupView:
    """One configured group joined with its ASG, shape and stored state for this run."""

    config: NodeGroupConfig
    asg: AsgState | None
    template: Template
    state: GroupState
    in_backoff: bool
    nodes: list[Node] = field(default_factory=list)  # registered nodes of the group's instances
    unregistered: list[AsgInstance] = field(default_factory=list)  # live instances with no node yet
    capacity: GroupCapacity = field(default_factory=GroupCapacity)  # suspended, reserved, zones
    zone_ids: Mapping[str, str] = field(default_factory=lambda: NO_ZONE_IDS)  # zone -> id, when known
    # Read off config and template once: every rule asks them of every group, often once per node.
    name: str = field(init=False)
    shape: Resources | None = field(init=False)  # allocatable of a new node (before its DaemonSets)
    _launch_labels: tuple[Mapping[str, str], ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.name = self.config.name
        self.shape = self.template.allocatable
        self._launch_labels = None

    @property
    def taints(self) -> tuple[Taint, ...]:
        """Taints a new node of the group carries."""
        return self.template.taints

    @property
    def labels(self) -> Mapping[str, str]:
        """Labels a new node of the group carries (its hostname aside)."""
        return self.template.labels

    @property
    def launch_labels(self) -> tuple[Mapping[str, str], ...]:
        """The labels a new node may carry: one mapping per zone of a multi-zone group (launch_labels)."""
        found = self._launch_labels
        if found is None:
            found = self._launch_labels = launch_labels(
                self.capacity.zones, self.template.labels, self.zone_ids
            )
        return found

    def admits(self, scheduling: Scheduling) -> bool:
        """Whether a new node of the group, in whichever zone it launches, admits `scheduling`
        (simulation.launch_reason)."""
        launches = self.launch_labels
        if len(launches) == 1:
            return scheduling.admits(launches[0], self.template.taints)
        return launch_reason(scheduling, launches, self.template.taints) is None

    @property
    def min_size(self) -> int:
        return self.asg.min_size if self.asg else 0

    @property
    def max_size(self) -> int:
        """The ASG's MaxSize, lowered by the config's max_size."""
        if self.asg is None:
            return 0
        if self.config.max_size is None:
            return self.asg.max_size
        return min(self.asg.max_size, self.config.max_size)

    @property
    def current_desired(self) -> int:
        return self.asg.desired if self.asg else 0

    @property
    def unavailable_reason(self) -> str | None:
        """Why the group cannot grow at all this run (None when it can)."""
        if self.asg is None:
            return f"Auto Scaling group {self.config.asg_name} not found"
        if self.shape is None:
            return f"node shape unknown ({self.template.source}; instance type {self.config.instance_type!r})"
        return None


@dataclass
class Context:
    config: ScalerConfig
    snapshot: Snapshot
    now: datetime
    groups: list[GroupView]
    group_of_node: dict[str, GroupView]
    pods_on_node: dict[str, list[Pod]]  # live pods only: terminal ones are left out
    busy_nodes: frozenset[str]  # nodes running a pod other than DaemonSet/mirror pods
    unbound: list[Pod]  # live pods bound to no node, in the snapshot's order (the backlog is among them)
    nodes_by_name: dict[str, Node] = field(default_factory=dict)  # every registered node
    _requests: dict[Resources, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    _vectors: dict[Resources, tuple[int, ...]] = field(default_factory=dict)
    # What the properties below build when first asked, kept for the run. Fields, not
    # functools.cached_property: compiled by mypyc (shared/local/native.py), a class keeps no
    # instance __dict__ and a cached_property becomes a plain property, built again at every read.
    # Not constructor arguments, so a `dataclasses.replace` starts them afresh; set in __post_init__
    # (mypyc gives an init=False field no default).
    _devices: tuple[DeviceWorld | None] | None = field(default=None, init=False, repr=False, compare=False)
    _dims: tuple[str, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _dim_index: dict[str, int] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._devices = None
        self._dims = None
        self._dim_index = None

    @property
    def devices(self) -> DeviceWorld | None:
        """DRA: the run's ResourceSlices, classes and claims. Built when first asked: only placing
        pending pods reads it, and most runs have none (it joins every registered node)."""
        if self._devices is None:
            self._devices = (self._device_world(),)
        return self._devices[0]

    def _device_world(self) -> DeviceWorld | None:
        return device_world(
            self.snapshot.dra,
            {
                view.name: (tuple((n.name, n.ready) for n in view.nodes), view.config.device_slices)
                for view in self.groups
            },
        )

    @property
    def dims(self) -> tuple[str, ...]:
        """The run's resource dimensions, sorted: every name a node, pod, group shape or template
        overhead has, and pods. Built when first asked (a run without pending pods never asks)."""
        if self._dims is None:
            self._dims = self._collect_dims()
        return self._dims

    def _collect_dims(self) -> tuple[str, ...]:
        snapshot = self.snapshot
        vectors = [n.allocatable for n in snapshot.nodes]
        vectors += [p.requests for p in snapshot.pods]
        vectors += [v.shape for v in self.groups if v.shape is not None]
        vectors += [v.template.overhead for v in self.groups]
        names = {PODS}
        # Pods and nodes share a handful of shapes, mostly next to each other: a vector read just
        # before is not read again.
        last = None
        for vector in vectors:
            if vector is not last:
                last = vector
                for name, _ in vector.items:
                    names.add(name)
        return tuple(sorted(names))

    @property
    def dim_index(self) -> dict[str, int]:
        if self._dim_index is None:
            self._dim_index = {name: i for i, name in enumerate(self.dims)}
        return self._dim_index

    def vector(self, resources: Resources) -> tuple[int, ...]:
        """Resources as a dense tuple in this run's dimension order (cached: shapes repeat)."""
        found = self._vectors.get(resources)
        if found is None:
            vec = [0] * len(self.dims)
            for name, value in resources.items:
                vec[self.dim_index[name]] = value
            found = self._vectors[resources] = tuple(vec)
        return found

    def request(self, resources: Resources) -> tuple[tuple[int, int], ...]:
        """Resources as non-zero (dimension, amount) pairs (cached: most pods share a few shapes)."""
        found = self._requests.get(resources)
        if found is None:
            # A list, not a generator, into the tuple: a generator resumes once per resource.
            index = self.dim_index
            found = tuple([(index[name], value) for name, value in resources.items if value])
            self._requests[resources] = found
        return found

    def room(self, allocatable: Resources, pods: Iterable[Pod]) -> list[int]:
        """Room left on a node once `pods` are in: its allocatable less their requests, as a fresh
        dense vector (every registered node of every run: the request pairs read off the cache)."""
        free = list(self.vector(allocatable))
        cached = self._requests
        for pod in pods:
            pairs = cached.get(pod.requests)
            for dim, amount in pairs if pairs is not None else self.request(pod.requests):
                free[dim] -= amount
        return free

    def older_than(self, since: datetime | None, seconds: int) -> bool:
        """True when `since` is known and at least `seconds` ago."""
        return since is not None and self.now - since >= timedelta(seconds=seconds)


# Sort keys read in C, no lambda frame per node (every group of every run sorts its nodes).
_NAME = attrgetter("name")
_INSTANCE_ID = attrgetter("instance_id")


def _group_view(
    snapshot: Snapshot,
    config: ScalerConfig,
    group_config: NodeGroupConfig,
    nodes_by_instance: Mapping[str, Node],
    now: datetime,
    zone_ids: Mapping[str, str],
) -> GroupView:
    """One configured group joined with its ASG, its registered nodes and its instances without one."""
    asg = snapshot.asgs.get(group_config.asg_name)
    state = snapshot.state.groups.get(group_config.name, GroupState())
    registered: list[Node] = []
    unregistered: list[AsgInstance] = []
    for instance in asg.live_instances if asg else ():
        node = nodes_by_instance.get(instance.instance_id)
        if node is None:
            unregistered.append(instance)
        else:
            registered.append(node)
    registered.sort(key=_NAME)
    unregistered.sort(key=_INSTANCE_ID)
    capacity = group_capacity(
        asg, snapshot.state.instances_first_seen, config.policy, now, group_config.instance_type
    )
    template = build_template(
        config, group_config.name, asg, registered, snapshot.instance_types, snapshot.daemonsets, zone_ids
    )
    return GroupView(
        config=group_config,
        asg=asg,
        template=template,
        state=state,
        # Launches that never came are a capacity failure, as a failed scaling activity is.
        in_backoff=(state.backoff_until is not None and state.backoff_until > now)
        or capacity.launches_overdue is not None,
        nodes=registered,
        unregistered=unregistered,
        capacity=capacity,
        zone_ids=zone_ids,
    )


def _zone_ids(
    snapshot: Snapshot, config: ScalerConfig, nodes_by_instance: Mapping[str, Node]
) -> Mapping[str, str]:
    """The id of each zone, as the registered nodes of the configured groups show it (zones.zone_ids_of):
    every group's ASG is read in the scaler's account, where a zone's name has one id. Only a group
    that spans several zones reads it: other runs skip the pass over the nodes."""
    asgs = [a for g in config.node_groups if (a := snapshot.asgs.get(g.asg_name)) is not None]
    if all(len(asg.availability_zones) < 2 for asg in asgs):
        return NO_ZONE_IDS
    nodes = (nodes_by_instance.get(i.instance_id) for asg in asgs for i in asg.live_instances)
    return zone_ids_of(node for node in nodes if node is not None)


def build_context(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Context:
    """Join config, ASGs, nodes and pods into the indexes the planning rules read."""
    nodes_by_instance: dict[str, Node] = {}
    nodes_by_name: dict[str, Node] = {}
    for node in snapshot.nodes:  # both indexes in one pass: every node of every run
        nodes_by_name[node.name] = node
        if node.instance_id:
            nodes_by_instance[node.instance_id] = node
    pods_on_node: dict[str, list[Pod]] = {}
    busy: set[str] = set()
    unbound: list[Pod] = []
    cutoff = config.policy.pod_priority_cutoff
    for pod in snapshot.pods:  # every pod of every run: its node's name read once, no defaultdict
        node_name = pod.node_name
        if pod.phase in TERMINAL_PHASES:  # Pod.is_terminal, without the call
            continue
        if not node_name:
            unbound.append(pod)  # most runs: none, and the backlog's pass reads these alone
        else:
            on_node = pods_on_node.get(node_name)
            if on_node is None:
                pods_on_node[node_name] = [pod]
            else:
                on_node.append(pod)
            if node_name not in busy and pod.keeps_node_busy(cutoff, now):  # one busy pod is enough
                busy.add(node_name)

    zone_ids = _zone_ids(snapshot, config, nodes_by_instance)
    groups = [
        _group_view(snapshot, config, group_config, nodes_by_instance, now, zone_ids)
        for group_config in config.node_groups
    ]
    group_of_node = {node.name: view for view in groups for node in view.nodes}

    return Context(
        config=config,
        snapshot=snapshot,
        now=now,
        groups=groups,
        group_of_node=group_of_node,
        pods_on_node=pods_on_node,
        busy_nodes=frozenset(busy),
        unbound=unbound,
        nodes_by_name=nodes_by_name,
    )
