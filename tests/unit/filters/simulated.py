"""A Simulation over given nodes and bound pods, prepared for the pending ones: what the stateful
filters' tests judge nodes with."""

from __future__ import annotations

from collections.abc import Mapping

from shared.domain.model import Pod
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.volume_binding import Volumes
from shared.planner.simulation import Simulation

DIMS = ("cpu", "memory", "nvidia.com/gpu", "pods")


def simulation(
    nodes: list[SimNode],
    bound: list[Pod],
    pending: list[Pod],
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Simulation:
    """The nodes with the bound pods on them, indexed for `pending`."""
    on_node: dict[str, list[Pod]] = {}
    for pod in bound:
        assert pod.node_name is not None
        on_node.setdefault(pod.node_name, []).append(pod)
    sim = Simulation(on_node, namespaces or {}, Volumes.of((), (), ()))
    for node in nodes:
        sim.add_node(node)
    sim.prepare(pending)
    return sim


def judge(sim: Simulation, pod: Pod) -> dict[str, Reason]:
    """Node name -> the dynamic filters' answer for `pod` (None: it fits)."""
    state = sim.state(pod)
    return {name: sim.dynamic(pod, state, node, (), DIMS) for name, node in sim.nodes.items()}
