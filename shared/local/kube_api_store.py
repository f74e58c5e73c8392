"""`ObjectStore`: the objects of the fake Kubernetes API server, with resourceVersion and generation."""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from shared.local.kube_api_resources import (
    NAMESPACE_NAME_LABEL,
    NAMESPACES,
    PDBS,
    PODS,
    RESOURCES,
    TERMINAL_PHASES,
    JsonObj,
    ObjectKey,
    ServedResource,
    bad_request,
    clone,
    dumps,
    rfc3339,
)
from shared.local.kube_api_selectors import (
    Requirement,
    field_value,
    label_selector_from_object,
    labels_of,
    parse_field_selector,
    parse_label_selector,
    selector_matches,
)

# --------------------------------------------------------------------------- PDB arithmetic


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d+%", value):
        return -(-int(value[:-1]) * total // 100)  # ceiling division
    raise ValueError(f"invalid int-or-percent value: {value!r}")


def is_ready(pod: JsonObj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_healthy(pod: JsonObj) -> bool:
    meta = pod.get("metadata") or {}
    return bool(
        not meta.get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
        and is_ready(pod)
    )


# --------------------------------------------------------------------------- the store


def _encode_continue(rv: int, key: ObjectKey) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> ObjectKey:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        start = data["start"]
        if (
            data.get("v") != "meta.k8s.io/v1"
            or not isinstance(data.get("rv"), int)
            or not (isinstance(start, list) and len(start) == 2 and all(isinstance(s, str) for s in start))
        ):
            raise ValueError("unexpected token content")
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from None
    return (start[0], start[1])


def parse_limit(value: str | None) -> int:
    """A non-negative integer query parameter (limit, timeoutSeconds); 0 when absent."""
    if value is None or value == "":
        return 0
    try:
        limit = int(value)
    except ValueError:
        raise bad_request(f"invalid limit: {value!r}") from None
    return max(limit, 0)


def matches(obj: JsonObj, labels: list[Requirement], fields: list[tuple[tuple[str, ...], str, str]]) -> bool:
    """Whether `obj` passes parsed label and field selectors."""
    for path, op, value in fields:
        if (field_value(obj, path) == value) != (op == "="):
            return False
    if labels:
        obj_labels = labels_of(obj)
        return all(r.matches(obj_labels) for r in labels)
    return True


def validate_pdb(obj: JsonObj) -> None:
    """ValueError when a PodDisruptionBudget's spec is invalid."""
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise ValueError("minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            _scaled(spec[key], 1)
    label_selector_from_object(spec.get("selector"))


class ObjectStore:
    """Every stored object by resource store and (namespace, name), and the global resourceVersion.

    One re-entrant lock guards it (the server's collaborators share it); `changed` is notified on every
    write, which is what watches wait on. Methods named "(lock held)" expect the caller to hold `lock`.
    """

    def __init__(self) -> None:
        # The server's clock: creation and deletion times, and the tables' AGE (the demo sets its own).
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # notified on every write (watches wait on it)
        self.rv = 0
        self.stores: dict[str, dict[ObjectKey, JsonObj]] = {r.store: {} for r in RESOURCES.values()}
        self._sorted_keys: dict[str, list[ObjectKey] | None] = {name: None for name in self.stores}
        # Encoded list items by (store, key) with the resourceVersion they were encoded at: the real
        # API server also serves lists from already-serialized objects in its watch cache.
        self._encoded: dict[tuple[str, ObjectKey], tuple[str, bytes]] = {}

    # ------------------------------------------------------------------ primitives (lock held)

    def bump(self) -> str:
        """The next resourceVersion, waking the watches."""
        self.rv += 1
        self.changed.notify_all()
        return str(self.rv)

    def get(self, res: ServedResource, key: ObjectKey) -> JsonObj | None:
        """The stored object itself (not a copy), or None."""
        return self.stores[res.store].get(key)

    def keys(self, res: ServedResource) -> list[ObjectKey]:
        """The keys of `res`, sorted (cached until the next insert or removal)."""
        keys = self._sorted_keys[res.store]
        if keys is None:
            keys = sorted(self.stores[res.store])
            self._sorted_keys[res.store] = keys
        return keys

    def namespace_keys(self, res: ServedResource, namespace: str) -> list[ObjectKey]:
        """The sorted keys of `res` in `namespace`."""
        keys = self.keys(res)
        lo = bisect.bisect_left(keys, (namespace,))
        hi = bisect.bisect_left(keys, (namespace + "\x00",))
        return keys[lo:hi]

    def iter_sorted(self, res: ServedResource) -> Iterator[JsonObj]:
        store = self.stores[res.store]
        return (store[key] for key in self.keys(res))

    def put(self, res: ServedResource, key: ObjectKey, obj: JsonObj) -> None:
        store = self.stores[res.store]
        if key not in store:
            self._sorted_keys[res.store] = None
        store[key] = obj

    def pop(self, res: ServedResource, key: ObjectKey) -> JsonObj | None:
        obj = self.stores[res.store].pop(key, None)
        if obj is not None:
            self._sorted_keys[res.store] = None
        return obj

    def fill_new(
        self, res: ServedResource, obj: JsonObj, namespace: str | None, *, keep_meta: bool
    ) -> ObjectKey:
        """Set kind, apiVersion and server-managed metadata on an object about to be created."""
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not keep_meta or not meta.get("uid"):
            meta["uid"] = str(uuid.uuid4())
        if not keep_meta or not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = rfc3339(self.now())
        if res.custom and (not keep_meta or not meta.get("generation")):
            meta["generation"] = 1  # custom resources count spec changes from 1
        if res is PODS:
            if not keep_meta or not isinstance(obj.get("status"), dict):
                obj["status"] = {}  # the real server ignores the status of a pod being created
            obj["status"].setdefault("phase", "Pending")
        if res is PDBS:
            validate_pdb(obj)
        if res is NAMESPACES:
            labels = meta.get("labels")
            meta["labels"] = {
                **(labels if isinstance(labels, dict) else {}),
                NAMESPACE_NAME_LABEL: meta["name"],
            }
            if not isinstance(obj.get("status"), dict):
                obj["status"] = {}
            obj["status"].setdefault("phase", "Active")
        return (meta.get("namespace", ""), meta["name"])

    # ------------------------------------------------------------------ seeding and inspection

    def seed(self, res: ServedResource, obj: JsonObj) -> JsonObj:
        """Store a copy of `obj` as new, keeping the metadata it has; returns a copy of what is stored."""
        obj = clone(obj)
        if not (obj.get("metadata") or {}).get("name"):
            raise ValueError("metadata.name is required")
        with self.lock:
            key = self.fill_new(res, obj, None, keep_meta=True)
            if key in self.stores[res.store]:
                raise ValueError(f"{res.kind} {'/'.join(k for k in key if k)} already exists")
            obj["metadata"]["resourceVersion"] = self.bump()
            self.put(res, key, obj)
            return clone(obj)

    def get_copy(self, res: ServedResource, key: ObjectKey) -> JsonObj | None:
        with self.lock:
            obj = self.stores[res.store].get(key)
            return None if obj is None else clone(obj)

    def all_copies(self, res: ServedResource) -> list[JsonObj]:
        with self.lock:
            return [clone(obj) for obj in self.iter_sorted(res)]

    def presented_copies(self, res: ServedResource) -> list[JsonObj]:
        """Copies as the API shows them (PDBs with a freshly computed status)."""
        with self.lock:
            return [clone(self.present(res, obj)) for obj in self.iter_sorted(res)]

    def remove(self, res: ServedResource, key: ObjectKey) -> bool:
        with self.lock:
            if self.pop(res, key) is None:
                return False
            self.bump()
            return True

    def update(self, res: ServedResource, key: ObjectKey, fn: Callable[[JsonObj], None]) -> JsonObj:
        with self.lock:
            obj = self.stores[res.store].get(key)
            if obj is None:
                raise KeyError(f"{res.kind} {'/'.join(k for k in key if k)} not found")
            fn(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = self.bump()
            return clone(obj)

    # ------------------------------------------------------------------ reading as the API shows it

    def present(self, res: ServedResource, obj: JsonObj) -> JsonObj:
        """The object as the API shows it (PDBs get a computed status; a custom resource is shown at
        the version asked for: the schemas of the versions served here are the same)."""
        if res.custom and obj.get("apiVersion") != res.api_version:
            return {**obj, "apiVersion": res.api_version}
        if res is not PDBS:
            return obj
        shown = dict(obj)
        shown["status"] = self.pdb_status(obj)
        return shown

    def pdb_status(self, pdb: JsonObj) -> JsonObj:
        """A PodDisruptionBudget's status, computed from the pods it selects now (lock held)."""
        namespace = pdb["metadata"]["namespace"]
        selector = label_selector_from_object((pdb.get("spec") or {}).get("selector"))
        pods = self.stores["pods"]
        matching = [
            pods[k] for k in self.namespace_keys(PODS, namespace) if selector_matches(selector, pods[k])
        ]
        expected = sum(1 for p in matching if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES)
        healthy = sum(1 for p in matching if is_healthy(p))
        spec = pdb.get("spec") or {}
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            desired = 0
        return {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": max(0, healthy - desired),
            "observedGeneration": (pdb.get("metadata") or {}).get("generation", 1),
        }

    def select(
        self, res: ServedResource, namespace: str | None, query: dict[str, str]
    ) -> tuple[list[tuple[ObjectKey, JsonObj]], JsonObj]:
        """One page of a list: the (key, object) pairs and the list metadata."""
        label_text = query.get("labelSelector", "")
        labels = parse_label_selector(label_text)
        fields = parse_field_selector(res, query.get("fieldSelector", ""), label_text)
        limit = parse_limit(query.get("limit"))
        token = query.get("continue") or None
        start_after = _decode_continue(token) if token else None
        filtering = bool(labels or fields)
        with self.lock:
            store = self.stores[res.store]
            keys = self.keys(res)
            lo, hi = 0, len(keys)
            if namespace is not None:
                lo = bisect.bisect_left(keys, (namespace,))
                hi = bisect.bisect_left(keys, (namespace + "\x00",))
            if start_after is not None:
                lo = max(lo, bisect.bisect_right(keys, start_after, lo, hi))
            items: list[tuple[ObjectKey, JsonObj]] = []
            last_key: ObjectKey | None = None
            more = False
            i = lo
            while i < hi:
                obj = store[keys[i]]
                if not filtering or matches(obj, labels, fields):
                    if limit and len(items) == limit:
                        more = True
                        break
                    items.append((keys[i], obj))
                    last_key = keys[i]
                i += 1
            meta: JsonObj = {"resourceVersion": str(self.rv)}
            if more and last_key is not None:
                meta["continue"] = _encode_continue(self.rv, last_key)
                if not filtering:
                    meta["remainingItemCount"] = hi - i
            return items, meta

    def encoded_item(self, res: ServedResource, key: ObjectKey, obj: JsonObj) -> bytes:
        """One list item as JSON, reusing the encoding while its resourceVersion is unchanged."""
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        store = f"{res.store}@{res.version}" if res.custom else res.store  # one encoding per version
        cached = self._encoded.get((store, key))
        if cached is not None and cached[0] == rv and res.kind != "PodDisruptionBudget":
            return cached[1]
        shown = self.present(res, obj)  # PDB status is computed on every read: never cached
        # Typed lists leave out each item's kind and apiVersion; lists of custom resources (served
        # as unstructured objects) keep them.
        encoded = dumps(
            shown if res.custom else {k: v for k, v in shown.items() if k not in ("kind", "apiVersion")}
        )
        self._encoded[(store, key)] = (rv, encoded)
        return encoded
