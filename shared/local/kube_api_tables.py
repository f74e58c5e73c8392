"""Discovery documents and server-side `Table` output (what kubectl asks for) of the fake API server."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.local.kube_api_resources import RESOURCES, SHORT_NAMES, JsonObj, ServedResource
from shared.local.kube_api_selectors import labels_of
from shared.local.kube_api_store import is_ready

# --------------------------------------------------------------------------- discovery and tables (kubectl)

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _api_resources(group: str, version: str) -> list[JsonObj]:
    """The APIResourceList entries of one group/version, subresources included (``pods/eviction``)."""
    entries: list[JsonObj] = []
    for res in RESOURCES.values():
        if (res.group, res.version) != (group, version):
            continue
        entry: JsonObj = {
            "name": res.plural,
            "singularName": res.kind.lower(),
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": _VERBS,
        }
        if res.plural in SHORT_NAMES and (res.group, res.plural) != ("events.k8s.io", "events"):
            entry["shortNames"] = SHORT_NAMES[res.plural]
        entries.append(entry)
        for sub in sorted(res.subresources):
            if sub == "eviction":  # served under core/v1, of kind policy/v1 Eviction
                entries.append(
                    {
                        "name": f"{res.plural}/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
            else:
                entries.append(
                    {
                        "name": f"{res.plural}/{sub}",
                        "singularName": "",
                        "namespaced": res.namespaced,
                        "kind": res.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
    return entries


def _api_group(name: str) -> JsonObj:
    versions = sorted({r.version for r in RESOURCES.values() if r.group == name})
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def discovery_document(parts: list[str], url: str) -> JsonObj | None:
    """The legacy discovery document at ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``, else None."""
    groups = sorted({r.group for r in RESOURCES.values() if r.group})
    if parts == ["api"]:
        address = url.removeprefix("http://")
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g) for g in groups]}
    if parts == ["apis", *parts[1:2]] and len(parts) == 2 and parts[1] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[1])}
    if parts == ["api", "v1"]:
        group, version = "", "v1"
    elif len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
    else:
        return None
    resources = _api_resources(group, version)
    if not resources:
        return None
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def wants_table(accept: str) -> bool:
    """Whether the Accept header asks for a meta.k8s.io/v1 Table (``kubectl get`` does)."""
    for media in accept.split(","):
        params = {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in media.split(";")[1:])}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") == "v1":
            return True
    return False


def _age(timestamp: str | None, now: datetime) -> str:
    """``duration.HumanDuration`` of kubectl's AGE column, for an RFC 3339 timestamp, at `now` (the
    server's clock: the demo's is simulated)."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp)
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int((now - then) / timedelta(seconds=1)))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def _column(name: str, description: str, kind: str = "string", fmt: str = "") -> JsonObj:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": 0}


_NAME_COLUMN = _column("Name", "Name must be unique within a namespace.", fmt="name")
_AGE_COLUMN = _column("Age", "CreationTimestamp of the object.")


def _node_cells(node: JsonObj, now: datetime) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
    status = "Ready" if ready == "True" else ("NotReady" if ready == "False" else "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in labels_of(node) if k.startswith(prefix)) or ["<none>"]
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or ""
    meta = node.get("metadata") or {}
    return [meta.get("name"), status, ",".join(roles), _age(meta.get("creationTimestamp"), now), version]


def _pod_cells(pod: JsonObj, now: datetime) -> list[Any]:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    if not statuses and status.get("phase") == "Running" and is_ready(pod):
        ready = len(containers)
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    shown = status.get("reason") or status.get("phase") or "Unknown"
    if shown == "Succeeded":
        shown = "Completed"
    if meta.get("deletionTimestamp"):
        shown = "Terminating"
    return [
        meta.get("name"),
        f"{ready}/{len(containers)}",
        shown,
        restarts,
        _age(meta.get("creationTimestamp"), now),
        spec.get("nodeName") or "<none>",
    ]


def _event_cells(event: JsonObj, now: datetime) -> list[Any]:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    last = (
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
    )
    target = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [
        _age(last, now),
        event.get("type", ""),
        event.get("reason", ""),
        target,
        event.get("message") or event.get("note", ""),
    ]


def _namespace_cells(namespace: JsonObj, now: datetime) -> list[Any]:
    meta = namespace.get("metadata") or {}
    phase = (namespace.get("status") or {}).get("phase", "")
    return [meta.get("name"), phase, _age(meta.get("creationTimestamp"), now)]


def _default_cells(obj: JsonObj, now: datetime) -> list[Any]:
    meta = obj.get("metadata") or {}
    return [meta.get("name"), _age(meta.get("creationTimestamp"), now)]


_TABLE_COLUMNS: dict[str, tuple[list[JsonObj], Callable[[JsonObj, datetime], list[Any]]]] = {
    "Node": (
        [
            _NAME_COLUMN,
            _column("Status", "The status of the node"),
            _column("Roles", "The roles of the node"),
            _AGE_COLUMN,
            _column("Version", "Kubelet Version reported by the node."),
        ],
        _node_cells,
    ),
    "Pod": (
        [
            _NAME_COLUMN,
            _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _column("Status", "The aggregate status of the containers in this pod."),
            _column(
                "Restarts", "The number of times the containers in this pod have been restarted.", "integer"
            ),
            _AGE_COLUMN,
            _column("Node", "Name of the node where the pod is scheduled."),
        ],
        _pod_cells,
    ),
    "Event": (
        [
            _column("Last Seen", "The time the event was last observed."),
            _column("Type", "Type of this event (Normal, Warning)."),
            _column("Reason", "Why the action was taken."),
            _column("Object", "The object this event is about."),
            _column("Message", "A human-readable description of the status of this operation."),
        ],
        _event_cells,
    ),
    "Namespace": (
        [_NAME_COLUMN, _column("Status", "The status of the namespace"), _AGE_COLUMN],
        _namespace_cells,
    ),
}


def as_table(
    res: ServedResource,
    objects: list[JsonObj],
    meta: JsonObj,
    query: dict[str, str],
    *,
    now: datetime,
    columns: bool = True,
) -> JsonObj:
    """A meta.k8s.io/v1 Table of ``objects``, rows carrying the objects' metadata (``includeObject``)."""
    definitions, cells = _TABLE_COLUMNS.get(res.kind, ([_NAME_COLUMN, _AGE_COLUMN], _default_cells))
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objects:
        row: JsonObj = {"cells": cells(obj, now)}
        if include == "Object":
            row["object"] = {**obj, "kind": res.kind, "apiVersion": res.api_version}
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        rows.append(row)
    table: JsonObj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    if columns:
        table["columnDefinitions"] = definitions
    table["rows"] = rows
    return table
