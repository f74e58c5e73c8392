"""The webhook's environment: parsed once, errors name the variable."""

from __future__ import annotations

import json

import pytest

from functions.webhook.settings import load_settings
from shared.constants import ENV_CONFIG, ENV_QUEUE_URL, ENV_WEBHOOK_SECRET_ARN
from shared.domain.errors import ConfigError

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/backlog-scaler-prod.fifo"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:backlog-scaler/webhook-AbCdEf"
CONFIG = {
    "cluster_name": "prod",
    "node_groups": [{"name": "g", "asg_name": "a", "instance_type": "p5.48xlarge"}],
}
ENVIRON = {
    ENV_QUEUE_URL: QUEUE_URL,
    ENV_WEBHOOK_SECRET_ARN: SECRET_ARN,
    ENV_CONFIG: json.dumps(CONFIG),
    "PATH": "/bin",
}


def test_settings_take_only_what_the_webhook_needs() -> None:
    # Given the function's environment
    # When it is parsed
    settings = load_settings(ENVIRON)

    # Then the queue, the secret and the cluster name come out
    assert (settings.queue_url, settings.secret_arn, settings.cluster_name) == (QUEUE_URL, SECRET_ARN, "prod")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({ENV_QUEUE_URL: None}, f"{ENV_QUEUE_URL}: Field required"),
        (
            {ENV_QUEUE_URL: QUEUE_URL.removesuffix(".fifo")},
            f"{ENV_QUEUE_URL}: must be the URL of an SQS FIFO",
        ),
        ({ENV_WEBHOOK_SECRET_ARN: "  "}, f"{ENV_WEBHOOK_SECRET_ARN}: must name the webhook secret"),
        ({ENV_CONFIG: "{"}, f"{ENV_CONFIG}: not valid JSON"),
        ({ENV_CONFIG: json.dumps({"cluster_name": "prod"})}, f"{ENV_CONFIG}: node_groups: Field required"),
    ],
)
def test_bad_environment_names_the_variable(changes: dict[str, str | None], message: str) -> None:
    # Given an environment with one missing or invalid variable
    environ = {k: v for k, v in {**ENVIRON, **changes}.items() if v is not None}

    # When it is parsed
    # Then the ConfigError names the variable and the problem
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as raised:
        load_settings(environ)
    assert str(raised.value).startswith("webhook environment: ")


def test_the_deployed_webhook_needs_only_the_cluster_name() -> None:
    # Given the environment the stack gives the webhook: the cluster name, no config
    environ = {
        "SCALER_CLUSTER_NAME": "research",
        ENV_QUEUE_URL: "https://sqs.us-west-2.amazonaws.com/1/q.fifo",
        ENV_WEBHOOK_SECRET_ARN: "arn:aws:secretsmanager:us-west-2:1:secret:w",
    }
    # Then its settings name the cluster, and a name the config would refuse is refused
    assert load_settings(environ).cluster_name == "research"
    with pytest.raises(ConfigError, match="not a cluster name"):
        load_settings({**environ, "SCALER_CLUSTER_NAME": "bad name!"})
