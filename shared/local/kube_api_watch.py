"""Watches of the fake Kubernetes API server: ``watch=true`` streams of newline-delimited WatchEvents.

Simplified (see `kube_api_server`): the store is diffed on every write, without an event history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from shared.local.kube_api_http import Stream
from shared.local.kube_api_resources import (
    PDBS,
    JsonObj,
    ObjectKey,
    ServedResource,
    bad_request,
    clone,
    dumps,
)
from shared.local.kube_api_selectors import parse_field_selector, parse_label_selector
from shared.local.kube_api_store import ObjectStore, matches, parse_limit
from shared.local.kube_api_tables import as_table

_Seen = dict[ObjectKey, tuple[str, JsonObj]]  # watched objects by key: (resourceVersion, copy as shown)


class WatchStream:
    """One watch of `res` (in `namespace`, or all), filtered by the query's selectors."""

    def __init__(
        self,
        store: ObjectStore,
        stopping: threading.Event,
        res: ServedResource,
        namespace: str | None,
        query: dict[str, str],
        table: bool,
    ) -> None:
        label_text = query.get("labelSelector", "")
        self._labels = parse_label_selector(label_text)
        self._fields = parse_field_selector(res, query.get("fieldSelector", ""), label_text)
        self._timeout = parse_limit(query.get("timeoutSeconds"))
        since_text = query.get("resourceVersion") or "0"
        if not since_text.isdigit():
            raise bad_request(f"invalid resourceVersion: {since_text!r}")
        self._since = int(since_text)
        self._store = store
        self._stopping = stopping
        self._res = res
        self._namespace = namespace
        self._query = query
        self._table = table
        self._first = True

    def stream(self) -> Stream:
        """The answer: a chunked stream that runs until timeoutSeconds or the server stops."""
        return Stream(self._events())

    def _matching(self, before: _Seen) -> _Seen:
        """Copies of the watched objects by key with their resourceVersion (lock held)."""
        store = self._store.stores[self._res.store]
        found = {}
        for key in self._store.keys(self._res):
            if self._namespace is not None and key[0] != self._namespace:
                continue
            obj = store[key]
            if matches(obj, self._labels, self._fields):
                version = str(obj["metadata"].get("resourceVersion", ""))
                known = before.get(key)
                if known is not None and known[0] == version and self._res is not PDBS:
                    found[key] = known
                else:
                    found[key] = (version, clone(self._store.present(self._res, obj)))
        return found

    def _encode(self, kind: str, obj: JsonObj) -> bytes:
        shown: JsonObj = obj
        if self._table:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion")}
            shown = as_table(self._res, [obj], meta, self._query, now=self._store.now(), columns=self._first)
        self._first = False
        return dumps({"type": kind, "object": shown}) + b"\n"

    def _events(self) -> Iterator[bytes]:
        deadline = time.monotonic() + self._timeout if self._timeout else None
        since = self._since
        with self._store.lock:
            seen, rv = self._matching({}), self._store.rv
        initial = [
            self._encode("ADDED" if since == 0 else "MODIFIED", obj)
            for version, obj in seen.values()
            if since == 0 or int(version or 0) > since
        ]
        yield b"".join(initial)
        while not self._stopping.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return
            with self._store.changed:
                if self._store.rv == rv:
                    self._store.changed.wait(timeout=0.5)
                if self._store.rv == rv:
                    continue
                now, rv = self._matching(seen), self._store.rv
            out = self._changes(seen, now)
            seen = now
            if out:
                yield b"".join(out)

    def _changes(self, seen: _Seen, now: _Seen) -> list[bytes]:
        out = [self._encode("DELETED", obj) for key, (_, obj) in seen.items() if key not in now]
        for key, (version, obj) in now.items():
            before = seen.get(key)
            if before is None:
                out.append(self._encode("ADDED", obj))
            elif before[0] != version:
                out.append(self._encode("MODIFIED", obj))
        return out
