"""The writes of the fake Kubernetes API server: create, replace, patch, delete and eviction.

As the real API server: optimistic concurrency on ``metadata.resourceVersion`` and ``uid``, the
``status`` subresource split, ``metadata.generation`` of custom resources, DeleteOptions
preconditions, ``dryRun=All``, and evictions that honour PodDisruptionBudgets (see `kube_api_server`).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from shared.local.kube_api_http import Response, json_response
from shared.local.kube_api_patches import has_directive, json_patch, merge_patch
from shared.local.kube_api_resources import (
    EVENTS,
    NAME_SUFFIX_CHARS,
    PATCH_TYPES,
    PDBS,
    PODS,
    ApiError,
    JsonObj,
    ObjectKey,
    ServedResource,
    bad_request,
    conflict,
    not_found,
    rfc3339,
    status_details,
)
from shared.local.kube_api_selectors import label_selector_from_object, selector_matches
from shared.local.kube_api_store import ObjectStore, is_healthy, validate_pdb

_IMMUTABLE_META = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")


def parse_body(text: str) -> Any:
    """The JSON request body; 400 BadRequest when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


def _require_object(res: ServedResource, body: Any) -> JsonObj:
    if not isinstance(body, dict):
        raise bad_request(f"the object provided is unrecognized (must be of type {res.kind})")
    return body


def _check_update_preconditions(
    res: ServedResource, key: ObjectKey, current: JsonObj, new_meta: JsonObj
) -> None:
    """400 for a name or namespace that is not the URL's; 409 for a stale uid or resourceVersion."""
    name = key[1]
    if new_meta.get("name") not in (None, name):
        raise bad_request(
            f"the name of the object ({new_meta['name']}) does not match the name on the URL ({name})"
        )
    if res.namespaced and new_meta.get("namespace") not in (None, "", key[0]):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    cur_meta = current["metadata"]
    if new_meta.get("uid") not in (None, "", cur_meta.get("uid")):
        raise conflict(
            res,
            name,
            f"Precondition failed: UID in precondition: {new_meta['uid']}, "
            f"UID in object meta: {cur_meta.get('uid')}",
        )
    if new_meta.get("resourceVersion") not in (None, "", cur_meta.get("resourceVersion")):
        raise conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )


def _updated(res: ServedResource, current: JsonObj, new: JsonObj, sub: str | None) -> JsonObj:
    """`new` as it is stored over `current`: the status split, generation and immutable metadata."""
    if sub == "status":
        updated = dict(current)
        if "status" in new:
            updated["status"] = new["status"]
        else:
            updated.pop("status", None)
    else:
        updated = dict(new)
        if res.has_status:
            if "status" in current:
                updated["status"] = current["status"]
            else:
                updated.pop("status", None)
    cur_meta = current["metadata"]
    meta = dict(updated.get("metadata") or {})
    if res.custom:
        # The API server owns metadata.generation: +1 when the spec changes, never on status writes.
        generation = int(cur_meta.get("generation") or 1)
        changed = sub != "status" and updated.get("spec") != current.get("spec")
        meta["generation"] = generation + 1 if changed else generation
    for immutable in _IMMUTABLE_META:
        if immutable in cur_meta:
            meta[immutable] = cur_meta[immutable]
        else:
            meta.pop(immutable, None)
    updated["metadata"] = meta
    updated["kind"] = current.get("kind", res.kind)
    updated["apiVersion"] = current.get("apiVersion", res.api_version)
    return updated


def _new_object_meta(res: ServedResource, namespace: str | None, body: JsonObj) -> JsonObj:
    """The metadata of an object to create, its name generated from generateName when asked."""
    if body.get("kind") not in (None, res.kind):
        raise bad_request(f"the object provided is unrecognized (must be of type {res.kind}): {body['kind']}")
    meta = body.get("metadata")
    if meta is None:
        meta = body["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if res.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise ApiError(
                422,
                f'{res.kind} "" is invalid: metadata.name: Required value: name or generateName is required',
                details={
                    "kind": res.kind,
                    "causes": [{"reason": "FieldValueRequired", "field": "metadata.name"}],
                },
            )
        meta["name"] = meta["generateName"] + "".join(secrets.choice(NAME_SUFFIX_CHARS) for _ in range(5))
    meta.pop("resourceVersion", None)
    return meta


def _patched(res: ServedResource, current: JsonObj, patch: Any, media_type: str) -> JsonObj:
    if media_type == "application/json-patch+json":
        patched = json_patch(current, patch)
    else:
        patched = merge_patch(current, patch)
    if not isinstance(patched, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    return patched


def _patch_media_type(res: ServedResource, content_type: str) -> str:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type not in PATCH_TYPES:
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(sorted(PATCH_TYPES))} (server-side apply is not supported by the fake)",
        )
    if res.custom and media_type == "application/strategic-merge-patch+json":
        # Custom resources have no Go struct to read patch strategies from.
        raise ApiError(
            415,
            "the body of the request was in an unknown format - accepted media types "
            "include: application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml",
        )
    return media_type


def _check_delete_preconditions(res: ServedResource, name: str, meta: JsonObj, options: Any) -> None:
    preconditions = (options.get("preconditions") if isinstance(options, dict) else None) or {}
    if preconditions.get("uid") not in (None, meta.get("uid")):
        raise conflict(
            res,
            name,
            f"Precondition failed: UID in precondition: {preconditions['uid']}, "
            f"UID in object meta: {meta.get('uid')}",
        )
    if preconditions.get("resourceVersion") not in (None, meta.get("resourceVersion")):
        raise conflict(
            res,
            name,
            "Precondition failed: ResourceVersion in precondition: "
            f"{preconditions['resourceVersion']}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _event_key(event: JsonObj) -> tuple[str, ...]:
    involved = event.get("involvedObject") or {}
    source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
    return (
        str((event.get("metadata") or {}).get("namespace", "")),
        *(str(involved.get(k, "")) for k in ("kind", "namespace", "name", "uid")),
        str(event.get("type", "")),
        str(event.get("reason", "")),
        str(event.get("message", "")),
        str(source),
    )


def _same_event(store: ObjectStore, res: ServedResource, event: JsonObj) -> JsonObj | None:
    """Count a core/v1 Event that repeats a stored one into it (lock held): count + 1, lastTimestamp.

    On a cluster client-go's EventCorrelator does this before the request (its aggregation key:
    source, involved object, type, reason, message), so `kubectl get events` shows one line with
    "(x3 over 5m)" instead of three; the fake does it for every client, which is what a reader of
    the events sees either way.
    """
    if "involvedObject" not in event:
        return None  # an events.k8s.io/v1 Event: its series are the client's to keep
    wanted = _event_key(event)
    namespace = wanted[0]
    for key in store.namespace_keys(res, namespace):
        stored = store.get(res, key)
        if stored is not None and _event_key(stored) == wanted:
            stored["count"] = int(stored.get("count") or 1) + int(event.get("count") or 1)
            stored["lastTimestamp"] = event.get("lastTimestamp") or rfc3339(store.now())
            stored["metadata"]["resourceVersion"] = store.bump()
            return stored
    return None


class ObjectWriter:
    """The write verbs over an `ObjectStore`; each answers a `Response` or raises `ApiError`."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        # An eviction marks the pod terminating (Succeeded, deletionTimestamp) instead of removing it.
        self.marks_terminating = False
        self.evictions: list[tuple[str, str]] = []  # successful (non dry-run) evictions, in order

    def create(self, res: ServedResource, namespace: str | None, body: Any, dry_run: bool) -> Response:
        body = _require_object(res, body)
        meta = _new_object_meta(res, namespace, body)
        store = self._store
        with store.lock:
            try:
                key = store.fill_new(res, body, namespace, keep_meta=False)
            except ValueError as exc:
                raise ApiError(422, f'{res.kind} "{meta["name"]}" is invalid: {exc}') from None
            if res.store == EVENTS.store and not dry_run and (repeated := _same_event(store, res, body)):
                return json_response(201, store.present(res, repeated))
            if key in store.stores[res.store]:
                raise ApiError(
                    409,
                    f'{res.group_resource} "{key[1]}" already exists',
                    reason="AlreadyExists",
                    details=status_details(res, key[1]),
                )
            if not dry_run:
                body["metadata"]["resourceVersion"] = store.bump()
                store.put(res, key, body)
            return json_response(201, store.present(res, body))

    def replace(
        self, res: ServedResource, key: ObjectKey, sub: str | None, body: Any, dry_run: bool
    ) -> Response:
        body = _require_object(res, body)
        with self._store.lock:
            current = self._store.get(res, key)
            if current is None:
                raise not_found(res, key[1])
            return self._commit_update(res, key, current, body, sub, dry_run)

    def patch(
        self,
        res: ServedResource,
        key: ObjectKey,
        sub: str | None,
        text: str,
        content_type: str,
        dry_run: bool,
    ) -> Response:
        media_type = _patch_media_type(res, content_type)
        patch = parse_body(text)
        if media_type != "application/json-patch+json":
            if not isinstance(patch, dict):
                raise bad_request("a merge patch must be a JSON object")
            if media_type == "application/strategic-merge-patch+json" and has_directive(patch):
                raise bad_request(
                    "strategic merge patch directives ($patch, $setElementOrder ...) are not supported"
                )
        with self._store.lock:
            current = self._store.get(res, key)
            if current is None:
                raise not_found(res, key[1])
            patched = _patched(res, current, patch, media_type)
            return self._commit_update(res, key, current, patched, sub, dry_run)

    def _commit_update(
        self,
        res: ServedResource,
        key: ObjectKey,
        current: JsonObj,
        new: JsonObj,
        sub: str | None,
        dry_run: bool,
    ) -> Response:
        """Check preconditions of an update, keep immutable fields, store it and answer (lock held)."""
        new_meta = new.get("metadata")
        if not isinstance(new_meta, dict):
            new_meta = new["metadata"] = {}
        _check_update_preconditions(res, key, current, new_meta)
        updated = _updated(res, current, new, sub)
        if res is PDBS:
            try:
                validate_pdb(updated)
            except ValueError as exc:
                raise ApiError(422, f'{res.kind} "{key[1]}" is invalid: {exc}') from None
        meta = updated["metadata"]
        if dry_run:
            meta["resourceVersion"] = current["metadata"].get("resourceVersion")
        else:
            meta["resourceVersion"] = self._store.bump()
            self._store.put(res, key, updated)
        return json_response(200, self._store.present(res, updated))

    def delete(self, res: ServedResource, key: ObjectKey, options: Any, dry_run: bool) -> Response:
        name = key[1]
        with self._store.lock:
            current = self._store.get(res, key)
            if current is None:
                raise not_found(res, name)
            meta = current["metadata"]
            _check_delete_preconditions(res, name, meta, options)
            if not dry_run:
                self._store.pop(res, key)
                self._store.bump()
            if res is PODS:
                return json_response(200, current)
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": status_details(res, name, uid=meta.get("uid")),
            }
            return json_response(200, body)

    # ------------------------------------------------------------------ eviction

    def evict(self, key: ObjectKey, body: Any, dry_run: bool) -> Response:
        namespace, name = key
        if not isinstance(body, dict):
            raise bad_request("the object provided is unrecognized (must be of type Eviction)")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name not in (None, "", name):
            raise bad_request("name in URL does not match name in Eviction object")
        store = self._store
        with store.lock:
            pod = store.get(PODS, key)
            if pod is None:
                raise not_found(PODS, name)
            meta = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase")
            success = json_response(
                201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
            )
            if meta.get("deletionTimestamp"):
                return success
            if phase not in ("Pending", "Succeeded", "Failed"):
                self._check_disruption_budget(pod, namespace)
            if dry_run:
                return success
            self.evictions.append(key)
            if self.marks_terminating:
                meta["deletionTimestamp"] = rfc3339(self._store.now())
                meta["deletionGracePeriodSeconds"] = 30
                pod.setdefault("status", {})["phase"] = "Succeeded"
                meta["resourceVersion"] = store.bump()
            else:
                store.pop(PODS, key)
                store.bump()
            return success

    def _check_disruption_budget(self, pod: JsonObj, namespace: str) -> None:
        """Raise 429 when the PDB selecting ``pod`` has no disruption to spare (lock held)."""
        pdbs = self._store.stores[PDBS.store]
        selecting = [
            pdbs[k]
            for k in self._store.namespace_keys(PDBS, namespace)
            if selector_matches(label_selector_from_object(pdbs[k]["spec"].get("selector")), pod)
        ]
        if not selecting:
            return
        if len(selecting) > 1:
            raise ApiError(
                500,
                "This pod has more than one PodDisruptionBudget, "
                "which the eviction subresource does not support.",
            )
        pdb = selecting[0]
        status = self._store.pdb_status(pdb)
        if is_healthy(pod):
            allowed = status["disruptionsAllowed"] > 0
        else:
            policy = pdb["spec"].get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            allowed = policy == "AlwaysAllow" or status["currentHealthy"] >= status["desiredHealthy"]
        if allowed:
            return
        cause = {
            "reason": "DisruptionBudget",
            "message": (
                f"The disruption budget {pdb['metadata']['name']} needs {status['desiredHealthy']} "
                f"healthy pods and has {status['currentHealthy']} currently"
            ),
        }
        raise ApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={"causes": [cause]},
        )
