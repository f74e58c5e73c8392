"""Gangs and ProvisioningRequests end to end: the real reconcile handler, moto and the fake API server.

The cluster of `test_e2e_handlers` (a100 preferred at priority 10, h100; max 8 each), with the
ProvisioningRequest and PodGroup CRDs served by the fake API server under the generated ClusterRole.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import pod
from tests.builders_provisioning import ATOMIC, CHECK, pod_group, pod_template, provisioning_request
from tests.integration.test_e2e_handlers import Aws, Cluster, aws, cluster, run_reconcile

__all__ = ["Aws", "aws", "cluster"]  # the fixtures of the e2e module, shared

pytestmark = pytest.mark.slow
A100_ONLY = {"gpu": "a100"}


def _template(cluster: Cluster, name: str, gpus: int = 8) -> None:
    template = pod_template(name, gpus=gpus)
    template["template"]["spec"]["nodeSelector"] = dict(A100_ONLY)
    cluster.server.add_pod_template(template)


def _conditions(cluster: Cluster, name: str) -> dict[str, dict[str, Any]]:
    stored = cluster.server.get_provisioning_request("research", name)
    assert stored is not None
    return {c["type"]: c for c in (stored.get("status") or {}).get("conditions") or ()}


def _status_writes(cluster: Cluster) -> list[str]:
    return [w for w in cluster.writes() if "/provisioningrequests/" in w]


def test_atomic_request_is_provisioned_once_and_its_capacity_bought(cluster: Cluster) -> None:
    # Given Kueue's ProvisioningRequest for 2 x 8 GPUs on a100 (no pod exists yet)
    _template(cluster, "llm-main")
    cluster.server.add_provisioning_request(provisioning_request("llm", [("llm-main", 2)], class_name=ATOMIC))
    # When the scaler runs
    result = run_reconcile(cluster)
    # Then it buys both nodes in one group and answers Accepted + Provisioned=True on the status
    assert cluster.desired(cluster.a100) == 2
    conditions = _conditions(cluster, "llm")
    assert conditions["Accepted"]["status"] == "True"
    provisioned = conditions["Provisioned"]
    assert (provisioned["status"], provisioned["reason"], provisioned["observedGeneration"]) == (
        "True",
        "CapacityIsProvisioned",
        1,
    )
    assert _status_writes(cluster) == [
        "PATCH /apis/autoscaling.x-k8s.io/v1/namespaces/research/provisioningrequests/llm/status"
    ]
    assert any(a["kind"] == "answer-provisioning-request" for a in result["actions"])
    # When it runs again a minute later (the nodes still launching)
    cluster.server.clear_calls()
    cluster.clock.advance(60)
    run_reconcile(cluster)
    # Then nothing more is bought and nothing is written: the booking holds the launching nodes
    assert cluster.desired(cluster.a100) == 2
    assert _status_writes(cluster) == []


def test_booked_nodes_are_consumed_by_the_annotated_pods(cluster: Cluster) -> None:
    # Given a request provisioned on two registered idle a100 nodes
    _template(cluster, "llm-main")
    cluster.server.add_provisioning_request(provisioning_request("llm", [("llm-main", 2)]))
    for index, instance in enumerate(cluster.launch(cluster.a100, 2)):
        cluster.register(f"a100-{index}", instance)
    run_reconcile(cluster)
    assert _conditions(cluster, "llm")["Provisioned"]["reason"] == "CapacityIsFound"
    # When its two pods arrive, pending, annotated to consume it, with another 8-GPU pod
    consume = {"autoscaling.x-k8s.io/consume-provisioning-request": "llm"}
    for name in ("llm-0", "llm-1"):
        cluster.server.add_pod(pod(name, gpus=8, annotations=consume, node_selector=A100_ONLY))
    cluster.server.add_pod(pod("other", gpus=8, node_selector=A100_ONLY))
    cluster.clock.advance(60)
    run_reconcile(cluster)
    # Then the consumers use the booked room and the other pod gets a node of its own
    assert cluster.desired(cluster.a100) == 3


def test_request_too_big_for_any_group_buys_nothing_and_says_why(cluster: Cluster) -> None:
    # Given a request for 10 x 8 GPUs on a100 (max 8)
    _template(cluster, "huge-main")
    cluster.server.add_provisioning_request(provisioning_request("huge", [("huge-main", 10)]))
    # When the scaler runs
    run_reconcile(cluster)
    # Then nothing is bought and Provisioned=False/CapacityIsNotFound says why, with no Failed:
    # cluster-autoscaler's best-effort-atomic class tries again later (a max size may be raised)
    assert cluster.desired(cluster.a100) == 0 and cluster.desired(cluster.h100) == 0
    conditions = _conditions(cluster, "huge")
    assert "Failed" not in conditions
    provisioned = conditions["Provisioned"]
    assert (provisioned["status"], provisioned["reason"]) == ("False", "CapacityIsNotFound")
    assert "needs 10 a100 nodes, more than the group's max size 8" in provisioned["message"]


def test_check_capacity_request_is_answered_without_buying(cluster: Cluster) -> None:
    _template(cluster, "probe-main")
    cluster.server.add_provisioning_request(
        provisioning_request("probe", [("probe-main", 1)], class_name=CHECK)
    )
    run_reconcile(cluster)
    assert cluster.desired(cluster.a100) == 0
    provisioned = _conditions(cluster, "probe")["Provisioned"]
    assert (provisioned["status"], provisioned["reason"]) == ("False", "CapacityIsNotFound")


def test_booking_expires_after_the_booking_time(cluster: Cluster) -> None:
    _template(cluster, "llm-main")
    cluster.server.add_provisioning_request(provisioning_request("llm", [("llm-main", 1)]))
    run_reconcile(cluster)
    cluster.clock.advance(601)
    run_reconcile(cluster)
    expired = _conditions(cluster, "llm")["BookingExpired"]
    assert (expired["status"], expired["reason"]) == ("True", "CapacityReservationTimeExpired")


def test_volcano_gang_that_cannot_fit_whole_buys_nothing(cluster: Cluster) -> None:
    # Given a Volcano PodGroup of minMember 10 on a100 (max 8), two of its pods created
    cluster.server.add_pod_group(pod_group("llm", 10, volcano=True))
    for index in range(2):
        cluster.server.add_pod(
            pod(
                f"llm-{index}",
                gpus=8,
                annotations={"scheduling.k8s.io/group-name": "llm"},
                node_selector=A100_ONLY,
            )
        )
    # When the scaler runs
    run_reconcile(cluster)
    # Then nothing is bought and each pod is told what the gang lacks
    assert cluster.desired(cluster.a100) == 0
    events = [e for e in cluster.server.events() if e["involvedObject"]["name"] == "llm-0"]
    assert any(
        "gang research/llm: needs 10 a100 nodes, more than the group's max size 8" in e["message"]
        for e in events
    )


def test_a_cluster_without_the_crds_is_reconciled_as_before(cluster: Cluster) -> None:
    # Given an API server that serves neither ProvisioningRequests nor PodGroups
    cluster.server.inject("GET", r"^/apis/(autoscaling\.x-k8s\.io|scheduling\.)", status=404, times=-1)
    cluster.server.add_pod(pod("train", gpus=8, node_selector=A100_ONLY))
    # When the scaler runs, Then it scales up for the pod as usual
    result = run_reconcile(cluster)
    assert result["ok"] is True
    assert cluster.desired(cluster.a100) == 1
