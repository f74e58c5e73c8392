"""Why a pod goes where it goes: every filter's verdict for one pod on each group's template node,
and the facts a group was chosen or skipped on (tier, price per GPU, max size, backoff).

Read-only over the planner: the same context, templates, simulation and filters `plan()` uses, run
one filter at a time so each verdict is shown rather than only the first refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.config import ScalerConfig
from shared.domain.constraints import ZONE
from shared.domain.errors import InputError
from shared.domain.model import Node, Pod, Scheduling, Snapshot
from shared.domain.plan import PodOutcome
from shared.planner.context import Context, GroupView, build_context
from shared.planner.diagnosis import zone_refusal
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.inter_pod_affinity import inter_pod_affinity
from shared.planner.filters.node_affinity import node_affinity
from shared.planner.filters.node_ports import node_ports, port_key
from shared.planner.filters.node_resources_fit import every_misfit
from shared.planner.filters.node_unschedulable import node_unschedulable
from shared.planner.filters.pod_topology_spread import pod_topology_spread
from shared.planner.filters.taint_toleration import taint_toleration
from shared.planner.filters.volume_binding import Volumes, volume_binding
from shared.planner.placement import template_node
from shared.planner.plan import plan
from shared.planner.simulation import PodState, Simulation

# In kube-scheduler's order (its default Filter plugins, apis/config/v1/default_plugins.go), with the
# names of our modules.
FILTERS = (
    "node_unschedulable",
    "taint_toleration",
    "node_affinity",
    "node_resources_fit",
    "node_ports",
    "inter_pod_affinity",
    "pod_topology_spread",
    "volume_binding",
    "dynamic_resources",
)


@dataclass(frozen=True)
class GroupSummary:
    """What a group is chosen or skipped on: priority tier first, then price per GPU, within max size."""

    name: str
    priority: int
    price_per_hour: float | None
    gpus: int  # GPUs of a new node (the template's allocatable)
    max_size: int
    backoff_until: datetime | None  # set only while the group is in capacity backoff
    unavailable: str | None  # why the group cannot grow at all this run
    zones: tuple[str, ...] = ()  # where it launches (one: it can take zone-bound pods)

    @property
    def price_per_gpu(self) -> float | None:
        """price_per_hour / GPUs of the template (None when either is unknown)."""
        if self.price_per_hour is None or not self.gpus:
            return None
        return self.price_per_hour / self.gpus


@dataclass(frozen=True)
class Verdict:
    filter: str
    reason: Reason  # None: the node passes


@dataclass(frozen=True)
class GroupVerdicts:
    """Every filter's verdict for the pod on one group's template node."""

    summary: GroupSummary
    node: str | None  # the template node judged (None: the group's shape is unknown)
    verdicts: tuple[Verdict, ...]

    @property
    def fits(self) -> bool:
        return self.node is not None and all(v.reason is None for v in self.verdicts)


@dataclass(frozen=True)
class PodExplanation:
    pod: str
    outcome: PodOutcome | None  # None: the pod is not pending (bound or finished)
    node_name: str | None
    groups: tuple[GroupVerdicts, ...]


def _summary(view: GroupView) -> GroupSummary:
    shape = view.shape
    return GroupSummary(
        name=view.name,
        priority=view.config.priority,
        price_per_hour=view.config.price_per_hour,
        gpus=shape.gpus if shape is not None else 0,
        max_size=view.max_size,
        backoff_until=view.state.backoff_until if view.in_backoff else None,
        unavailable=view.unavailable_reason or view.capacity.growth_blocked,
        zones=view.capacity.zones,
    )


def group_summaries(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> tuple[GroupSummary, ...]:
    """One summary per configured group, in config order."""
    return tuple(_summary(view) for view in build_context(snapshot, config, now).groups)


def _registered_node(ctx: Context, node: Node) -> SimNode:
    name = node.name
    free = list(ctx.vector(node.allocatable))
    bound = [p for p in ctx.pods_on_node.get(name, ()) if not p.is_terminal]
    for pod in bound:
        for dim, amount in ctx.request(pod.requests):
            free[dim] -= amount
    ports = {port_key(port) for pod in bound for port in pod.constraints.host_ports}
    return SimNode(node.name, node.labels, node.taints, free, node.unschedulable, ports)


def _template_free(ctx: Context, view: GroupView) -> list[int] | None:
    if view.shape is None:
        return None
    free = list(ctx.vector(view.shape))
    for dim, amount in ctx.request(view.template.overhead):
        free[dim] -= amount
    return free


def _dynamic_resources(sim: Simulation, state: PodState, node: SimNode) -> Reason:
    """The DynamicResources verdict in the plugin's words: the claims resolve and their devices
    can be allocated on the node (which request and selector failed, if not)."""
    demand = state.devices
    if demand is None:
        return None
    if sim.devices is None:
        return demand.unresolvable
    found = sim.devices.static(demand, node) or sim.allocation(demand, node)
    return found if isinstance(found, str) else None


def _launch_affinity(scheduling: Scheduling, node: SimNode) -> Reason:
    """NodeAffinity on a new node of a group, in every zone it may launch in (SimNode.launches): the
    first zone that fails, named when the group spans several."""
    for variant in node.launches:
        reason = node_affinity(scheduling, variant)
        if reason:
            return f"{reason} (in {variant[ZONE]})"
    return node_affinity(scheduling, node.labels) if not node.launches else None


def _verdicts(ctx: Context, sim: Simulation, pod: Pod, state: PodState, node: SimNode) -> tuple[Verdict, ...]:
    scheduling = pod.scheduling
    reasons: dict[str, Reason] = {
        "node_unschedulable": node_unschedulable(scheduling, node.unschedulable),
        "node_affinity": _launch_affinity(scheduling, node),
        "taint_toleration": taint_toleration(scheduling, node.taints),
        "node_resources_fit": every_misfit(ctx.request(pod.requests), node.free, ctx.dims),
        "node_ports": node_ports(pod.constraints.host_ports, node.ports),
        "inter_pod_affinity": (
            inter_pod_affinity(state.affinity, node.labels) if state.affinity is not None else None
        ),
        "pod_topology_spread": (
            pod_topology_spread(state.spread, node.labels) if state.spread is not None else None
        ),
        "volume_binding": volume_binding(state.volumes, node.labels) if state.volumes is not None else None,
        "dynamic_resources": _dynamic_resources(sim, state, node),
    }
    return tuple(Verdict(name, reasons[name]) for name in FILTERS)


def _zone_verdict(view: GroupView, pod: Pod, sim: Simulation) -> tuple[Verdict, ...]:
    """Why a group that may launch in several zones does not take the pod though some zone would
    (diagnosis.zone_refusal, the plan's own rule): not a scheduler filter, so shown only when it is
    what keeps the group from taking the pod."""
    found = zone_refusal(view, (pod,), sim)
    if found is None:
        return ()
    reason, said = found
    return (Verdict("zone_guarantee", f"{reason} ({said})" if said else reason),)


def explain_pod(snapshot: Snapshot, config: ScalerConfig, now: datetime, pod_key: str) -> PodExplanation:
    """Each filter's verdict for the pod `namespace/name` on every group's template node, and its
    outcome in `plan()`. Pure; InputError when the snapshot has no such pod."""
    pod = next((p for p in snapshot.pods if p.key == pod_key), None)
    if pod is None:
        raise InputError(f"--explain: no pod {pod_key!r} in the input (expected namespace/name)")
    ctx = build_context(snapshot, config, now)
    sim = Simulation(
        ctx.pods_on_node,
        snapshot.namespaces,
        Volumes.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes),
        ctx.devices,
    )
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        sim.add_node(_registered_node(ctx, node))
    templates: dict[str, SimNode] = {}
    for view in ctx.groups:
        free = _template_free(ctx, view)
        if free is not None:
            templates[view.name] = template_node(view, 0, free)
            sim.add_node(templates[view.name])
    sim.prepare([pod])
    state = sim.state(pod)
    groups = []
    for view in ctx.groups:
        template = templates.get(view.name)
        verdicts = _verdicts(ctx, sim, pod, state, template) if template is not None else ()
        if template is not None:
            verdicts += _zone_verdict(view, pod, sim)
        name = template.name if template is not None else None
        groups.append(GroupVerdicts(_summary(view), name, verdicts))
    outcome = next((p for p in plan(snapshot, config, now).pods if p.pod == pod_key), None)
    return PodExplanation(pod_key, outcome, pod.node_name, tuple(groups))
