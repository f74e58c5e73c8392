"""DynamicResources: a pod with spec.resourceClaims (DRA) needs devices the planner cannot see, so it
is never placed by the planner and says why."""

from __future__ import annotations

from typing import Any

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.dynamic_resources import dynamic_resources
from shared.planner.filters.framework import SimNode
from shared.planner.filters.volume_binding import Volumes
from shared.planner.simulation import Simulation


def _pod(resource_claims: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "trainer:1"}]}
    if resource_claims is not None:
        spec["resourceClaims"] = resource_claims
        spec["containers"][0]["resources"] = {"claims": [{"name": c["name"]} for c in resource_claims]}
    return pod_from_json({"metadata": {"name": "trainer", "namespace": "default"}, "spec": spec})


def test_pod_without_resource_claims_passes() -> None:
    # Given a plain pod
    pod = _pod()
    # When the filter judges it
    # Then it passes
    assert dynamic_resources(pod.constraints) is None


def test_pod_with_resource_claims_is_left_to_the_scheduler() -> None:
    # Given a pod with two DRA claims, one from a template
    pod = _pod(
        [
            {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
            {"name": "nic", "resourceClaimName": "shared-nic"},
        ]
    )
    # When the filter judges it
    reason = dynamic_resources(pod.constraints)
    # Then it names the claims and says the planner cannot verify them
    assert reason == (
        "uses DRA resource claims (gpu, nic): the planner cannot verify devices, left to the scheduler"
    )
    assert not pod.constraints.is_plain


def test_dra_pod_fits_no_node_of_the_simulation() -> None:
    # Given a simulation with an empty GPU node and a DRA pod
    node = SimNode("gpu-1", {}, (), [96000, 0, 8, 110])
    sim = Simulation({}, {}, Volumes.of((), (), ()))
    sim.add_node(node)
    pod = _pod([{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}])
    sim.prepare([pod])
    # When the static filters judge the node
    reason = sim.static(pod, sim.state(pod), node)
    # Then the DRA reason keeps it off, before any other filter
    assert reason is not None and reason.startswith("uses DRA resource claims (gpu)")
