"""The attrition mark on the wire: `taint_node` / `untaint_node` of the Kubernetes adapter against the fake
API server (generated ClusterRole enforced), edited as `kubectl taint` edits them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.adapters.kubernetes.auth import build_transport
from shared.adapters.kubernetes.cluster import ClusterOptions, KubernetesCluster
from shared.adapters.kubernetes.rbac import cluster_role
from shared.adapters.kubernetes.transport import RestTransport
from shared.domain.errors import ConflictError, NotFoundError
from shared.domain.model import Taint, TaintEffect
from shared.local.kube_api_server import FakeKubeApiServer
from shared.planner.attrition import ATTRITION_TAINT_KEY

TOKEN = "k8s-aws-v1.test-token"
MARK = Taint(ATTRITION_TAINT_KEY, "", TaintEffect.PREFER_NO_SCHEDULE)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# Set by the node lifecycle controller; the domain model drops timeAdded, the edit must not.
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "effect": "NoExecute",
    "timeAdded": "2026-12-02T11:00:00Z",
}


def node(name: str, taints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}},
        "spec": {"providerID": f"aws:///us-east-1a/i-0{name[-1]}", "taints": taints},
        "status": {
            "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-02T11:00:00Z"}],
        },
    }


@pytest.fixture
def server() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as fake:
        fake.require_token(TOKEN)
        fake.enforce_cluster_role(cluster_role())
        yield fake


@pytest.fixture
def cluster(server: FakeKubeApiServer) -> Iterator[KubernetesCluster]:
    api: RestTransport = build_transport(server.url, token=TOKEN)
    yield KubernetesCluster(api, ClusterOptions(read_timeout=2.0), sleep=lambda _: None)
    api.close()


def patches(server: FakeKubeApiServer) -> list[Any]:
    return [c for c in server.calls if c.method == "PATCH"]


def test_taint_node_sends_the_whole_list_with_the_read_resource_version(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a GPU node that also carries a NoExecute taint with its timeAdded
    server.add_node(node("gpu-0", [GPU_TAINT, UNREACHABLE]))
    version = server.get_node("gpu-0")["metadata"]["resourceVersion"]  # type: ignore[index]

    # When the scaler marks it
    cluster.taint_node("gpu-0", MARK)

    # Then one merge patch replaced spec.taints with the old taints (untouched) plus the mark,
    # preconditioned on the resourceVersion it read
    (patch,) = patches(server)
    assert patch.body == {
        "spec": {
            "taints": [GPU_TAINT, UNREACHABLE, {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}]
        },
        "metadata": {"resourceVersion": version},
    }
    got = cluster.get_node("gpu-0")
    assert got is not None and MARK in got.taints


def test_taint_node_twice_writes_once(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given a node already marked
    server.add_node(node("gpu-0", [GPU_TAINT]))
    cluster.taint_node("gpu-0", MARK)

    # When it is marked again (a retried run)
    cluster.taint_node("gpu-0", MARK)

    # Then the second call found it as wanted and wrote nothing
    assert len(patches(server)) == 1


def test_taint_node_with_a_new_effect_replaces_the_old_one(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node marked PreferNoSchedule
    server.add_node(node("gpu-0", [GPU_TAINT, {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}]))

    # When it is marked NoSchedule
    cluster.taint_node("gpu-0", Taint(ATTRITION_TAINT_KEY, "", TaintEffect.NO_SCHEDULE))

    # Then both effects are there, as `kubectl taint KEY:NoSchedule` leaves a PreferNoSchedule one alone
    stored = server.get_node("gpu-0")
    assert stored is not None
    assert [(t["key"], t["effect"]) for t in stored["spec"]["taints"]] == [
        ("nvidia.com/gpu", "NoSchedule"),
        (ATTRITION_TAINT_KEY, "PreferNoSchedule"),
        (ATTRITION_TAINT_KEY, "NoSchedule"),
    ]


def test_untaint_node_removes_every_effect_of_the_key(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node with the mark under two effects
    server.add_node(
        node(
            "gpu-0",
            [
                GPU_TAINT,
                {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"},
                {"key": ATTRITION_TAINT_KEY, "effect": "NoSchedule"},
            ],
        )
    )

    # When the mark is lifted
    cluster.untaint_node("gpu-0", ATTRITION_TAINT_KEY)

    # Then only the other taints are left; lifting again writes nothing
    stored = server.get_node("gpu-0")
    assert stored is not None and stored["spec"]["taints"] == [GPU_TAINT]
    cluster.untaint_node("gpu-0", ATTRITION_TAINT_KEY)
    assert len(patches(server)) == 1


def test_taint_on_a_stale_read_is_a_conflict_and_writes_nothing(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node read by the re-validation, then changed by someone else
    server.add_node(node("gpu-0", [GPU_TAINT]))
    read = cluster.get_node("gpu-0")
    assert read is not None
    server.update_node("gpu-0", lambda obj: obj["metadata"]["labels"].update(changed="yes"))

    # When the mark is applied on that read
    with pytest.raises(ConflictError):
        cluster.taint_node("gpu-0", MARK, resource_version=read.resource_version)

    # Then nothing was written
    assert patches(server) == []


def test_taint_missing_node_is_not_found(cluster: KubernetesCluster) -> None:
    with pytest.raises(NotFoundError):
        cluster.taint_node("ghost", MARK)
