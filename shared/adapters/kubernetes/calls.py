"""The error boundary of the Kubernetes adapter: one request in, the project's errors out.

`ApiCaller.call` runs one request (reading its body included), renews a refused EKS token once,
retries 429s within `ClusterOptions`, and maps every HTTP status and urllib3 failure as the table in
`shared.adapters.kubernetes.cluster` draws it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import urllib3

from shared.adapters.kubernetes.options import ClusterOptions
from shared.adapters.kubernetes.transport import HttpStatusError, QueryValue, RestTransport
from shared.domain.errors import (
    AuthError,
    ClusterActionError,
    ClusterReadError,
    ConflictError,
    NotFoundError,
    ScalerError,
    ThrottledError,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ListExpiredError(ClusterReadError):
    """HTTP 410 on a continued list: the continue token expired; the list must start again."""


class ReadNotFoundError(ClusterReadError):
    """HTTP 404 on a read: absent object (get_node answers None) or an unknown API path."""


def body_of(response: urllib3.BaseHTTPResponse) -> bytes:
    """The body of a response `ApiCaller.send` returned unread; read inside `ApiCaller.call`, so that
    transport errors while reading stay inside the error boundary."""
    return response.data


def api_path(template: str, **names: str) -> str:
    """A request path with each `{name}` replaced by its URL-quoted value (object names are DNS
    subdomains or labels, but a malformed one must not reach another path)."""
    return template.format(**{key: quote(value, safe="") for key, value in names.items()})


def decode_json(body: bytes, what: str) -> Any:
    """The decoded body; ClusterReadError when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError as exc:  # incl. UnicodeDecodeError
        raise ClusterReadError(f"{what}: response is not valid JSON: {exc}") from exc


def _status_message(exc: HttpStatusError) -> str:
    """`<status> <reason>: <message of the Status body>`, for logs and error messages."""
    message = ""
    if exc.body:
        try:
            body = json.loads(exc.body)
            if isinstance(body, dict):
                message = str(body.get("message") or "")
        except ValueError:
            message = exc.body[:200].decode("utf-8", errors="replace")
    text = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
    return f"{text}: {message}" if message else text


def _transport_message(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)  # MaxRetryError wraps the last underlying error
    inner = reason if isinstance(reason, Exception) else exc
    return f"{type(inner).__name__}: {inner}"


def _retry_after(exc: HttpStatusError) -> float | None:
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return seconds if seconds >= 0 else None


class ApiCaller:
    """Runs requests through one `RestTransport` and maps their failures (shared by reads and writes)."""

    def __init__(
        self,
        transport: RestTransport,
        options: ClusterOptions,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.transport = transport
        self.options = options
        self.timeout = (options.connect_timeout, options.read_timeout)
        self._sleep = sleep

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, QueryValue]] = (),
        body: object = None,
        content_type: str = "application/json",
    ) -> urllib3.BaseHTTPResponse:
        """One REST request, the response unread; a status outside 2xx raises HttpStatusError."""
        return self.transport.request(
            method, path, query=query, body=body, content_type=content_type, timeout=self.timeout
        )

    def call(
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
            except HttpStatusError as exc:
                status = exc.status
                if status == 401 and not renewed and self.transport.renew(exc.authorization):
                    logger.info("%s: token refused (401), retry once with a newly signed token", what)
                    renewed = True
                    continue
                if status == 429 and retry_throttled and attempt < self.options.throttle_retries:
                    delay = _retry_after(exc)
                    if delay is None:
                        delay = 0.5 * 2**attempt
                    delay = min(delay, self.options.throttle_max_delay)
                    logger.info("%s: throttled (429), retry %d in %.1fs", what, attempt + 1, delay)
                    self._sleep(delay)
                    attempt += 1
                    continue
                raise _error(exc, what, failure, throttled) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                # Timeouts, refused and dropped connections, truncated bodies (after urllib3's retries).
                raise failure(f"{what}: {_transport_message(exc)}") from exc


def _error(
    exc: HttpStatusError,
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
        return NotFoundError(message) if writing else ReadNotFoundError(message)
    if status == 409 and writing:
        return ConflictError(message)
    if status == 410 and not writing:
        return ListExpiredError(message)
    return failure(message)
