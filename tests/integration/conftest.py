"""Fixtures of the integration tests that reach the fake Kubernetes API server through the adapter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.adapters.kubernetes.rbac import cluster_role, status_role
from shared.constants import DEFAULT_STATUS_NAMESPACE
from shared.local.kube_api_server import FakeKubeApiServer


@pytest.fixture
def kube_api_server() -> Iterator[FakeKubeApiServer]:
    """The fake API server enforcing the ClusterRole and the status Role generated from the adapter's
    permission table.

    A request the table does not grant is a 403 with the real API server's message, as on a cluster
    with the manifest `cdk synth` prints applied.
    """
    with FakeKubeApiServer() as server:
        server.enforce_cluster_role(cluster_role(), roles=[status_role(DEFAULT_STATUS_NAMESPACE)])
        yield server
