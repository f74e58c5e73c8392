"""HTTP plumbing of the fake Kubernetes API server: responses, streams, recorded calls, the handler."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from shared.local.kube_api_resources import REASONS, JsonObj, dumps, status_body

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
class Injection:
    method: str | None
    pattern: re.Pattern[str]
    status: int | None
    delay: float
    drop: bool
    remaining: int  # -1 = forever
    body: JsonObj | None
    retry_after: int | None


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    """A streamed (chunked) answer: each item of ``chunks`` is written and flushed as it comes."""

    chunks: Iterator[bytes]
    content_type: str = "application/json"


_DROP = object()  # sentinel: close the connection without answering


def json_response(status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, dumps(obj), headers=headers or {})


def _injected_response(injection: Injection) -> Response:
    status = injection.status if injection.status is not None else 200
    headers: dict[str, str] = {}
    if injection.retry_after is not None:
        headers["Retry-After"] = str(injection.retry_after)
    if injection.body is not None:
        return json_response(status, injection.body, headers)
    reason = REASONS.get(status, "")
    try:
        message = f"injected {status} {HTTPStatus(status).phrase}"
    except ValueError:
        message = f"injected {status}"
    details = {"retryAfterSeconds": injection.retry_after} if injection.retry_after is not None else None
    return json_response(status, status_body(status, reason, message, details), headers)


class CallLog:
    """The requests received, in arrival order, and the failures injected into the next ones."""

    def __init__(self, lock: threading.RLock, stopping: threading.Event) -> None:
        self._lock = lock
        self._stopping = stopping
        self._calls: list[RecordedCall] = []
        self._injections: list[Injection] = []

    @property
    def calls(self) -> list[RecordedCall]:
        with self._lock:
            return list(self._calls)

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    def inject(self, injection: Injection) -> None:
        with self._lock:
            self._injections.append(injection)

    def clear_injections(self) -> None:
        with self._lock:
            self._injections.clear()

    def receive(self, call: RecordedCall) -> Any:
        """Record `call`; the injected answer (a Response or _DROP) if one matches, else None."""
        with self._lock:
            self._calls.append(call)
            injection = self._take_injection(call.method, call.path)
        if injection is None:
            return None
        if injection.delay > 0 and self._stopping.wait(injection.delay):
            return _DROP
        if injection.drop:
            return _DROP
        if injection.status is not None or injection.body is not None:
            return _injected_response(injection)
        return None  # a delay only: then answer as usual

    def _take_injection(self, method: str, path: str) -> Injection | None:
        for injection in self._injections:
            if injection.method not in (None, method) or not injection.pattern.search(path):
                continue
            if injection.remaining > 0:
                injection.remaining -= 1
                if injection.remaining == 0:
                    self._injections.remove(injection)
            return injection
        return None


# --------------------------------------------------------------------------- the HTTP handler

Dispatch = Callable[[str, str, dict[str, str], bytes, str], Any]


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body, chunked or with a Content-Length."""
    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length > 0 else b""


def _send(handler: BaseHTTPRequestHandler, result: Response) -> None:
    try:
        handler.send_response(result.status)
        handler.send_header("Content-Type", result.content_type)
        handler.send_header("Content-Length", str(len(result.body)))
        handler.send_header("Cache-Control", "no-cache, private")
        for name, value in result.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(result.body)
    except OSError:
        handler.close_connection = True


def _send_stream(handler: BaseHTTPRequestHandler, result: Stream) -> None:
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", result.content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()
        handler.wfile.flush()
        for chunk in result.chunks:
            if chunk:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except OSError:
        handler.close_connection = True


def make_handler(
    dispatch: Dispatch, lock: threading.RLock, connections: set[socket.socket]
) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering every request with `dispatch`, tracking open connections."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: avoid delayed-ACK stalls

        def version_string(self) -> str:
            return "fake-kube-apiserver"

        def setup(self) -> None:
            super().setup()
            with lock:
                connections.add(self.connection)

        def finish(self) -> None:
            with lock:
                connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            body = _read_body(self)
            headers = {k.lower(): v for k, v in self.headers.items()}
            result = dispatch(self.command, self.path, headers, body, self.client_address[0])
            if isinstance(result, Stream):
                _send_stream(self, result)
                return
            if result is _DROP:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            assert isinstance(result, Response)
            _send(self, result)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
