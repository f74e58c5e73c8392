"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.adapters.aws import clients
from tests.fakes.aws import use_fake_credentials


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials in us-east-1 for moto, and a fresh per-process client cache before and after."""
    use_fake_credentials(monkeypatch, "us-east-1")
    yield
    clients.clear_clients()
