"""Fuzzing the webhook Lambda: no client input gives a 5xx, and nothing unauthenticated reaches the queue."""

from __future__ import annotations

import base64
import copy
import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from functions.webhook.auth import sign
from functions.webhook.service import build_webhook
from functions.webhook.settings import load_settings
from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.queue import clear_fast_clients

SECRET = "whsec-fuzz-0123456789abcdef0123456789"
NOW = 1_796_212_800.0
FIXTURES = Path(__file__).resolve().parents[1] / "events"
CONFIG = {
    "cluster_name": "prod",
    "node_groups": [{"name": "g", "asg_name": "a", "instance_type": "p4d.24xlarge"}],
}
EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class SteppingClock:
    """Moves to a new dedup window before every example, so no send is hidden by coalescing."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now

    def next_window(self) -> float:
        self.now += 2 * constants.QUEUE_DEDUP_WINDOW_SECONDS
        return self.now


class RecordingSender:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, body: str, *, group_id: str, deduplication_id: str) -> str:
        self.sent.append(body)
        return str(len(self.sent))


@dataclass
class Fuzz:
    handler: ModuleType
    clock: SteppingClock
    sender: RecordingSender

    def invoke(self, event: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
        """(status, messages enqueued by this request, response)."""
        before = len(self.sender.sent)
        response: dict[str, Any] = self.handler.handler(event, Context())
        return response["statusCode"], len(self.sender.sent) - before, response


@dataclass
class Context:
    function_name: str = "webhook"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:webhook"
    aws_request_id: str = "fuzz"


@pytest.fixture(scope="module")
def fuzz() -> Iterator[Fuzz]:
    # moto guards against any accidental AWS call; the webhook itself runs on a recording sender.
    with pytest.MonkeyPatch.context() as env, mock_aws():
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv(constants.ENV_QUEUE_URL, "https://sqs.us-east-1.amazonaws.com/123456789012/fuzz.fifo")
        env.setenv(constants.ENV_WEBHOOK_SECRET_ARN, "arn:aws:secretsmanager:us-east-1:123456789012:secret:f")
        env.setenv(constants.ENV_CONFIG, json.dumps(CONFIG))
        clients.clear_clients()
        clear_fast_clients()
        handler = importlib.reload(importlib.import_module("functions.webhook.handler"))
        clock, sender = SteppingClock(), RecordingSender()
        settings = load_settings(os.environ)
        webhook = build_webhook(settings, clock=clock, sender=sender, read_secret=lambda: SECRET)
        handler.set_dependencies(webhook)
        yield Fuzz(handler, clock, sender)
        clients.clear_clients()
        clear_fast_clients()


def fixture_body(name: str) -> Any:
    event = json.loads((FIXTURES / f"webhook_{name}.json").read_text())
    return json.loads(event["body"])


VALID_DOCUMENTS = [
    fixture_body("function_url_admission"),
    fixture_body("http_api_failed_scheduling"),
    {"events": [fixture_body("http_api_failed_scheduling")]},
    {"apiVersion": "v1", "kind": "EventList", "items": [fixture_body("http_api_failed_scheduling")]},
    fixture_body("function_url_poke"),
]
ROUTES = ["/admission", "/events", "/poke", "/webhook/admission", "/webhook/events", "/webhook/poke"]
AUTH_HEADERS = [constants.HEADER_SIGNATURE, constants.HEADER_TIMESTAMP, "authorization", "Authorization"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


def dict_nodes(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from dict_nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from dict_nodes(child)


@st.composite
def mutated_payloads(draw: st.DrawFn) -> Any:
    """A valid document of some route with up to three fields replaced, added or removed."""
    document = copy.deepcopy(draw(st.sampled_from(VALID_DOCUMENTS)))
    for _ in range(draw(st.integers(0, 3))):
        node = draw(st.sampled_from(list(dict_nodes(document))))
        key = draw(st.sampled_from(sorted(node) or ["x"]) | st.text(max_size=8))
        if key in node and draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(json_values)
    return document


bodies = st.one_of(
    st.binary(max_size=512),
    st.text(max_size=256).map(str.encode),
    json_values.map(lambda v: json.dumps(v).encode()),
    mutated_payloads().map(lambda v: json.dumps(v).encode()),
)
paths = st.sampled_from([*ROUTES, "/", "/webhook", "/metrics"]) | st.text(max_size=30).map(lambda t: "/" + t)
methods = st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE", "OPTIONS", "HEAD"]) | st.text(
    max_size=8
)
header_values = st.one_of(
    st.text(max_size=80),
    st.text(max_size=40).map(lambda t: "Bearer " + t),
    st.text(alphabet="0123456789abcdef", max_size=64).map(lambda t: "sha256=" + t),
    st.integers(-(10**13), 10**13).map(str),
    st.just(str(int(NOW))),
)
header_names = st.sampled_from([*AUTH_HEADERS, "content-length", "Content-Length", "content-type"]) | st.text(
    max_size=20
)
arbitrary_headers = st.dictionaries(header_names, header_values, max_size=6)


def v2_event(method: str, path: str, headers: dict[str, str], body: bytes, encode: str) -> dict[str, Any]:
    """A payload-v2 event; `encode`: "text" (UTF-8 text), "base64", or "bogus" (flagged base64, isn't)."""
    if encode == "text":
        text, flagged = body.decode("utf-8", errors="replace"), False
    elif encode == "base64":
        text, flagged = base64.b64encode(body).decode(), True
    else:
        text, flagged = body.decode("latin-1"), True
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.1"},
            "routeKey": "$default",
            "stage": "$default",
            "requestId": "fuzz",
        },
        "body": text,
        "isBase64Encoded": flagged,
    }


def signed_bytes(event: dict[str, Any]) -> bytes:
    """The bytes the webhook will see (what a sender has to sign)."""
    body = event["body"] or ""
    return base64.b64decode(body) if event["isBase64Encoded"] else body.encode("utf-8")


encodings = st.sampled_from(["text", "text", "base64", "bogus"])


@EXAMPLES
@given(method=methods, path=paths, headers=arbitrary_headers, body=bodies, encode=encodings)
def test_unauthenticated_input_never_fails_the_server_nor_reaches_the_queue(
    fuzz: Fuzz, method: str, path: str, headers: dict[str, str], body: bytes, encode: str
) -> None:
    # Given any request without valid credentials (arbitrary headers, body, path and method)
    fuzz.clock.next_window()
    event = v2_event(method, path, headers, body, encode)

    # When it is delivered
    status, enqueued, response = fuzz.invoke(event)

    # Then it is refused before routing (size, encoding or authentication), with a JSON error
    assert status in (400, 401, 413), response
    assert set(json.loads(response["body"])) == {"error"}
    assert SECRET not in response["body"]
    assert enqueued == 0


@EXAMPLES
@given(
    method=methods,
    path=paths,
    extra=st.dictionaries(st.sampled_from(["content-type", "x-forwarded-for", "user-agent"]), header_values),
    body=bodies,
    encode=st.sampled_from(["text", "base64"]),
    skew=st.integers(-constants.WEBHOOK_REPLAY_WINDOW_SECONDS, constants.WEBHOOK_REPLAY_WINDOW_SECONDS),
    scheme=st.sampled_from(["signature", "bearer"]),
)
def test_authenticated_input_never_fails_the_server(
    fuzz: Fuzz,
    method: str,
    path: str,
    extra: dict[str, str],
    body: bytes,
    encode: str,
    skew: int,
    scheme: str,
) -> None:
    # Given any body, path and method, correctly signed (or with the bearer secret) within the window
    now = fuzz.clock.next_window()
    event = v2_event(method, path, dict(extra), body, encode)
    if scheme == "signature":
        event["headers"].update(sign(SECRET, int(now) + skew, signed_bytes(event)))
    else:
        event["headers"]["authorization"] = f"Bearer {SECRET}"

    # When it is delivered
    status, enqueued, response = fuzz.invoke(event)

    # Then the answer is a 2xx or a 4xx, and only an accepted request may enqueue (at most once)
    assert status in (200, 202, 400, 404, 405), response
    assert enqueued <= (1 if status in (200, 202) else 0)
    if status == 200:
        assert json.loads(response["body"])["response"]["allowed"] is True


@EXAMPLES
@given(document=mutated_payloads(), route=st.sampled_from(ROUTES), tamper=st.binary(min_size=1, max_size=4))
def test_a_signature_over_other_bytes_never_enqueues(
    fuzz: Fuzz, document: Any, route: str, tamper: bytes
) -> None:
    # Given a payload-shaped body whose bytes changed after it was signed
    now = fuzz.clock.next_window()
    body = json.dumps(document).encode()
    event = v2_event("POST", route, sign(SECRET, int(now), body), body + tamper, "base64")

    # When it is delivered
    status, enqueued, _ = fuzz.invoke(event)

    # Then it is refused as unauthenticated
    assert (status, enqueued) == (401, 0)
