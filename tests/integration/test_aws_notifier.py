"""Notifiers against moto's SNS and Secrets Manager and a local HTTP server standing in for Slack."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from shared.adapters.aws.notifier import (
    SLACK_PLAIN,
    SLACK_TEXT_MAX,
    SNS_MESSAGE_MAX_BYTES,
    CompositeNotifier,
    NullNotifier,
    SlackNotifier,
    SnsNotifier,
    notifier_from_config,
)
from shared.adapters.aws.secrets import SecretsManagerSecrets
from shared.config import NotificationsConfig

REGION = "us-east-1"
# One session for every client of this module: it parses each service model once. Created after
# `import moto`, so its clients go through moto's interception.
SESSION = boto3.session.Session()


pytestmark = pytest.mark.usefixtures("fake_aws")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def sent_to(topic_arn: str) -> list[tuple[str, str | None]]:
    """(message, subject) of every publish moto recorded on a topic."""
    topic = sns_backends[DEFAULT_ACCOUNT_ID][REGION].topics[topic_arn]
    return [(message, subject) for _, message, subject, _, _ in topic.sent_notifications]


# SNS


def test_sns_publishes_one_message_per_batch(aws: None) -> None:
    # Given a topic
    topic = SESSION.client("sns", region_name=REGION).create_topic(Name="scaler")["TopicArn"]

    # When a batch is notified (the client is built from the topic ARN's region)
    ok = SnsNotifier(topic).notify(
        "research: scaled gpu-a 2 -> 4", ["gpu-a: 4 pending pods", "gpu-b: unchanged"]
    )

    # Then one message carries the subject and every line
    assert ok
    assert sent_to(topic) == [
        (
            "research: scaled gpu-a 2 -> 4\ngpu-a: 4 pending pods\ngpu-b: unchanged",
            "research: scaled gpu-a 2 -> 4",
        )
    ]


def test_sns_subject_and_message_are_cut_to_the_limits(aws: None) -> None:
    # Given a topic and a batch whose subject and body exceed SNS's limits
    client = SESSION.client("sns", region_name=REGION)
    topic = client.create_topic(Name="scaler")["TopicArn"]
    subject = "scale-up\n" + "s" * 300
    lines = ["x" * 1000] * 400  # ~400 KB

    # When it is notified
    ok = SnsNotifier(topic, client).notify(subject, lines)

    # Then it is published, truncated: subject on one line of 100 characters, body within 256 KiB
    assert ok
    ((message, sent_subject),) = sent_to(topic)
    assert sent_subject is not None and len(sent_subject) == 100 and "\n" not in sent_subject
    assert len(message.encode()) <= SNS_MESSAGE_MAX_BYTES
    assert message.endswith("(truncated)")


def test_sns_failure_returns_false_and_does_not_raise(aws: None, caplog: pytest.LogCaptureFixture) -> None:
    # Given a topic that does not exist
    topic = f"arn:aws:sns:{REGION}:{DEFAULT_ACCOUNT_ID}:missing"

    # When a batch is notified
    ok = SnsNotifier(topic).notify("subject", ["line"])

    # Then it reports failure and logs it
    assert not ok
    assert "SNS notification" in caplog.text


# Slack


class SlackStub:
    """A local HTTP server recording POSTed bodies and answering with a fixed status."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.content_types: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                stub.bodies.append(json.loads(self.rfile.read(length)))
                stub.content_types.append(self.headers.get("Content-Type") or "")
                self.send_response(stub.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/secret"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> SlackStub:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def secret_with(value: str) -> tuple[Any, str]:
    client = SESSION.client("secretsmanager", region_name=REGION)
    return client, client.create_secret(Name="slack-webhook", SecretString=value)["ARN"]


def secrets_from(client: Any) -> SecretsManagerSecrets:
    return SecretsManagerSecrets(lambda service, region: client)


def test_slack_posts_the_batch_as_json_text(aws: None) -> None:
    # Given a webhook URL stored in Secrets Manager and a listening endpoint
    with SlackStub() as slack:
        client, arn = secret_with(slack.url)
        reads: list[str] = []
        client.meta.events.register(
            "provide-client-params.secrets-manager.GetSecretValue", lambda **_: reads.append("x")
        )
        notifier = SlackNotifier(arn, secrets_from(client))

        # When two batches are notified
        first = notifier.notify("research: scaled gpu-a 2 -> 4", ["gpu-a: 4 pending pods"])
        second = notifier.notify("research: idle", [])

    # Then both are posted as {"text": ...} JSON and the secret was read once
    assert first and second
    assert slack.bodies == [
        {"text": "research: scaled gpu-a 2 -&gt; 4\ngpu-a: 4 pending pods", **SLACK_PLAIN},
        {"text": "research: idle", **SLACK_PLAIN},
    ]
    assert slack.content_types[0].startswith("application/json")
    assert len(reads) == 1


def test_slack_shows_what_users_and_the_cluster_wrote_as_text(aws: None) -> None:
    # Given a forced scale-down whose requested_by mentions the channel and hides a link
    with SlackStub() as slack:
        client, arn = secret_with(slack.url)
        line = "drain n1 (a100): forced scale-down of a100 by <!channel> <https://evil.example|docs> & co"

        # When it is notified
        assert SlackNotifier(arn, secrets_from(client)).notify("research: 1 drain", [line])

    # Then Slack receives the control characters escaped: no mention, no link, plain text
    text = slack.bodies[0]["text"]
    assert "<" not in text and ">" not in text
    assert "&lt;!channel&gt; &lt;https://evil.example|docs&gt; &amp; co" in text
    assert slack.bodies[0]["mrkdwn"] is False and slack.bodies[0]["unfurl_links"] is False


def test_slack_reads_a_json_secret_and_truncates_long_text(aws: None) -> None:
    # Given a JSON secret and a batch longer than Slack shows
    with SlackStub() as slack:
        _, arn = secret_with(json.dumps({"url": slack.url}))

        # When notified (the Secrets Manager client is built from the ARN's region)
        ok = SlackNotifier(arn).notify("subject", ["y" * 100] * 100)

    # Then the text is cut to Slack's limit
    assert ok
    assert len(slack.bodies[0]["text"]) == SLACK_TEXT_MAX
    assert slack.bodies[0]["text"].endswith("(truncated)")


def test_slack_error_status_returns_false(aws: None, caplog: pytest.LogCaptureFixture) -> None:
    # Given an endpoint answering 500
    with SlackStub(status=500) as slack:
        client, arn = secret_with(slack.url)

        # When notified
        ok = SlackNotifier(arn, secrets_from(client)).notify("subject", ["line"])

    # Then it reports failure, logs the status, and never logs the webhook URL (a credential)
    assert not ok
    assert "HTTP 500" in caplog.text
    assert "/services/T0/B0" not in caplog.text


def test_a_revoked_webhook_makes_the_next_notification_read_the_secret_again(aws: None) -> None:
    # Given an endpoint answering 404 (webhook revoked) and a notifier that cached the URL
    with SlackStub(status=404) as slack:
        client, arn = secret_with(slack.url)
        reads: list[str] = []
        client.meta.events.register(
            "provide-client-params.secrets-manager.GetSecretValue", lambda **_: reads.append("x")
        )
        notifier = SlackNotifier(arn, secrets_from(client))

        # When two notifications are sent
        results = [notifier.notify("subject", ["line"]), notifier.notify("subject", ["line"])]

    # Then both fail, and the secret was read before each (a rotated URL would be picked up)
    assert results == [False, False]
    assert len(reads) == 2


def test_slack_unreachable_endpoint_returns_false(aws: None) -> None:
    # Given a webhook URL on a port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client, arn = secret_with(f"http://127.0.0.1:{port}/hook")

    # When notified / Then failure, no exception
    assert not SlackNotifier(arn, secrets_from(client), timeout=1.0).notify("subject", ["line"])


def test_slack_missing_secret_returns_false_and_retries_next_time(aws: None) -> None:
    # Given the secret does not exist yet
    client = SESSION.client("secretsmanager", region_name=REGION)
    arn = f"arn:aws:secretsmanager:{REGION}:{DEFAULT_ACCOUNT_ID}:secret:slack-webhook-AbCdEf"
    notifier = SlackNotifier(arn, secrets_from(client))

    # When notified / Then failure; once the secret exists, the next notification works
    assert not notifier.notify("subject", ["line"])
    with SlackStub() as slack:
        _, real_arn = secret_with(slack.url)
        assert SlackNotifier(real_arn, secrets_from(client)).notify("subject", ["line"])


# composition


def test_composite_sends_to_sns_and_slack(aws: None) -> None:
    # Given SNS and Slack notifiers
    topic = SESSION.client("sns", region_name=REGION).create_topic(Name="scaler")["TopicArn"]
    with SlackStub() as slack:
        _, arn = secret_with(slack.url)
        notifier = notifier_from_config(
            NotificationsConfig(sns_topic_arn=topic, slack_webhook_secret_arn=arn)
        )

        # When a batch is notified
        ok = notifier.notify("subject", ["line"])

    # Then both received it
    assert ok
    assert isinstance(notifier, CompositeNotifier)
    assert len(sent_to(topic)) == 1
    assert len(slack.bodies) == 1


def test_no_notifications_configured_is_a_null_notifier() -> None:
    # Given no topic and no Slack secret / When built / Then a NullNotifier
    assert isinstance(notifier_from_config(NotificationsConfig()), NullNotifier)
