"""The Kubernetes API permissions of `KubernetesCluster`: one table, and the ClusterRole generated from it.

Every request the adapter (`cluster.py`) makes needs one (API group, resource, verb) entry here, naming
the adapter methods that make it; nothing else is granted. The CDK app prints the ClusterRole built
from this table (`cdk/manifests.py`), and the fake API server of the tests and of the local demo
enforces the same role, so a request the table lacks fails there with the real server's 403, as it
would on a cluster. Pure data: no kubernetes import, so cdk/ can use it without the client.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.constants import RBAC_GROUP, SERVICE_NAME, STATUS_CONFIGMAP

RBAC_API_GROUP = "rbac.authorization.k8s.io"
CORE_GROUP = ""
PROVISIONING_GROUP = "autoscaling.x-k8s.io"  # cluster-autoscaler's ProvisioningRequest API


@dataclass(frozen=True, slots=True)
class Permission:
    """One (API group, resource, verb) the adapter uses, and the `KubernetesCluster` methods using it."""

    group: str  # "" is the core group
    resource: str  # "<resource>/<subresource>" for a subresource, as RBAC names it
    verb: str  # as the API server derives it: GET of a collection is list, of one object get
    used_by: tuple[str, ...]
    # Granted on this one object only (RBAC resourceNames), by the Role in the status namespace rather
    # than by the ClusterRole. resourceNames cannot restrict create or list, so the object must exist:
    # the manifests create it (`status_config_map`).
    resource_name: str = ""


# Sorted by group, resource, verb. Not granted, because nothing calls it: watch (every read is a paged
# list or one get), get of a pod, update (PUT; the ProvisioningRequest status is merge-patched, so
# neither update nor get of provisioningrequests/status is needed), deletecollection, events.k8s.io
# (the adapter writes core/v1 Events and never patches one). The custom resources' lists answer 404
# when their CRD is not installed; the adapter then reads none.
PERMISSIONS: tuple[Permission, ...] = (
    Permission(CORE_GROUP, "configmaps", "get", ("get_config_map",), STATUS_CONFIGMAP),
    Permission(CORE_GROUP, "configmaps", "patch", ("patch_config_map",), STATUS_CONFIGMAP),
    Permission(CORE_GROUP, "events", "create", ("record_events",)),
    Permission(CORE_GROUP, "namespaces", "list", ("list_namespaces",)),
    Permission(CORE_GROUP, "nodes", "delete", ("delete_node",)),
    Permission(CORE_GROUP, "nodes", "get", ("get_node", "taint_node", "untaint_node")),
    Permission(CORE_GROUP, "nodes", "list", ("list_nodes",)),
    Permission(CORE_GROUP, "nodes", "patch", ("cordon", "uncordon", "taint_node", "untaint_node")),
    Permission(CORE_GROUP, "persistentvolumeclaims", "list", ("list_persistent_volume_claims",)),
    Permission(CORE_GROUP, "persistentvolumes", "list", ("list_persistent_volumes",)),
    Permission(CORE_GROUP, "pods", "delete", ("delete_pod",)),  # forced drains, past PodDisruptionBudgets
    Permission(CORE_GROUP, "pods", "list", ("list_pods", "list_pods_on_node")),
    Permission(CORE_GROUP, "pods/eviction", "create", ("can_evict", "evict")),
    Permission(CORE_GROUP, "podtemplates", "list", ("list_pod_templates",)),  # ProvisioningRequests' pods
    Permission("apps", "daemonsets", "list", ("list_daemonsets",)),
    Permission(PROVISIONING_GROUP, "provisioningrequests", "list", ("list_provisioning_requests",)),
    Permission(
        PROVISIONING_GROUP, "provisioningrequests/status", "patch", ("set_provisioning_request_conditions",)
    ),
    # Migration: a move's evictions within their budgets (a dry run never uses a budget up).
    Permission("policy", "poddisruptionbudgets", "list", ("list_pod_disruption_budgets",)),
    # Dynamic Resource Allocation (resource.k8s.io/v1): 404 without the API, then no DRA.
    Permission("resource.k8s.io", "deviceclasses", "list", ("list_device_classes",)),
    Permission("resource.k8s.io", "resourceclaims", "list", ("list_resource_claims",)),
    Permission("resource.k8s.io", "resourceclaimtemplates", "list", ("list_resource_claim_templates",)),
    Permission("resource.k8s.io", "resourceslices", "list", ("list_resource_slices",)),
    Permission("scheduling.volcano.sh", "podgroups", "list", ("list_pod_groups",)),
    Permission("scheduling.x-k8s.io", "podgroups", "list", ("list_pod_groups",)),
    Permission("storage.k8s.io", "storageclasses", "list", ("list_storage_classes",)),
)


def policy_rules(permissions: Iterable[Permission] = PERMISSIONS) -> list[dict[str, list[str]]]:
    """The rules granting exactly `permissions`, sorted: deterministic for any input order.

    A rule grants every (group, resource, verb) of its lists, so one rule per API group, verb set and
    resource name, holding the resources that need exactly those verbs: no resource gets a verb it
    does not use, and a permission on one named object stays on that object.
    """
    verbs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for permission in permissions:
        verbs[(permission.group, permission.resource, permission.resource_name)].add(permission.verb)
    resources: dict[tuple[str, tuple[str, ...], str], list[str]] = defaultdict(list)
    for (group, resource, name), granted in verbs.items():
        resources[(group, tuple(sorted(granted)), name)].append(resource)
    rules = [
        (group, sorted(names), list(granted), name) for (group, granted, name), names in resources.items()
    ]
    return [
        {
            "apiGroups": [group],
            "resources": names,
            "verbs": granted,
            **({"resourceNames": [name]} if name else {}),
        }
        for group, names, granted, name in sorted(rules)
    ]


def _metadata(name: str, labels: Mapping[str, str] | None, namespace: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    return metadata


def cluster_role(
    name: str = SERVICE_NAME,
    *,
    labels: Mapping[str, str] | None = None,
    permissions: Iterable[Permission] = PERMISSIONS,
) -> dict[str, Any]:
    """The ClusterRole (a manifest document) granting the cluster-wide `permissions`, by default the
    adapter's (those on one named object are the status Role's)."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": _metadata(name, labels),
        "rules": policy_rules(p for p in permissions if not p.resource_name),
    }


def status_role(
    namespace: str,
    name: str = SERVICE_NAME,
    *,
    labels: Mapping[str, str] | None = None,
    permissions: Iterable[Permission] = PERMISSIONS,
) -> dict[str, Any]:
    """The Role in `namespace` granting the `permissions` on named objects (get/patch of the status
    ConfigMap): a namespaced Role, so the grant reaches no ConfigMap of another namespace."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "Role",
        "metadata": _metadata(name, labels, namespace),
        "rules": policy_rules(p for p in permissions if p.resource_name),
    }


def status_role_binding(
    namespace: str, name: str = SERVICE_NAME, *, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The RoleBinding of `status_role` to the scaler's group (the EKS access entries map the
    functions' IAM roles to it)."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(name, labels, namespace),
        "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "Role", "name": name},
        "subjects": [{"apiGroup": RBAC_API_GROUP, "kind": "Group", "name": RBAC_GROUP}],
    }


def status_config_map(namespace: str, *, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The status ConfigMap as the manifests create it: the Role may only get and patch it.

    Without `data`: `kubectl apply` then never resets what the scaler wrote (a three-way merge only
    touches the keys a manifest declares).
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(STATUS_CONFIGMAP, labels, namespace),
    }
