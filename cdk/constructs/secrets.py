"""Secrets the functions read: the webhook's HMAC key (ours) and an optional Slack webhook (yours)."""

from __future__ import annotations

import re

from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from cdk.nag import acknowledge

# A complete secret ARN ends in the 6-character suffix Secrets Manager appends to the name.
_COMPLETE_SECRET_ARN = re.compile(r"^arn:[^:]+:secretsmanager:[^:]*:\d*:secret:.+-[A-Za-z0-9]{6}$")


class ScalerSecrets(Construct):
    def __init__(self, scope: Construct, id: str, *, slack_secret_arn: str | None = None) -> None:
        super().__init__(scope, id)
        self.webhook = secretsmanager.Secret(
            self,
            "WebhookSecret",
            description="backlog-scaler webhook HMAC key (shared with the cluster's event forwarder)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
        )
        acknowledge(
            self.webhook,
            "AwsSolutions-SMG4",
            "The webhook key is shared with the in-cluster event forwarder, which cannot follow an "
            "automatic rotation; rotate by updating the secret value and the forwarder together "
            "(docs/deploy.md).",
        )
        self.slack: secretsmanager.ISecret | None = None
        if slack_secret_arn:
            if _COMPLETE_SECRET_ARN.match(slack_secret_arn):
                self.slack = secretsmanager.Secret.from_secret_complete_arn(
                    self, "SlackSecret", slack_secret_arn
                )
            else:
                self.slack = secretsmanager.Secret.from_secret_partial_arn(
                    self, "SlackSecret", slack_secret_arn
                )
