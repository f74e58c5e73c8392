"""The request router of the fake Kubernetes API server: one HTTP request in, one answer out.

`Router.dispatch` records the request, applies injected faults, authenticates it, and routes it as the
API server's RequestInfo does: health and version, discovery, then ``/api/v1/...`` and
``/apis/<group>/<version>/...`` resource paths (authorized against the enforced ClusterRole) to the
reads here and the writes of `ObjectWriter`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from shared.local.kube_api_access import AccessControl
from shared.local.kube_api_http import CallLog, RecordedCall, Response, Stream, json_response
from shared.local.kube_api_resources import (
    RESOURCES,
    VERSION_INFO,
    ApiError,
    ServedResource,
    bad_request,
    dumps,
    not_found,
    status_body,
)
from shared.local.kube_api_store import ObjectStore
from shared.local.kube_api_tables import as_table, discovery_document, wants_table
from shared.local.kube_api_watch import WatchStream
from shared.local.kube_api_writes import ObjectWriter, parse_body

_NOT_FOUND = "the server could not find the requested resource"


def _method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")


def _dry_run(query: dict[str, str]) -> bool:
    value = query.get("dryRun")
    if value is None or value == "":
        return False
    if value != "All":
        raise bad_request(f'unsupported dry run value "{value}", only "All" is supported')
    return True


def _recorded_body(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True, slots=True)
class _MemberRequest:
    """A request on one named object (and maybe a subresource of it)."""

    method: str
    res: ServedResource
    namespace: str | None
    name: str
    sub: str | None
    query: dict[str, str]
    text: str
    content_type: str
    table: bool


def _split_resource_path(parts: list[str]) -> tuple[str, str, list[str], str | None]:
    """(API group, version, the path after it, namespace) of a resource path; 404 for another path."""
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, _NOT_FOUND)
    namespace: str | None = None
    # As the API server's RequestInfo: namespaces/<name>/status is the Namespace's own subresource.
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    return group, version, rest, namespace


class Router:
    """Answers requests from an `ObjectStore` (reads) and an `ObjectWriter` (writes)."""

    def __init__(
        self,
        store: ObjectStore,
        writer: ObjectWriter,
        access: AccessControl,
        log: CallLog,
        *,
        url: Callable[[], str],
        stopping: threading.Event,
    ) -> None:
        self._store = store
        self._writer = writer
        self._access = access
        self._log = log
        self._url = url
        self._stopping = stopping

    def dispatch(
        self, method: str, raw_path: str, headers: dict[str, str], raw_body: bytes, client_host: str = ""
    ) -> Any:
        """Handle one request; returns a Response, a Stream or _DROP. Runs on a handler thread."""
        split = urlsplit(raw_path)
        path = split.path
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        text = raw_body.decode("utf-8", errors="replace") if raw_body else ""
        injected = self._log.receive(RecordedCall(method, path, query, _recorded_body(text), headers))
        if injected is not None:
            return injected
        anonymous = self._access.is_anonymous(headers, client_host)
        if not self._access.authenticates(headers, anonymous):
            return json_response(401, status_body(401, "Unauthorized", "Unauthorized"))
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
        except ApiError as err:
            return json_response(err.code, err.status(), err.headers)
        except Exception as exc:  # a bug in the fake: answer like the real server would
            message = f"fake kube-apiserver error: {type(exc).__name__}: {exc}"
            return json_response(500, status_body(500, "InternalError", message))

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
    ) -> Response | Stream:
        if path.rstrip("/") in ("/healthz", "/livez", "/readyz"):
            return Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if path.rstrip("/") == "/version":
            return json_response(200, VERSION_INFO)
        parts = [unquote(p) for p in path.strip("/").split("/")]
        discovery = discovery_document(parts, self._url()) if method == "GET" else None
        if discovery is not None:
            return json_response(200, discovery)
        group, version, rest, namespace = _split_resource_path(parts)
        if rest and restricted:
            self._access.authorize(method, query, group, rest, namespace)
        res = RESOURCES.get((group, version, rest[0] if rest else ""))
        if res is None or len(rest) > 3 or (namespace is not None and not res.namespaced):
            raise ApiError(404, _NOT_FOUND)
        if res.namespaced and namespace is None and len(rest) > 1:
            raise ApiError(404, _NOT_FOUND)
        table = wants_table(accept)
        if len(rest) <= 1:
            return self._collection(method, res, namespace, query, text, table)
        sub = rest[2] if len(rest) > 2 else None
        request = _MemberRequest(method, res, namespace, rest[1], sub, query, text, content_type, table)
        return self._member(request)

    def _collection(
        self,
        method: str,
        res: ServedResource,
        namespace: str | None,
        query: dict[str, str],
        text: str,
        table: bool,
    ) -> Response | Stream:
        dry_run = _dry_run(query)  # validated on every request, as before routing by verb
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                return WatchStream(self._store, self._stopping, res, namespace, query, table).stream()
            if table:
                return self._list_table(res, namespace, query)
            return self._list(res, namespace, query)
        if method == "POST" and (namespace is not None or not res.namespaced):
            return self._writer.create(res, namespace, parse_body(text), dry_run)
        raise _method_not_allowed()

    def _member(self, r: _MemberRequest) -> Response | Stream:
        res, name, sub = r.res, r.name, r.sub
        key = (r.namespace or "", name)
        dry_run = _dry_run(r.query)
        if sub is not None and sub not in res.subresources:
            raise ApiError(404, _NOT_FOUND)
        if sub == "eviction":
            if r.method != "POST":
                raise _method_not_allowed()
            return self._writer.evict(key, parse_body(r.text), dry_run)
        if r.method == "GET" and sub is None and r.query.get("watch") in ("true", "1"):
            # kubectl get <kind> <name> -w: a watch of the list narrowed to one name
            narrowed = dict(r.query, fieldSelector=f"metadata.name={name}")
            namespace = r.namespace if res.namespaced else None
            return WatchStream(self._store, self._stopping, res, namespace, narrowed, r.table).stream()
        if r.method == "GET":
            return self._get(res, key, sub, r.query, r.table)
        if r.method == "PATCH":
            return self._writer.patch(res, key, sub, r.text, r.content_type, dry_run)
        if r.method == "PUT":
            return self._writer.replace(res, key, sub, parse_body(r.text), dry_run)
        if r.method == "DELETE" and sub is None:
            options = parse_body(r.text) if r.text.strip() else {}
            return self._writer.delete(res, key, options, dry_run)
        raise _method_not_allowed()

    # ------------------------------------------------------------------ reads

    def _get(
        self, res: ServedResource, key: tuple[str, str], sub: str | None, query: dict[str, str], table: bool
    ) -> Response:
        store = self._store
        with store.lock:
            obj = store.get(res, key)
            if obj is None:
                raise not_found(res, key[1])
            if table and sub is None:
                meta = {"resourceVersion": str(store.rv)}
                return json_response(
                    200, as_table(res, [store.present(res, obj)], meta, query, now=store.now())
                )
            return json_response(200, store.present(res, obj))

    def _list(self, res: ServedResource, namespace: str | None, query: dict[str, str]) -> Response:
        store = self._store
        with store.lock:
            selected, meta = store.select(res, namespace, query)
            items = [store.encoded_item(res, key, obj) for key, obj in selected]
            head = dumps({"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta})
            return Response(200, head[:-1] + b',"items":[' + b",".join(items) + b"]}")

    def _list_table(self, res: ServedResource, namespace: str | None, query: dict[str, str]) -> Response:
        store = self._store
        with store.lock:
            selected, meta = store.select(res, namespace, query)
            shown = [store.present(res, o) for _, o in selected]
            return json_response(200, as_table(res, shown, meta, query, now=store.now()))
