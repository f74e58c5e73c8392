"""Kubernetes manifests the operator applies after `cdk deploy`: pure functions returning YAML text.

The ClusterRole is generated from the Kubernetes adapter's permission table
(`shared.adapters.kubernetes.rbac.PERMISSIONS`, a pure module: no kubernetes client here): it grants
exactly the (API group, resource, verb) pairs the functions use, nothing that reads secrets or changes
workloads beyond evictions and forced drains.
"""

from __future__ import annotations

from typing import Any

import yaml

from shared.adapters.kubernetes.rbac import (
    RBAC_API_GROUP,
    cluster_role,
    status_config_map,
    status_role,
    status_role_binding,
)
from shared.constants import DEFAULT_STATUS_NAMESPACE, PROVISIONING_API_GROUP, RBAC_GROUP, SERVICE_NAME
from shared.domain.resources import (
    ACCELERATOR_RESOURCE_MARK,
    ACCELERATOR_RESOURCE_PREFIXES,
    ACCELERATOR_RESOURCES,
)

ADMISSION_WEBHOOK_NAME = "pods.backlog-scaler.dev"  # any DNS name with three labels; identifies the hook
WEBHOOK_URL_PLACEHOLDER = "__BACKLOG_SCALER_WEBHOOK_URL__"
# Routes of the webhook function under WEBHOOK_PATH (functions/webhook/handler.py).
ADMISSION_ROUTE = "/admission"
# The admission URL ends in a path token derived from the webhook secret, which only exists after
# deploy: the operator fills it in with `backlog-scaler admission-token` (see the Deploy docs).
ADMISSION_TOKEN_PLACEHOLDER = "__ADMISSION_PATH_TOKEN__"
EVENTS_ROUTE = "/events"


def _labels(cluster_name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": SERVICE_NAME, "app.kubernetes.io/instance": cluster_name}


def _dump(documents: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=1000)


def rbac_manifest(cluster_name: str, status_namespace: str = DEFAULT_STATUS_NAMESPACE) -> str:
    """ClusterRole (generated from the adapter's table) + ClusterRoleBinding to the scaler's group, and
    the status ConfigMap in `status_namespace` with the Role (get/patch on it alone) and its binding."""
    role = cluster_role(SERVICE_NAME, labels=_labels(cluster_name))
    binding = {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": SERVICE_NAME, "labels": _labels(cluster_name)},
        "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole", "name": SERVICE_NAME},
        # The EKS access entries map the functions' IAM roles to this group.
        "subjects": [{"apiGroup": RBAC_API_GROUP, "kind": "Group", "name": RBAC_GROUP}],
    }
    labels = _labels(cluster_name)
    status = [
        status_config_map(status_namespace, labels=labels),
        status_role(status_namespace, labels=labels),
        status_role_binding(status_namespace, labels=labels),
    ]
    return _dump([role, binding, *status])


def _is_accelerator_expression(name: str) -> str:
    """CEL of shared.domain.resources.is_accelerator for the resource name in variable `name`."""
    listed = ", ".join(f"'{resource}'" for resource in sorted(ACCELERATOR_RESOURCES))
    prefixes = "".join(f" || {name}.startsWith('{prefix}')" for prefix in ACCELERATOR_RESOURCE_PREFIXES)
    return f"{name} in [{listed}] || {name}.contains('{ACCELERATOR_RESOURCE_MARK}'){prefixes}"


def _needs_accelerator_expression() -> str:
    """CEL of shared.domain.resources.needs_accelerator for the pod in `object`: a container or init
    container requesting or limiting an accelerator, or a DRA claim."""
    names = _is_accelerator_expression("r")
    container = (
        "has(c.resources) && ("
        f"(has(c.resources.requests) && c.resources.requests.exists(r, {names})) || "
        f"(has(c.resources.limits) && c.resources.limits.exists(r, {names})))"
    )
    return (
        "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0) || "
        f"object.spec.containers.exists(c, {container}) || "
        f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {container}))"
    )


# Only pods that need an accelerator (the webhook's own rule, generated from the same definition so
# the API server sends exactly the pods the webhook wakes the scaler for), and every
# ProvisioningRequest, are sent to the webhook (matchConditions: Kubernetes >= 1.30; `object` is
# dynamically typed there, apiserver/pkg/admission/plugin/cel/compile.go). CEL's || is true when
# either side is, even if the other errs: a ProvisioningRequest, which has no spec.containers, passes
# on the left.
ACCELERATOR_POD_EXPRESSION = (
    f"request.resource.group == '{PROVISIONING_API_GROUP}' || {_needs_accelerator_expression()}"
)


def admission_webhook_manifest(cluster_name: str, url: str = WEBHOOK_URL_PLACEHOLDER) -> str:
    """ValidatingWebhookConfiguration that tells the scaler about new pods that need an accelerator and
    new ProvisioningRequests (never blocks them).

    `failurePolicy: Ignore` and a 2 s timeout: the webhook only wakes the scaler sooner, so an outage
    must never stop pod creation; the 1-minute schedule catches anything it misses.
    """
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": SERVICE_NAME, "labels": _labels(cluster_name)},
        "webhooks": [
            {
                "name": ADMISSION_WEBHOOK_NAME,
                "clientConfig": {"url": url},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    },
                    {  # Kueue asks for capacity before it creates pods: answer as fast as for a pod
                        "operations": ["CREATE"],
                        "apiGroups": ["autoscaling.x-k8s.io"],
                        "apiVersions": ["v1", "v1beta1"],
                        "resources": ["provisioningrequests"],
                        "scope": "Namespaced",
                    },
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                    ]
                },
                "matchConditions": [{"name": "needs-accelerator", "expression": ACCELERATOR_POD_EXPRESSION}],
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 2,
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    return _dump([config])


def rbac_manifest_filename(cluster_name: str) -> str:
    """File name of the RBAC manifest written next to the templates in cdk.out."""
    return f"{SERVICE_NAME}-{cluster_name}-rbac.yaml"
