"""Builders of real-format test data: Kubernetes Pod/Node JSON and DescribeAutoScalingGroups JSON.

Tests build objects in the wire formats and go through the real parsers, so fixtures stay honest.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.config import ScalerConfig, parse_config
from shared.domain.model import ScalerState, Snapshot
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import nodes_from_list, pods_from_list

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    gpus: int = 1,
    cpu: str | None = None,
    memory: str | None = None,
    namespace: str = "research",
    node: str | None = None,
    phase: str | None = None,
    unschedulable: bool | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: list[list[dict[str, Any]]] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    owner_kind: str | None = "Job",
    created: datetime | None = None,
    priority: int | None = None,
    init_requests: list[dict[str, str]] | None = None,
    overhead: dict[str, str] | None = None,
    pod_requests: dict[str, str] | None = None,
    deleted: datetime | None = None,
    grace_seconds: int | None = None,
    nominated: str | None = None,
) -> dict[str, Any]:
    """A Pod as `kubectl get pod -o json` shows it. Unbound pods default to Pending/Unschedulable.

    `pod_requests`: pod-level `spec.resources.requests` (PodLevelResources); `deleted`: its
    deletionTimestamp; `grace_seconds`: spec.terminationGracePeriodSeconds; `nominated`:
    status.nominatedNodeName."""
    requests: dict[str, str] = {
        "cpu": cpu or str(max(1, gpus * 6)),
        "memory": memory or f"{max(4, gpus * 48)}Gi",
    }
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    created = created or NOW - timedelta(minutes=5)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": iso(created),
        "labels": labels or {"app": "train"},
    }
    if annotations:
        meta["annotations"] = annotations
    if deleted is not None:
        meta["deletionTimestamp"] = iso(deleted)
        meta["deletionGracePeriodSeconds"] = 30 if grace_seconds is None else grace_seconds
    if owner_kind:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": owner_kind, "name": f"{name}-owner", "uid": "o", "controller": True}
        ]
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "trainer:1", "resources": {"requests": requests, "limits": requests}}
        ],
        "tolerations": tolerations if tolerations is not None else [GPU_TOLERATION],
        "priority": priority or 0,
    }
    if init_requests:
        spec["initContainers"] = [
            {"name": f"init{i}", "image": "init:1", "resources": {"requests": r}}
            for i, r in enumerate(init_requests)
        ]
    if overhead:
        spec["overhead"] = overhead
    if pod_requests:
        spec["resources"] = {"requests": pod_requests, "limits": pod_requests}
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": term} for term in affinity]
                }
            }
        }
    if node:
        spec["nodeName"] = node
    phase = phase or ("Running" if node else "Pending")
    status: dict[str, Any] = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    if unschedulable is None:
        unschedulable = node is None and phase == "Pending"
    if unschedulable:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: insufficient nvidia.com/gpu",
                "lastTransitionTime": iso(created + timedelta(seconds=1)),
            }
        ]
    elif node:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node(
    name: str,
    instance_id: str,
    *,
    gpus: int = 8,
    cpu: str = "95",
    memory: str = "1100Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    created: datetime | None = None,
    zone: str = "us-west-2a",
    deleted: datetime | None = None,
) -> dict[str, Any]:
    """A Node as `kubectl get node -o json` shows it (`deleted`: its deletionTimestamp)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "400Gi"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    created = created or NOW - timedelta(hours=2)
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": iso(created),
        "labels": {"kubernetes.io/hostname": name, **(labels if labels is not None else {"gpu": "a100"})},
    }
    if annotations:
        meta["annotations"] = annotations
    if deleted is not None:
        meta["deletionTimestamp"] = iso(deleted)
    spec: dict[str, Any] = {
        "providerID": f"aws:///{zone}/{instance_id}",
        "taints": taints if taints is not None else [GPU_TAINT],
    }
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": iso(created)}
            ],
        },
    }


def asg(
    name: str,
    *,
    desired: int,
    instances: list[str] | None = None,
    min_size: int = 0,
    max_size: int = 16,
    lifecycle: dict[str, str] | None = None,
    cluster: str = "research",
    protected: list[str] | None = None,
    new_instances_protected: bool = False,
    weights: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One group of `aws autoscaling describe-auto-scaling-groups`.

    `protected`: instances with ProtectedFromScaleIn; `new_instances_protected`: the group's
    NewInstancesProtectedFromScaleIn; `weights`: MixedInstancesPolicy overrides (instance type ->
    WeightedCapacity), `desired`/`min_size`/`max_size` then in units, instances of the first type."""
    kind = next(iter(weights)) if weights else "p4d.24xlarge"
    group: dict[str, Any] = {
        "AutoScalingGroupName": name,
        "AutoScalingGroupARN": (
            f"arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:x:autoScalingGroupName/{name}"
        ),
        "MinSize": min_size,
        "MaxSize": max_size,
        "DesiredCapacity": desired,
        "Instances": [
            {
                "InstanceId": i,
                "AvailabilityZone": "us-west-2a",
                "LifecycleState": (lifecycle or {}).get(i, "InService"),
                "HealthStatus": "Healthy",
                "InstanceType": kind,
                "ProtectedFromScaleIn": i in (protected or ()),
                **({"WeightedCapacity": str(weights[kind])} if weights else {}),
            }
            for i in instances or []
        ],
        "NewInstancesProtectedFromScaleIn": new_instances_protected,
        "Tags": [{"Key": "backlog-scaler/cluster", "Value": cluster}],
    }
    if weights:
        group["MixedInstancesPolicy"] = {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "gpu", "Version": "$Latest"},
                "Overrides": [{"InstanceType": t, "WeightedCapacity": str(w)} for t, w in weights.items()],
            },
            "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100},
        }
    return group


def a100_group(**extra: Any) -> dict[str, Any]:
    """The config entry of the a100 group (8-GPU nodes behind research-a100), with `extra` keys."""
    return {
        "name": "a100",
        "asg_name": "research-a100",
        "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "labels": {"gpu": "a100"},
        "taints": [GPU_TAINT],
        **extra,
    }


def config(**overrides: Any) -> ScalerConfig:
    """A one-group config (a100, 8 GPUs per node, max 16); keyword arguments replace top-level keys."""
    doc: dict[str, Any] = {
        "cluster_name": "research",
        "region": "us-west-2",
        "node_groups": [a100_group(price_per_hour=32.77, max_size=16)],
        "policy": {"cordon_settle_seconds": 30},
    }
    for key, value in overrides.items():
        doc[key] = value
    return parse_config(doc)


def snapshot(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    asgs: list[dict[str, Any]],
    state: ScalerState | None = None,
) -> Snapshot:
    """A Snapshot through the real parsers."""
    return Snapshot(
        pods=pods_from_list({"kind": "PodList", "items": pods}),
        nodes=nodes_from_list({"kind": "NodeList", "items": nodes}),
        asgs=asgs_from_describe({"AutoScalingGroups": asgs}),
        state=state or ScalerState(),
    )


def admission_review(obj: dict[str, Any], *, uid: str = "uid-1", **request: Any) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) the API server sends for the CREATE of a Pod `obj`
    (`request` fields replace or add to the request's)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "object": obj,
            **request,
        },
    }
