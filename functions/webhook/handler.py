"""Webhook Lambda (Function URL or HTTP API; both send payload v2, which APIGatewayHttpResolver reads,
stripping a named stage). POST routes, also under the `/webhook` prefix (`/webhook/admission`, ...):

    /admission[/<token>]  AdmissionReview v1 -> 200 AdmissionReview, always allowed; GPU pods enqueue
    /events     core/v1 Event(s)     -> 202 {"enqueued": true|false}
    /poke       {"reason": "..."}    -> 202 {"enqueued": true}

Every request is authenticated (auth.py); refusals: JSON `{"error": ...}`, 400/401/404/405/413/503
in the order service.py gives. An event in another shape than payload format 2.0 (a REST API's, a
direct invoke, a schedule) gets a 400 naming the format before any of that (request.py).
Queue message and delay design: queue.py.
"""

from __future__ import annotations

import json
import os
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from shared.collector import gc_paused

with gc_paused(keep=True):  # a cold start's objects are all long-lived: see shared/collector.py
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
    from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

    from functions.common.dependencies import Dependencies
    from functions.webhook.errors import MethodNotAllowedError, RequestRejectedError, RouteNotFoundError
    from functions.webhook.request import is_known_route, payload_format_problem
    from functions.webhook.service import Webhook, build_webhook
    from functions.webhook.settings import load_settings
    from shared.constants import SERVICE_NAME, WEBHOOK_PATH

if TYPE_CHECKING:  # typing only: the module costs import time at every cold start
    from aws_lambda_powertools.utilities.typing import LambdaContext

logger = Logger(service=SERVICE_NAME)
dependencies: Dependencies[Webhook] = Dependencies(lambda: build_webhook(load_settings(os.environ)))
set_dependencies = dependencies.override
dependencies.get()  # cold start: a bad environment fails here, by name
app = APIGatewayHttpResolver(strip_prefixes=[WEBHOOK_PATH])


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=int(status), content_type=content_types.APPLICATION_JSON, body=body, headers=headers
    )


def _authenticate(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response:
    event = app.current_event  # runs for every request, routed or not
    body = dependencies.get().authenticate(
        event.headers, event.body, bool(event.is_base64_encoded), event.path
    )
    app.append_context(body=body)
    return next_middleware(app)


app.use(middlewares=[_authenticate])


@app.post("/admission")
@app.post("/admission/<token>")  # the token was checked by the middleware (EKS: no other credentials)
def admission(token: str = "") -> Response:
    return _json(HTTPStatus.OK, dependencies.get().admit(app.context["body"]))


@app.post("/events")
def events() -> Response:
    return _json(HTTPStatus.ACCEPTED, {"enqueued": dependencies.get().events(app.context["body"])})


@app.post("/poke")
def poke() -> Response:
    return _json(HTTPStatus.ACCEPTED, {"enqueued": dependencies.get().poke(app.context["body"])})


@app.exception_handler(RequestRejectedError)
def rejected(exc: RequestRejectedError) -> Response:
    logger.info("request refused", extra={"status": int(exc.status_code), "error": exc.message})
    allow = {"Allow": "POST"} if isinstance(exc, MethodNotAllowedError) else None
    return _json(exc.status_code, {"error": exc.message}, allow)


@app.not_found
def not_found(_: Exception) -> Response:
    if is_known_route(app.current_event.path):
        method = app.current_event.http_method
        return rejected(MethodNotAllowedError(f"method {method} not allowed: use POST"))
    return rejected(RouteNotFoundError("no such route: use /admission, /events or /poke"))


@app.exception_handler(Exception)
def unexpected(exc: Exception) -> Response:
    logger.exception("unexpected error")
    return _json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "internal error"})


def _wrong_payload_format(problem: str) -> dict[str, Any]:
    """The 400 for an event the resolver cannot read, built by hand: the resolver would fail on it."""
    logger.info("request refused", extra={"status": int(HTTPStatus.BAD_REQUEST), "error": problem})
    return {
        "statusCode": int(HTTPStatus.BAD_REQUEST),
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": problem}, separators=(",", ":")),
        "isBase64Encoded": False,
    }


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    problem = payload_format_problem(event)
    if problem is not None:
        return _wrong_payload_format(problem)
    return app.resolve(event, context)
