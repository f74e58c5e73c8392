"""The resources the fake Kubernetes API server serves, and its Status error bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

JsonObj = dict[str, Any]

ObjectKey = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.1-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generateName suffixes
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
PATCH_TYPES = frozenset(
    {"application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json"}
)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def clone(obj: Any) -> Any:
    """Deep copy of a JSON value (faster than copy.deepcopy for plain JSON)."""
    return json.loads(json.dumps(obj))


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return rfc3339(datetime.now(UTC))


# --------------------------------------------------------------------------- resources


_META_FIELDS: dict[str, tuple[str, ...]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
}
_NAME_FIELD: dict[str, tuple[str, ...]] = {"metadata.name": ("metadata", "name")}
_STATUS = frozenset({"status"})


@dataclass(frozen=True)
class ServedResource:
    plural: str
    group: str  # "" for the core group
    version: str
    kind: str
    namespaced: bool = True
    store: str = ""  # the store the objects live in ("": the plural)
    fields: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(_META_FIELDS))
    # supported field selectors -> path in the object
    subresources: frozenset[str] = frozenset()
    custom: bool = False  # a CustomResourceDefinition's: metadata.generation, no strategic merge patch

    def __post_init__(self) -> None:
        if not self.store:
            object.__setattr__(self, "store", self.plural)

    @property
    def has_status(self) -> bool:
        """Main-resource writes keep the stored status (the status subresource owns it)."""
        return "status" in self.subresources

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """The name used in error messages, e.g. ``pods`` or ``poddisruptionbudgets.policy``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    **_META_FIELDS,
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "involvedObject.apiVersion": ("involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": ("involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": ("involvedObject", "fieldPath"),
    "reason": ("reason",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "type": ("type",),
}

PODS = ServedResource(
    "pods",
    "",
    "v1",
    "Pod",
    fields={
        **_META_FIELDS,
        "spec.nodeName": ("spec", "nodeName"),
        "spec.restartPolicy": ("spec", "restartPolicy"),
        "spec.schedulerName": ("spec", "schedulerName"),
        "spec.serviceAccountName": ("spec", "serviceAccountName"),
        "spec.hostNetwork": ("spec", "hostNetwork"),
        "status.phase": ("status", "phase"),
        "status.podIP": ("status", "podIP"),
        "status.nominatedNodeName": ("status", "nominatedNodeName"),
    },
    subresources=frozenset({"eviction", "status"}),
)
NODES = ServedResource(
    "nodes",
    "",
    "v1",
    "Node",
    namespaced=False,
    fields={**_NAME_FIELD, "spec.unschedulable": ("spec", "unschedulable")},
    subresources=_STATUS,
)
EVENTS = ServedResource("events", "", "v1", "Event", fields=_EVENT_FIELDS)
# events.k8s.io/v1 shares the store of core/v1 events, as on the real server.
_EVENTS_V1 = replace(EVENTS, group="events.k8s.io", fields=dict(_META_FIELDS))
PDBS = ServedResource("poddisruptionbudgets", "policy", "v1", "PodDisruptionBudget", subresources=_STATUS)
DAEMONSETS = ServedResource("daemonsets", "apps", "v1", "DaemonSet", subresources=_STATUS)
PVCS = ServedResource("persistentvolumeclaims", "", "v1", "PersistentVolumeClaim", subresources=_STATUS)
PVS = ServedResource(
    "persistentvolumes",
    "",
    "v1",
    "PersistentVolume",
    namespaced=False,
    fields=_NAME_FIELD,
    subresources=_STATUS,
)
STORAGE_CLASSES = ServedResource(
    "storageclasses", "storage.k8s.io", "v1", "StorageClass", namespaced=False, fields=_NAME_FIELD
)
NAMESPACES = ServedResource(
    "namespaces",
    "",
    "v1",
    "Namespace",
    namespaced=False,
    fields={**_NAME_FIELD, "status.phase": ("status", "phase")},
    subresources=_STATUS,
)
# The CRDs of gang schedulers and of cluster-autoscaler's ProvisioningRequest API, with the status
# subresource their CRDs declare (kubebuilder:subresource:status).
PROVISIONING_REQUESTS = ServedResource(
    "provisioningrequests",
    "autoscaling.x-k8s.io",
    "v1",
    "ProvisioningRequest",
    subresources=_STATUS,
    custom=True,
)
# The same objects at the older version, as a CRD serves both.
_PROVISIONING_REQUESTS_V1BETA1 = replace(PROVISIONING_REQUESTS, version="v1beta1")
POD_TEMPLATES = ServedResource("podtemplates", "", "v1", "PodTemplate")
CONFIG_MAPS = ServedResource("configmaps", "", "v1", "ConfigMap")  # the scaler's status ConfigMap
COSCHEDULING_POD_GROUPS = ServedResource(
    "podgroups",
    "scheduling.x-k8s.io",
    "v1alpha1",
    "PodGroup",
    store="podgroups.scheduling.x-k8s.io",
    subresources=_STATUS,
    custom=True,
)
VOLCANO_POD_GROUPS = ServedResource(
    "podgroups",
    "scheduling.volcano.sh",
    "v1beta1",
    "PodGroup",
    store="podgroups.scheduling.volcano.sh",
    subresources=_STATUS,
    custom=True,
)
# Dynamic Resource Allocation, GA in Kubernetes 1.34 (built in, not a CRD).
RESOURCE_SLICES = ServedResource(
    "resourceslices", "resource.k8s.io", "v1", "ResourceSlice", namespaced=False, fields=_NAME_FIELD
)
DEVICE_CLASSES = ServedResource(
    "deviceclasses", "resource.k8s.io", "v1", "DeviceClass", namespaced=False, fields=_NAME_FIELD
)
RESOURCE_CLAIMS = ServedResource(
    "resourceclaims", "resource.k8s.io", "v1", "ResourceClaim", subresources=_STATUS
)
RESOURCE_CLAIM_TEMPLATES = ServedResource(
    "resourceclaimtemplates", "resource.k8s.io", "v1", "ResourceClaimTemplate"
)
SHORT_NAMES = {
    "provisioningrequests": ["provreq", "provreqs"],
    "pods": ["po"],
    "nodes": ["no"],
    "events": ["ev"],
    "namespaces": ["ns"],
    "persistentvolumeclaims": ["pvc"],
    "persistentvolumes": ["pv"],
    "poddisruptionbudgets": ["pdb"],
    "daemonsets": ["ds"],
    "storageclasses": ["sc"],
    "configmaps": ["cm"],
}
RESOURCES = {
    (r.group, r.version, r.plural): r
    for r in (
        PODS,
        NODES,
        EVENTS,
        _EVENTS_V1,
        PDBS,
        DAEMONSETS,
        PVCS,
        PVS,
        STORAGE_CLASSES,
        NAMESPACES,
        PROVISIONING_REQUESTS,
        _PROVISIONING_REQUESTS_V1BETA1,
        POD_TEMPLATES,
        CONFIG_MAPS,
        COSCHEDULING_POD_GROUPS,
        VOLCANO_POD_GROUPS,
        RESOURCE_SLICES,
        DEVICE_CLASSES,
        RESOURCE_CLAIMS,
        RESOURCE_CLAIM_TEMPLATES,
    )
}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


# --------------------------------------------------------------------------- errors


class ApiError(Exception):
    """Raised inside request handling; becomes a ``Status`` response."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: JsonObj | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details = details
        self.headers = headers or {}

    def status(self) -> JsonObj:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code: int, reason: str, message: str, details: JsonObj | None = None) -> JsonObj:
    body: JsonObj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def status_details(res: ServedResource, name: str, **extra: Any) -> JsonObj:
    details: JsonObj = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.plural
    details.update(extra)
    return details


def not_found(res: ServedResource, name: str) -> ApiError:
    return ApiError(404, f'{res.group_resource} "{name}" not found', details=status_details(res, name))


def conflict(res: ServedResource, name: str, message: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {res.group_resource} "{name}": {message}',
        details=status_details(res, name),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)
