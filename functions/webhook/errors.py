"""Why the webhook refuses a request: one exception per HTTP status, raised by the helpers.

    RequestRejectedError            status_code, a message safe to show the sender
    ├── BadRequestError             400  bad JSON, wrong kind/apiVersion, missing fields, bad encoding
    ├── UnauthorizedError           401  no, stale or wrong signature / bearer secret
    ├── RouteNotFoundError          404  no such path
    ├── MethodNotAllowedError       405  a known path called with another method than POST
    ├── PayloadTooLargeError        413  Content-Length or the decoded body above the limit
    └── ServiceUnavailableError     503  the queue or the secret cannot be reached; the sender retries

Messages name the problem and never echo a secret, a signature or the body.
"""

from __future__ import annotations

from http import HTTPStatus

from shared.domain.errors import ScalerError


class RequestRejectedError(ScalerError):
    """A request the webhook answers with a 4xx/503 and a JSON `{"error": message}`."""

    status_code: int = HTTPStatus.BAD_REQUEST

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(RequestRejectedError):
    status_code = HTTPStatus.BAD_REQUEST


class UnauthorizedError(RequestRejectedError):
    status_code = HTTPStatus.UNAUTHORIZED


class RouteNotFoundError(RequestRejectedError):
    status_code = HTTPStatus.NOT_FOUND


class MethodNotAllowedError(RequestRejectedError):
    status_code = HTTPStatus.METHOD_NOT_ALLOWED


class PayloadTooLargeError(RequestRejectedError):
    status_code = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


class ServiceUnavailableError(RequestRejectedError):
    status_code = HTTPStatus.SERVICE_UNAVAILABLE
