"""The webhook over the real botocore wire path: a moto server on 127.0.0.1, and an SQS that hangs."""

from __future__ import annotations

import base64
import importlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from functions.webhook.auth import sign
from functions.webhook.service import build_webhook
from functions.webhook.settings import load_settings
from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.queue import clear_fast_clients, fast_sqs_client
from tests.fakes.aws import use_fake_credentials

pytestmark = pytest.mark.slow

REGION = "us-east-1"
SECRET = "whsec-server-0123456789abcdef01234567"
FIXTURES = Path(__file__).resolve().parents[1] / "events"
CONFIG = {
    "cluster_name": "prod",
    "node_groups": [{"name": "g", "asg_name": "a", "instance_type": "p4d.24xlarge"}],
}


@dataclass
class Context:
    function_name: str = "webhook"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:webhook"
    aws_request_id: str = "integration"


@dataclass
class Deployment:
    handler: ModuleType
    sqs: Any
    queue_url: str


def fixture(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((FIXTURES / f"webhook_{name}.json").read_text())
    return event


def signed(event: dict[str, Any]) -> dict[str, Any]:
    body = base64.b64decode(event["body"]) if event["isBase64Encoded"] else event["body"].encode()
    event["headers"].update(sign(SECRET, int(time.time()), body))
    return event


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        with pytest.MonkeyPatch.context() as env:
            use_fake_credentials(env, REGION)
            env.setenv(constants.ENV_AWS_ENDPOINT_URL, f"http://{host}:{port}")
            clients.clear_clients()
            clear_fast_clients()
            sqs = boto3.client("sqs", region_name=REGION)
            queue_url = sqs.create_queue(QueueName="prod.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
            secret = boto3.client("secretsmanager", region_name=REGION).create_secret(
                Name="webhook", SecretString=SECRET
            )
            env.setenv(constants.ENV_QUEUE_URL, queue_url)
            env.setenv(constants.ENV_WEBHOOK_SECRET_ARN, secret["ARN"])
            env.setenv(constants.ENV_CONFIG, json.dumps(CONFIG))
            handler = importlib.reload(importlib.import_module("functions.webhook.handler"))
            yield Deployment(handler, sqs, queue_url)
    finally:
        clients.clear_clients()
        clear_fast_clients()
        server.stop()


def test_triggers_from_two_instances_reach_the_queue_once(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two warm instances of the webhook whose clocks sit in the same dedup window
    window = constants.QUEUE_DEDUP_WINDOW_SECONDS
    now = (time.time() // window) * window + 1

    def instance() -> None:
        webhook = build_webhook(load_settings(os.environ), clock=lambda: now)
        deployment.handler.set_dependencies(webhook)

    # When the first admits a GPU pod and the second gets a FailedScheduling event and a poke
    instance()
    responses = [deployment.handler.handler(signed(fixture("function_url_admission")), Context())]
    instance()
    responses += [
        deployment.handler.handler(signed(fixture(name)), Context())
        for name in ("http_api_failed_scheduling", "function_url_poke")
    ]

    # Then all are answered and the FIFO queue (deduplicating over the wire) holds one reconcile
    assert [r["statusCode"] for r in responses] == [200, 202, 202]
    received = deployment.sqs.receive_message(
        QueueUrl=deployment.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
    )["Messages"]
    assert len(received) == 1
    assert received[0]["Attributes"]["MessageGroupId"] == "prod"
    assert received[0]["Attributes"]["MessageDeduplicationId"] == f"prod-{int(now // window)}"
    assert json.loads(received[0]["Body"])["source"] == "admission"


@pytest.fixture
def hanging_sqs(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An SQS endpoint that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", f"http://127.0.0.1:{listener.getsockname()[1]}")
    clear_fast_clients()
    deployment.handler.set_dependencies(build_webhook(load_settings(os.environ)))
    yield
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()
    clear_fast_clients()


# How long the API server waits for our admission webhook: the timeoutSeconds of the webhook
# configuration cdk/manifests.py deploys (admissionregistration.k8s.io/v1; Kubernetes' default is 10 s).
ADMISSION_WEBHOOK_TIMEOUT_SECONDS = 2


def test_a_hanging_queue_answers_the_api_server_within_its_timeout(
    deployment: Deployment, hanging_sqs: None
) -> None:
    # Given SQS hangs
    # When a GPU pod is admitted and an event arrives
    admission = deployment.handler.handler(signed(fixture("function_url_admission")), Context())
    events = deployment.handler.handler(signed(fixture("http_api_failed_scheduling")), Context())

    # Then the pod is allowed and the event is a 503: the hang ended at the client's timeouts
    assert admission["statusCode"] == 200 and json.loads(admission["body"])["response"]["allowed"] is True
    assert events["statusCode"] == 503
    # And those timeouts, not the machine's speed, keep the answer inside the API server's 2 s webhook
    # timeout: one attempt, bounded by its connect and read timeouts (what the webhook's sender uses)
    config = fast_sqs_client().meta.config
    assert config.retries["total_max_attempts"] == 1
    assert config.connect_timeout + config.read_timeout <= 1.0 < ADMISSION_WEBHOOK_TIMEOUT_SECONDS
