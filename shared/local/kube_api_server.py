"""A real HTTP server that speaks enough of the Kubernetes REST API for the official client.

``FakeKubeApiServer`` listens on 127.0.0.1 (random free port) and serves the JSON wire format of the
Kubernetes API, so that the unmodified ``kubernetes`` Python client (``CoreV1Api``, ``PolicyV1Api``,
``EventsV1Api`` ...) can be pointed at it with ``Configuration(host=server.url)``. Tests seed and inspect
the state through a thread-safe Python API, and can inject failures (status codes, delays, dropped
connections) per method and path.

Resources: core/v1 ``pods`` (with the ``eviction`` and ``status`` subresources), ``nodes`` (with
``status``), ``events``, ``persistentvolumeclaims``, ``persistentvolumes`` and ``namespaces``;
``events.k8s.io/v1`` ``events`` (same store as core events); ``policy/v1`` ``poddisruptionbudgets``;
``apps/v1`` ``daemonsets``; ``storage.k8s.io/v1`` ``storageclasses``; core/v1 ``podtemplates``; and the
custom resources ``autoscaling.x-k8s.io/v1`` ``provisioningrequests``, ``scheduling.x-k8s.io/v1alpha1`` and
``scheduling.volcano.sh/v1beta1`` ``podgroups`` (with ``status``; ``metadata.generation`` counts spec
changes; strategic merge patch is a 415, as for any custom resource). Verbs: list (all namespaces and
per namespace), get, create (POST), replace (PUT), patch, delete and watch.

The real ``kubectl`` works against it too: discovery (``/api``, ``/api/v1``, ``/apis``,
``/apis/<group>[/<version>]``), server-side ``Table`` output when the ``Accept`` header asks for
``as=Table;v=v1;g=meta.k8s.io`` (kubectl ``get``), and ``watch=true`` streams. kubectl sends no bearer
token over plain HTTP, so ``FakeKubeApiServer(allow_anonymous_loopback=True)`` accepts requests without
an ``Authorization`` header from 127.0.0.1 as an unrestricted user (``kubectl``); a request with a
token is still checked against it and the enforced ClusterRole.

Faithful to the real API server:

* paths, kinds, ``apiVersion``s, and ``Status`` error bodies (``reason``, ``code``, ``details`` with the
  plural resource name as ``kind``, messages such as ``pods "x" not found``);
* ``metadata.resourceVersion`` is one global counter bumped on every write; list responses carry the
  current one; list items omit ``kind``/``apiVersion`` like the real typed lists do;
* pagination with ``limit``/``continue`` (an opaque base64 token holding the last returned key),
  ``remainingItemCount`` when no selector is used, 400 for an invalid token;
* ``fieldSelector`` (``=``, ``==``, ``!=``) on the fields the real server indexes for each resource,
  400 ``field label not supported`` otherwise; full ``labelSelector`` syntax (``=``, ``==``, ``!=``,
  ``in``, ``notin``, existence, ``!key``, ``>``, ``<``);
* patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902: add, remove, replace, move, copy, test;
  a failure is 422), and strategic merge patch; a ``metadata.resourceVersion`` in the patched result
  that differs from the stored one is a 409 Conflict (optimistic concurrency), as is a ``uid`` mismatch;
* a PATCH/PUT of the main resource keeps the stored ``status`` and the ``status`` subresource changes
  only ``status`` (pods, nodes, PDBs), as on the real server;
* creating a pod resets its status to ``{"phase": "Pending"}``; ``generateName`` is honoured; 409
  AlreadyExists; the namespace in the body must match the URL;
* DELETE of a pod returns the pod, DELETE of anything else returns a ``Status`` Success; DeleteOptions
  ``preconditions`` (uid, resourceVersion) are checked;
* evictions (policy/v1): pods that are Pending, Succeeded, Failed or already terminating are evicted
  without consulting PDBs; otherwise the (single) PDB that selects the pod must allow a disruption,
  else 429 TooManyRequests with a ``DisruptionBudget`` cause; more than one PDB is a 500; a not-Ready
  pod may be evicted while the budget is met (the default ``IfHealthyBudget`` policy); success is a
  201 ``Status``;
* ``dryRun=All`` on writes validates and answers without storing anything;
* RBAC, once a ClusterRole is enforced (``enforce_cluster_role``): each resource request needs a rule
  granting its API group, resource (``pods/eviction`` for a subresource) and verb, else 403 Forbidden
  with the real message (``nodes "n1" is forbidden: User "u" cannot patch resource "nodes" ...``);
* namespaces get the ``kubernetes.io/metadata.name`` label and phase ``Active``.

Simplified:

* watches diff the store on every write (no event history): ``resourceVersion`` 0 or absent sends
  every object as ``ADDED``, a later one sends the objects changed since as ``MODIFIED``; deletions
  before the watch started are not replayed; writes in quick succession may coalesce into one event;
  objects leaving a selector are ``DELETED``; no bookmarks;
* no server-side apply (415), no protobuf/CBOR/YAML bodies, no aggregated discovery (the legacy
  discovery documents are served, which clients fall back to), no OpenAPI;
* table columns are a subset of the real ones (nodes: NAME, STATUS, ROLES, AGE, VERSION; pods: NAME,
  READY, STATUS, RESTARTS, AGE, NODE; events: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE; others NAME, AGE);
* continuing a paginated list sees the current state, not a snapshot at the first page's
  resourceVersion, and tokens never expire (inject a 410 to simulate expiry);
* strategic merge patch is treated as a JSON merge patch (lists are replaced, not merged by key);
  ``$patch``-style directives are rejected with 400 rather than interpreted;
* a PDB's expected pod count is the number of matching pods not in a terminal phase (the real
  controller asks the owning controller's scale for percentages/maxUnavailable); healthy means phase
  Running, a ``Ready`` condition ``True`` and no ``deletionTimestamp``; PDB ``status`` is computed on
  every read instead of by a controller;
* pod deletion is immediate (no graceful termination); no admission, defaulting beyond the pod phase,
  validation of object schemas; one identity (one optional bearer token, one ClusterRole) plus,
  when allowed, the unrestricted tokenless loopback user; no Roles, resourceNames or nonResourceURLs
  rules;
* core/v1 and events.k8s.io/v1 events share a store but are not converted into each other's shape.

Notes for users:

* the ``kubernetes`` client (37.x, pydantic models) validates responses, so seeded objects need the
  fields its models require (e.g. a pod's ``spec.containers``); raw reads (``_preload_content=False``)
  do not care;
* ``CoreV1Api.patch_node(name, body)`` with a dict body is sent as
  ``application/strategic-merge-patch+json`` (the generated default is ``application/json-patch+json``,
  which the client's REST layer rewrites for non-list bodies); a list body stays a JSON patch; pass
  ``_content_type="application/merge-patch+json"`` for a merge patch;
* urllib3 retries idempotent requests (GET) on dropped connections and read timeouts by default
  (``Retry(3)``); use ``Configuration.retries = 0`` to see the failure itself.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import json
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["FakeKubeApiServer", "RecordedCall"]

JsonObj = dict[str, Any]
_Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

_REASONS = {
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

_VERSION_INFO = {
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

_NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generateName suffixes
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_PATCH_TYPES = frozenset(
    {"application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json"}
)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _clone(obj: Any) -> Any:
    """Deep copy of a JSON value (faster than copy.deepcopy for plain JSON)."""
    return json.loads(json.dumps(obj))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class _Resource:
    plural: str
    group: str  # "" for the core group
    version: str
    kind: str
    namespaced: bool
    store: str
    fields: dict[str, tuple[str, ...]]  # supported field selectors -> path in the object
    subresources: frozenset[str] = frozenset()
    has_status: bool = False  # main-resource writes keep the stored status
    custom: bool = False  # a CustomResourceDefinition's: metadata.generation, no strategic merge patch

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """The name used in error messages, e.g. ``pods`` or ``poddisruptionbudgets.policy``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_META_FIELDS: dict[str, tuple[str, ...]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
}
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

_PODS = _Resource(
    plural="pods",
    group="",
    version="v1",
    kind="Pod",
    namespaced=True,
    store="pods",
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
    has_status=True,
)
_NODES = _Resource(
    plural="nodes",
    group="",
    version="v1",
    kind="Node",
    namespaced=False,
    store="nodes",
    fields={"metadata.name": ("metadata", "name"), "spec.unschedulable": ("spec", "unschedulable")},
    subresources=frozenset({"status"}),
    has_status=True,
)
_EVENTS = _Resource(
    plural="events",
    group="",
    version="v1",
    kind="Event",
    namespaced=True,
    store="events",
    fields=_EVENT_FIELDS,
)
_EVENTS_V1 = _Resource(  # shares the store of core/v1 events, as on the real server
    plural="events",
    group="events.k8s.io",
    version="v1",
    kind="Event",
    namespaced=True,
    store="events",
    fields=_META_FIELDS,
)
_PDBS = _Resource(
    plural="poddisruptionbudgets",
    group="policy",
    version="v1",
    kind="PodDisruptionBudget",
    namespaced=True,
    store="poddisruptionbudgets",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
)
_DAEMONSETS = _Resource(
    plural="daemonsets",
    group="apps",
    version="v1",
    kind="DaemonSet",
    namespaced=True,
    store="daemonsets",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
)
_PVCS = _Resource(
    plural="persistentvolumeclaims",
    group="",
    version="v1",
    kind="PersistentVolumeClaim",
    namespaced=True,
    store="persistentvolumeclaims",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
)
_PVS = _Resource(
    plural="persistentvolumes",
    group="",
    version="v1",
    kind="PersistentVolume",
    namespaced=False,
    store="persistentvolumes",
    fields={"metadata.name": ("metadata", "name")},
    subresources=frozenset({"status"}),
    has_status=True,
)
_STORAGE_CLASSES = _Resource(
    plural="storageclasses",
    group="storage.k8s.io",
    version="v1",
    kind="StorageClass",
    namespaced=False,
    store="storageclasses",
    fields={"metadata.name": ("metadata", "name")},
)
_NAMESPACES = _Resource(
    plural="namespaces",
    group="",
    version="v1",
    kind="Namespace",
    namespaced=False,
    store="namespaces",
    fields={"metadata.name": ("metadata", "name"), "status.phase": ("status", "phase")},
    subresources=frozenset({"status"}),
    has_status=True,
)
# The CRDs of gang schedulers and of cluster-autoscaler's ProvisioningRequest API, with the status
# subresource their CRDs declare (kubebuilder:subresource:status).
_PROVISIONING_REQUESTS = _Resource(
    plural="provisioningrequests",
    group="autoscaling.x-k8s.io",
    version="v1",
    kind="ProvisioningRequest",
    namespaced=True,
    store="provisioningrequests",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
    custom=True,
)
_PROVISIONING_REQUESTS_V1BETA1 = _Resource(  # the same objects at the older version, as a CRD serves both
    plural="provisioningrequests",
    group="autoscaling.x-k8s.io",
    version="v1beta1",
    kind="ProvisioningRequest",
    namespaced=True,
    store="provisioningrequests",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
    custom=True,
)
_POD_TEMPLATES = _Resource(
    plural="podtemplates",
    group="",
    version="v1",
    kind="PodTemplate",
    namespaced=True,
    store="podtemplates",
    fields=_META_FIELDS,
)
_COSCHEDULING_POD_GROUPS = _Resource(
    plural="podgroups",
    group="scheduling.x-k8s.io",
    version="v1alpha1",
    kind="PodGroup",
    namespaced=True,
    store="podgroups.scheduling.x-k8s.io",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
    custom=True,
)
_VOLCANO_POD_GROUPS = _Resource(
    plural="podgroups",
    group="scheduling.volcano.sh",
    version="v1beta1",
    kind="PodGroup",
    namespaced=True,
    store="podgroups.scheduling.volcano.sh",
    fields=_META_FIELDS,
    subresources=frozenset({"status"}),
    has_status=True,
    custom=True,
)
_SHORT_NAMES = {
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
}
_RESOURCES = {
    (r.group, r.version, r.plural): r
    for r in (
        _PODS,
        _NODES,
        _EVENTS,
        _EVENTS_V1,
        _PDBS,
        _DAEMONSETS,
        _PVCS,
        _PVS,
        _STORAGE_CLASSES,
        _NAMESPACES,
        _PROVISIONING_REQUESTS,
        _PROVISIONING_REQUESTS_V1BETA1,
        _POD_TEMPLATES,
        _COSCHEDULING_POD_GROUPS,
        _VOLCANO_POD_GROUPS,
    )
}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace


# --------------------------------------------------------------------------- errors


class _ApiError(Exception):
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
        self.reason = reason if reason is not None else _REASONS.get(code, "")
        self.details = details
        self.headers = headers or {}

    def status(self) -> JsonObj:
        return _status_body(self.code, self.reason, self.message, self.details)


def _status_body(code: int, reason: str, message: str, details: JsonObj | None = None) -> JsonObj:
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


def _details(res: _Resource, name: str, **extra: Any) -> JsonObj:
    details: JsonObj = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.plural
    details.update(extra)
    return details


def _not_found(res: _Resource, name: str) -> _ApiError:
    return _ApiError(404, f'{res.group_resource} "{name}" not found', details=_details(res, name))


def _conflict(res: _Resource, name: str, message: str) -> _ApiError:
    return _ApiError(
        409,
        f'Operation cannot be fulfilled on {res.group_resource} "{name}": {message}',
        details=_details(res, name),
    )


def _bad_request(message: str) -> _ApiError:
    return _ApiError(400, message)


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present or value is None or not re.fullmatch(r"-?\d+", value):
            return False
        bound = int(self.values[0])
        return int(value) > bound if self.op == ">" else int(value) < bound


_LABEL_TOKEN = re.compile(r"\s*(?:(!=|==|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")
_Token = tuple[str, str]  # ("op" | "id", text)


def _tokenize_label_selector(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _LABEL_TOKEN.match(text, pos)
        if m is None:
            raise _bad_request(f"unable to parse requirement: invalid character in {text!r}")
        tokens.append(("op", m.group(1)) if m.group(1) else ("id", m.group(2)))
        pos = m.end()
    return tokens


class _LabelSelectorParser:
    """Recursive-descent parser for the ``labelSelector`` query syntax (comma = AND)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize_label_selector(text)
        self.i = 0

    def _peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _next(self) -> _Token | None:
        tok = self._peek()
        self.i += 1
        return tok

    def _fail(self, found: _Token | None, expected: str) -> _ApiError:
        what = f"'{found[1]}'" if found else "end of input"
        return _bad_request(
            f"unable to parse requirement: found {what}, expected: {expected} (in {self.text!r})"
        )

    def parse(self) -> list[_Requirement]:
        requirements: list[_Requirement] = []
        if not self.tokens:
            return requirements
        while True:
            requirements.append(self._requirement())
            tok = self._next()
            if tok is None:
                return requirements
            if tok != ("op", ","):
                raise self._fail(tok, "','")

    def _requirement(self) -> _Requirement:
        tok = self._next()
        if tok == ("op", "!"):
            key_tok = self._next()
            if key_tok is None or key_tok[0] != "id":
                raise self._fail(key_tok, "identifier")
            return _Requirement(key_tok[1], "!")
        if tok is None or tok[0] != "id":
            raise self._fail(tok, "!, identifier")
        key = tok[1]
        op = self._peek()
        if op is None or op == ("op", ","):
            return _Requirement(key, "exists")
        self.i += 1
        if op in (("op", "="), ("op", "=="), ("op", "!=")):
            value_tok = self._peek()
            value = ""
            if value_tok is not None and value_tok[0] == "id":
                value = value_tok[1]
                self.i += 1
            return _Requirement(key, "!=" if op[1] == "!=" else "=", (value,))
        if op in (("op", ">"), ("op", "<")):
            value_tok = self._next()
            if value_tok is None or value_tok[0] != "id" or not re.fullmatch(r"-?\d+", value_tok[1]):
                raise self._fail(value_tok, "integer")
            return _Requirement(key, op[1], (value_tok[1],))
        if op in (("id", "in"), ("id", "notin")):
            return _Requirement(key, op[1], self._value_set())
        raise self._fail(op, "in, notin, =, ==, !=, gt, lt")

    def _value_set(self) -> tuple[str, ...]:
        tok = self._next()
        if tok != ("op", "("):
            raise self._fail(tok, "'('")
        values: list[str] = []
        while True:
            tok = self._next()
            if tok is not None and tok[0] == "id":
                values.append(tok[1])
                tok = self._next()
            if tok == ("op", ","):
                continue
            if tok == ("op", ")"):
                break
            raise self._fail(tok, "',' or ')'")
        if not values:
            raise _bad_request(f"unable to parse requirement: values set can't be empty (in {self.text!r})")
        return tuple(values)


def _parse_label_selector(text: str) -> list[_Requirement]:
    """Parse the ``labelSelector`` query syntax; raises _ApiError(400) when malformed."""
    return _LabelSelectorParser(text).parse()


def _label_selector_from_object(selector: JsonObj | None) -> list[_Requirement] | None:
    """Requirements of a ``metav1.LabelSelector``; None means "selects nothing" (a null selector)."""
    if selector is None:
        return None
    requirements = [_Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise ValueError(f"unsupported matchExpressions operator: {expr.get('operator')!r}")
        requirements.append(_Requirement(expr["key"], op, tuple(expr.get("values") or ())))
    return requirements


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` not preceded by a backslash, keeping escapes for a later unescape."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape_field_value(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _parse_field_selector(
    res: _Resource, text: str, label_text: str
) -> list[tuple[tuple[str, ...], str, str]]:
    """Parse ``fieldSelector`` into (path, op, value) triples for the fields ``res`` supports."""
    terms: list[tuple[tuple[str, ...], str, str]] = []
    if not text.strip():
        return terms
    for raw in _split_unescaped(text, ","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(!=|==|=)(.*)", raw)
        if m is None:
            raise _bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        key, op, value = m.group(1), m.group(2), _unescape_field_value(m.group(3))
        path = res.fields.get(key)
        if path is None:
            gv = f"{res.group}/{res.version}"
            raise _bad_request(
                f'Unable to find "{gv}, Resource={res.plural}" that match label selector "{label_text}", '
                f'field selector "{text}": field label not supported: {key}'
            )
        terms.append((path, "!=" if op == "!=" else "=", value))
    return terms


def _field_value(obj: JsonObj, path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "false" if path in (("spec", "unschedulable"), ("spec", "hostNetwork")) else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _labels(obj: JsonObj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


# --------------------------------------------------------------------------- patches


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; builds new dicts along patched paths and never mutates ``target``."""
    if not isinstance(patch, dict):
        return _clone(patch) if isinstance(patch, list) else patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _has_directive(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k.startswith("$") or _has_directive(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_directive(v) for v in value)
    return False


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _ApiError(422, f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str], path: str) -> Any:
    for token in tokens:
        doc = _child(doc, token, path)
    return doc


def _child(container: Any, token: str, path: str) -> Any:
    if isinstance(container, dict):
        if token not in container:
            raise _ApiError(422, f"doc is missing path: {path!r}")
        return container[token]
    if isinstance(container, list):
        index = _list_index(container, token, path, allow_end=False)
        return container[index]
    raise _ApiError(422, f"doc is missing path: {path!r}")


def _list_index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not re.fullmatch(r"0|[1-9]\d*", token):
        raise _ApiError(422, f"invalid array index in path: {path!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise _ApiError(422, f"array index out of bounds in path: {path!r}")
    return index


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch applied to a copy of ``doc``; errors are 422 like the real server."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise _bad_request("json patch must be a JSON array of operation objects")
    doc = _clone(doc)

    def add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
        if not tokens:
            return value
        parent = _resolve(doc, tokens[:-1], path)
        if isinstance(parent, dict):
            parent[tokens[-1]] = value
        elif isinstance(parent, list):
            parent.insert(_list_index(parent, tokens[-1], path, allow_end=True), value)
        else:
            raise _ApiError(422, f"doc is missing path: {path!r}")
        return doc

    def remove(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
        if not tokens:
            return None, doc
        parent = _resolve(doc, tokens[:-1], path)
        old = _child(parent, tokens[-1], path)
        if isinstance(parent, dict):
            del parent[tokens[-1]]
        else:
            del parent[int(tokens[-1])]
        return doc, old

    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise _bad_request(f"json patch operation is missing 'path': {op}")
        tokens = _pointer(path)
        if kind == "add":
            doc = add(doc, tokens, _clone(op.get("value")), path)
        elif kind == "remove":
            doc, _ = remove(doc, tokens, path)
        elif kind == "replace":
            _resolve(doc, tokens, path)  # must exist
            doc, _ = remove(doc, tokens, path)
            doc = add(doc, tokens, _clone(op.get("value")), path)
        elif kind == "test":
            if _resolve(doc, tokens, path) != op.get("value"):
                raise _ApiError(422, f"testing value {path} failed: test failed")
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise _bad_request(f"json patch operation is missing 'from': {op}")
            from_tokens = _pointer(source)
            if kind == "move":
                doc, value = remove(doc, from_tokens, source)
            else:
                value = _clone(_resolve(doc, from_tokens, source))
            doc = add(doc, tokens, value, path)
        else:
            raise _bad_request(f"Unexpected kind: {kind}")
    return doc


# --------------------------------------------------------------------------- PDB arithmetic


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d+%", value):
        return -(-int(value[:-1]) * total // 100)  # ceiling division
    raise ValueError(f"invalid int-or-percent value: {value!r}")


def _is_ready(pod: JsonObj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _is_healthy(pod: JsonObj) -> bool:
    meta = pod.get("metadata") or {}
    return bool(
        not meta.get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
        and _is_ready(pod)
    )


def _selects(requirements: list[_Requirement] | None, obj: JsonObj) -> bool:
    if requirements is None:
        return False
    labels = _labels(obj)
    return all(r.matches(labels) for r in requirements)


# --------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class _PolicyRule:
    """One rule of a ClusterRole; ``*`` matches any group, resource or verb, as in the real RBAC."""

    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]

    def allows(self, group: str, resource: str, verb: str) -> bool:
        return (
            ("*" in self.groups or group in self.groups)
            and ("*" in self.resources or resource in self.resources)
            and ("*" in self.verbs or verb in self.verbs)
        )


def _cluster_role_rules(role: JsonObj) -> tuple[_PolicyRule, ...]:
    if role.get("kind") != "ClusterRole":
        raise ValueError(f"expected a ClusterRole, got {role.get('kind')!r}")
    rules = []
    for rule in role.get("rules") or ():
        if rule.get("nonResourceURLs") or rule.get("resourceNames"):
            raise ValueError("nonResourceURLs and resourceNames are not supported by the fake")
        rules.append(
            _PolicyRule(
                frozenset(rule.get("apiGroups") or ()),
                frozenset(rule.get("resources") or ()),
                frozenset(rule.get("verbs") or ()),
            )
        )
    return tuple(rules)


def _verb(method: str, name: str | None, query: dict[str, str]) -> str:
    """The RBAC verb of a resource request, as the API server's RequestInfo derives it."""
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        return "get" if name else "list"
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _forbidden(
    user: str, verb: str, group: str, resource: str, sub: str | None, name: str | None, namespace: str | None
) -> _ApiError:
    group_resource = f"{resource}.{group}" if group else resource
    full = f"{resource}/{sub}" if sub else resource
    target = f'{group_resource} "{name}"' if name else group_resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    details: JsonObj = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = resource
    return _ApiError(
        403,
        f'{target} is forbidden: User "{user}" cannot {verb} resource "{full}" '
        f'in API group "{group}" {scope}',
        details=details,
    )


# --------------------------------------------------------------------------- discovery and tables (kubectl)

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _api_resources(group: str, version: str) -> list[JsonObj]:
    """The APIResourceList entries of one group/version, subresources included (``pods/eviction``)."""
    entries: list[JsonObj] = []
    for res in _RESOURCES.values():
        if (res.group, res.version) != (group, version):
            continue
        entry: JsonObj = {
            "name": res.plural,
            "singularName": res.kind.lower(),
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": _VERBS,
        }
        if res.plural in _SHORT_NAMES and (res.group, res.plural) != ("events.k8s.io", "events"):
            entry["shortNames"] = _SHORT_NAMES[res.plural]
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
    versions = sorted({r.version for r in _RESOURCES.values() if r.group == name})
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def _discovery(parts: list[str], url: str) -> JsonObj | None:
    """The legacy discovery document at ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>[/<v>]``, else None."""
    groups = sorted({r.group for r in _RESOURCES.values() if r.group})
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


def _wants_table(accept: str) -> bool:
    """Whether the Accept header asks for a meta.k8s.io/v1 Table (``kubectl get`` does)."""
    for media in accept.split(","):
        params = {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in media.split(";")[1:])}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") == "v1":
            return True
    return False


def _age(timestamp: str | None) -> str:
    """``duration.HumanDuration`` of kubectl's AGE column, for an RFC 3339 timestamp."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp)
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int((datetime.now(UTC) - then) / timedelta(seconds=1)))
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


def _node_cells(node: JsonObj) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
    status = "Ready" if ready == "True" else ("NotReady" if ready == "False" else "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in _labels(node) if k.startswith(prefix)) or ["<none>"]
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or ""
    meta = node.get("metadata") or {}
    return [meta.get("name"), status, ",".join(roles), _age(meta.get("creationTimestamp")), version]


def _pod_cells(pod: JsonObj) -> list[Any]:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    if not statuses and status.get("phase") == "Running" and _is_ready(pod):
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
        _age(meta.get("creationTimestamp")),
        spec.get("nodeName") or "<none>",
    ]


def _event_cells(event: JsonObj) -> list[Any]:
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
        _age(last),
        event.get("type", ""),
        event.get("reason", ""),
        target,
        event.get("message") or event.get("note", ""),
    ]


def _namespace_cells(namespace: JsonObj) -> list[Any]:
    meta = namespace.get("metadata") or {}
    phase = (namespace.get("status") or {}).get("phase", "")
    return [meta.get("name"), phase, _age(meta.get("creationTimestamp"))]


def _default_cells(obj: JsonObj) -> list[Any]:
    meta = obj.get("metadata") or {}
    return [meta.get("name"), _age(meta.get("creationTimestamp"))]


_TABLE_COLUMNS: dict[str, tuple[list[JsonObj], Callable[[JsonObj], list[Any]]]] = {
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


def _table(
    res: _Resource, objects: list[JsonObj], meta: JsonObj, query: dict[str, str], *, columns: bool = True
) -> JsonObj:
    """A meta.k8s.io/v1 Table of ``objects``, rows carrying the objects' metadata (``includeObject``)."""
    definitions, cells = _TABLE_COLUMNS.get(res.kind, ([_NAME_COLUMN, _AGE_COLUMN], _default_cells))
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objects:
        row: JsonObj = {"cells": cells(obj)}
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


# --------------------------------------------------------------------------- injections and records


@dataclass(frozen=True)
class RecordedCall:
    """One HTTP request as received (header names lower-cased, JSON body parsed when possible)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]


@dataclass
class _Injection:
    method: str | None
    pattern: re.Pattern[str]
    status: int | None
    delay: float
    drop: bool
    remaining: int  # -1 = forever
    body: JsonObj | None
    retry_after: int | None


@dataclass
class _Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Stream:
    """A streamed (chunked) answer: each item of ``chunks`` is written and flushed as it comes."""

    chunks: Iterator[bytes]
    content_type: str = "application/json"


_DROP = object()  # sentinel: close the connection without answering


def _json_response(status: int, obj: Any, headers: dict[str, str] | None = None) -> _Response:
    return _Response(status, _dumps(obj), headers=headers or {})


# --------------------------------------------------------------------------- the server


class FakeKubeApiServer:
    """An in-memory Kubernetes API server on 127.0.0.1 for the official ``kubernetes`` client."""

    def __init__(self, *, allow_anonymous_loopback: bool = False) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # notified on every write (watches wait on it)
        # kubectl sends no bearer token over plain HTTP: let it in from loopback as an unrestricted user.
        self.allow_anonymous_loopback = allow_anonymous_loopback
        self._rv = 0
        self._stores: dict[str, dict[_Key, JsonObj]] = {r.store: {} for r in _RESOURCES.values()}
        self._sorted_keys: dict[str, list[_Key] | None] = {name: None for name in self._stores}
        # Encoded list items by (store, key) with the resourceVersion they were encoded at: the real
        # API server also serves lists from already-serialized objects in its watch cache.
        self._encoded: dict[tuple[str, _Key], tuple[str, bytes]] = {}
        self._calls: list[RecordedCall] = []
        self._injections: list[_Injection] = []
        self._evictions: list[tuple[str, str]] = []
        self._token: str | None = None
        self._rbac: tuple[_PolicyRule, ...] | None = None  # None: every authenticated request is allowed
        self._rbac_user = ""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.eviction_marks_terminating = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeKubeApiServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="fake-kube-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake delayed requests and close open keep-alive connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeKubeApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT``."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_port}"

    # ------------------------------------------------------------------ seeding and inspection

    def add_pod(self, obj: JsonObj) -> JsonObj:
        """Store a new pod (namespace defaults to "default", phase to Pending); returns the stored copy."""
        return self._seed(_PODS, obj)

    def add_node(self, obj: JsonObj) -> JsonObj:
        """Store a new node; returns the stored copy."""
        return self._seed(_NODES, obj)

    def add_pdb(self, obj: JsonObj) -> JsonObj:
        """Store a new policy/v1 PodDisruptionBudget; returns the stored copy."""
        return self._seed(_PDBS, obj)

    def add_daemonset(self, obj: JsonObj) -> JsonObj:
        """Store a new apps/v1 DaemonSet (namespace defaults to "default"); returns the stored copy."""
        return self._seed(_DAEMONSETS, obj)

    def add_pvc(self, obj: JsonObj) -> JsonObj:
        """Store a new PersistentVolumeClaim (namespace defaults to "default"); returns the stored copy."""
        return self._seed(_PVCS, obj)

    def add_pv(self, obj: JsonObj) -> JsonObj:
        """Store a new PersistentVolume; returns the stored copy."""
        return self._seed(_PVS, obj)

    def add_storage_class(self, obj: JsonObj) -> JsonObj:
        """Store a new storage.k8s.io/v1 StorageClass; returns the stored copy."""
        return self._seed(_STORAGE_CLASSES, obj)

    def add_namespace(self, obj: JsonObj) -> JsonObj:
        """Store a new Namespace (labelled kubernetes.io/metadata.name, phase Active); returns a copy."""
        return self._seed(_NAMESPACES, obj)

    def add_provisioning_request(self, obj: JsonObj) -> JsonObj:
        return self._seed(_PROVISIONING_REQUESTS, obj)

    def add_pod_template(self, obj: JsonObj) -> JsonObj:
        return self._seed(_POD_TEMPLATES, obj)

    def add_pod_group(self, obj: JsonObj) -> JsonObj:
        """A coscheduling or Volcano PodGroup, by the group of its apiVersion."""
        volcano = str(obj.get("apiVersion") or "").startswith("scheduling.volcano.sh/")
        return self._seed(_VOLCANO_POD_GROUPS if volcano else _COSCHEDULING_POD_GROUPS, obj)

    def get_provisioning_request(self, namespace: str, name: str) -> JsonObj | None:
        return self._get_copy(_PROVISIONING_REQUESTS, (namespace, name))

    def provisioning_requests(self) -> list[JsonObj]:
        return self._all_copies(_PROVISIONING_REQUESTS)

    def update_provisioning_request(
        self, namespace: str, name: str, fn: Callable[[JsonObj], None]
    ) -> JsonObj:
        return self._update(_PROVISIONING_REQUESTS, (namespace, name), fn)

    def get_pod(self, namespace: str, name: str) -> JsonObj | None:
        """A copy of the pod, or None."""
        return self._get_copy(_PODS, (namespace, name))

    def get_node(self, name: str) -> JsonObj | None:
        """A copy of the node, or None."""
        return self._get_copy(_NODES, ("", name))

    def pods(self) -> list[JsonObj]:
        """Copies of all pods, sorted by namespace/name."""
        return self._all_copies(_PODS)

    def nodes(self) -> list[JsonObj]:
        """Copies of all nodes, sorted by name."""
        return self._all_copies(_NODES)

    def events(self) -> list[JsonObj]:
        """Copies of all events (core/v1 and events.k8s.io/v1), sorted by namespace/name."""
        return self._all_copies(_EVENTS)

    def pdbs(self) -> list[JsonObj]:
        """Copies of all PodDisruptionBudgets (with a freshly computed status)."""
        with self._lock:
            return [_clone(self._present(_PDBS, obj)) for obj in self._iter_sorted(_PDBS)]

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Remove a pod; returns whether it existed."""
        return self._remove(_PODS, (namespace, name))

    def delete_node(self, name: str) -> bool:
        """Remove a node; returns whether it existed."""
        return self._remove(_NODES, ("", name))

    def update_pod(self, namespace: str, name: str, fn: Callable[[JsonObj], None]) -> JsonObj:
        """Mutate a stored pod in place with ``fn`` under the lock; bumps resourceVersion, returns a copy."""
        return self._update(_PODS, (namespace, name), fn)

    def update_node(self, name: str, fn: Callable[[JsonObj], None]) -> JsonObj:
        """Mutate a stored node in place with ``fn`` under the lock; bumps resourceVersion, returns a copy."""
        return self._update(_NODES, ("", name), fn)

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._lock:
            return self._rv

    @property
    def evictions(self) -> list[tuple[str, str]]:
        """(namespace, name) of every successful (non dry-run) eviction, in order."""
        with self._lock:
            return list(self._evictions)

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._calls)

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        with self._lock:
            self._calls.clear()

    def enforce_cluster_role(self, role: JsonObj | None, *, user: str = "backlog-scaler") -> None:
        """Authorize every resource request against the rules of `role`, a ClusterRole (None: allow all).

        As the real RBAC authorizer: the request's API group, resource (``pods/eviction`` for a
        subresource) and verb (get, list, watch, create, update, patch, delete, deletecollection) must
        be granted by one rule, else 403 Forbidden. Non-resource paths (version, health) stay open.
        """
        rules = None if role is None else _cluster_role_rules(role)
        with self._lock:
            self._rbac = rules
            self._rbac_user = user

    def require_token(self, token: str | None) -> None:
        """Demand ``Authorization: Bearer <token>`` on every request (None disables the check)."""
        with self._lock:
            self._token = token

    def write_kubeconfig(self, path: Path, token: str, name: str = "fake") -> Path:
        """Write a kubeconfig (JSON, which is YAML) that reaches this server with `token`; returns `path`."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        }
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        path.chmod(0o600)
        return path

    def inject(
        self,
        method: str | None,
        path_regex: str,
        *,
        status: int | None = None,
        delay: float = 0.0,
        drop: bool = False,
        times: int = 1,
        body: JsonObj | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Make the next ``times`` (-1: all) requests matching method and path misbehave."""
        if times == 0 or times < -1:
            raise ValueError("times must be positive or -1")
        injection = _Injection(
            method.upper() if method else None,
            re.compile(path_regex),
            status,
            delay,
            drop,
            times,
            body,
            retry_after,
        )
        with self._lock:
            self._injections.append(injection)

    def clear_injections(self) -> None:
        """Remove all pending injections."""
        with self._lock:
            self._injections.clear()

    # ------------------------------------------------------------------ store internals (lock held)

    def _bump(self) -> str:
        self._rv += 1
        self._changed.notify_all()
        return str(self._rv)

    def _keys(self, res: _Resource) -> list[_Key]:
        keys = self._sorted_keys[res.store]
        if keys is None:
            keys = sorted(self._stores[res.store])
            self._sorted_keys[res.store] = keys
        return keys

    def _iter_sorted(self, res: _Resource) -> Iterator[JsonObj]:
        store = self._stores[res.store]
        return (store[key] for key in self._keys(res))

    def _put(self, res: _Resource, key: _Key, obj: JsonObj) -> None:
        store = self._stores[res.store]
        if key not in store:
            self._sorted_keys[res.store] = None
        store[key] = obj

    def _pop(self, res: _Resource, key: _Key) -> JsonObj | None:
        obj = self._stores[res.store].pop(key, None)
        if obj is not None:
            self._sorted_keys[res.store] = None
        return obj

    def _fill_new(self, res: _Resource, obj: JsonObj, namespace: str | None, *, keep_meta: bool) -> _Key:
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
            meta["creationTimestamp"] = _now()
        if res.custom and (not keep_meta or not meta.get("generation")):
            meta["generation"] = 1  # custom resources count spec changes from 1
        if res is _PODS:
            if not keep_meta or not isinstance(obj.get("status"), dict):
                obj["status"] = {}  # the real server ignores the status of a pod being created
            obj["status"].setdefault("phase", "Pending")
        if res is _PDBS:
            self._validate_pdb(obj)
        if res is _NAMESPACES:
            labels = meta.get("labels")
            meta["labels"] = {
                **(labels if isinstance(labels, dict) else {}),
                NAMESPACE_NAME_LABEL: meta["name"],
            }
            if not isinstance(obj.get("status"), dict):
                obj["status"] = {}
            obj["status"].setdefault("phase", "Active")
        return (meta.get("namespace", ""), meta["name"])

    @staticmethod
    def _validate_pdb(obj: JsonObj) -> None:
        spec = obj.get("spec") or {}
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            raise ValueError("minAvailable and maxUnavailable cannot be both set")
        for key in ("minAvailable", "maxUnavailable"):
            if spec.get(key) is not None:
                _scaled(spec[key], 1)
        _label_selector_from_object(spec.get("selector"))

    def _seed(self, res: _Resource, obj: JsonObj) -> JsonObj:
        obj = _clone(obj)
        if not (obj.get("metadata") or {}).get("name"):
            raise ValueError("metadata.name is required")
        with self._lock:
            key = self._fill_new(res, obj, None, keep_meta=True)
            if key in self._stores[res.store]:
                raise ValueError(f"{res.kind} {'/'.join(k for k in key if k)} already exists")
            obj["metadata"]["resourceVersion"] = self._bump()
            self._put(res, key, obj)
            return _clone(obj)

    def _get_copy(self, res: _Resource, key: _Key) -> JsonObj | None:
        with self._lock:
            obj = self._stores[res.store].get(key)
            return None if obj is None else _clone(obj)

    def _all_copies(self, res: _Resource) -> list[JsonObj]:
        with self._lock:
            return [_clone(obj) for obj in self._iter_sorted(res)]

    def _remove(self, res: _Resource, key: _Key) -> bool:
        with self._lock:
            if self._pop(res, key) is None:
                return False
            self._bump()
            return True

    def _update(self, res: _Resource, key: _Key, fn: Callable[[JsonObj], None]) -> JsonObj:
        with self._lock:
            obj = self._stores[res.store].get(key)
            if obj is None:
                raise KeyError(f"{res.kind} {'/'.join(k for k in key if k)} not found")
            fn(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = self._bump()
            return _clone(obj)

    def _present(self, res: _Resource, obj: JsonObj) -> JsonObj:
        """The object as the API shows it (PDBs get a computed status; a custom resource is shown at
        the version asked for: the schemas of the versions served here are the same)."""
        if res.custom and obj.get("apiVersion") != res.api_version:
            return {**obj, "apiVersion": res.api_version}
        if res is not _PDBS:
            return obj
        shown = dict(obj)
        shown["status"] = self._pdb_status(obj)
        return shown

    def _pdb_status(self, pdb: JsonObj) -> JsonObj:
        namespace = pdb["metadata"]["namespace"]
        selector = _label_selector_from_object((pdb.get("spec") or {}).get("selector"))
        pods = self._stores["pods"]
        keys = self._keys(_PODS)
        lo = bisect.bisect_left(keys, (namespace,))
        hi = bisect.bisect_left(keys, (namespace + "\x00",))
        matching = [pods[k] for k in keys[lo:hi] if _selects(selector, pods[k])]
        expected = sum(1 for p in matching if (p.get("status") or {}).get("phase") not in _TERMINAL_PHASES)
        healthy = sum(1 for p in matching if _is_healthy(p))
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

    # ------------------------------------------------------------------ HTTP dispatch

    def _dispatch(
        self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes, client_host: str = ""
    ) -> Any:
        """Handle one request; returns a _Response, a _Stream or _DROP. Runs on a handler thread."""
        split = urlsplit(raw_path)
        path = split.path
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        text = raw_body.decode("utf-8", errors="replace") if raw_body else ""
        recorded_body: Any = None
        if text:
            try:
                recorded_body = json.loads(text)
            except ValueError:
                recorded_body = text
        with self._lock:
            self._calls.append(RecordedCall(method, path, query, recorded_body, headers))
            injection = self._take_injection(method, path)
            token = self._token
        if injection is not None:
            if injection.delay > 0 and self._stopping.wait(injection.delay):
                return _DROP
            if injection.drop:
                return _DROP
            if injection.status is not None or injection.body is not None:
                return self._injected_response(injection)
        anonymous = (
            self.allow_anonymous_loopback
            and "authorization" not in headers
            and client_host in ("127.0.0.1", "::1")
        )
        if token is not None and not anonymous and headers.get("authorization") != f"Bearer {token}":
            return _json_response(401, _status_body(401, "Unauthorized", "Unauthorized"))
        try:
            return self._route(
                method,
                path,
                query,
                text,
                headers.get("content-type", ""),
                accept=headers.get("accept", ""),
                restricted=not anonymous,
            )
        except _ApiError as err:
            return _json_response(err.code, err.status(), err.headers)
        except Exception as exc:  # a bug in the fake: answer like the real server would
            message = f"fake kube-apiserver error: {type(exc).__name__}: {exc}"
            return _json_response(500, _status_body(500, "InternalError", message))

    def _take_injection(self, method: str, path: str) -> _Injection | None:
        for injection in self._injections:
            if injection.method not in (None, method) or not injection.pattern.search(path):
                continue
            if injection.remaining > 0:
                injection.remaining -= 1
                if injection.remaining == 0:
                    self._injections.remove(injection)
            return injection
        return None

    @staticmethod
    def _injected_response(injection: _Injection) -> _Response:
        status = injection.status if injection.status is not None else 200
        headers: dict[str, str] = {}
        if injection.retry_after is not None:
            headers["Retry-After"] = str(injection.retry_after)
        if injection.body is not None:
            return _json_response(status, injection.body, headers)
        reason = _REASONS.get(status, "")
        try:
            message = f"injected {status} {HTTPStatus(status).phrase}"
        except ValueError:
            message = f"injected {status}"
        details = {"retryAfterSeconds": injection.retry_after} if injection.retry_after is not None else None
        return _json_response(status, _status_body(status, reason, message, details), headers)

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        text: str,
        content_type: str,
        *,
        accept: str = "",
        restricted: bool = True,
    ) -> _Response | _Stream:
        if path.rstrip("/") in ("/healthz", "/livez", "/readyz"):
            return _Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if path.rstrip("/") == "/version":
            return _json_response(200, _VERSION_INFO)
        parts = [unquote(p) for p in path.strip("/").split("/")]
        discovery = _discovery(parts, self.url) if method == "GET" else None
        if discovery is not None:
            return _json_response(200, discovery)
        table = _wants_table(accept)
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _ApiError(404, "the server could not find the requested resource")
        namespace: str | None = None
        # As the API server's RequestInfo: namespaces/<name>/status is the Namespace's own subresource.
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if rest and restricted:
            self._authorize(method, query, group, rest, namespace)
        res = _RESOURCES.get((group, version, rest[0] if rest else ""))
        if res is None or len(rest) > 3 or (namespace is not None and not res.namespaced):
            raise _ApiError(404, "the server could not find the requested resource")
        if res.namespaced and namespace is None and len(rest) > 1:
            raise _ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        dry_run = self._dry_run(query)
        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    return self._watch(res, namespace, query, table)
                if table:
                    return self._list_table(res, namespace, query)
                return self._list(res, namespace, query)
            if method == "POST" and (namespace is not None or not res.namespaced):
                return self._create(res, namespace, self._parse_body(text), dry_run)
            raise self._method_not_allowed()
        key = (namespace or "", name)
        if sub is not None and sub not in res.subresources:
            raise _ApiError(404, "the server could not find the requested resource")
        if sub == "eviction":
            if method != "POST":
                raise self._method_not_allowed()
            return self._evict(key, self._parse_body(text), dry_run)
        if method == "GET" and sub is None and query.get("watch") in ("true", "1"):
            # kubectl get <kind> <name> -w: a watch of the list narrowed to one name
            narrowed = dict(query, fieldSelector=f"metadata.name={name}")
            return self._watch(res, namespace if res.namespaced else None, narrowed, table)
        if method == "GET":
            with self._lock:
                obj = self._stores[res.store].get(key)
                if obj is None:
                    raise _not_found(res, name)
                if table and sub is None:
                    meta = {"resourceVersion": str(self._rv)}
                    return _json_response(200, _table(res, [self._present(res, obj)], meta, query))
                return _json_response(200, self._present(res, obj))
        if method == "PATCH":
            return self._patch(res, key, sub, text, content_type, dry_run)
        if method == "PUT":
            return self._replace(res, key, sub, self._parse_body(text), dry_run)
        if method == "DELETE" and sub is None:
            return self._delete(res, key, self._parse_body(text) if text.strip() else {}, dry_run)
        raise self._method_not_allowed()

    def _authorize(
        self, method: str, query: dict[str, str], group: str, rest: list[str], namespace: str | None
    ) -> None:
        """Raise 403 unless the enforced ClusterRole grants this resource request."""
        with self._lock:
            rules, user = self._rbac, self._rbac_user
        if rules is None:
            return
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        verb = _verb(method, name, query)
        full = f"{resource}/{sub}" if sub else resource
        if not any(rule.allows(group, full, verb) for rule in rules):
            raise _forbidden(user, verb, group, resource, sub, name, namespace)

    @staticmethod
    def _method_not_allowed() -> _ApiError:
        return _ApiError(405, "the server does not allow this method on the requested resource")

    @staticmethod
    def _dry_run(query: dict[str, str]) -> bool:
        value = query.get("dryRun")
        if value is None or value == "":
            return False
        if value != "All":
            raise _bad_request(f'unsupported dry run value "{value}", only "All" is supported')
        return True

    @staticmethod
    def _parse_body(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise _bad_request(f"the request body is not valid JSON: {exc}") from None

    # ------------------------------------------------------------------ list

    def _list(self, res: _Resource, namespace: str | None, query: dict[str, str]) -> _Response:
        with self._lock:
            selected, meta = self._select(res, namespace, query)
            items = [self._encoded_item(res, key, obj) for key, obj in selected]
            head = _dumps({"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta})
            return _Response(200, head[:-1] + b',"items":[' + b",".join(items) + b"]}")

    def _list_table(self, res: _Resource, namespace: str | None, query: dict[str, str]) -> _Response:
        with self._lock:
            selected, meta = self._select(res, namespace, query)
            return _json_response(200, _table(res, [self._present(res, o) for _, o in selected], meta, query))

    def _select(
        self, res: _Resource, namespace: str | None, query: dict[str, str]
    ) -> tuple[list[tuple[_Key, JsonObj]], JsonObj]:
        """One page of a list: the (key, object) pairs and the list metadata (lock held)."""
        label_text = query.get("labelSelector", "")
        labels = _parse_label_selector(label_text)
        fields = _parse_field_selector(res, query.get("fieldSelector", ""), label_text)
        limit = self._parse_limit(query.get("limit"))
        token = query.get("continue") or None
        start_after = self._decode_continue(token) if token else None
        filtering = bool(labels or fields)
        with self._lock:
            store = self._stores[res.store]
            keys = self._keys(res)
            lo, hi = 0, len(keys)
            if namespace is not None:
                lo = bisect.bisect_left(keys, (namespace,))
                hi = bisect.bisect_left(keys, (namespace + "\x00",))
            if start_after is not None:
                lo = max(lo, bisect.bisect_right(keys, start_after, lo, hi))
            items: list[tuple[_Key, JsonObj]] = []
            last_key: _Key | None = None
            more = False
            i = lo
            while i < hi:
                obj = store[keys[i]]
                if not filtering or self._matches(obj, labels, fields):
                    if limit and len(items) == limit:
                        more = True
                        break
                    items.append((keys[i], obj))
                    last_key = keys[i]
                i += 1
            meta: JsonObj = {"resourceVersion": str(self._rv)}
            if more and last_key is not None:
                meta["continue"] = self._encode_continue(self._rv, last_key)
                if not filtering:
                    meta["remainingItemCount"] = hi - i
            return items, meta

    # ------------------------------------------------------------------ watch

    def _watch(self, res: _Resource, namespace: str | None, query: dict[str, str], table: bool) -> _Stream:
        """A ``watch=true`` stream: newline-delimited WatchEvents until timeoutSeconds or stop()."""
        label_text = query.get("labelSelector", "")
        labels = _parse_label_selector(label_text)
        fields = _parse_field_selector(res, query.get("fieldSelector", ""), label_text)
        timeout = self._parse_limit(query.get("timeoutSeconds"))
        since_text = query.get("resourceVersion") or "0"
        if not since_text.isdigit():
            raise _bad_request(f"invalid resourceVersion: {since_text!r}")
        since = int(since_text)

        def matching(before: dict[_Key, tuple[str, JsonObj]]) -> dict[_Key, tuple[str, JsonObj]]:
            """Copies of the watched objects by key with their resourceVersion (lock held)."""
            store = self._stores[res.store]
            found = {}
            for key in self._keys(res):
                if namespace is not None and key[0] != namespace:
                    continue
                obj = store[key]
                if self._matches(obj, labels, fields):
                    version = str(obj["metadata"].get("resourceVersion", ""))
                    known = before.get(key)
                    if known is not None and known[0] == version and res is not _PDBS:
                        found[key] = known
                    else:
                        found[key] = (version, _clone(self._present(res, obj)))
            return found

        def events() -> Iterator[bytes]:
            deadline = time.monotonic() + timeout if timeout else None
            first = True

            def encode(kind: str, obj: JsonObj) -> bytes:
                nonlocal first
                shown: JsonObj = obj
                if table:
                    shown = _table(
                        res,
                        [obj],
                        {"resourceVersion": obj["metadata"].get("resourceVersion")},
                        query,
                        columns=first,
                    )
                first = False
                return _dumps({"type": kind, "object": shown}) + b"\n"

            with self._lock:
                seen, rv = matching({}), self._rv
            initial = [
                encode("ADDED" if since == 0 else "MODIFIED", obj)
                for version, obj in seen.values()
                if since == 0 or int(version or 0) > since
            ]
            yield b"".join(initial)
            while not self._stopping.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    return
                with self._changed:
                    if self._rv == rv:
                        self._changed.wait(timeout=0.5)
                    if self._rv == rv:
                        continue
                    now, rv = matching(seen), self._rv
                out = [encode("DELETED", obj) for key, (_, obj) in seen.items() if key not in now]
                for key, (version, obj) in now.items():
                    before = seen.get(key)
                    if before is None:
                        out.append(encode("ADDED", obj))
                    elif before[0] != version:
                        out.append(encode("MODIFIED", obj))
                seen = now
                if out:
                    yield b"".join(out)

        return _Stream(events())

    def _encoded_item(self, res: _Resource, key: _Key, obj: JsonObj) -> bytes:
        """One list item as JSON, reusing the encoding while its resourceVersion is unchanged."""
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        store = f"{res.store}@{res.version}" if res.custom else res.store  # one encoding per version
        cached = self._encoded.get((store, key))
        if cached is not None and cached[0] == rv and res.kind != "PodDisruptionBudget":
            return cached[1]
        shown = self._present(res, obj)  # PDB status is computed on every read: never cached
        # Typed lists leave out each item's kind and apiVersion; lists of custom resources (served
        # as unstructured objects) keep them.
        encoded = _dumps(
            shown if res.custom else {k: v for k, v in shown.items() if k not in ("kind", "apiVersion")}
        )
        self._encoded[(store, key)] = (rv, encoded)
        return encoded

    @staticmethod
    def _matches(
        obj: JsonObj, labels: list[_Requirement], fields: list[tuple[tuple[str, ...], str, str]]
    ) -> bool:
        for path, op, value in fields:
            if (_field_value(obj, path) == value) != (op == "="):
                return False
        if labels:
            obj_labels = _labels(obj)
            return all(r.matches(obj_labels) for r in labels)
        return True

    @staticmethod
    def _parse_limit(value: str | None) -> int:
        if value is None or value == "":
            return 0
        try:
            limit = int(value)
        except ValueError:
            raise _bad_request(f"invalid limit: {value!r}") from None
        return max(limit, 0)

    @staticmethod
    def _encode_continue(rv: int, key: _Key) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> _Key:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            data = json.loads(raw)
            start = data["start"]
            if (
                data.get("v") != "meta.k8s.io/v1"
                or not isinstance(data.get("rv"), int)
                or not (
                    isinstance(start, list) and len(start) == 2 and all(isinstance(s, str) for s in start)
                )
            ):
                raise ValueError("unexpected token content")
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise _bad_request(f"continue key is not valid: {exc}") from None
        return (start[0], start[1])

    # ------------------------------------------------------------------ create / replace / patch / delete

    def _create(self, res: _Resource, namespace: str | None, body: Any, dry_run: bool) -> _Response:
        if not isinstance(body, dict):
            raise _bad_request(f"the object provided is unrecognized (must be of type {res.kind})")
        if body.get("kind") not in (None, res.kind):
            raise _bad_request(
                f"the object provided is unrecognized (must be of type {res.kind}): {body['kind']}"
            )
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        if res.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _ApiError(
                    422,
                    f'{res.kind} "" is invalid: metadata.name: Required value: '
                    "name or generateName is required",
                    details={
                        "kind": res.kind,
                        "causes": [{"reason": "FieldValueRequired", "field": "metadata.name"}],
                    },
                )
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice(_NAME_SUFFIX_CHARS) for _ in range(5)
            )
        meta.pop("resourceVersion", None)
        with self._lock:
            try:
                key = self._fill_new(res, body, namespace, keep_meta=False)
            except ValueError as exc:
                raise _ApiError(422, f'{res.kind} "{meta["name"]}" is invalid: {exc}') from None
            if key in self._stores[res.store]:
                raise _ApiError(
                    409,
                    f'{res.group_resource} "{key[1]}" already exists',
                    reason="AlreadyExists",
                    details=_details(res, key[1]),
                )
            if not dry_run:
                body["metadata"]["resourceVersion"] = self._bump()
                self._put(res, key, body)
            return _json_response(201, self._present(res, body))

    def _replace(self, res: _Resource, key: _Key, sub: str | None, body: Any, dry_run: bool) -> _Response:
        if not isinstance(body, dict):
            raise _bad_request(f"the object provided is unrecognized (must be of type {res.kind})")
        with self._lock:
            current = self._stores[res.store].get(key)
            if current is None:
                raise _not_found(res, key[1])
            return self._commit_update(res, key, current, body, sub, dry_run)

    def _patch(
        self, res: _Resource, key: _Key, sub: str | None, text: str, content_type: str, dry_run: bool
    ) -> _Response:
        media_type = content_type.split(";")[0].strip().lower()
        if media_type not in _PATCH_TYPES:
            raise _ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(sorted(_PATCH_TYPES))} (server-side apply is not supported by the fake)",
            )
        if res.custom and media_type == "application/strategic-merge-patch+json":
            # Custom resources have no Go struct to read patch strategies from.
            raise _ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
            )
        patch = self._parse_body(text)
        if media_type != "application/json-patch+json":
            if not isinstance(patch, dict):
                raise _bad_request("a merge patch must be a JSON object")
            if media_type == "application/strategic-merge-patch+json" and _has_directive(patch):
                raise _bad_request(
                    "strategic merge patch directives ($patch, $setElementOrder ...) are not supported"
                )
        with self._lock:
            current = self._stores[res.store].get(key)
            if current is None:
                raise _not_found(res, key[1])
            if media_type == "application/json-patch+json":
                patched = _json_patch(current, patch)
            else:
                patched = _merge_patch(current, patch)
            if not isinstance(patched, dict):
                raise _ApiError(422, "the patched object is not a JSON object")
            return self._commit_update(res, key, current, patched, sub, dry_run)

    def _commit_update(
        self, res: _Resource, key: _Key, current: JsonObj, new: JsonObj, sub: str | None, dry_run: bool
    ) -> _Response:
        """Check preconditions of an update, keep immutable fields, store it and answer (lock held)."""
        name = key[1]
        new_meta = new.get("metadata")
        if not isinstance(new_meta, dict):
            new_meta = new["metadata"] = {}
        if new_meta.get("name") not in (None, name):
            raise _bad_request(
                f"the name of the object ({new_meta['name']}) does not match the name on the URL ({name})"
            )
        if res.namespaced and new_meta.get("namespace") not in (None, "", key[0]):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        cur_meta = current["metadata"]
        if new_meta.get("uid") not in (None, "", cur_meta.get("uid")):
            raise _conflict(
                res,
                name,
                f"Precondition failed: UID in precondition: {new_meta['uid']}, "
                f"UID in object meta: {cur_meta.get('uid')}",
            )
        if new_meta.get("resourceVersion") not in (None, "", cur_meta.get("resourceVersion")):
            raise _conflict(
                res,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
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
        meta = dict(updated.get("metadata") or {})
        if res.custom:
            # The API server owns metadata.generation: +1 when the spec changes, never on status writes.
            generation = int(cur_meta.get("generation") or 1)
            changed = sub != "status" and updated.get("spec") != current.get("spec")
            meta["generation"] = generation + 1 if changed else generation
        for immutable in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if immutable in cur_meta:
                meta[immutable] = cur_meta[immutable]
            else:
                meta.pop(immutable, None)
        updated["metadata"] = meta
        updated["kind"] = current.get("kind", res.kind)
        updated["apiVersion"] = current.get("apiVersion", res.api_version)
        if res is _PDBS:
            try:
                self._validate_pdb(updated)
            except ValueError as exc:
                raise _ApiError(422, f'{res.kind} "{name}" is invalid: {exc}') from None
        if dry_run:
            meta["resourceVersion"] = cur_meta.get("resourceVersion")
        else:
            meta["resourceVersion"] = self._bump()
            self._put(res, key, updated)
        return _json_response(200, self._present(res, updated))

    def _delete(self, res: _Resource, key: _Key, options: Any, dry_run: bool) -> _Response:
        name = key[1]
        with self._lock:
            current = self._stores[res.store].get(key)
            if current is None:
                raise _not_found(res, name)
            preconditions = (options.get("preconditions") if isinstance(options, dict) else None) or {}
            meta = current["metadata"]
            if preconditions.get("uid") not in (None, meta.get("uid")):
                raise _conflict(
                    res,
                    name,
                    f"Precondition failed: UID in precondition: {preconditions['uid']}, "
                    f"UID in object meta: {meta.get('uid')}",
                )
            if preconditions.get("resourceVersion") not in (None, meta.get("resourceVersion")):
                raise _conflict(
                    res,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions['resourceVersion']}, "
                    f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                )
            if not dry_run:
                self._pop(res, key)
                self._bump()
            if res is _PODS:
                return _json_response(200, current)
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": _details(res, name, uid=meta.get("uid")),
            }
            return _json_response(200, body)

    # ------------------------------------------------------------------ eviction

    def _evict(self, key: _Key, body: Any, dry_run: bool) -> _Response:
        namespace, name = key
        if not isinstance(body, dict):
            raise _bad_request("the object provided is unrecognized (must be of type Eviction)")
        body_name = (body.get("metadata") or {}).get("name")
        if body_name not in (None, "", name):
            raise _bad_request("name in URL does not match name in Eviction object")
        with self._lock:
            pod = self._stores["pods"].get(key)
            if pod is None:
                raise _not_found(_PODS, name)
            meta = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase")
            success = _json_response(
                201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
            )
            if meta.get("deletionTimestamp"):
                return success
            if phase not in ("Pending", "Succeeded", "Failed"):
                self._check_disruption_budget(pod, namespace)
            if dry_run:
                return success
            self._evictions.append(key)
            if self.eviction_marks_terminating:
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 30
                pod.setdefault("status", {})["phase"] = "Succeeded"
                meta["resourceVersion"] = self._bump()
            else:
                self._pop(_PODS, key)
                self._bump()
            return success

    def _check_disruption_budget(self, pod: JsonObj, namespace: str) -> None:
        """Raise 429 when the PDB selecting ``pod`` has no disruption to spare (lock held)."""
        keys = self._keys(_PDBS)
        lo = bisect.bisect_left(keys, (namespace,))
        hi = bisect.bisect_left(keys, (namespace + "\x00",))
        pdbs = self._stores["poddisruptionbudgets"]
        selecting = [
            pdbs[k]
            for k in keys[lo:hi]
            if _selects(_label_selector_from_object(pdbs[k]["spec"].get("selector")), pod)
        ]
        if not selecting:
            return
        if len(selecting) > 1:
            raise _ApiError(
                500,
                "This pod has more than one PodDisruptionBudget, "
                "which the eviction subresource does not support.",
            )
        pdb = selecting[0]
        status = self._pdb_status(pdb)
        if _is_healthy(pod):
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
        raise _ApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={"causes": [cause]},
        )


# --------------------------------------------------------------------------- HTTP plumbing


def _make_handler(fake: FakeKubeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: avoid delayed-ACK stalls

        def version_string(self) -> str:
            return "fake-kube-apiserver"

        def setup(self) -> None:
            super().setup()
            with fake._lock:
                fake._connections.add(self.connection)

        def finish(self) -> None:
            with fake._lock:
                fake._connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _read_body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _handle(self) -> None:
            body = self._read_body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            result = fake._dispatch(self.command, self.path, headers, body, self.client_address[0])
            if isinstance(result, _Stream):
                self._stream(result)
                return
            if result is _DROP:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            assert isinstance(result, _Response)
            try:
                self.send_response(result.status)
                self.send_header("Content-Type", result.content_type)
                self.send_header("Content-Length", str(len(result.body)))
                self.send_header("Cache-Control", "no-cache, private")
                for name, value in result.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(result.body)
            except OSError:
                self.close_connection = True

        def _stream(self, result: _Stream) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Type", result.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache, private")
                self.end_headers()
                self.wfile.flush()
                for chunk in result.chunks:
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
