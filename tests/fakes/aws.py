"""Fake AWS credentials for moto: no test may ever reach a real account."""

from __future__ import annotations

import pytest

from shared.adapters.aws import clients

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


def use_fake_credentials(env: pytest.MonkeyPatch, region: str) -> None:
    """Point boto3 at fake credentials in `region` and drop the per-process client cache."""
    for name, value in FAKE_CREDENTIALS.items():
        env.setenv(name, value)
    env.setenv("AWS_DEFAULT_REGION", region)
    env.delenv("AWS_PROFILE", raising=False)
    clients.clear_clients()
