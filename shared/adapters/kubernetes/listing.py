"""Paged lists: every object of one list call, page by page (`limit` + `continue`), or an error.

`PagedLister.list_every` prefetches the next page while one is decoded, restarts once on an expired
continue token (HTTP 410), and parses pages with a `ListParser`, which reuses the domain objects of
the last complete list that have not changed since (same uid and resourceVersion).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import urllib3

from shared.adapters.kubernetes.calls import ApiCaller, ListExpiredError, body_of, decode_json
from shared.collector import gc_paused
from shared.domain.errors import ClusterReadError

logger = logging.getLogger(__name__)

T = TypeVar("T")
# One page's request, given the continue token of the page before (None: the first page).
PageFetch = Callable[[str | None], urllib3.BaseHTTPResponse]

_HEAD_CHARS = 16384  # the list envelope's kind, apiVersion and metadata come before its items
_JSON_DECODER = json.JSONDecoder()


def peek_continue(body: bytes) -> str | None:
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


def _skip_space(text: str, index: int) -> int:
    while text[index] in " \t\n\r":
        index += 1
    return index


def _continue_of(document: object) -> str | None:
    metadata = document.get("metadata") if isinstance(document, dict) else None
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


def _read_page(fetch: PageFetch, token: str | None) -> bytes:
    return body_of(fetch(token))


_ObjectKey = tuple[str, str, str, str]  # namespace, name, uid, resourceVersion


class ListParser(Generic[T]):
    """Turns list pages into domain objects, reusing those of the last complete list.

    The API server gives an object a new resourceVersion on every write, so an object listed with
    the same uid and resourceVersion as last time is unchanged: a warm Lambda container re-parses
    only what changed since its previous run. Misses go through `shared.formats.kubernetes`.
    """

    def __init__(
        self,
        kind: str,
        parse_one: Callable[[Mapping[str, Any]], T],
        *,
        per_page: Callable[[], Callable[[Mapping[str, Any]], T]] | None = None,
        skippable: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        """`per_page`: makes the parse of one page, for a parse with a memo of its own (pods).
        `skippable`: objects left out, with a warning, when malformed (the rest of the list stands)."""
        self.kind = kind
        self._parse_one = parse_one
        self._per_page = per_page
        self._skippable = skippable
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
        parse_one = self._per_page() if self._per_page is not None else self._parse_one
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
                    obj = parse_one(item)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                problem = f"{source}: items[{index}]{_named(item)}: malformed {kind}: {detail}"
                if self._skippable is not None and self._skippable(item):
                    logger.warning("%s: left out of this run", problem)
                    continue
                raise ClusterReadError(problem) from exc
            seen[key] = obj
            objects.append(obj)
        return objects

    def remember(self, seen: dict[_ObjectKey, T]) -> None:
        """Keep the objects of a complete list (only those: deleted objects are forgotten)."""
        self._known = seen


def _named(item: object) -> str:
    """ " (namespace/name)" of a listed object, when it has them: an index into one page of a list
    is no name an operator can look the object up by."""
    meta = item.get("metadata") if isinstance(item, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str):
        return ""
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f" ({namespace}/{name})" if isinstance(namespace, str) and namespace else f" ({name})"


class PagedLister:
    """Lists through an `ApiCaller`: all pages of one list call, as one consistent snapshot."""

    def __init__(self, caller: ApiCaller) -> None:
        self._caller = caller

    def list_every(
        self,
        what: str,
        path: str,
        parser: ListParser[T],
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        complete: bool = True,
    ) -> tuple[T, ...]:
        """All objects the collection at `path` (all namespaces) lists, paged with `continue`."""
        caller = self._caller
        return self.list_all(
            what,
            lambda token: caller.send(
                "GET",
                path,
                query=(
                    ("limit", caller.options.page_size),
                    ("continue", token),
                    ("fieldSelector", field_selector),
                    ("labelSelector", label_selector),
                ),
            ),
            parser,
            complete=complete,
        )

    def list_all(
        self,
        what: str,
        fetch: PageFetch,
        parser: ListParser[T],
        *,
        complete: bool = True,
    ) -> tuple[T, ...]:
        """All pages `fetch` answers, restarted once when the continue token expires."""
        try:
            return self._list_pages(what, fetch, parser, complete)
        except ListExpiredError as exc:
            # A continue token outlived the API server's compaction window: start again, once, so
            # the result is one consistent snapshot rather than two halves.
            logger.warning("listing %s again from the start: %s", what, exc)
        try:
            return self._list_pages(what, fetch, parser, complete)
        except ListExpiredError as exc:
            raise ClusterReadError(f"list {what}: continue token expired twice: {exc}") from exc

    def _list_pages(
        self,
        what: str,
        fetch: PageFetch,
        parser: ListParser[T],
        complete: bool,
    ) -> tuple[T, ...]:
        # While one page is decoded and parsed, the next is already requested: the API server and
        # the network work in parallel with us (the fetching thread waits on the socket, GIL free).
        # Its continue token is peeked from the head of the body; the full decode confirms it.
        objects: list[T] = []
        seen: dict[_ObjectKey, T] = {}
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k8s-list")
        try:
            with gc_paused():  # see shared/collector.py
                page, token = 1, None
                pending = self._fetch_page(pool, what, fetch, page, token)
                while True:
                    source = f"list {what} (page {page})"
                    body = pending.result()
                    peeked = peek_continue(body)
                    prefetched = self._fetch_page(pool, what, fetch, page + 1, peeked) if peeked else None
                    document = decode_json(body, source)
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
        fetch: PageFetch,
        page: int,
        token: str | None,
    ) -> Future[bytes]:
        return pool.submit(
            self._caller.call,
            f"list {what} (page {page})",
            functools.partial(_read_page, fetch, token),
            failure=ClusterReadError,
        )


def is_unbound_pod(item: Mapping[str, Any]) -> bool:
    """A pod no node holds yet (no spec.nodeName): one the API server admitted but this scaler cannot
    read (a request past 2^63-1, which the API server stores) is left out of the run rather than
    failing every run for every group. It holds no node's room, so nothing destructive is decided
    on its account; a bound pod that cannot be read still fails the read (its node's room and
    busyness are unknown: nothing destructive may be decided)."""
    spec = item.get("spec") if isinstance(item, Mapping) else None
    return not (isinstance(spec, Mapping) and spec.get("nodeName"))


def describes_pods(item: Mapping[str, Any]) -> bool:
    """A DaemonSet or PodTemplate: it only describes pods. One this scaler cannot read (a request past
    2^63-1, which the API server stores) is left out of the run rather than failing every run for
    every group: the pods it describes could not fit any node either (no DaemonSet overhead they
    would take; a ProvisioningRequest naming the template is reported waiting for it), and nothing
    destructive is decided on its account."""
    return isinstance(item, Mapping)
