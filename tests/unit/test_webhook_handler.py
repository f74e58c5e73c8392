"""The webhook Lambda end to end on its JSON fixtures, against moto's SQS FIFO and Secrets Manager."""

from __future__ import annotations

import base64
import copy
import importlib
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.webhook.auth import SECRET_REFRESH_SECONDS, admission_path_token, sign
from functions.webhook.service import build_webhook
from functions.webhook.settings import WebhookSettings, load_settings
from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.queue import clear_fast_clients
from shared.domain.errors import ConfigError
from tests.builders_provisioning import provisioning_request
from tests.fakes.aws import use_fake_credentials

REGION = "us-east-1"
CLUSTER = "prod"
SECRET = "whsec-0123456789abcdef0123456789abcdef"
NOW = 1_796_212_800.0  # 2026-12-02T12:00:00Z, the start of a dedup window
WINDOW = int(NOW // constants.QUEUE_DEDUP_WINDOW_SECONDS)
FIXTURES = Path(__file__).resolve().parents[1] / "events"
CONFIG = {
    "cluster_name": CLUSTER,
    "node_groups": [{"name": "p4d", "asg_name": "prod-p4d", "instance_type": "p4d.24xlarge"}],
}


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class LambdaContextStub:
    function_name: str = "backlog-scaler-webhook"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:123456789012:function:backlog-scaler-webhook"
    aws_request_id: str = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"


@dataclass
class World:
    handler: ModuleType
    settings: WebhookSettings
    sqs: Any
    secrets: Any


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with pytest.MonkeyPatch.context() as env, mock_aws():
        use_fake_credentials(env, REGION)
        env.delenv(constants.ENV_AWS_ENDPOINT_URL, raising=False)
        clients.clear_clients()
        clear_fast_clients()
        sqs = boto3.client("sqs", region_name=REGION)
        secrets = boto3.client("secretsmanager", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="boot.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        secret_arn = secrets.create_secret(Name="backlog-scaler/webhook", SecretString=SECRET)["ARN"]
        env.setenv(constants.ENV_QUEUE_URL, queue_url)
        env.setenv(constants.ENV_WEBHOOK_SECRET_ARN, secret_arn)
        env.setenv(constants.ENV_CONFIG, json.dumps(CONFIG))
        handler = importlib.reload(importlib.import_module("functions.webhook.handler"))
        yield World(handler, load_settings(os.environ), sqs, secrets)
        clients.clear_clients()
        clear_fast_clients()


_queue_names = (f"webhook-{n}.fifo" for n in itertools.count())


class Harness:
    """One test's webhook: a fresh FIFO queue, a fresh cold start, a clock the test moves."""

    def __init__(self, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
        self.world = world
        self.clock = FakeClock(NOW + 0.25)
        self.queue_url = self.new_queue()
        self.use_queue(self.queue_url, monkeypatch)

    def new_queue(self, **attributes: str) -> str:
        response = self.world.sqs.create_queue(
            QueueName=next(_queue_names), Attributes={"FifoQueue": "true", **attributes}
        )
        return str(response["QueueUrl"])

    def use_queue(
        self, queue_url: str, monkeypatch: pytest.MonkeyPatch, secret_arn: str | None = None
    ) -> None:
        update = {"queue_url": queue_url, "secret_arn": secret_arn or self.world.settings.secret_arn}
        settings = self.world.settings.model_copy(update=update)
        self.world.handler.set_dependencies(build_webhook(settings, clock=self.clock))

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.world.handler.handler(event, LambdaContextStub())
        return response

    def messages(self) -> list[dict[str, Any]]:
        response = self.world.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        )
        return [
            {
                "group": message["Attributes"]["MessageGroupId"],
                "dedup": message["Attributes"]["MessageDeduplicationId"],
                "body": json.loads(message["Body"]),
            }
            for message in response.get("Messages", [])
        ]


@pytest.fixture
def hook(world: World, monkeypatch: pytest.MonkeyPatch) -> Harness:
    return Harness(world, monkeypatch)


def fixture(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((FIXTURES / f"webhook_{name}.json").read_text())
    return event


def body_of(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")


def with_body(event: dict[str, Any], body: bytes | str | dict[str, Any]) -> dict[str, Any]:
    event = copy.deepcopy(event)
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    data = data.encode("utf-8") if isinstance(data, str) else data
    event["body"] = base64.b64encode(data).decode() if event.get("isBase64Encoded") else data.decode()
    event["headers"]["content-length"] = str(len(data))
    return event


def with_headers(event: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["headers"].update(headers)
    return event


def signed(event: dict[str, Any], *, secret: str = SECRET, timestamp: int = int(NOW)) -> dict[str, Any]:
    return with_headers(event, sign(secret, timestamp, body_of(event)))


def bearer(event: dict[str, Any], token: str = SECRET) -> dict[str, Any]:
    return with_headers(event, {"authorization": f"Bearer {token}"})


def routed(event: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    return event


def answer(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


ADMISSION = fixture("function_url_admission")
FAILED_SCHEDULING = fixture("http_api_failed_scheduling")
POKE = fixture("function_url_poke")
POKE_BASE64 = fixture("function_url_poke_base64")
REVIEW = json.loads(body_of(ADMISSION))
EVENT = json.loads(body_of(FAILED_SCHEDULING))


# Relevant requests: exactly one message, with the documented ids and body


def test_gpu_pod_admission_is_allowed_and_enqueues_one_trigger(hook: Harness) -> None:
    # Given the API server's AdmissionReview for a pod asking for 8 GPUs, sent with the bearer secret
    event = bearer(ADMISSION)

    # When the Function URL delivers it
    response = hook.invoke(event)

    # Then the pod is allowed (the uid echoed) and one admission trigger is queued for the cluster
    assert response["statusCode"] == 200
    assert answer(response) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True},
    }
    assert hook.messages() == [
        {
            "group": CLUSTER,
            "dedup": f"{CLUSTER}-{WINDOW}",
            "body": {
                "source": "admission",
                "cluster": CLUSTER,
                "reason": "GPU pod created: research/train-llm-7b-*",
                "at": "2026-12-02T12:00:00.250Z",
            },
        }
    ]


def test_provisioning_request_admission_is_allowed_and_enqueues_one_trigger(hook: Harness) -> None:
    # Given the API server's AdmissionReview for a ProvisioningRequest Kueue creates, sent to the
    # admission URL (the manifest's second rule)
    request = provisioning_request("job-llm-prov-1", [("ppt-job-llm-main", 2)])
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3e5d1a0c-7a44-4c1e-9a0f-2f1b8f4d9c11",
            "kind": {"group": "autoscaling.x-k8s.io", "version": "v1", "kind": "ProvisioningRequest"},
            "resource": {
                "group": "autoscaling.x-k8s.io",
                "version": "v1",
                "resource": "provisioningrequests",
            },
            "name": "job-llm-prov-1",
            "namespace": "research",
            "operation": "CREATE",
            "object": request,
        },
    }
    # When it arrives
    response = hook.invoke(bearer(with_body(ADMISSION, review)))
    # Then it is allowed and wakes the scaler like a GPU pod does
    assert response["statusCode"] == 200
    assert answer(response)["response"] == {"uid": "3e5d1a0c-7a44-4c1e-9a0f-2f1b8f4d9c11", "allowed": True}
    [message] = hook.messages()
    assert message["body"]["source"] == "admission"
    assert message["body"]["reason"] == "ProvisioningRequest created: research/job-llm-prov-1"


def test_admission_path_token_authenticates_the_api_server_on_eks(hook: Harness) -> None:
    # Given the AdmissionReview with no credentials in its headers (EKS cannot add any), sent to the
    # URL that ends in the path token derived from the secret
    token = admission_path_token(SECRET)
    event = routed(ADMISSION, "POST", f"/webhook/admission/{token}")

    # When it arrives
    response = hook.invoke(event)

    # Then the pod is allowed and one admission trigger is queued
    assert response["statusCode"] == 200
    assert answer(response)["response"]["allowed"] is True
    assert [m["body"]["source"] for m in hook.messages()] == ["admission"]


@pytest.mark.parametrize(
    "path",
    [
        "/webhook/admission/" + "0" * 64,  # a wrong token
        "/webhook/admission/" + "sesame",  # not even the right shape
        "/webhook/events/TOKEN",  # the path token is for the admission route only
        "/webhook/poke/TOKEN",
    ],
)
def test_path_token_is_refused_when_wrong_or_off_the_admission_route(hook: Harness, path: str) -> None:
    event = routed(ADMISSION, "POST", path.replace("TOKEN", admission_path_token(SECRET)))
    response = hook.invoke(event)
    assert response["statusCode"] in (401, 404)
    assert hook.messages() == []


def test_failed_scheduling_event_from_http_api_enqueues_an_events_trigger(hook: Harness) -> None:
    # Given a signed FailedScheduling Event posted by a forwarder through the HTTP API (/webhook prefix)
    event = signed(FAILED_SCHEDULING)

    # When it is delivered
    response = hook.invoke(event)

    # Then it is accepted and one events trigger names the pod
    assert (response["statusCode"], answer(response)) == (202, {"enqueued": True})
    [message] = hook.messages()
    assert (message["group"], message["dedup"]) == (CLUSTER, f"{CLUSTER}-{WINDOW}")
    assert message["body"]["source"] == "events"
    assert message["body"]["reason"] == "FailedScheduling: research/train-llm-7b-x2k9f"


def test_signed_poke_enqueues_its_reason(hook: Harness) -> None:
    # Given a signed poke
    # When it is delivered
    response = hook.invoke(signed(POKE))

    # Then it is queued with the caller's reason
    assert (response["statusCode"], answer(response)) == (202, {"enqueued": True})
    [message] = hook.messages()
    assert message["body"] == {
        "source": "poke",
        "cluster": CLUSTER,
        "reason": "nightly batch submitted",
        "at": "2026-12-02T12:00:00.250Z",
    }


def test_base64_body_is_checked_and_parsed_after_decoding(hook: Harness) -> None:
    # Given a poke the Function URL base64-encoded, signed over the bytes the sender sent
    event = signed(POKE_BASE64)

    # When it is delivered
    response = hook.invoke(event)

    # Then the signature matches the decoded bytes and the poke is queued
    assert response["statusCode"] == 202
    assert [m["body"]["reason"] for m in hook.messages()] == ["nightly batch submitted"]


@pytest.mark.parametrize(
    "document",
    [
        {"events": [{**EVENT, "reason": "Scheduled"}, EVENT]},
        {"apiVersion": "v1", "kind": "EventList", "items": [EVENT]},
        {**EVENT, "reason": "NotTriggerScaleUp"},
    ],
    ids=["batch", "event-list", "not-trigger-scale-up"],
)
def test_every_event_payload_shape_enqueues_when_relevant(hook: Harness, document: dict[str, Any]) -> None:
    # Given a forwarder payload in one of the accepted shapes, carrying a relevant event
    event = signed(with_body(FAILED_SCHEDULING, document))

    # When it is delivered
    response = hook.invoke(event)

    # Then one reconcile is queued
    assert answer(response) == {"enqueued": True}
    assert len(hook.messages()) == 1


# Irrelevant requests: answered, nothing queued


def test_pod_without_gpus_is_allowed_without_enqueuing(hook: Harness) -> None:
    # Given the admission of a CPU-only pod
    review = copy.deepcopy(REVIEW)
    for container in review["request"]["object"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    event = bearer(with_body(ADMISSION, review))

    # When it is delivered
    response = hook.invoke(event)

    # Then it is allowed and nothing is queued
    assert response["statusCode"] == 200
    assert answer(response)["response"] == {"uid": review["request"]["uid"], "allowed": True}
    assert hook.messages() == []


def test_irrelevant_event_is_accepted_without_enqueuing(hook: Harness) -> None:
    # Given a signed Scheduled event (the pod found a node)
    event = signed(with_body(FAILED_SCHEDULING, {**EVENT, "reason": "Scheduled", "type": "Normal"}))

    # When it is delivered
    response = hook.invoke(event)

    # Then it is accepted, not queued
    assert (response["statusCode"], answer(response)) == (202, {"enqueued": False})
    assert hook.messages() == []


# Refusals: the status, a JSON error, nothing queued


@pytest.mark.parametrize("event", [ADMISSION, FAILED_SCHEDULING, POKE], ids=["admission", "events", "poke"])
def test_unsigned_request_is_refused_with_401(hook: Harness, event: dict[str, Any]) -> None:
    # Given a relevant request without any credentials
    # When it is delivered
    response = hook.invoke(event)

    # Then it is refused and nothing is queued
    assert response["statusCode"] == 401
    assert answer(response)["error"].startswith("missing credentials")
    assert hook.messages() == []


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (signed(POKE, secret="not-the-secret-0123456789"), "invalid signature"),
        (with_body(signed(POKE), {"reason": "forged after signing"}), "invalid signature"),
        (bearer(POKE, "not-the-secret-0123456789"), "invalid bearer token"),
        (with_headers(POKE, {"authorization": f"Basic {SECRET}"}), "unsupported Authorization scheme"),
    ],
    ids=["wrong-key", "tampered-body", "wrong-bearer", "basic-auth"],
)
def test_bad_credentials_are_refused_without_echoing_secrets(
    hook: Harness, event: dict[str, Any], message: str
) -> None:
    # Given a poke whose credentials do not match the secret (or whose body changed after signing)
    # When it is delivered
    response = hook.invoke(event)

    # Then it is refused, the error is specific, and neither the secret nor the credentials are echoed
    assert response["statusCode"] == 401
    error = answer(response)["error"]
    assert error.startswith(message)
    assert SECRET not in response["body"] and "not-the-secret" not in response["body"]
    assert hook.messages() == []


@pytest.mark.parametrize(
    ("offset", "status"),
    [(-301, 401), (-300, 202), (300, 202), (301, 401), (-86_400, 401)],
)
def test_replay_window_admits_five_minutes_of_skew_either_way(
    hook: Harness, offset: int, status: int
) -> None:
    # Given a poke signed `offset` seconds away from the webhook's clock
    event = signed(POKE, timestamp=int(hook.clock.now) + offset)

    # When it is delivered
    response = hook.invoke(event)

    # Then only timestamps within the replay window are accepted
    assert response["statusCode"] == status
    assert len(hook.messages()) == (1 if status == 202 else 0)


def test_oversized_content_length_is_refused_with_413(hook: Harness) -> None:
    # Given a signed poke that declares a body larger than the limit
    event = with_headers(signed(POKE), {"content-length": str(constants.WEBHOOK_MAX_BODY_BYTES + 1)})

    # When it is delivered
    response = hook.invoke(event)

    # Then it is refused before anything else
    assert response["statusCode"] == 413
    assert answer(response) == {"error": f"request body larger than {constants.WEBHOOK_MAX_BODY_BYTES} bytes"}
    assert hook.messages() == []


@pytest.mark.parametrize("source", [POKE, POKE_BASE64], ids=["text", "base64"])
def test_oversized_body_is_refused_with_413_whatever_content_length_says(
    hook: Harness, source: dict[str, Any]
) -> None:
    # Given a signed poke whose real body is above the limit but whose Content-Length lies
    body = json.dumps({"reason": "x", "padding": "p" * constants.WEBHOOK_MAX_BODY_BYTES})
    event = with_headers(signed(with_body(source, body)), {"content-length": "10"})

    # When it is delivered
    response = hook.invoke(event)

    # Then the decoded length decides
    assert response["statusCode"] == 413
    assert hook.messages() == []


@pytest.mark.parametrize(
    ("source", "body", "error"),
    [
        (ADMISSION, "{not json", "admission: body is not valid JSON"),
        (ADMISSION, {**REVIEW, "kind": "Pod"}, "admission: kind: Input should be 'AdmissionReview'"),
        (ADMISSION, {**REVIEW, "apiVersion": "admission.k8s.io/v1beta1"}, "admission: apiVersion:"),
        (ADMISSION, {**REVIEW, "request": {"operation": "CREATE"}}, "admission: request.uid: Field required"),
        (FAILED_SCHEDULING, {"reason": "FailedScheduling"}, "event: involvedObject: Field required"),
        (FAILED_SCHEDULING, {"events": [EVENT, {"reason": 3}]}, "events: events[1].reason:"),
        (POKE, {"why": "no reason"}, "poke: reason: Field required"),
        (POKE, {"reason": "   "}, "poke: reason: String should have at least 1 character"),
        (POKE, "", "poke: empty body"),
    ],
    ids=[
        "bad-json",
        "wrong-kind",
        "wrong-api-version",
        "missing-uid",
        "event-missing-involved-object",
        "batch-with-bad-event",
        "poke-missing-reason",
        "poke-blank-reason",
        "empty-body",
    ],
)
def test_malformed_bodies_are_refused_with_400(
    hook: Harness, source: dict[str, Any], body: str | dict[str, Any], error: str
) -> None:
    # Given an authenticated request whose body is malformed for its route
    event = signed(with_body(source, body))

    # When it is delivered
    response = hook.invoke(event)

    # Then the error names the problem and nothing is queued
    assert response["statusCode"] == 400
    assert answer(response)["error"].startswith(error)
    assert hook.messages() == []


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (signed(fixture("rest_api_poke")), "payload format 1.0 is not supported"),
        ({}, "not an HTTP request in payload format 2.0"),
        (json.loads((FIXTURES / "schedule.json").read_text()), "not an HTTP request in payload format 2.0"),
        (json.loads((FIXTURES / "sqs_batch.json").read_text()), "not an HTTP request in payload format 2.0"),
    ],
    ids=["rest-api-payload-1.0", "empty", "schedule", "sqs"],
)
def test_an_event_in_another_payload_format_is_refused_with_400(
    hook: Harness, event: dict[str, Any], error: str
) -> None:
    # Given an event the routes cannot read: a REST API's (payload format 1.0, signed as a poke should
    # be), a direct invoke's, or another event source's
    # When it is delivered
    response = hook.invoke(copy.deepcopy(event))

    # Then it gets a 400 that names the format to send, and nothing is queued
    assert response["statusCode"] == 400
    assert answer(response)["error"].startswith(error)
    assert "payload format 2.0" in answer(response)["error"]
    assert hook.messages() == []


def test_unknown_path_is_404_and_wrong_method_is_405(hook: Harness) -> None:
    # Given authenticated requests to a path we do not serve and with a method we do not accept
    unknown = hook.invoke(signed(routed(POKE, "POST", "/metrics")))
    wrong_method = hook.invoke(signed(routed(POKE, "GET", "/poke")))

    # Then they are 404 and 405 (with Allow), and nothing is queued
    assert unknown["statusCode"] == 404 and "no such route" in answer(unknown)["error"]
    assert wrong_method["statusCode"] == 405 and wrong_method["headers"]["Allow"] == "POST"
    assert answer(wrong_method) == {"error": "method GET not allowed: use POST"}
    assert hook.messages() == []


def test_unauthenticated_callers_learn_nothing_about_routes(hook: Harness) -> None:
    # Given unsigned requests to an unknown path and with a wrong method
    # When they are delivered
    statuses = [
        hook.invoke(routed(POKE, method, path))["statusCode"]
        for method, path in [("GET", "/x"), ("GET", "/poke")]
    ]

    # Then both are refused as unauthenticated
    assert statuses == [401, 401]


@pytest.mark.parametrize(
    ("path", "stage"),
    [("/webhook/poke", "$default"), ("/poke", "$default"), ("/live/webhook/poke", "live")],
)
def test_routes_are_served_with_and_without_prefix_and_stage(hook: Harness, path: str, stage: str) -> None:
    # Given a signed poke through the Function URL (no prefix), the HTTP API (/webhook) or a named stage
    event = routed(POKE, "POST", path)
    event["requestContext"]["stage"] = stage

    # When it is delivered
    response = hook.invoke(signed(event))

    # Then it reaches the poke route
    assert response["statusCode"] == 202


# Queue failures


def test_queue_failure_still_allows_the_pod(hook: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a webhook whose queue does not exist (every send fails)
    hook.use_queue(hook.queue_url.replace("webhook-", "missing-"), monkeypatch)

    # When a GPU pod is admitted
    response = hook.invoke(bearer(ADMISSION))

    # Then it is still allowed
    assert response["statusCode"] == 200
    assert answer(response)["response"]["allowed"] is True


@pytest.mark.parametrize("event", [signed(FAILED_SCHEDULING), signed(POKE)], ids=["events", "poke"])
def test_queue_failure_on_events_and_poke_is_503(
    hook: Harness, monkeypatch: pytest.MonkeyPatch, event: dict[str, Any]
) -> None:
    # Given a webhook whose queue does not exist
    hook.use_queue(hook.queue_url.replace("webhook-", "missing-"), monkeypatch)

    # When a relevant event or a poke arrives
    response = hook.invoke(event)

    # Then the sender is told to retry, without AWS details
    assert response["statusCode"] == 503
    assert answer(response) == {"error": "the reconcile queue is unavailable; retry later"}


def test_unreadable_secret_is_503(hook: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a webhook whose secret does not exist
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:missing-AbCdEf"
    hook.use_queue(hook.queue_url, monkeypatch, secret_arn=missing)

    # When a signed poke arrives
    response = hook.invoke(signed(POKE))

    # Then it cannot be authenticated now: 503, nothing queued
    assert response["statusCode"] == 503
    assert answer(response) == {"error": "the webhook secret cannot be read; retry later"}
    assert hook.messages() == []


# Coalescing, delay, rotation


def test_burst_of_1000_admissions_in_one_window_becomes_one_message(hook: Harness) -> None:
    # Given 1,000 GPU pods admitted within one 5-second window
    event = bearer(ADMISSION)
    statuses = set()
    for n in range(1000):
        hook.clock.now = NOW + n * 0.004
        statuses.add(hook.invoke(event)["statusCode"])

    # Then every pod is allowed and the queue holds one reconcile
    assert statuses == {200}
    assert [m["dedup"] for m in hook.messages()] == [f"{CLUSTER}-{WINDOW}"]


def test_each_dedup_window_gets_its_own_message(hook: Harness) -> None:
    # Given admissions spread over three windows (two in the first)
    for offset in (0.0, 4.9, 5.0, 12.0):
        hook.clock.now = NOW + offset
        assert hook.invoke(bearer(ADMISSION))["statusCode"] == 200

    # Then there is one message per window, in order
    assert [m["dedup"] for m in hook.messages()] == [f"{CLUSTER}-{WINDOW + k}" for k in (0, 1, 2)]


def test_sqs_drops_a_repeated_dedup_id_from_another_instance(
    hook: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two warm instances (each remembers only its own sends) admitting pods in the same window
    hook.invoke(bearer(ADMISSION))
    hook.use_queue(hook.queue_url, monkeypatch)  # a second cold start on the same queue
    hook.invoke(signed(FAILED_SCHEDULING))

    # Then SQS FIFO deduplication keeps one message
    assert len(hook.messages()) == 1


def test_queue_level_delay_holds_the_admission_trigger(
    hook: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the FIFO queue as the CDK app creates it: a queue-level delay (no per-message delay on FIFO)
    hook.queue_url = hook.new_queue(DelaySeconds="10")
    hook.use_queue(hook.queue_url, monkeypatch)

    # When a GPU pod is admitted
    hook.invoke(bearer(ADMISSION))

    # Then the trigger is queued but not yet deliverable
    attributes = hook.world.sqs.get_queue_attributes(QueueUrl=hook.queue_url, AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
    assert hook.messages() == []


def test_rotated_secret_is_picked_up_after_the_refresh_interval(hook: Harness) -> None:
    # Given a webhook that has read the secret, then a rotation
    assert hook.invoke(signed(POKE))["statusCode"] == 202
    rotated = "whsec-rotated-fedcba9876543210fedcba98"
    hook.world.secrets.put_secret_value(SecretId=hook.world.settings.secret_arn, SecretString=rotated)

    # When a sender signs with the new secret before and after the refresh interval
    hook.clock.now += 1
    early = hook.invoke(signed(POKE, secret=rotated, timestamp=int(hook.clock.now)))
    hook.clock.now += SECRET_REFRESH_SECONDS
    late = hook.invoke(signed(POKE, secret=rotated, timestamp=int(hook.clock.now)))

    # Then the early one is refused (no re-read yet) and the late one re-reads and is accepted
    assert (early["statusCode"], late["statusCode"]) == (401, 202)
    hook.world.secrets.put_secret_value(SecretId=hook.world.settings.secret_arn, SecretString=SECRET)


# Cold start


def test_missing_environment_fails_at_cold_start(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an environment without the queue URL
    monkeypatch.delenv(constants.ENV_QUEUE_URL)

    # When the function module is loaded (cold start)
    try:
        with pytest.raises(ConfigError, match=f"{constants.ENV_QUEUE_URL}: Field required"):
            importlib.reload(world.handler)
    finally:
        monkeypatch.undo()
        importlib.reload(world.handler)  # leave a working module for the other tests
