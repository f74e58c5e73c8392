"""NodeResourcesFit: a pod's requests against a node's free room (plugins/noderesources/fit.go).
How requests are summed (sidecars, init containers, overhead) is tested with the parser."""

from __future__ import annotations

from typing import Any

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.framework import SimNode
from shared.planner.filters.node_resources_fit import Request, every_misfit, insufficient, node_resources_fit
from shared.planner.filters.volume_binding import Volumes
from shared.planner.simulation import Simulation

DIMS = ("cpu", "memory", "nvidia.com/gpu", "pods")
GI = 1024**3


def _pod(name: str = "p", requests: dict[str, str] | None = None) -> Pod:
    container: dict[str, Any] = {"name": "main", "image": "trainer:1"}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    return pod_from_json(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container]}}
    )


def _request(pod: Pod) -> Request:
    return tuple((DIMS.index(name), amount) for name, amount in pod.requests.items if name in DIMS)


def _free(cpu: int = 4000, memory: int = 16 * GI, gpus: int = 0, pods: int = 110) -> list[int]:
    return [cpu, memory, gpus, pods]


def test_pod_without_requests_fits_while_a_pod_slot_is_left() -> None:
    # Given a pod with no requests (it still takes one pod slot)
    pod = _pod()
    # When judged against a node with room and one with no room but a free slot
    roomy = node_resources_fit(_request(pod), _free(), DIMS)
    full = node_resources_fit(_request(pod), _free(cpu=0, memory=0, pods=1), DIMS)
    # Then it fits both
    assert (roomy, full) == (None, None)


def test_request_equal_to_free_room_fits() -> None:
    # Given a pod asking exactly what the node has left
    pod = _pod("p", {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"})
    # When judged
    reason = node_resources_fit(_request(pod), _free(gpus=1), DIMS)
    # Then it fits
    assert reason is None


def test_too_much_cpu_or_memory_is_insufficient() -> None:
    # Given pods asking more cpu, and more memory, than the node has left
    cpu_hungry = _pod("p", {"cpu": "5", "memory": "1Gi"})
    memory_hungry = _pod("p", {"cpu": "1", "memory": "17Gi"})
    # When judged
    reasons = [node_resources_fit(_request(p), _free(), DIMS) for p in (cpu_hungry, memory_hungry)]
    # Then the scheduler's words name the resource
    assert reasons == ["Insufficient cpu", "Insufficient memory"]


def test_extended_resource_is_insufficient_when_absent() -> None:
    # Given a GPU pod and a node without free GPUs
    pod = _pod("p", {"cpu": "1", "nvidia.com/gpu": "2"})
    # When judged
    reason = node_resources_fit(_request(pod), _free(gpus=1), DIMS)
    # Then the GPU is the reason
    assert reason == "Insufficient nvidia.com/gpu"


def test_no_pod_slot_left_is_too_many_pods() -> None:
    # Given a node whose pod slots are used up
    pod = _pod("p", {"cpu": "1"})
    # When judged
    reason = node_resources_fit(_request(pod), _free(pods=0), DIMS)
    # Then the scheduler's words for it
    assert reason == "Too many pods"


def test_insufficient_lists_every_short_resource_in_dimension_order() -> None:
    # Given a pod short on cpu and GPUs but not memory
    pod = _pod("p", {"cpu": "8", "memory": "1Gi", "nvidia.com/gpu": "4"})
    # When the short resources are listed
    names = insufficient(_request(pod), _free(gpus=2), DIMS)
    # Then both appear, in the run's order; the first is the filter's reason
    assert names == ("cpu", "nvidia.com/gpu")
    assert node_resources_fit(_request(pod), _free(gpus=2), DIMS) == "Insufficient cpu"


def test_recorded_placement_takes_room_and_rollback_gives_it_back() -> None:
    # Given a node with 8 GPUs and a pod asking 6
    node = SimNode("gpu-1", {}, (), _free(cpu=96000, memory=1100 * GI, gpus=8))
    sim = Simulation({}, {}, Volumes.of((), (), ()))
    sim.add_node(node)
    first, second = (
        _pod("a", {"cpu": "6", "nvidia.com/gpu": "6"}),
        _pod("b", {"cpu": "6", "nvidia.com/gpu": "6"}),
    )
    sim.prepare([first, second])
    sim.checkpoint()
    # When the first is recorded on the node
    sim.record(first, node, _request(first))
    # Then the second no longer fits there
    assert (
        sim.dynamic(second, sim.state(second), node, _request(second), DIMS) == "Insufficient nvidia.com/gpu"
    )
    # And when the placement is rolled back, it fits again
    sim.rollback()
    assert sim.dynamic(second, sim.state(second), node, _request(second), DIMS) is None
    assert node.free == _free(cpu=96000, memory=1100 * GI, gpus=8)


def test_explaining_a_pod_lists_every_resource_that_does_not_fit_in_the_plugins_order() -> None:
    # Given a pod over the node's free GPUs, CPU and memory
    pod = _pod("big", {"nvidia.com/gpu": "8", "cpu": "200", "memory": "2000Gi"})
    # When every misfit is asked (what `plan --explain` shows), Then each is named, in fit.go's
    # order (pods, cpu, memory, ephemeral-storage, then extended resources), as its Status joins them
    assert every_misfit(_request(pod), _free(gpus=2), DIMS) == (
        "Insufficient cpu, Insufficient memory, Insufficient nvidia.com/gpu"
    )
    # And a pod that fits has none
    assert every_misfit(_request(_pod("small", {"nvidia.com/gpu": "1"})), _free(gpus=2), DIMS) is None
