"""resource.k8s.io/v1 objects as `kubectl get -o json` prints them (shapes from the NVIDIA DRA driver
for GPUs' ResourceSlices and the Kubernetes docs' examples), for the DRA tests."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"
CLASS = "gpu.nvidia.com"


def gpu_device(
    index: int,
    *,
    memory: str = "80Gi",
    product: str = "NVIDIA A100-SXM4-80GB",
    pcie_root: str | None = None,
    driver_version: str = "550.54.15",
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "type": {"string": "gpu"},
        "index": {"int": index},
        "uuid": {"string": f"GPU-{index:08d}-0000-0000-0000-000000000000"},
        "productName": {"string": product},
        "driverVersion": {"version": driver_version},
        "architecture": {"string": "Ampere"},
    }
    if pcie_root is not None:
        attributes["resource.kubernetes.io/pcieRoot"] = {"string": pcie_root}
    return {"name": f"gpu-{index}", "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def slice_spec(devices: list[dict[str, Any]], *, node: str | None = None, pool: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool or node or "pool", "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    return spec


def resource_slice(node: str, devices: list[dict[str, Any]], name: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-{DRIVER}-abcde", "uid": f"uid-slice-{node}"},
        "spec": slice_spec(devices, node=node),
    }


def gpu_slice(node: str, count: int = 8, **device: Any) -> dict[str, Any]:
    return resource_slice(node, [gpu_device(i, **device) for i in range(count)])


def device_class(name: str = CLASS, expression: str = f"device.driver == '{DRIVER}'") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def exactly(
    count: int = 1,
    *,
    device_class_name: str = CLASS,
    selectors: tuple[str, ...] = (),
    mode: str = "ExactCount",
    admin: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin:
        body["adminAccess"] = True
    return body


def claim_spec(*requests: dict[str, Any], constraints: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return {"devices": devices}


def request(name: str = "gpu", **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exactly(**kwargs)}


def first_available(name: str, *alternatives: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": [{"name": sub, **body} for sub, body in alternatives]}


def claim_template(
    name: str = "one-gpu", spec: dict[str, Any] | None = None, namespace: str = "ml"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": spec or claim_spec(request())},
    }


def resource_claim(
    name: str,
    spec: dict[str, Any] | None = None,
    *,
    namespace: str = "ml",
    allocated_on: str | None = None,
    devices: tuple[str, ...] = (),
) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}"},
        "spec": spec or claim_spec(request()),
        "status": {},
    }
    if allocated_on is not None:
        claim["status"]["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": allocated_on, "device": d} for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [allocated_on]}]},
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [allocated_on]}
                        ]
                    },
                ]
            },
        }
    return claim


def dra_pod(
    name: str, claims: list[dict[str, Any]], *, namespace: str = "ml", statuses: dict[str, str] | None = None
) -> dict[str, Any]:
    """A pending pod with spec.resourceClaims; `statuses`: claims the controller generated."""
    status: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    if statuses:
        status["resourceClaimStatuses"] = [{"name": k, "resourceClaimName": v} for k, v in statuses.items()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "claims": [{"name": c["name"]} for c in claims],
                    },
                }
            ],
            "resourceClaims": claims,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": status,
    }


def from_template(name: str = "gpu", template: str = "one-gpu") -> dict[str, Any]:
    return {"name": name, "resourceClaimTemplateName": template}


def by_name(claim: str, name: str = "gpu") -> dict[str, Any]:
    return {"name": name, "resourceClaimName": claim}
