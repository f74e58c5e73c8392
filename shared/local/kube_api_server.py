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

Layout: this module is the server's face (lifecycle, seeding, inspection, access, fault injection);
the work is done by its sibling modules: `kube_api_store` (objects, resourceVersion, generation),
`kube_api_watch` (watch streams), `kube_api_writes` (create, replace, patch, delete, eviction),
`kube_api_router` (routing one request), `kube_api_access` (token and RBAC), `kube_api_http` (the HTTP
handler, recorded calls and injected faults), and the wire-format helpers `kube_api_resources`,
`kube_api_selectors`, `kube_api_patches` and `kube_api_tables`.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from http.server import ThreadingHTTPServer
from pathlib import Path

from shared.local.kube_api_access import AccessControl
from shared.local.kube_api_http import CallLog, Injection, RecordedCall, make_handler
from shared.local.kube_api_resources import (
    CONFIG_MAPS,
    COSCHEDULING_POD_GROUPS,
    DAEMONSETS,
    DEVICE_CLASSES,
    EVENTS,
    NAMESPACES,
    NODES,
    PDBS,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    PVCS,
    PVS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STORAGE_CLASSES,
    VOLCANO_POD_GROUPS,
    JsonObj,
)
from shared.local.kube_api_router import Router
from shared.local.kube_api_store import ObjectStore
from shared.local.kube_api_writes import ObjectWriter

__all__ = ["FakeKubeApiServer", "RecordedCall"]


class FakeKubeApiServer:
    """An in-memory Kubernetes API server on 127.0.0.1 for the official ``kubernetes`` client."""

    def __init__(self, *, allow_anonymous_loopback: bool = False) -> None:
        self._store = ObjectStore()
        self._lock = self._store.lock  # one lock for the store, the call log and the access rules
        self._stopping = threading.Event()
        self._writer = ObjectWriter(self._store)
        # kubectl sends no bearer token over plain HTTP: let it in from loopback as an unrestricted user.
        self._access = AccessControl(self._lock, allow_anonymous_loopback=allow_anonymous_loopback)
        self._log = CallLog(self._lock, self._stopping)
        self._router = Router(
            self._store, self._writer, self._access, self._log, url=lambda: self.url, stopping=self._stopping
        )
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def allow_anonymous_loopback(self) -> bool:
        """Whether tokenless requests from 127.0.0.1 are let in as an unrestricted user (kubectl)."""
        return self._access.allow_anonymous_loopback

    @allow_anonymous_loopback.setter
    def allow_anonymous_loopback(self, value: bool) -> None:
        self._access.allow_anonymous_loopback = value

    @property
    def eviction_marks_terminating(self) -> bool:
        """Whether an eviction marks the pod terminating (Succeeded) instead of removing it."""
        return self._writer.marks_terminating

    @eviction_marks_terminating.setter
    def eviction_marks_terminating(self, value: bool) -> None:
        self._writer.marks_terminating = value

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeKubeApiServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        handler = make_handler(self._router.dispatch, self._lock, self._connections)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
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
        with self._store.changed:
            self._store.changed.notify_all()
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
        return self._store.seed(PODS, obj)

    def add_node(self, obj: JsonObj) -> JsonObj:
        """Store a new node; returns the stored copy."""
        return self._store.seed(NODES, obj)

    def add_pdb(self, obj: JsonObj) -> JsonObj:
        """Store a new policy/v1 PodDisruptionBudget; returns the stored copy."""
        return self._store.seed(PDBS, obj)

    def add_daemonset(self, obj: JsonObj) -> JsonObj:
        """Store a new apps/v1 DaemonSet (namespace defaults to "default"); returns the stored copy."""
        return self._store.seed(DAEMONSETS, obj)

    def add_pvc(self, obj: JsonObj) -> JsonObj:
        """Store a new PersistentVolumeClaim (namespace defaults to "default"); returns the stored copy."""
        return self._store.seed(PVCS, obj)

    def add_pv(self, obj: JsonObj) -> JsonObj:
        """Store a new PersistentVolume; returns the stored copy."""
        return self._store.seed(PVS, obj)

    def add_storage_class(self, obj: JsonObj) -> JsonObj:
        """Store a new storage.k8s.io/v1 StorageClass; returns the stored copy."""
        return self._store.seed(STORAGE_CLASSES, obj)

    def add_namespace(self, obj: JsonObj) -> JsonObj:
        """Store a new Namespace (labelled kubernetes.io/metadata.name, phase Active); returns a copy."""
        return self._store.seed(NAMESPACES, obj)

    def add_provisioning_request(self, obj: JsonObj) -> JsonObj:
        return self._store.seed(PROVISIONING_REQUESTS, obj)

    def add_pod_template(self, obj: JsonObj) -> JsonObj:
        return self._store.seed(POD_TEMPLATES, obj)

    def add_dra_object(self, obj: JsonObj) -> JsonObj:
        """A resource.k8s.io/v1 ResourceSlice, DeviceClass, ResourceClaim or ResourceClaimTemplate."""
        served = {
            r.kind: r for r in (RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)
        }
        return self._store.seed(served[obj["kind"]], obj)

    def add_config_map(self, obj: JsonObj) -> JsonObj:
        return self._store.seed(CONFIG_MAPS, obj)

    def get_config_map(self, namespace: str, name: str) -> JsonObj | None:
        return self._store.get_copy(CONFIG_MAPS, (namespace, name))

    def add_pod_group(self, obj: JsonObj) -> JsonObj:
        """A coscheduling or Volcano PodGroup, by the group of its apiVersion."""
        volcano = str(obj.get("apiVersion") or "").startswith("scheduling.volcano.sh/")
        return self._store.seed(VOLCANO_POD_GROUPS if volcano else COSCHEDULING_POD_GROUPS, obj)

    def get_provisioning_request(self, namespace: str, name: str) -> JsonObj | None:
        return self._store.get_copy(PROVISIONING_REQUESTS, (namespace, name))

    def provisioning_requests(self) -> list[JsonObj]:
        return self._store.all_copies(PROVISIONING_REQUESTS)

    def update_provisioning_request(
        self, namespace: str, name: str, fn: Callable[[JsonObj], None]
    ) -> JsonObj:
        return self._store.update(PROVISIONING_REQUESTS, (namespace, name), fn)

    def get_pod(self, namespace: str, name: str) -> JsonObj | None:
        """A copy of the pod, or None."""
        return self._store.get_copy(PODS, (namespace, name))

    def get_node(self, name: str) -> JsonObj | None:
        """A copy of the node, or None."""
        return self._store.get_copy(NODES, ("", name))

    def pods(self) -> list[JsonObj]:
        """Copies of all pods, sorted by namespace/name."""
        return self._store.all_copies(PODS)

    def nodes(self) -> list[JsonObj]:
        """Copies of all nodes, sorted by name."""
        return self._store.all_copies(NODES)

    def events(self) -> list[JsonObj]:
        """Copies of all events (core/v1 and events.k8s.io/v1), sorted by namespace/name."""
        return self._store.all_copies(EVENTS)

    def pdbs(self) -> list[JsonObj]:
        """Copies of all PodDisruptionBudgets (with a freshly computed status)."""
        return self._store.presented_copies(PDBS)

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Remove a pod; returns whether it existed."""
        return self._store.remove(PODS, (namespace, name))

    def delete_node(self, name: str) -> bool:
        """Remove a node; returns whether it existed."""
        return self._store.remove(NODES, ("", name))

    def update_pod(self, namespace: str, name: str, fn: Callable[[JsonObj], None]) -> JsonObj:
        """Mutate a stored pod in place with ``fn`` under the lock; bumps resourceVersion, returns a copy."""
        return self._store.update(PODS, (namespace, name), fn)

    def update_node(self, name: str, fn: Callable[[JsonObj], None]) -> JsonObj:
        """Mutate a stored node in place with ``fn`` under the lock; bumps resourceVersion, returns a copy."""
        return self._store.update(NODES, ("", name), fn)

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._lock:
            return self._store.rv

    @property
    def evictions(self) -> list[tuple[str, str]]:
        """(namespace, name) of every successful (non dry-run) eviction, in order."""
        with self._lock:
            return list(self._writer.evictions)

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request received so far, in arrival order."""
        return self._log.calls

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        self._log.clear_calls()

    # ------------------------------------------------------------------ access and faults

    def enforce_cluster_role(
        self, role: JsonObj | None, *, user: str = "backlog-scaler", roles: Sequence[JsonObj] = ()
    ) -> None:
        """Authorize every resource request against the rules of `role`, a ClusterRole (None: allow all),
        and of `roles`, Roles bound in their own namespace (each holds there only).

        As the real RBAC authorizer: the request's API group, resource (``pods/eviction`` for a
        subresource) and verb (get, list, watch, create, update, patch, delete, deletecollection) must
        be granted by one rule, else 403 Forbidden. Non-resource paths (version, health) stay open.
        """
        self._access.enforce_cluster_role(role, user, roles)

    def set_clock(self, now: Callable[[], datetime]) -> None:
        """Use `now` as the server's time (creationTimestamp, deletionTimestamp, the tables' AGE): the
        demo's world runs on a simulated clock, and kubectl's ages must be of that clock."""
        with self._store.lock:
            self._store.now = now

    def require_token(self, token: str | Callable[[str], bool] | None) -> None:
        """Demand ``Authorization: Bearer <token>`` on every request, or a header the predicate
        accepts (None disables the check)."""
        self._access.require_token(token)

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
        injection = Injection(
            method.upper() if method else None,
            re.compile(path_regex),
            status,
            delay,
            drop,
            times,
            body,
            retry_after,
        )
        self._log.inject(injection)

    def clear_injections(self) -> None:
        """Remove all pending injections."""
        self._log.clear_injections()
