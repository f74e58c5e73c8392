"""The raw request: its payload format, the body bytes as the sender sent them (size-checked) and the
routed path.

Function URLs and HTTP APIs invoke the function with payload format 2.0 (`"version": "2.0"`, the method
under `requestContext.http`); that is the only shape the routes read. A REST API (payload format 1.0,
`httpMethod` at the top), an HTTP API integration set to 1.0, or any other event is refused with a 400
naming the format before routing (`payload_format_problem`).

Function URLs and HTTP APIs hand the body over as text, or base64-encoded (`isBase64Encoded`) when it
is not text; the signature covers the decoded bytes. The size limit is checked on the declared
Content-Length first (cheap) and then on the decoded bytes (Content-Length may be absent or wrong).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from functions.webhook.errors import BadRequestError, PayloadTooLargeError
from shared.constants import WEBHOOK_MAX_BODY_BYTES, WEBHOOK_PATH

CONTENT_LENGTH_HEADER = "content-length"
ADMISSION_ROUTE = "/admission"
ROUTES = (ADMISSION_ROUTE, "/events", "/poke")


PAYLOAD_FORMAT = "2.0"
_USE_PAYLOAD_V2 = "send payload format 2.0 (a Lambda Function URL, or an HTTP API with payload format 2.0)"


def payload_format_problem(event: object) -> str | None:
    """Why `event` is not an HTTP request in payload format 2.0 (None when it is one).

    Checks what the resolver reads of every request (Powertools' APIGatewayProxyEventV2: `rawPath`,
    `requestContext.stage` and `requestContext.http.method`), so that a request of another shape gets
    a 400 instead of a KeyError.
    """
    if not isinstance(event, Mapping):
        return f"expected an HTTP request event, got {type(event).__name__}: {_USE_PAYLOAD_V2}"
    version = event.get("version")
    if "httpMethod" in event or version == "1.0":
        # AWS's payload format 1.0 (API Gateway developer guide, "Create AWS Lambda proxy integrations
        # for HTTP APIs", payload format version): a REST API's, or an HTTP API integration's set so.
        return f"payload format 1.0 is not supported: {_USE_PAYLOAD_V2}"
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, Mapping) else None
    if (
        version == PAYLOAD_FORMAT
        and isinstance(event.get("rawPath"), str)
        and isinstance(context, Mapping)
        and isinstance(context.get("stage"), str)
        and isinstance(http, Mapping)
        and isinstance(http.get("method"), str)
    ):
        return None
    return f"not an HTTP request in payload format {PAYLOAD_FORMAT}: {_USE_PAYLOAD_V2}"


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"request body larger than {limit} bytes")


def read_body(
    headers: Mapping[str, str],
    body: str | None,
    is_base64_encoded: bool,
    limit: int = WEBHOOK_MAX_BODY_BYTES,
) -> bytes:
    """The body bytes; PayloadTooLargeError above `limit`, BadRequestError when undecodable."""
    declared = next((v for k, v in headers.items() if str(k).lower() == CONTENT_LENGTH_HEADER), None)
    if declared is not None:
        text = str(declared).strip()
        if not text.isascii() or not text.isdigit():
            raise BadRequestError("Content-Length must be a non-negative integer")
        if len(text.lstrip("0")) > len(str(limit)) or int(text) > limit:
            raise _too_large(limit)
    if not body:
        return b""
    if is_base64_encoded:
        if len(body) > 4 * (limit // 3 + 1):  # longer than any encoding of `limit` bytes
            raise _too_large(limit)
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequestError("body is flagged base64 but is not valid base64") from exc
    else:
        if len(body) > limit:  # every character takes at least one byte
            raise _too_large(limit)
        # surrogatepass: a lone surrogate becomes bytes the JSON parser then rejects (400), not a crash.
        data = body.encode("utf-8", errors="surrogatepass")
    if len(data) > limit:
        raise _too_large(limit)
    return data


def route_path(path: str) -> str:
    """The path the routes see: the deployed API's `/webhook` prefix removed (as the resolver does)."""
    if path == WEBHOOK_PATH:
        return "/"
    return path[len(WEBHOOK_PATH) :] if path.startswith(WEBHOOK_PATH + "/") else path


def admission_token(path: str) -> str | None:
    """The token of an `/admission/<token>` path (the admission webhook's URL), else None."""
    prefix, _, token = route_path(path).partition(ADMISSION_ROUTE + "/")
    return token if not prefix and token and "/" not in token else None


def is_known_route(path: str) -> bool:
    """True when `path` (as the event has it) names one of the webhook's routes."""
    return route_path(path) in ROUTES or admission_token(path) is not None
