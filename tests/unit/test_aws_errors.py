"""Mapping botocore failures to the project's errors, and botocore's retries as configured."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
)

from shared.adapters.aws import clients
from shared.adapters.aws.clients import client_config, scaler_error
from shared.domain.errors import (
    ActionError,
    AuthError,
    FleetActionError,
    FleetReadError,
    ReadError,
    ThrottledError,
)

pytestmark = pytest.mark.usefixtures("fake_aws")


def client_error(code: str, status: int = 400, operation: str = "SetDesiredCapacity") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "some text"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        operation,
    )


@pytest.mark.parametrize(
    "code",
    [
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
    ],
)
def test_throttling_codes_map_to_throttled_error(code: str) -> None:
    # Given a throttling error from any service
    exc = client_error(code)

    # When it is mapped for an action
    error = scaler_error(exc, FleetActionError, "set desired")

    # Then it is a ThrottledError naming the code
    assert type(error) is ThrottledError
    assert code in str(error)


def test_throttling_of_a_read_folds_into_the_read_error_when_asked() -> None:
    # Given a throttled read whose port contract says FleetReadError includes throttling
    exc = client_error("Throttling")

    # When it is mapped with throttled=FleetReadError
    error = scaler_error(exc, FleetReadError, "describe", throttled=FleetReadError)

    # Then it is a FleetReadError
    assert type(error) is FleetReadError


@pytest.mark.parametrize(
    "code",
    [
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "ExpiredToken",
        "ExpiredTokenException",
    ],
)
def test_auth_codes_map_to_auth_error(code: str) -> None:
    # Given a credentials/permission error
    exc = client_error(code, 403)

    # When it is mapped for a read
    error = scaler_error(exc, FleetReadError, "describe", throttled=FleetReadError)

    # Then it is an AuthError, whatever the caller's type
    assert type(error) is AuthError


def test_a_403_without_a_code_is_an_auth_error() -> None:
    # Given a bare HTTP 403 (no error code in the body)
    exc = ClientError({"Error": {}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "Query")

    # When / Then it maps to AuthError
    assert type(scaler_error(exc, ReadError, "load")) is AuthError


@pytest.mark.parametrize(("fallback"), [FleetReadError, FleetActionError, ReadError, ActionError])
def test_other_codes_map_to_the_callers_error_type(fallback: type[Exception]) -> None:
    # Given an error code that is neither throttling nor auth (the message mentions throttling on purpose)
    exc = ClientError(
        {"Error": {"Code": "ValidationError", "Message": "Throttling AccessDenied"}},
        "SetDesiredCapacity",
    )

    # When it is mapped
    error = scaler_error(exc, fallback, "set desired")  # type: ignore[arg-type]

    # Then the caller's type is used: the message text never decides
    assert type(error) is fallback
    assert "ValidationError" in str(error)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            EndpointConnectionError(endpoint_url="https://autoscaling.us-east-1.amazonaws.com"),
            FleetActionError,
        ),
        (ReadTimeoutError(endpoint_url="https://autoscaling.us-east-1.amazonaws.com"), FleetActionError),
        (ParamValidationError(report="bad"), FleetActionError),
        (NoCredentialsError(), AuthError),
    ],
)
def test_botocore_errors_map_by_type(exc: Exception, expected: type[Exception]) -> None:
    # Given a botocore (non-HTTP) failure
    # When it is mapped for an action
    error = scaler_error(exc, FleetActionError, "terminate")

    # Then transport failures are the caller's type and missing credentials are an AuthError
    assert type(error) is expected


def test_client_is_built_once_per_service_and_region() -> None:
    # Given the process-wide client cache
    # When the same (service, region) is asked twice, and another region once
    first = clients.client("autoscaling", "us-east-1")
    second = clients.client("autoscaling", "us-east-1")
    other = clients.client("autoscaling", "eu-west-1")

    # Then the first client is reused, configured with adaptive retries and short timeouts
    assert first is second
    assert other is not first
    assert other.meta.region_name == "eu-west-1"
    assert first.meta.config.retries == {"mode": "adaptive", "total_max_attempts": clients.MAX_ATTEMPTS}
    assert first.meta.config.connect_timeout == clients.CONNECT_TIMEOUT_SECONDS


def test_client_honours_aws_endpoint_url(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given AWS_ENDPOINT_URL (how the local run reaches its moto server)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5999")

    # When a client is built
    client = clients.client("dynamodb", "us-east-1")

    # Then boto3 points it there
    assert client.meta.endpoint_url == "http://127.0.0.1:5999"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: object) -> Iterator[bytes]:
        yield self._body


def _error_body(code: str) -> bytes:
    return (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>no</Message></Error>"
        "<RequestId>r-1</RequestId></ErrorResponse>"
    ).encode()


def _client_answering(code: str, status: int, calls: list[str]) -> object:
    client = boto3.session.Session().client(
        "autoscaling",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the handler below answers every request
        config=client_config(max_attempts=2),
    )

    def answer(request: object, **_: object) -> AWSResponse:
        calls.append(code)
        return AWSResponse("http://127.0.0.1:9", status, {}, _Raw(_error_body(code)))

    client.meta.events.register("before-send.autoscaling.SetDesiredCapacity", answer)
    return client


def test_throttling_is_retried_by_botocore_then_mapped() -> None:
    # Given an endpoint that always throttles and a client allowing 2 attempts (adaptive mode waits
    # about a second before the retry: its rate limiter slows down after a throttle)
    calls: list[str] = []
    client = _client_answering("Throttling", 400, calls)

    # When the call is made
    with pytest.raises(ClientError) as caught:
        client.set_desired_capacity(AutoScalingGroupName="g", DesiredCapacity=1)  # type: ignore[attr-defined]

    # Then botocore retried it and the failure maps to ThrottledError
    assert len(calls) == 2
    assert type(scaler_error(caught.value, FleetActionError, "set desired")) is ThrottledError


def test_access_denied_is_not_retried() -> None:
    # Given an endpoint that denies access
    calls: list[str] = []
    client = _client_answering("AccessDenied", 403, calls)

    # When the call is made
    with pytest.raises(ClientError) as caught:
        client.set_desired_capacity(AutoScalingGroupName="g", DesiredCapacity=1)  # type: ignore[attr-defined]

    # Then exactly one request went out, and it maps to AuthError
    assert len(calls) == 1
    assert type(scaler_error(caught.value, FleetActionError, "set desired")) is AuthError
