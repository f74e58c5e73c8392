"""boto3 clients (one per service and region, built once per process) and the boto error mapping.

Every AWS adapter maps botocore failures through `scaler_error`, by error code only:

    botocore failure                                        project error
    ClientError, throttling code (Throttling, ...)          ThrottledError, or the read error of a
                                                            read whose contract folds throttling in
    ClientError, auth code (AccessDenied, ExpiredToken...)  AuthError (never retried)
    ClientError, HTTP 401/403 without a known code          AuthError
    ClientError, any other code                             the caller's error type
    NoCredentialsError and other credential failures        AuthError
    EndpointConnectionError, ReadTimeoutError, other        the caller's error type
    BotoCoreError

Retries are botocore's own (adaptive mode: exponential backoff with jitter plus a client-side rate
limiter that slows down after throttling); the adapters never retry a call themselves.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    NoAuthTokenError,
    NoCredentialsError,
    PartialCredentialsError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)

from shared import constants
from shared.domain.errors import AuthError, ScalerError, ThrottledError

# An AWS client: the stubs (mypy_boto3_*) are not a dependency, so clients are typed loosely.
AwsClient = Any

MAX_ATTEMPTS = 5  # in total, the first attempt included
CONNECT_TIMEOUT_SECONDS = 3.0
# Long enough for a 100-group DescribeAutoScalingGroups page, short enough to leave a 60 s Lambda
# time to map the failure and report it.
READ_TIMEOUT_SECONDS = 10.0

# The union botocore's retry handler treats as throttling (botocore.retries.standard), copied because
# botocore keeps it private.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)

AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",  # EC2
        "AuthorizationError",  # SNS
        "UnauthorizedOperation",  # EC2
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)

_CREDENTIAL_ERRORS: tuple[type[BotoCoreError], ...] = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    NoAuthTokenError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)

BOTO_ERRORS: tuple[type[Exception], ...] = (ClientError, BotoCoreError)
"""What to catch around a boto3 call: every failure botocore raises on purpose."""

_lock = threading.Lock()
_session: boto3.session.Session | None = None
_clients: dict[tuple[str, str | None], AwsClient] = {}


def client_config(
    *,
    max_attempts: int = MAX_ATTEMPTS,
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> Config:
    """The botocore config of every client: adaptive retries and short timeouts."""
    return Config(
        # total_max_attempts counts the first attempt; botocore's older `max_attempts` counts retries only.
        retries={"mode": "adaptive", "total_max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        user_agent_extra=constants.SERVICE_NAME,
    )


def client(service: str, region: str | None = None) -> AwsClient:
    """The process-wide client of `service` in `region` (None: the environment's region).

    The endpoint comes from AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE> when set (boto3 reads them
    itself), which is how the local run points every adapter at a moto server.
    """
    key = (service, region or None)
    with _lock:
        # A boto3 session is not thread-safe while it builds clients; built clients are.
        cached = _clients.get(key)
        if cached is None:
            global _session
            if _session is None:
                _session = boto3.session.Session()
            cached = _session.client(service, region_name=region or None, config=client_config())
            _clients[key] = cached
        return cached


def clear_clients() -> None:
    """Forget the cached clients (tests that change the environment between cases)."""
    global _session
    with _lock:
        _clients.clear()
        _session = None


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "")
    return ""


def scaler_error(
    exc: BaseException,
    fallback: type[ScalerError],
    message: str,
    *,
    throttled: type[ScalerError] = ThrottledError,
) -> ScalerError:
    """The project error for a botocore failure; raise it `from exc`.

    `fallback` is the caller's error type (FleetReadError, FleetActionError, ReadError, ActionError);
    `throttled` lets a read whose port contract folds throttling into its read error say so.
    """
    code = error_code(exc)
    detail = f"{message}: {_describe(exc)}"
    if code in THROTTLING_CODES:
        return throttled(detail)
    if code in AUTH_CODES or isinstance(exc, _CREDENTIAL_ERRORS):
        return AuthError(detail)
    if isinstance(exc, ClientError) and not code and _http_status(exc) in (401, 403):
        return AuthError(detail)
    return fallback(detail)


def _http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or f"HTTP {_http_status(exc)}"
        return f"{code}: {error.get('Message') or 'no message'}"
    return f"{type(exc).__name__}: {exc}"
