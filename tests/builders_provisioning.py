"""Real-format ProvisioningRequests, PodTemplates and PodGroups (as `kubectl get -o json` prints them)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from shared.domain.model import Snapshot
from shared.formats.kubernetes import objects_from_documents
from tests.builders import GPU_TOLERATION, NOW, iso

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"


def pod_template(name: str, *, gpus: int = 8, namespace: str = "research") -> dict[str, Any]:
    """A core/v1 PodTemplate as Kueue creates it for a pod set."""
    requests = {"cpu": str(gpus * 6), "memory": f"{gpus * 48}Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pt-{name}", "resourceVersion": "5"},
        "template": {
            "metadata": {"labels": {"app": "train"}},
            "spec": {
                "containers": [{"name": "main", "image": "trainer:1", "resources": {"requests": requests}}],
                "tolerations": [GPU_TOLERATION],
            },
        },
    }


def condition(
    type_: str,
    status: str,
    reason: str,
    *,
    message: str = "",
    at: datetime | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": iso(at or NOW - timedelta(minutes=1)),
    }


def provisioning_request(
    name: str,
    pod_sets: list[tuple[str, int]],
    *,
    class_name: str = ATOMIC,
    namespace: str = "research",
    conditions: list[dict[str, Any]] | None = None,
    parameters: dict[str, str] | None = None,
    created: datetime | None = None,
    generation: int = 1,
) -> dict[str, Any]:
    """An autoscaling.x-k8s.io/v1 ProvisioningRequest; `pod_sets` is (PodTemplate name, count)."""
    spec: dict[str, Any] = {
        "provisioningClassName": class_name,
        "podSets": [{"podTemplateRef": {"name": t}, "count": c} for t, c in pod_sets],
    }
    if parameters:
        spec["parameters"] = parameters
    document: dict[str, Any] = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-pr-{name}",
            "generation": generation,
            "resourceVersion": "7",
            "creationTimestamp": iso(created or NOW - timedelta(minutes=2)),
        },
        "spec": spec,
    }
    if conditions is not None:
        document["status"] = {"conditions": conditions}
    return document


def pod_group(
    name: str, min_member: int, *, volcano: bool = False, namespace: str = "research"
) -> dict[str, Any]:
    """A coscheduling (scheduling.x-k8s.io/v1alpha1) or Volcano (scheduling.volcano.sh/v1beta1) PodGroup."""
    api = "scheduling.volcano.sh/v1beta1" if volcano else "scheduling.x-k8s.io/v1alpha1"
    return {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-pg-{name}"},
        "spec": {"minMember": min_member},
    }


def with_objects(base: Snapshot, objects: list[dict[str, Any]]) -> Snapshot:
    """`base` plus the PodGroups, PodTemplates and ProvisioningRequests of `objects`."""
    found = objects_from_documents([({"kind": "List", "items": objects}, "test")])
    return replace(
        base,
        pod_groups=found.pod_groups,
        pod_templates=found.pod_templates,
        provisioning_requests=found.provisioning_requests,
    )
