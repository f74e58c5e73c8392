"""`ClusterWriter`: the writes of the adapter (cordon, taints, eviction, deletes, the status patch).

Node edits are JSON merge patches (RFC 7386), with the read's resourceVersion as precondition where a
concurrent edit must be a 409 rather than a lost update; a missing pod or node is success for evict
and delete.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shared.adapters.kubernetes.calls import ApiCaller, api_path, body_of, decode_json
from shared.adapters.kubernetes.transport import QueryValue
from shared.constants import PROVISIONING_API_GROUP
from shared.domain.errors import ClusterActionError, ConflictError, EvictionBlockedError, NotFoundError
from shared.domain.model import ANNOTATION_CORDONED_AT, Taint
from shared.domain.provisioning import ConditionUpdate
from shared.formats.kubernetes import condition_to_json, rfc3339

MERGE_PATCH = "application/merge-patch+json"


def taints_with(taints: list[dict[str, Any]], taint: Taint) -> list[dict[str, Any]] | None:
    """`taints` (a Node's spec.taints) with `taint` in place of one of the same key and effect, as
    `kubectl taint --overwrite` edits them; None when it is already there."""
    effect = str(taint.effect)
    same = [t for t in taints if t.get("key") == taint.key and t.get("effect") == effect]
    if len(same) == 1 and (same[0].get("value") or "") == taint.value:
        return None
    wanted: dict[str, Any] = {"key": taint.key, "effect": effect}
    if taint.value:
        wanted["value"] = taint.value
    return [*(t for t in taints if t not in same), wanted]


def taints_without(taints: list[dict[str, Any]], key: str) -> list[dict[str, Any]] | None:
    """`taints` without every taint of `key` (`kubectl taint nodes NAME KEY-`); None when none has it."""
    kept = [t for t in taints if t.get("key") != key]
    return None if len(kept) == len(taints) else kept


TaintEdit = Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]
"""An edit of a Node's spec.taints (`taints_with`, `taints_without`): None when already as wanted."""


def edited_taints(
    node: dict[str, Any], resource_version: str | None, edit: TaintEdit, what: str
) -> list[dict[str, Any]] | None:
    """The Node's spec.taints after `edit` (a copy; None: already as wanted); a ConflictError when
    `resource_version` is given and the node's is another (it changed since that read)."""
    current = node_resource_version(node)
    if resource_version and current != resource_version:
        raise ConflictError(f"{what}: the node changed since it was read ({resource_version}, now {current})")
    return edit([dict(t) for t in (node.get("spec") or {}).get("taints") or ()])


def node_resource_version(node: dict[str, Any]) -> str:
    """metadata.resourceVersion of a Node as JSON ("" when absent)."""
    return str((node.get("metadata") or {}).get("resourceVersion") or "")


class ClusterWriter:
    """Patches, evictions and deletes through one `ApiCaller`; failures are ClusterActionError's tree."""

    def __init__(self, caller: ApiCaller) -> None:
        self._caller = caller

    def cordon(self, name: str, at: datetime, *, resource_version: str | None = None) -> None:
        """Mark unschedulable and annotate when; with `resource_version`, only if unchanged since."""
        metadata: dict[str, Any] = {"annotations": {ANNOTATION_CORDONED_AT: rfc3339(at)}}
        if resource_version:
            # In a merge patch the resourceVersion is a precondition: the API server answers 409 when
            # the stored object moved on, instead of overwriting a change we did not see.
            metadata["resourceVersion"] = resource_version
        self._patch_node(f"cordon node {name}", name, {"metadata": metadata, "spec": {"unschedulable": True}})

    def uncordon(self, name: str) -> None:
        """Clear unschedulable and the cordoned-at annotation."""
        patch = {
            "metadata": {"annotations": {ANNOTATION_CORDONED_AT: None}},
            "spec": {"unschedulable": False},
        }
        self._patch_node(f"uncordon node {name}", name, patch)

    def taint_node(self, name: str, taint: Taint, *, resource_version: str | None = None) -> None:
        """Add `taint` as `kubectl taint nodes NAME KEY=VALUE:EFFECT --overwrite` does (see the port)."""
        what = f"taint node {name} {taint.key}:{taint.effect}"
        self._edit_taints(what, name, resource_version, lambda taints: taints_with(taints, taint))

    def untaint_node(self, name: str, key: str, *, resource_version: str | None = None) -> None:
        """Remove the taints with `key` as `kubectl taint nodes NAME KEY-` does (see the port)."""
        what = f"untaint node {name} {key}"
        self._edit_taints(what, name, resource_version, lambda taints: taints_without(taints, key))

    def _edit_taints(
        self,
        what: str,
        name: str,
        resource_version: str | None,
        edit: TaintEdit,
    ) -> None:
        # kubectl taint reads the node, edits the list and sends it whole (spec.taints has no merge
        # key, so a strategic merge replaces it like a JSON merge patch does); the read's
        # resourceVersion in the patch makes a concurrent edit a 409 instead of a lost update. The raw
        # list is kept, so fields the domain model drops (timeAdded of NoExecute taints) survive.
        document = decode_json(self._request(what, "GET", _node_path(name)), what)
        taints = edited_taints(document, resource_version, edit, what)
        if taints is None:
            return  # already as wanted
        patch: dict[str, Any] = {"spec": {"taints": taints}}
        if current := node_resource_version(document):
            patch["metadata"] = {"resourceVersion": current}
        self._patch_node(what, name, patch)

    def _patch_node(self, what: str, name: str, patch: dict[str, Any]) -> None:
        # Without _content_type, kubernetes 37.0.1 sends a dict body as a strategic merge patch; a
        # JSON merge patch (RFC 7386) says exactly what we mean, null deletes included.
        self._request(what, "PATCH", _node_path(name), body=patch, content_type=MERGE_PATCH)

    def set_provisioning_request_conditions(self, update: ConditionUpdate) -> None:
        """Merge-patch `status.conditions` through the status subresource, the uid as precondition."""
        # A JSON merge patch replaces the whole list, which the update carries whole (the conditions
        # of other writers included, as read). The uid makes a re-created request a 409.
        metadata = {"uid": update.uid} if update.uid else {}
        patch = {
            "metadata": metadata,
            "status": {"conditions": [condition_to_json(c) for c in update.conditions]},
        }
        path = api_path(
            "/apis/{group}/{version}/namespaces/{namespace}/provisioningrequests/{name}/status",
            group=PROVISIONING_API_GROUP,
            version=update.version,
            namespace=update.namespace,
            name=update.name,
        )
        self._request(
            f"set conditions of provisioning request {update.key}",
            "PATCH",
            path,
            body=patch,
            content_type=MERGE_PATCH,
        )

    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """Merge-patch the keys of `data` into ConfigMap `namespace/name` (other keys are kept)."""
        self._request(
            f"patch configmap {namespace}/{name}",
            "PATCH",
            api_path("/api/v1/namespaces/{namespace}/configmaps/{name}", namespace=namespace, name=name),
            body={"data": dict(data)},
            content_type=MERGE_PATCH,
        )

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        """Evict through the Eviction API; a missing pod is success; 429 is EvictionBlockedError.
        `dry_run`: the API server judges the eviction (PodDisruptionBudgets too) and evicts nothing."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = _pod_path(namespace, name) + "/eviction" + ("?dryRun=All" if dry_run else "")
        with contextlib.suppress(NotFoundError):  # the pod is gone already: what eviction wanted
            self._caller.call(
                f"evict pod {namespace}/{name}",
                lambda: body_of(self._caller.send("POST", path, body=body)),
                failure=ClusterActionError,
                throttled=EvictionBlockedError,  # a PodDisruptionBudget said no: retry in a later run
                retry_throttled=False,
            )

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete a pod, bypassing PodDisruptionBudgets; a missing pod is success."""
        self._delete(
            f"delete pod {namespace}/{name}",
            _pod_path(namespace, name),
            query=(("gracePeriodSeconds", grace_seconds),),
        )

    def delete_node(self, name: str) -> None:
        """Delete a Node object; a missing node is success."""
        self._delete(f"delete node {name}", _node_path(name))

    def _delete(self, what: str, path: str, *, query: Sequence[tuple[str, QueryValue]] = ()) -> None:
        with contextlib.suppress(NotFoundError):  # the object is gone already: what the delete wanted
            self._request(what, "DELETE", path, query=query)

    def _request(
        self,
        what: str,
        method: str,
        path: str,
        *,
        body: object = None,
        content_type: str = "application/json",
        query: Sequence[tuple[str, QueryValue]] = (),
    ) -> bytes:
        """One request, its raw body read; a failure is a ClusterActionError (or what
        `ApiCaller.call` maps its status to)."""
        send = self._caller.send
        return self._caller.call(
            what,
            lambda: body_of(send(method, path, query=query, body=body, content_type=content_type)),
            failure=ClusterActionError,
        )


def _node_path(name: str) -> str:
    return api_path("/api/v1/nodes/{name}", name=name)


def _pod_path(namespace: str, name: str) -> str:
    return api_path("/api/v1/namespaces/{namespace}/pods/{name}", namespace=namespace, name=name)
