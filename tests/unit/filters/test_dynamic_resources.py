"""DynamicResources with structured parameters: the situations of kube-scheduler's table tests
(kubernetes/kubernetes pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go)
and of the allocator's (staging/src/k8s.io/dynamic-resource-allocation/structured/internal/
allocatortesting/allocator_testing.go: "simple", "all-devices", "already-allocated-devices",
"with-constraint", "prioritized-list", "admin-access", "invalid-CEL-*", "duplicate-slice"), in
resource.k8s.io/v1 JSON through the real parsers and the run's Simulation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.domain.dra import DraObjects
from shared.domain.model import Pod
from shared.formats.dra import (
    device_class_from_json,
    resource_claim_from_json,
    resource_claim_template_from_json,
    resource_slice_from_json,
    slice_spec_from_json,
)
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.dynamic_resources import CANNOT_ALLOCATE, NOT_AVAILABLE, device_world
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.volume_binding import Volumes
from shared.planner.simulation import Simulation
from tests.builders_dra import (
    CLASS,
    DRIVER,
    by_name,
    claim_spec,
    claim_template,
    device_class,
    dra_pod,
    exactly,
    first_available,
    from_template,
    gpu_device,
    gpu_slice,
    request,
    resource_claim,
    resource_slice,
    slice_spec,
)

HOST = "kubernetes.io/hostname"


def _world(objects: list[dict[str, Any]], groups: dict[str, Any] | None = None) -> DraObjects:
    parsers = {
        "ResourceSlice": resource_slice_from_json,
        "DeviceClass": device_class_from_json,
        "ResourceClaim": resource_claim_from_json,
        "ResourceClaimTemplate": resource_claim_template_from_json,
    }
    found: dict[str, list[Any]] = {kind: [] for kind in parsers}
    for obj in objects:
        found[obj["kind"]].append(parsers[obj["kind"]](obj))
    return DraObjects(
        tuple(found["ResourceSlice"]),
        tuple(found["DeviceClass"]),
        tuple(found["ResourceClaim"]),
        tuple(found["ResourceClaimTemplate"]),
    )


def _sim(objects: list[dict[str, Any]], nodes: list[str], groups: dict[str, Any] | None = None) -> Simulation:
    world = device_world(_world(objects), groups or {})
    sim = Simulation({}, {}, Volumes.of((), (), ()), world)
    for name in nodes:
        sim.add_node(SimNode(name, {HOST: name}, (), [100_000], False))
    return sim


def _template_node(sim: Simulation, group: str, index: int = 0) -> SimNode:
    name = f"template-{group}-{index}"
    node = SimNode(name, {HOST: name}, (), [100_000], False, group=group)
    sim.add_node(node)
    return node


def _verdict(sim: Simulation, pod: Pod, node: SimNode) -> Reason:
    state = sim.state(pod)
    return sim.static(pod, state, node) or sim.dynamic(pod, state, node, (), ())


def _place(sim: Simulation, pod: Pod, node: SimNode) -> None:
    assert _verdict(sim, pod, node) is None
    sim.record(pod, node)


def _pod(name: str, claims: list[dict[str, Any]], **kwargs: Any) -> Pod:
    return pod_from_json(dra_pod(name, claims, **kwargs))


BASE = [device_class(), claim_template()]


def test_fixtures_are_valid_resource_k8s_io_v1_objects() -> None:
    # Given the fixtures the DRA tests use
    kubernetes = pytest.importorskip("kubernetes.client")
    client = kubernetes.ApiClient()
    spec = claim_spec(request(), constraints=({"matchAttribute": "resource.kubernetes.io/pcieRoot"},))
    objects = {
        "V1ResourceSlice": gpu_slice("node-a", 2, pcie_root="pci0"),
        "V1DeviceClass": device_class(),
        "V1ResourceClaimTemplate": claim_template(spec=spec),
        "ResourceV1ResourceClaim": resource_claim("shared", allocated_on="node-a", devices=("gpu-0",)),
    }
    for model, obj in objects.items():
        # When the kubernetes client's models read them
        parsed = client._ApiClient__deserialize(json.loads(json.dumps(obj)), model)  # type: ignore[attr-defined]
        # Then they are what the API serves (required fields present, types right)
        assert parsed.to_dict()["metadata"]["name"] == obj["metadata"]["name"]


def test_a_claim_from_a_template_takes_one_free_device() -> None:
    # Given a node with one GPU (allocator "simple")
    sim = _sim([*BASE, gpu_slice("node-a", 1)], ["node-a"])
    first, second = _pod("a", [from_template()]), _pod("b", [from_template()])
    node = sim.nodes["node-a"]
    # When the first pod is placed
    _place(sim, first, node)
    # Then the device is taken: the second pod cannot be allocated there
    reason = _verdict(sim, second, node)
    assert reason is not None and reason.startswith(CANNOT_ALLOCATE)
    assert "0 free device(s) match" in reason


def test_devices_allocated_to_claims_are_not_free() -> None:
    # Given a node with two GPUs, gpu-0 allocated to a running pod's claim
    objects = [
        *BASE,
        gpu_slice("node-a", 2),
        resource_claim("running", allocated_on="node-a", devices=("gpu-0",)),
    ]
    sim = _sim(objects, ["node-a"])
    node = sim.nodes["node-a"]
    # When two pods each want one GPU
    _place(sim, _pod("a", [from_template()]), node)
    # Then only one fits
    assert (_verdict(sim, _pod("b", [from_template()]), node) or "").startswith(CANNOT_ALLOCATE)


def test_a_device_allocated_with_admin_access_stays_free_for_workloads() -> None:
    # Given a node with one GPU, allocated to a monitoring claim with adminAccess (as a DCGM exporter's
    # claim is on every GPU node)
    monitoring = resource_claim("dcgm", allocated_on="node-a", devices=("gpu-0",))
    monitoring["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    sim = _sim([*BASE, gpu_slice("node-a", 1), monitoring], ["node-a"])
    # Then a pod wanting one GPU still fits: an admin-access result is not an allocated device
    # (kube-scheduler's dynamicresources foreachAllocatedDevice skips it)
    assert _verdict(sim, _pod("a", [from_template()]), sim.nodes["node-a"]) is None


def test_a_claim_the_controller_found_unnecessary_is_skipped() -> None:
    # Given a pod whose status lists its template claim with no resourceClaimName (generating one
    # was not needed), on a node with no free device
    objects = [
        *BASE,
        gpu_slice("node-a", 1),
        resource_claim("running", allocated_on="node-a", devices=("gpu-0",)),
    ]
    sim = _sim(objects, ["node-a"])
    raw = dra_pod("a", [from_template()])
    raw["status"]["resourceClaimStatuses"] = [{"name": "gpu"}]
    pod = pod_from_json(raw)
    # Then the claim demands nothing (k8s.io/dynamic-resource-allocation resourceclaim.Name: nil)
    assert _verdict(sim, pod, sim.nodes["node-a"]) is None


def test_an_allocated_claim_pins_its_pod_to_its_node() -> None:
    # Given a claim allocated on node-a (status.allocation.nodeSelector)
    objects = [*BASE, gpu_slice("node-a", 1), gpu_slice("node-b", 1)]
    objects.append(resource_claim("pinned", allocated_on="node-a", devices=("gpu-0",)))
    sim = _sim(objects, ["node-a", "node-b"])
    pod = _pod("a", [by_name("pinned")])
    # Then the pod fits node-a (its device is its own already) and no other node
    assert _verdict(sim, pod, sim.nodes["node-a"]) is None
    assert _verdict(sim, pod, sim.nodes["node-b"]) == NOT_AVAILABLE


def test_a_shared_claim_is_allocated_once_for_all_its_pods() -> None:
    # Given one claim by name, shared by two pods, and nodes with one GPU each
    objects = [*BASE, gpu_slice("node-a", 1), gpu_slice("node-b", 1), resource_claim("shared")]
    sim = _sim(objects, ["node-a", "node-b"])
    first, second = _pod("a", [by_name("shared")]), _pod("b", [by_name("shared")])
    # When the first pod is placed on node-a
    _place(sim, first, sim.nodes["node-a"])
    # Then the second goes where the claim is, taking no further device, and nowhere else
    assert _verdict(sim, second, sim.nodes["node-a"]) is None
    assert _verdict(sim, second, sim.nodes["node-b"]) == NOT_AVAILABLE


def test_generated_claims_are_read_from_the_pods_status() -> None:
    # Given a pod whose template-generated claim exists and is allocated on node-a
    objects = [*BASE, gpu_slice("node-a", 1), gpu_slice("node-b", 1)]
    objects.append(resource_claim("a-gpu-x7k2p", allocated_on="node-a", devices=("gpu-0",)))
    sim = _sim(objects, ["node-a", "node-b"])
    pod = _pod("a", [from_template()], statuses={"gpu": "a-gpu-x7k2p"})
    # Then it is pinned to node-a
    assert _verdict(sim, pod, sim.nodes["node-b"]) == NOT_AVAILABLE
    assert _verdict(sim, pod, sim.nodes["node-a"]) is None


@pytest.mark.parametrize(
    ("count", "mode", "fits"),
    [(2, "ExactCount", True), (3, "ExactCount", False), (0, "All", True)],
)
def test_count_and_allocation_mode_all(count: int, mode: str, fits: bool) -> None:
    # Given a node with two GPUs and a template asking for `count` of them, or all
    template = claim_template("gpus", claim_spec(request(count=count, mode=mode)))
    sim = _sim([device_class(), template, gpu_slice("node-a", 2)], ["node-a"])
    pod = _pod("a", [from_template(template="gpus")])
    # Then it fits exactly when the node has them free
    assert (_verdict(sim, pod, sim.nodes["node-a"]) is None) is fits


def test_allocation_mode_all_needs_every_matching_device_free() -> None:
    # Given a node with two GPUs, one allocated ("all-devices-some-allocated")
    template = claim_template("all", claim_spec(request(mode="All")))
    objects = [device_class(), template, gpu_slice("node-a", 2)]
    objects.append(resource_claim("running", allocated_on="node-a", devices=("gpu-1",)))
    sim = _sim(objects, ["node-a"])
    # Then a request for all of them cannot be allocated
    reason = _verdict(sim, _pod("a", [from_template(template="all")]), sim.nodes["node-a"])
    assert reason is not None and "allocationMode All" in reason


def test_first_available_takes_the_first_alternative_that_fits() -> None:
    # Given one 80Gi GPU in use and one 40Gi GPU free, and a request preferring 80Gi
    big = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    small = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('39Gi'))"
    spec = claim_spec(
        first_available("gpu", ("large", exactly(selectors=(big,))), ("small", exactly(selectors=(small,))))
    )
    devices = [gpu_device(0, memory="80Gi"), gpu_device(1, memory="40Gi")]
    objects = [device_class(), claim_template("pref", spec), resource_slice("node-a", devices)]
    objects.append(resource_claim("running", allocated_on="node-a", devices=("gpu-0",)))
    sim = _sim(objects, ["node-a"])
    node = sim.nodes["node-a"]
    # When a pod is placed, then the 40Gi GPU serves it; a second finds none left
    _place(sim, _pod("a", [from_template(template="pref")]), node)
    assert (_verdict(sim, _pod("b", [from_template(template="pref")]), node) or "").startswith(
        CANNOT_ALLOCATE
    )


def test_match_attribute_keeps_devices_on_one_pcie_root() -> None:
    # Given two GPUs per PCIe root ("with-constraint") and a claim for two on one root
    devices = [gpu_device(i, pcie_root=f"pci{i // 2}") for i in range(4)]
    spec = claim_spec(
        request(count=2),
        constraints=({"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},),
    )
    objects = [device_class(), claim_template("pair", spec), resource_slice("node-a", devices)]
    objects.append(resource_claim("running", allocated_on="node-a", devices=("gpu-1",)))
    sim = _sim(objects, ["node-a"])
    node = sim.nodes["node-a"]
    # When a pod is placed: gpu-0 alone is left on pci0, so the pair is gpu-2 and gpu-3
    _place(sim, _pod("a", [from_template(template="pair")]), node)
    # Then no second pair exists (gpu-0 has no partner on its root)
    reason = _verdict(sim, _pod("b", [from_template(template="pair")]), node)
    assert reason is not None and reason.startswith(CANNOT_ALLOCATE)


def test_match_attribute_fails_for_devices_without_the_attribute() -> None:
    spec = claim_spec(request(count=2), constraints=({"matchAttribute": "resource.kubernetes.io/pcieRoot"},))
    sim = _sim([device_class(), claim_template("pair", spec), gpu_slice("node-a", 2)], ["node-a"])
    reason = _verdict(sim, _pod("a", [from_template(template="pair")]), sim.nodes["node-a"])
    assert reason is not None and 'no device with attribute "resource.kubernetes.io/pcieRoot"' in reason


def test_admin_access_takes_no_device() -> None:
    # Given a node whose only GPU is allocated, and a monitoring claim with adminAccess
    template = claim_template("monitor", claim_spec(request(admin=True)))
    objects = [device_class(), template, gpu_slice("node-a", 1)]
    objects.append(resource_claim("running", allocated_on="node-a", devices=("gpu-0",)))
    sim = _sim(objects, ["node-a"])
    node = sim.nodes["node-a"]
    # Then admin pods fit, and placing one leaves the device as it was
    _place(sim, _pod("a", [from_template(template="monitor")]), node)
    assert _verdict(sim, _pod("b", [from_template(template="monitor")]), node) is None


def test_semver_and_quantity_selectors_of_a_device_class() -> None:
    # Given a class selecting GPUs with a recent driver and at least 40Gi
    expression = (
        f"device.driver == '{DRIVER}' && "
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0')) && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    )
    objects = [device_class(expression=expression), claim_template()]
    objects += [gpu_slice("old", 1, driver_version="535.104.5"), gpu_slice("new", 1)]
    sim = _sim(objects, ["old", "new"])
    pod = _pod("a", [from_template()])
    # Then only the node with the newer driver fits
    assert _verdict(sim, pod, sim.nodes["new"]) is None
    reason = _verdict(sim, pod, sim.nodes["old"]) or ""
    # And the other's reason names the request and the selector no device passes, in the plugin's words
    assert reason.startswith(CANNOT_ALLOCATE)
    assert f'request "gpu": no free device passes deviceclass "{CLASS}" selector {expression!r}' in reason


def test_a_selector_that_does_not_compile_names_the_expression_and_the_class() -> None:
    sim = _sim(
        [device_class(expression="device.driver =="), claim_template(), gpu_slice("node-a", 1)], ["node-a"]
    )
    pod = _pod("a", [from_template()])
    reason = sim.state(pod).unverifiable
    assert reason is not None
    assert 'resourceclaimtemplate "ml/one-gpu" request "gpu"' in reason
    assert f"deviceclass \"{CLASS}\" selector 'device.driver =='" in reason and "CEL compile error" in reason


def test_a_selector_failing_at_run_time_names_the_expression_and_the_device() -> None:
    template = claim_template(
        "odd", claim_spec(request(selectors=("device.attributes['gpu.nvidia.com'].missing == 1",)))
    )
    sim = _sim([device_class(), template, gpu_slice("node-a", 1)], ["node-a"])
    reason = _verdict(sim, _pod("a", [from_template(template="odd")]), sim.nodes["node-a"])
    assert reason is not None and reason.startswith(CANNOT_ALLOCATE)
    assert "device.attributes['gpu.nvidia.com'].missing == 1" in reason
    assert f'device "{DRIVER}/node-a/gpu-0"' in reason and "CEL runtime error" in reason


@pytest.mark.parametrize(
    ("objects", "claims", "expected"),
    [
        ([claim_template()], [from_template()], f'deviceclass "{CLASS}" not found'),
        ([device_class()], [from_template()], 'resourceclaimtemplate "ml/one-gpu" not found'),
        ([device_class()], [by_name("gone")], 'resourceclaim "ml/gone" not found'),
    ],
)
def test_missing_objects_fail_the_pod_with_a_reason_naming_them(
    objects: list[dict[str, Any]], claims: list[dict[str, Any]], expected: str
) -> None:
    sim = _sim([*objects, gpu_slice("node-a", 1)], ["node-a"])
    reason = _verdict(sim, _pod("a", claims), sim.nodes["node-a"])
    assert reason is not None and expected in reason


def test_a_slice_with_duplicate_device_names_is_not_used() -> None:
    # Given a slice naming gpu-0 twice ("duplicate-slice": the pool is invalid)
    broken = resource_slice("node-a", [gpu_device(0), gpu_device(0)])
    sim = _sim([*BASE, broken], ["node-a"])
    reason = _verdict(sim, _pod("a", [from_template()]), sim.nodes["node-a"])
    assert reason is not None and 'duplicate device name "gpu-0"' in reason


def test_template_nodes_get_the_slices_of_a_registered_node_of_their_group() -> None:
    # Given a group whose registered node publishes one GPU
    groups = {"a100": ((("node-a", True),), ())}
    sim = _sim([*BASE, gpu_slice("node-a", 1)], ["node-a"], groups)
    first, second = _template_node(sim, "a100", 0), _template_node(sim, "a100", 1)
    pods = [_pod(f"p{i}", [from_template()]) for i in range(3)]
    # When two pods go to the two new nodes
    _place(sim, pods[0], first)
    _place(sim, pods[1], second)
    # Then each new node had its own device, now taken
    assert (_verdict(sim, pods[2], first) or "").startswith(CANNOT_ALLOCATE)


def test_template_nodes_at_zero_get_the_configured_slices() -> None:
    config_slices = (slice_spec_from_json(slice_spec([gpu_device(i) for i in range(2)], pool="gpus"), "cfg"),)
    sim = _sim(list(BASE), [], {"a100": ((), config_slices)})
    node = _template_node(sim, "a100")
    _place(sim, _pod("a", [from_template()]), node)
    _place(sim, _pod("b", [from_template()]), node)
    assert (_verdict(sim, _pod("c", [from_template()]), node) or "").startswith(CANNOT_ALLOCATE)


def test_a_group_without_known_devices_is_no_candidate_and_says_how_to_fix_it() -> None:
    sim = _sim(list(BASE), [], {"a100": ((), ())})
    reason = _verdict(sim, _pod("a", [from_template()]), _template_node(sim, "a100"))
    assert reason is not None and "node_groups[].resource_slices" in reason and "a100" in reason


def test_pods_without_claims_are_not_judged_by_the_filter() -> None:
    sim = _sim(list(BASE), ["node-a"])
    pod = pod_from_json(
        {"metadata": {"name": "plain", "namespace": "ml"}, "spec": {"containers": [{"name": "c"}]}}
    )
    assert sim.state(pod).devices is None
    assert _verdict(sim, pod, sim.nodes["node-a"]) is None


def test_without_the_dra_objects_claims_stay_unverifiable() -> None:
    # Given a simulation that was given no DRA world (conservative: never counted)
    sim = Simulation({}, {}, Volumes.of((), (), ()))
    pod = _pod("a", [from_template()])
    assert "cannot verify devices" in (sim.state(pod).unverifiable or "")


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    # Given a driver republishing node-a's pool: generation 1 had one GPU, generation 2 has two
    old = gpu_slice("node-a", 1)
    new = gpu_slice("node-a", 2)
    new["metadata"]["name"] = "node-a-gpu.nvidia.com-fghij"
    new["spec"]["pool"]["generation"] = 2
    sim = _sim([*BASE, old, new], ["node-a"])
    node = sim.nodes["node-a"]
    # Then gpu-0 is not a duplicate, and the pool has two devices
    _place(sim, _pod("a", [from_template()]), node)
    _place(sim, _pod("b", [from_template()]), node)
    assert (_verdict(sim, _pod("c", [from_template()]), node) or "").startswith(CANNOT_ALLOCATE)


def test_a_booting_node_without_slices_yet_has_its_groups_devices() -> None:
    # Given a100 with a Ready node publishing one GPU and a node still booting (driver not up yet)
    groups = {"a100": ((("node-a", True), ("node-b", False)), ())}
    sim = _sim([*BASE, gpu_slice("node-a", 1)], ["node-a", "node-b"], groups)
    # Then the booting node counts as the group's template: one GPU
    _place(sim, _pod("a", [from_template()]), sim.nodes["node-b"])
    assert (_verdict(sim, _pod("b", [from_template()]), sim.nodes["node-b"]) or "").startswith(
        CANNOT_ALLOCATE
    )
