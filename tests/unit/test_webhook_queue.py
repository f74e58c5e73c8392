"""Reconcile triggers (ids, bodies, coalescing) and the SQS / Secrets Manager adapters on moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from functions.reconcile.triggers import validate_wake_up
from functions.webhook.queue import ReconcileTriggers, deduplication_id, message_body
from shared.adapters.aws import clients
from shared.adapters.aws.queue import SqsFifoQueue, clear_fast_clients, fast_sqs_client
from shared.adapters.aws.secrets import SecretsManagerSecrets, region_of_arn
from shared.domain.errors import ActionError, ConfigError
from tests.fakes.aws import use_fake_credentials

REGION = "us-east-1"
NOW = 1_796_212_800.0


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RecordingSender:
    """Records sends; fails while `error` is set."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []
        self.error: Exception | None = None

    def send(self, body: str, *, group_id: str, deduplication_id: str) -> str:
        if self.error is not None:
            raise self.error
        self.sent.append({"body": body, "group_id": group_id, "deduplication_id": deduplication_id})
        return f"m-{len(self.sent)}"


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(0.0, 359242560), (4.999, 359242560), (5.0, 359242561), (-0.001, 359242559)],
)
def test_deduplication_id_is_the_cluster_and_its_5_second_window(offset: float, expected: int) -> None:
    assert deduplication_id("prod", NOW + offset) == f"prod-{expected}"


def test_message_body_is_small_compact_json() -> None:
    # Given a trigger
    # When its body is built
    body = message_body("admission", "prod", "GPU pod created: research/train-0", NOW + 0.1234)

    # Then it is the documented document, compact, with a millisecond UTC timestamp
    assert body == (
        '{"source":"admission","cluster":"prod","reason":"GPU pod created: research/train-0",'
        '"at":"2026-12-02T12:00:00.123Z"}'
    )


def test_message_body_is_a_wake_up_the_reconcile_function_accepts() -> None:
    # Given a trigger body as the webhook sends it
    body = message_body("events", "prod", "FailedScheduling: research/train-0", NOW)

    # When the reconcile function validates it (the consumer's side of the contract)
    wake_up = validate_wake_up(body, "prod")

    # Then every field survives
    assert (wake_up.source, wake_up.cluster, wake_up.reason) == (
        "events",
        "prod",
        "FailedScheduling: research/train-0",
    )
    assert wake_up.at == datetime.fromtimestamp(NOW, UTC)


def test_long_reasons_are_cut() -> None:
    reason = json.loads(message_body("poke", "prod", "x" * 1000, NOW))["reason"]
    assert len(reason) == 256 and reason.endswith("...")


def test_an_instance_sends_one_trigger_per_window() -> None:
    # Given the triggers of one warm instance
    sender, clock = RecordingSender(), FakeClock(NOW)
    triggers = ReconcileTriggers(sender, "prod", clock)

    # When triggers come in two windows
    results = []
    for offset in (0.0, 1.0, 4.9, 5.0, 6.0):
        clock.now = NOW + offset
        results.append(triggers.enqueue("admission", "r"))

    # Then only the first of each window reaches the queue, grouped by cluster
    assert results == [True, False, False, True, False]
    assert [(s["group_id"], s["deduplication_id"]) for s in sender.sent] == [
        ("prod", "prod-359242560"),
        ("prod", "prod-359242561"),
    ]


def test_a_failed_send_is_retried_by_the_next_trigger() -> None:
    # Given a send that fails
    sender, clock = RecordingSender(), FakeClock(NOW)
    triggers = ReconcileTriggers(sender, "prod", clock)
    sender.error = ActionError("queue down")
    with pytest.raises(ActionError):
        triggers.enqueue("events", "r")

    # When the next trigger of the same window comes and the queue is back
    sender.error = None
    # Then it is sent (a failure is not remembered as sent)
    assert triggers.enqueue("events", "r") is True and len(sender.sent) == 1


# Adapters on moto


@pytest.fixture(scope="module")
def aws() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as env, mock_aws():
        use_fake_credentials(env, REGION)
        env.delenv("AWS_ENDPOINT_URL", raising=False)
        clear_fast_clients()
        yield
        clients.clear_clients()
        clear_fast_clients()


@pytest.fixture
def sqs(aws: None) -> Any:
    return boto3.client("sqs", region_name=REGION)


def fifo_queue(sqs: Any, name: str, **attributes: str) -> str:
    response = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", **attributes})
    return str(response["QueueUrl"])


def received(sqs: Any, queue_url: str) -> list[str]:
    response = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    return [m["Body"] for m in response.get("Messages", [])]


def test_sqs_fifo_drops_a_repeated_deduplication_id(sqs: Any) -> None:
    # Given the adapter on a FIFO queue (moto honours deduplication ids like SQS)
    queue = SqsFifoQueue(fifo_queue(sqs, "dedup"), fast_sqs_client())

    # When the same id is sent twice and another id once
    queue.send("first", group_id="prod", deduplication_id="prod-1")
    queue.send("duplicate", group_id="prod", deduplication_id="prod-1")
    queue.send("second", group_id="prod", deduplication_id="prod-2")

    # Then the duplicate is accepted but never delivered
    assert received(sqs, queue.url) == ["first", "second"]


def test_fifo_queues_refuse_a_per_message_delay(sqs: Any) -> None:
    # Given a FIFO queue
    queue_url = fifo_queue(sqs, "no-per-message-delay")

    # When a message asks for its own delay, as a standard queue would allow
    # Then SQS refuses it: the admission delay has to be the queue's DelaySeconds
    with pytest.raises(ClientError) as raised:
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody="x",
            MessageGroupId="g",
            MessageDeduplicationId="d",
            DelaySeconds=10,
        )
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_send_to_a_missing_queue_is_an_action_error(sqs: Any) -> None:
    queue = SqsFifoQueue(f"https://sqs.{REGION}.amazonaws.com/123456789012/missing.fifo")
    with pytest.raises(ActionError, match="send to queue"):
        queue.send("x", group_id="g", deduplication_id="d")


def test_secret_string_is_read_from_the_secrets_region(aws: None) -> None:
    # Given a secret in another region than the default
    client = boto3.client("secretsmanager", region_name="eu-west-1")
    arn = client.create_secret(Name="webhook", SecretString="value-0123456789abcdef")["ARN"]

    # When it is read by ARN
    # Then the adapter found it in eu-west-1
    assert region_of_arn(arn) == "eu-west-1"
    assert SecretsManagerSecrets().secret_string(arn) == "value-0123456789abcdef"


def test_missing_or_binary_secrets_are_config_errors(aws: None) -> None:
    client = boto3.client("secretsmanager", region_name=REGION)
    binary = client.create_secret(Name="binary", SecretBinary=b"\x00\x01")["ARN"]
    secrets = SecretsManagerSecrets()
    with pytest.raises(ConfigError, match="does not exist"):
        secrets.secret_string(f"arn:aws:secretsmanager:{REGION}:123456789012:secret:nope-AbCdEf")
    with pytest.raises(ConfigError, match="holds no SecretString"):
        secrets.secret_string(binary)


@pytest.mark.parametrize(
    ("arn", "region"),
    [
        ("arn:aws:secretsmanager:eu-west-1:1:secret:x", "eu-west-1"),
        ("my-secret", None),
        ("arn:aws:s3:::b", None),
    ],
)
def test_region_of_arn(arn: str, region: str | None) -> None:
    assert region_of_arn(arn) == region
