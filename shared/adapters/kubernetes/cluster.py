"""`KubernetesCluster`: the `Cluster` port on the official kubernetes client.

Lists are read page by page (`limit` + `continue`) as raw JSON and parsed by `shared.formats.kubernetes`
straight into domain objects: the client's typed models cost ~7x more for thousands of pods. Every
kubernetes/urllib3 failure is mapped here to the project's errors:

    HTTP status / failure           read (list, get)        write (patch, evict, delete, event)
    401, 403                        AuthError               AuthError
    404                             ClusterReadError        NotFoundError (evict/delete: success;
                                    (get_node: None)         get_node: None)
    409                             ClusterReadError        ConflictError
    410 (expired continue token)    list restarted once,    -
                                    then ClusterReadError
    429                             retried (Retry-After),  ThrottledError after retries;
                                    then ThrottledError     eviction: EvictionBlockedError at once
    other 4xx, 5xx                  ClusterReadError        ClusterActionError
    timeout, refused, dropped       ClusterReadError        ClusterActionError
    malformed body / object         ClusterReadError        -

Transport retries (connect errors; read errors on GET only) are urllib3's, configured on the
ApiClient (`auth.default_retries`). A list either returns every object or raises: the controller never
plans on a partial picture. While one page is decoded, the next is already on its way.

Every request needs its (API group, resource, verb) in `rbac.PERMISSIONS`, naming the method: the
ClusterRole is generated from that table and the tests' fake API server enforces it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import boto3
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from shared import constants
from shared.adapters.kubernetes.auth import (
    ClusterEndpoint,
    EksTokenSource,
    api_client_from_kubeconfig,
    build_api_client,
    decode_certificate_authority,
    describe_cluster_endpoint,
    renew_token,
)
from shared.domain.errors import (
    AuthError,
    ClusterActionError,
    ClusterReadError,
    ConflictError,
    EvictionBlockedError,
    NotFoundError,
    ScalerError,
    ThrottledError,
)
from shared.domain.model import ANNOTATION_CORDONED_AT, DaemonSet, Node, Pod, Taint
from shared.domain.operations import ClusterEvent
from shared.domain.provisioning import (
    COSCHEDULING_API_GROUP,
    COSCHEDULING_API_VERSION,
    PROVISIONING_API_GROUP,
    PROVISIONING_API_VERSIONS,
    VOLCANO_API_GROUP,
    VOLCANO_API_VERSION,
    ConditionUpdate,
    PodGroup,
    PodTemplate,
    ProvisioningRequest,
)
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.kubernetes import (
    condition_to_json,
    daemonset_from_json,
    namespace_from_json,
    node_from_json,
    pod_from_json,
    pod_group_from_json,
    pod_template_from_json,
    provisioning_request_from_json,
    pv_from_json,
    pvc_from_json,
    storage_class_from_json,
)

if TYPE_CHECKING:
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_sts import STSClient

    from shared.config import ScalerConfig

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Terminal pods hold no resources and never make a node busy; batch clusters accumulate thousands.
ACTIVE_PODS_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
MERGE_PATCH = "application/merge-patch+json"
NODE_EVENT_NAMESPACE = "default"  # where kubectl and the kubelet put the events of cluster-scoped objects
_MAX_EVENT_NAME = 253 - 17  # a DNS subdomain, minus the ".<16 hex>" suffix


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    """Tuning of `KubernetesCluster`; the defaults suit a cluster of tens of thousands of pods."""

    page_size: int = 500
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    # None lists every pod; the default leaves out Succeeded/Failed pods (see ACTIVE_PODS_FIELD_SELECTOR).
    pod_field_selector: str | None = ACTIVE_PODS_FIELD_SELECTOR
    throttle_retries: int = 3  # 429 on a read or a patch/delete: retries before ThrottledError
    throttle_max_delay: float = 5.0  # cap on one wait, whatever Retry-After asks for
    max_events_per_call: int = 200
    max_event_message_bytes: int = 1024
    max_consecutive_event_failures: int = 3

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError("page_size must be positive")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ValueError("timeouts must be positive")


class _ListExpiredError(ClusterReadError):
    """HTTP 410 on a continued list: the continue token expired; the list must start again."""


class _ReadNotFoundError(ClusterReadError):
    """HTTP 404 on a read: absent object (get_node answers None) or an unknown API path."""


def _body(response: object) -> bytes:
    """The body of a `_preload_content=False` call.

    The client's annotations name the typed model, but such a call returns the urllib3 response
    unread; reading it here keeps transport errors inside the error boundary.
    """
    return cast(urllib3.BaseHTTPResponse, response).data


def _read_page(fetch: Callable[[str | None], object], token: str | None) -> bytes:
    return _body(fetch(token))


_HEAD_CHARS = 16384  # the list envelope's kind, apiVersion and metadata come before its items


def _peek_continue(body: bytes) -> str | None:
    """The continue token from the head of a list body without decoding its items; None if unsure.

    The API server writes `{"kind":...,"apiVersion":...,"metadata":{...},"items":[...]}`; the top-level
    keys are walked in order until `metadata` (found) or `items` (unsure: the caller decodes fully).
    """
    head = body[:_HEAD_CHARS].decode("utf-8", errors="ignore")
    decoder = _JSON_DECODER
    try:
        index = _skip_space(head, 0)
        if head[index] != "{":
            return None
        index += 1
        while True:
            index = _skip_space(head, index)
            key, index = decoder.raw_decode(head, index)
            index = _skip_space(head, index)
            if head[index] != ":" or key == "items":
                return None
            value, index = decoder.raw_decode(head, _skip_space(head, index + 1))
            if key == "metadata":
                token = value.get("continue") if isinstance(value, dict) else None
                return token if isinstance(token, str) and token else None
            index = _skip_space(head, index)
            if head[index] != ",":
                return None
            index += 1
    except (ValueError, IndexError):  # cut-off head or unexpected shape
        return None


_JSON_DECODER = json.JSONDecoder()


def _skip_space(text: str, index: int) -> int:
    while text[index] in " \t\n\r":
        index += 1
    return index


def _continue_of(document: object) -> str | None:
    metadata = document.get("metadata") if isinstance(document, dict) else None
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a list is decoded and parsed.

    Decoding allocates millions of containers and keeps some (the domain objects and their labels);
    every allocation burst triggers collections that walk the growing kept heap: ~30 % of the time
    of a 20,000-pod list. Decoded JSON has no reference cycles, so pausing loses nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_ObjectKey = tuple[str, str, str, str]  # namespace, name, uid, resourceVersion


class _ListParser(Generic[T]):
    """Turns list pages into domain objects, reusing those of the last complete list.

    The API server gives an object a new resourceVersion on every write, so an object listed with
    the same uid and resourceVersion as last time is unchanged: a warm Lambda container re-parses
    only what changed since its previous run. Misses go through `shared.formats.kubernetes`.
    """

    def __init__(self, kind: str, parse_one: Callable[[Mapping[str, Any]], T]) -> None:
        self.kind = kind
        self._parse_one = parse_one
        self._known: dict[_ObjectKey, T] = {}

    def parse_page(self, document: object, source: str, seen: dict[_ObjectKey, T]) -> list[T]:
        """The objects of one decoded page; ClusterReadError naming a malformed one."""
        kind = self.kind
        if (
            not isinstance(document, dict)
            or document.get("kind") not in (f"{kind}List", "List")
            or not isinstance(document.get("items"), list)
        ):
            raise ClusterReadError(f"{source}: expected a {kind}List with items")
        items: list[Any] = document["items"]
        known = self._known
        objects: list[T] = []
        for index, item in enumerate(items):
            try:
                meta = item["metadata"]
                key = (
                    meta.get("namespace") or "",
                    meta["name"],
                    meta.get("uid") or "",
                    meta.get("resourceVersion") or "",
                )
                obj = known.get(key) if key[3] else None
                if obj is None:
                    if item.get("kind", kind) != kind:
                        raise ValueError(f"kind is {item.get('kind')!r}")
                    obj = self._parse_one(item)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ClusterReadError(f"{source}: items[{index}]: malformed {kind}: {detail}") from exc
            seen[key] = obj
            objects.append(obj)
        return objects

    def remember(self, seen: dict[_ObjectKey, T]) -> None:
        """Keep the objects of a complete list (only those: deleted objects are forgotten)."""
        self._known = seen


def _utcnow() -> datetime:
    return datetime.now(UTC)


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


def _rfc3339(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("timestamps sent to Kubernetes must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status_message(exc: ApiException) -> str:
    """`<status> <reason>: <message of the Status body>`, for logs and error messages."""
    message = ""
    if exc.body:
        try:
            body = json.loads(exc.body)
            if isinstance(body, dict):
                message = str(body.get("message") or "")
        except ValueError:
            message = str(exc.body)[:200]
    text = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
    return f"{text}: {message}" if message else text


def _transport_message(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)  # MaxRetryError wraps the last underlying error
    inner = reason if isinstance(reason, Exception) else exc
    return f"{type(inner).__name__}: {inner}"


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return seconds if seconds >= 0 else None


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: max(0, limit - 3)].decode("utf-8", errors="ignore") + "..."


class KubernetesCluster:
    """The `Cluster` port over a ready `kubernetes.client.ApiClient` (see `cluster_from_config`)."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        options: ClusterOptions | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._options = options or ClusterOptions()
        self._core = k8s.CoreV1Api(api_client)
        self._apps = k8s.AppsV1Api(api_client)
        self._storage = k8s.StorageV1Api(api_client)
        self._timeout = (self._options.connect_timeout, self._options.read_timeout)
        self._sleep = sleep
        self._clock = clock
        self._pods = _ListParser("Pod", pod_from_json)
        self._nodes = _ListParser("Node", node_from_json)
        self._daemonsets = _ListParser("DaemonSet", daemonset_from_json)
        self._pvcs = _ListParser("PersistentVolumeClaim", pvc_from_json)
        self._pvs = _ListParser("PersistentVolume", pv_from_json)
        self._storage_classes = _ListParser("StorageClass", storage_class_from_json)
        self._namespaces = _ListParser("Namespace", namespace_from_json)
        self._custom = k8s.CustomObjectsApi(api_client)
        self._provisioning_requests = _ListParser("ProvisioningRequest", provisioning_request_from_json)
        self._pod_templates = _ListParser("PodTemplate", pod_template_from_json)
        self._pod_groups = {
            api: _ListParser("PodGroup", functools.partial(_pod_group_of, api))
            for api in (
                f"{COSCHEDULING_API_GROUP}/{COSCHEDULING_API_VERSION}",
                f"{VOLCANO_API_GROUP}/{VOLCANO_API_VERSION}",
            )
        }

    # ------------------------------------------------------------------ reads

    def list_pods(self) -> tuple[Pod, ...]:
        """Every pod of every namespace (minus terminal ones with the default field selector)."""
        return self._list_pods("pods", self._options.pod_field_selector, complete=True)

    def list_nodes(self) -> tuple[Node, ...]:
        """Every node."""
        return self._list_every("nodes", self._core.list_node, self._nodes)

    def list_daemonsets(self) -> tuple[DaemonSet, ...]:
        """Every DaemonSet of every namespace."""
        return self._list_every("daemonsets", self._apps.list_daemon_set_for_all_namespaces, self._daemonsets)

    def list_persistent_volume_claims(self) -> tuple[PersistentVolumeClaim, ...]:
        """Every PersistentVolumeClaim of every namespace."""
        return self._list_every(
            "persistentvolumeclaims", self._core.list_persistent_volume_claim_for_all_namespaces, self._pvcs
        )

    def list_persistent_volumes(self) -> tuple[PersistentVolume, ...]:
        """Every PersistentVolume."""
        return self._list_every("persistentvolumes", self._core.list_persistent_volume, self._pvs)

    def list_storage_classes(self) -> tuple[StorageClass, ...]:
        """Every StorageClass."""
        return self._list_every("storageclasses", self._storage.list_storage_class, self._storage_classes)

    def list_namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of every namespace, by name."""
        return dict(self._list_every("namespaces", self._core.list_namespace, self._namespaces))

    def list_provisioning_requests(self) -> tuple[ProvisioningRequest, ...]:
        """Every ProvisioningRequest, from v1 or (an older CRD) v1beta1; () when neither is served."""
        for version in PROVISIONING_API_VERSIONS:
            found = self._list_custom(
                PROVISIONING_API_GROUP, version, "provisioningrequests", self._provisioning_requests, None
            )
            if found is not None:
                return found
        return ()

    def list_pod_templates(self) -> tuple[PodTemplate, ...]:
        """Every PodTemplate of every namespace."""
        return self._list_every(
            "podtemplates", self._core.list_pod_template_for_all_namespaces, self._pod_templates
        )

    def list_pod_groups(self) -> tuple[PodGroup, ...]:
        """Every coscheduling and Volcano PodGroup; an API that is not served adds none."""
        found: list[PodGroup] = []
        for api, parser in self._pod_groups.items():
            group, _, version = api.partition("/")
            found.extend(self._list_custom(group, version, "podgroups", parser) or ())
        return tuple(found)

    def _list_custom(
        self,
        group: str,
        version: str,
        plural: str,
        parser: _ListParser[T],
        absent: tuple[T, ...] | None = (),
    ) -> tuple[T, ...] | None:
        """Every object of a custom resource; `absent` when its API answers 404 (no such CRD)."""

        def call(**kwargs: Any) -> Any:
            return self._custom.list_cluster_custom_object(group, version, plural, **kwargs)

        try:
            return self._list_every(f"{plural}.{group}/{version}", call, parser)
        except _ReadNotFoundError:
            logger.debug("%s.%s/%s is not served: the CRD is not installed", plural, group, version)
            return absent

    def _list_every(self, what: str, call: Callable[..., Any], parser: _ListParser[T]) -> tuple[T, ...]:
        """All objects of one list call (all namespaces), paged with `continue`."""
        return self._list_all(
            what,
            lambda token: call(
                limit=self._options.page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
            parser,
        )

    def list_pods_on_node(self, name: str) -> tuple[Pod, ...]:
        """Pods bound to node `name` (same phase filter as `list_pods`)."""
        selector = ",".join(s for s in (f"spec.nodeName={name}", self._options.pod_field_selector) if s)
        # A subset: reuse known pods, but do not forget the others.
        return self._list_pods(f"pods on node {name}", selector, complete=False)

    def _list_pods(self, what: str, selector: str | None, *, complete: bool) -> tuple[Pod, ...]:
        return self._list_all(
            what,
            lambda token: self._core.list_pod_for_all_namespaces(
                limit=self._options.page_size,
                _continue=token,
                field_selector=selector,
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
            self._pods,
            complete=complete,
        )

    def get_node(self, name: str) -> Node | None:
        """A fresh read of node `name`; None when it does not exist."""
        what = f"get node {name}"
        try:
            body = self._call(
                what,
                lambda: _body(
                    self._core.read_node(name, _preload_content=False, _request_timeout=self._timeout)
                ),
                failure=ClusterReadError,
            )
        except _ReadNotFoundError:
            return None
        document = self._decode(body, what)
        try:
            return node_from_json(document)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ClusterReadError(f"{what}: malformed Node: {exc!r}") from exc

    def _list_all(
        self, what: str, fetch: Callable[[str | None], Any], parser: _ListParser[T], *, complete: bool = True
    ) -> tuple[T, ...]:
        try:
            return self._list_pages(what, fetch, parser, complete)
        except _ListExpiredError as exc:
            # A continue token outlived the API server's compaction window: start again, once, so
            # the result is one consistent snapshot rather than two halves.
            logger.warning("listing %s again from the start: %s", what, exc)
        try:
            return self._list_pages(what, fetch, parser, complete)
        except _ListExpiredError as exc:
            raise ClusterReadError(f"list {what}: continue token expired twice: {exc}") from exc

    def _list_pages(
        self, what: str, fetch: Callable[[str | None], Any], parser: _ListParser[T], complete: bool
    ) -> tuple[T, ...]:
        # While one page is decoded and parsed, the next is already requested: the API server and
        # the network work in parallel with us (the fetching thread waits on the socket, GIL free).
        # Its continue token is peeked from the head of the body; the full decode confirms it.
        objects: list[T] = []
        seen: dict[_ObjectKey, T] = {}
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k8s-list")
        try:
            with _gc_paused():
                page, token = 1, None
                pending = self._fetch_page(pool, what, fetch, page, token)
                while True:
                    source = f"list {what} (page {page})"
                    body = pending.result()
                    peeked = _peek_continue(body)
                    prefetched = self._fetch_page(pool, what, fetch, page + 1, peeked) if peeked else None
                    document = self._decode(body, source)
                    objects.extend(parser.parse_page(document, source, seen))
                    next_token = _continue_of(document)
                    if not next_token:
                        if prefetched is not None:
                            prefetched.cancel()
                        if complete:
                            parser.remember(seen)
                        return tuple(objects)
                    if next_token == token:
                        raise ClusterReadError(
                            f"{source}: the API server returned the same continue token again"
                        )
                    if prefetched is None or peeked != next_token:
                        if prefetched is not None:
                            prefetched.cancel()  # never trust a peek the decode contradicts
                        prefetched = self._fetch_page(pool, what, fetch, page + 1, next_token)
                    page, token, pending = page + 1, next_token, prefetched
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # an abandoned request ends by its timeout

    def _fetch_page(
        self,
        pool: ThreadPoolExecutor,
        what: str,
        fetch: Callable[[str | None], Any],
        page: int,
        token: str | None,
    ) -> Future[bytes]:
        return pool.submit(
            self._call,
            f"list {what} (page {page})",
            functools.partial(_read_page, fetch, token),
            failure=ClusterReadError,
        )

    @staticmethod
    def _decode(body: bytes, what: str) -> Any:
        try:
            return json.loads(body)
        except ValueError as exc:  # incl. UnicodeDecodeError
            raise ClusterReadError(f"{what}: response is not valid JSON: {exc}") from exc

    # ------------------------------------------------------------------ writes

    def cordon(self, name: str, at: datetime, *, resource_version: str | None = None) -> None:
        """Mark unschedulable and annotate when; with `resource_version`, only if unchanged since."""
        metadata: dict[str, Any] = {"annotations": {ANNOTATION_CORDONED_AT: _rfc3339(at)}}
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
        edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
    ) -> None:
        # kubectl taint reads the node, edits the list and sends it whole (spec.taints has no merge
        # key, so a strategic merge replaces it like a JSON merge patch does); the read's
        # resourceVersion in the patch makes a concurrent edit a 409 instead of a lost update. The raw
        # list is kept, so fields the domain model drops (timeAdded of NoExecute taints) survive.
        body = self._call(
            what,
            lambda: _body(self._core.read_node(name, _preload_content=False, _request_timeout=self._timeout)),
            failure=ClusterActionError,
        )
        document = self._decode(body, what)
        metadata = document.get("metadata") or {}
        current = str(metadata.get("resourceVersion") or "")
        if resource_version and current != resource_version:
            raise ConflictError(
                f"{what}: the node changed since it was read ({resource_version}, now {current})"
            )
        taints = edit([dict(t) for t in (document.get("spec") or {}).get("taints") or ()])
        if taints is None:
            return  # already as wanted
        patch: dict[str, Any] = {"spec": {"taints": taints}}
        if current:
            patch["metadata"] = {"resourceVersion": current}
        self._patch_node(what, name, patch)

    def _patch_node(self, what: str, name: str, patch: dict[str, Any]) -> None:
        # Without _content_type, kubernetes 37.0.1 sends a dict body as a strategic merge patch; a
        # JSON merge patch (RFC 7386) says exactly what we mean, null deletes included.
        self._call(
            what,
            lambda: _body(
                self._core.patch_node(
                    name,
                    patch,
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
            ),
            failure=ClusterActionError,
        )

    def set_provisioning_request_conditions(self, update: ConditionUpdate) -> None:
        """Merge-patch `status.conditions` through the status subresource, the uid as precondition."""
        # A JSON merge patch replaces the whole list, which the update carries whole (the conditions
        # of other writers included, as read). The uid makes a re-created request a 409.
        metadata = {"uid": update.uid} if update.uid else {}
        patch = {
            "metadata": metadata,
            "status": {"conditions": [condition_to_json(c) for c in update.conditions]},
        }
        self._call(
            f"set conditions of provisioning request {update.key}",
            lambda: _body(
                self._custom.patch_namespaced_custom_object_status(
                    PROVISIONING_API_GROUP,
                    update.version,
                    update.namespace,
                    "provisioningrequests",
                    update.name,
                    patch,
                    _content_type=MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
            ),
            failure=ClusterActionError,
        )

    def evict(self, namespace: str, name: str) -> None:
        """Evict through the Eviction API; a missing pod is success; 429 is EvictionBlockedError."""
        body = k8s.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        )
        with contextlib.suppress(NotFoundError):  # the pod is gone already: what eviction wanted
            self._call(
                f"evict pod {namespace}/{name}",
                lambda: _body(
                    self._core.create_namespaced_pod_eviction(
                        name, namespace, body, _preload_content=False, _request_timeout=self._timeout
                    )
                ),
                failure=ClusterActionError,
                throttled=EvictionBlockedError,  # a PodDisruptionBudget said no: retry in a later run
                retry_throttled=False,
            )

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete a pod, bypassing PodDisruptionBudgets; a missing pod is success."""
        with contextlib.suppress(NotFoundError):
            self._call(
                f"delete pod {namespace}/{name}",
                lambda: _body(
                    self._core.delete_namespaced_pod(
                        name,
                        namespace,
                        grace_period_seconds=grace_seconds,
                        _preload_content=False,
                        _request_timeout=self._timeout,
                    )
                ),
                failure=ClusterActionError,
            )

    def delete_node(self, name: str) -> None:
        """Delete a Node object; a missing node is success."""
        with contextlib.suppress(NotFoundError):
            self._call(
                f"delete node {name}",
                lambda: _body(
                    self._core.delete_node(name, _preload_content=False, _request_timeout=self._timeout)
                ),
                failure=ClusterActionError,
            )

    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        """Create core/v1 Events, best effort: returns how many were written and never raises.

        At most `max_events_per_call` per call; stops at the first auth or throttling failure and after
        `max_consecutive_event_failures` failures in a row (the API server is unwell: do not pile on).
        """
        limit = self._options.max_events_per_call
        if len(events) > limit:
            logger.warning("recording %d of %d events; the rest are dropped", limit, len(events))
        written = 0
        failures = 0
        for event in events[:limit]:
            try:
                self._create_event(event)
            except (AuthError, ThrottledError) as exc:
                logger.warning("stopped recording events after %d: %s", written, exc)
                break
            except ScalerError as exc:
                failures += 1
                logger.warning(
                    "event %s on %s %s not recorded: %s",
                    event.reason,
                    event.target.kind,
                    event.target.name,
                    exc,
                )
                if failures >= self._options.max_consecutive_event_failures:
                    logger.warning("stopped recording events after %d failures in a row", failures)
                    break
            except Exception:  # best effort means best effort: a bug here must not fail the run
                logger.exception("event %s on %s not recorded", event.reason, event.target.name)
                failures += 1
                if failures >= self._options.max_consecutive_event_failures:
                    break
            else:
                written += 1
                failures = 0
        return written

    def _create_event(self, event: ClusterEvent) -> None:
        target = event.target
        cluster_scoped = not target.namespace
        namespace = NODE_EVENT_NAMESPACE if cluster_scoped else target.namespace
        now = self._clock().replace(microsecond=0)
        prefix = target.name[:_MAX_EVENT_NAME].rstrip("-.")  # each DNS label ends alphanumeric
        body = k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name=f"{prefix}.{secrets.token_hex(8)}", namespace=namespace),
            involved_object=k8s.V1ObjectReference(
                api_version="v1",
                kind=target.kind,
                name=target.name,
                namespace=None if cluster_scoped else target.namespace,
                uid=target.uid or None,
            ),
            reason=event.reason,
            message=_truncate_utf8(event.message, self._options.max_event_message_bytes),
            type=event.type.value,
            source=k8s.V1EventSource(component=constants.EVENT_SOURCE),
            reporting_component=constants.EVENT_SOURCE,
            reporting_instance=constants.EVENT_SOURCE,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        self._call(
            f"record event {event.reason} on {target.kind} {target.name}",
            lambda: _body(
                self._core.create_namespaced_event(
                    namespace, body, _preload_content=False, _request_timeout=self._timeout
                )
            ),
            failure=ClusterActionError,
            retry_throttled=False,  # best effort: never wait for an event
        )

    # ------------------------------------------------------------------ the error boundary

    def _call(
        self,
        what: str,
        call: Callable[[], T],
        *,
        failure: type[ClusterReadError] | type[ClusterActionError],
        throttled: type[ScalerError] = ThrottledError,
        retry_throttled: bool = True,
    ) -> T:
        """Run one request (reading the body included) and map its failures to the project's errors.

        A 401 re-signs the EKS token and retries once (safe for writes too: the API server refuses
        before doing anything); a second 401, or one with a token that cannot be renewed, is AuthError.
        """
        attempt = 0
        renewed = False
        while True:
            try:
                return call()
            except ApiException as exc:
                status = exc.status
                if status == 401 and not renewed and renew_token(self._core.api_client.configuration):
                    logger.info("%s: token refused (401), retry once with a newly signed token", what)
                    renewed = True
                    continue
                if status == 429 and retry_throttled and attempt < self._options.throttle_retries:
                    delay = _retry_after(exc)
                    if delay is None:
                        delay = 0.5 * 2**attempt
                    delay = min(delay, self._options.throttle_max_delay)
                    logger.info("%s: throttled (429), retry %d in %.1fs", what, attempt + 1, delay)
                    self._sleep(delay)
                    attempt += 1
                    continue
                raise self._error(exc, what, failure, throttled) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                # Timeouts, refused and dropped connections, truncated bodies (after urllib3's retries).
                raise failure(f"{what}: {_transport_message(exc)}") from exc

    @staticmethod
    def _error(
        exc: ApiException,
        what: str,
        failure: type[ClusterReadError] | type[ClusterActionError],
        throttled: type[ScalerError],
    ) -> ScalerError:
        status = exc.status
        message = f"{what}: {_status_message(exc)}"
        if status in (401, 403):
            return AuthError(message)
        if status == 429:
            return throttled(message)
        writing = issubclass(failure, ClusterActionError)
        if status == 404:
            return NotFoundError(message) if writing else _ReadNotFoundError(message)
        if status == 409 and writing:
            return ConflictError(message)
        if status == 410 and not writing:
            return _ListExpiredError(message)
        return failure(message)


def _pod_group_of(api_version: str, obj: Mapping[str, Any]) -> PodGroup:
    """A PodGroup listed from `api_version` (a list item may leave its apiVersion out)."""
    return pod_group_from_json(obj if obj.get("apiVersion") else {**obj, "apiVersion": api_version})


def cluster_from_config(
    config: ScalerConfig,
    *,
    sts_client: STSClient | None = None,
    eks_client: EKSClient | None = None,
    options: ClusterOptions | None = None,
) -> KubernetesCluster:
    """A `KubernetesCluster` for the configured cluster.

    With `kubernetes.kubeconfig`, from that file (local use). Otherwise the EKS endpoint and CA from
    the config, or from eks:DescribeCluster when either is missing, and a refreshing EKS token.
    Raises ConfigError, AuthError, ClusterReadError (DescribeCluster failed).
    """
    settings = config.kubernetes
    if settings.kubeconfig:
        return KubernetesCluster(api_client_from_kubeconfig(settings.kubeconfig), options)
    if settings.endpoint and settings.certificate_authority:
        endpoint = ClusterEndpoint(
            settings.endpoint, decode_certificate_authority(settings.certificate_authority)
        )
    else:
        eks = eks_client if eks_client is not None else boto3.client("eks", region_name=config.region)
        endpoint = describe_cluster_endpoint(eks, config.cluster_name)
        if settings.endpoint:
            endpoint = ClusterEndpoint(settings.endpoint, endpoint.ca_pem)
    tokens = EksTokenSource(config.cluster_name, config.region, sts_client=sts_client)
    return KubernetesCluster(
        build_api_client(endpoint.url, token_source=tokens, ca_pem=endpoint.ca_pem), options
    )
