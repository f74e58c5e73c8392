"""Migration of jobs that checkpoint, end to end: the real reconcile handler on moto and the fake
Kubernetes API server (the cluster of test_e2e_handlers.py), with migration switched on.

The cluster: two a100 nodes, "full" running a 7-GPU job that does not checkpoint (1 GPU free) and
"small" running one 1-GPU job that saves every 30 minutes and has run 10 hours: emptying "small"
saves 80 GPU-hours against 0.58 lost, and its job fits on "full".
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from shared.adapters.aws import clients
from shared.domain.checkpoint import ANNOTATION_CHECKPOINT_INTERVAL
from tests.builders import pod
from tests.integration import test_e2e_handlers as e2e
from tests.integration.test_e2e_handlers import Cluster, run_reconcile
from tests.integration.test_fault_matrix import steal_lease

# The e2e module's fixtures: the moto account and one cluster on it, wired to the handlers.
aws = e2e.aws
cluster = e2e.cluster

pytestmark = pytest.mark.slow

MOVER = ("research", "mover")


def with_migration(cluster: Cluster) -> None:
    config = json.loads(os.environ["SCALER_CONFIG"])
    config["policy"]["migration"] = {"enabled": True}
    config["policy"]["attrition"] = {"enabled": False, "spare_gpus": 0}  # every free GPU is room to move onto
    os.environ["SCALER_CONFIG"] = json.dumps(config)  # the cluster fixture's monkeypatch restores it
    cluster.wire()


def two_nodes(cluster: Cluster) -> None:
    full, small = cluster.launch(cluster.a100, 2)
    cluster.register("full", full)
    cluster.register("small", small)
    started = cluster.now - timedelta(hours=10)
    cluster.server.add_pod(pod("stay", gpus=7, node="full", created=started))
    cluster.server.add_pod(
        pod(
            "mover",
            gpus=1,
            node="small",
            created=started,
            labels={"app": "mover"},
            annotations={ANNOTATION_CHECKPOINT_INTERVAL: "1800"},
        )
    )
    with_migration(cluster)


def pdb(min_available: int) -> dict[str, Any]:
    """A PodDisruptionBudget over the moving job (minAvailable 1 over one pod: no disruption allowed)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "mover", "namespace": "research"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "mover"}}},
    }


def kinds(response: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(a["kind"], a["target"], a["status"]) for a in response["actions"]]


def test_a_pdb_that_refuses_stops_the_migration_and_uncordons_then_a_later_run_moves_the_job(
    cluster: Cluster,
) -> None:
    # Given the job covered by a PodDisruptionBudget that allows no disruption
    two_nodes(cluster)
    cluster.server.add_pdb(pdb(1))

    # When the scaler runs: it cordons "small", re-validates, and the eviction's dry run is refused
    # (429: the API server judged the budget and evicted nothing)
    refused = run_reconcile(cluster)

    # Then nothing was evicted, not even tried, and "small" is schedulable again
    assert ("cordon", "small", "done") in kinds(refused)
    assert ("migrate", "small", "skipped") in kinds(refused)
    assert not [k for k in kinds(refused) if k[0] == "evict"]
    assert ("uncordon", "small", "done") in kinds(refused)
    assert MOVER not in cluster.server.evictions and not cluster.cordoned("small")

    # When the budget no longer covers the job (its owner relabelled it) and the scaler runs again
    cluster.server.update_pod(*MOVER, lambda obj: obj["metadata"]["labels"].update({"app": "free"}))
    cluster.clock.advance(60)
    moved = run_reconcile(cluster)

    # Then the job is evicted through the Eviction API, "small" stays cordoned, and the pod hears why
    assert ("evict", "research/mover", "done") in kinds(moved)
    assert MOVER in cluster.server.evictions and cluster.cordoned("small")
    reasons = [e["reason"] for e in cluster.server.events() if e["involvedObject"]["name"] == "mover"]
    assert "MovedForConsolidation" in reasons
    # And the migration is stored for the per-hour budget
    assert len(cluster.state.load().groups["a100"].migrated_at) == 1

    # When the job's pod is gone (its Job re-creates it; the scheduler puts it on "full") and the
    # scaler runs after the cordon settled: idle scale-down takes the node
    cluster.server.delete_pod(*MOVER)
    cluster.clock.advance(60)
    run_reconcile(cluster)
    assert cluster.server.get_node("small") is None and cluster.desired(cluster.a100) == 1


GANG = {"scheduling.x-k8s.io/pod-group": "train", "train-job": "t1"}
GANG_MEMBERS = [("research", "a-member"), ("research", "b-member"), ("research", "c-member")]


def a_gang_across_three_nodes(cluster: Cluster) -> None:
    """A 3-member gang that checkpoints: a-member on "half" (beside a 4-GPU job), b- and c-member on
    "small"; emptying "small" moves the whole gang (its members run together or not at all)."""
    full, half, small = cluster.launch(cluster.a100, 3)
    for name, instance_id in (("full", full), ("half", half), ("small", small)):
        cluster.register(name, instance_id)
    started = cluster.now - timedelta(hours=10)
    cluster.server.add_pod(pod("stay-full", gpus=4, node="full", created=started))
    cluster.server.add_pod(pod("stay-half", gpus=4, node="half", created=started))
    member: dict[str, Any] = {
        "gpus": 1,
        "labels": GANG,
        "annotations": {ANNOTATION_CHECKPOINT_INTERVAL: "1800"},
        "created": started,
    }
    for (_, name), node_name in zip(GANG_MEMBERS, ("half", "small", "small"), strict=True):
        cluster.server.add_pod(pod(name, node=node_name, **member))
    with_migration(cluster)


@pytest.mark.parametrize(("min_available", "moved"), [(2, []), (0, GANG_MEMBERS)])
def test_a_gang_moves_whole_or_not_at_all_under_one_budget_over_its_members(
    cluster: Cluster, min_available: int, moved: list[tuple[str, str]]
) -> None:
    # Given the gang under ONE PodDisruptionBudget: minAvailable 2 of 3 allows 1 disruption (each
    # member's dry run passes alone: a dry run never uses the budget up), minAvailable 0 allows 3
    a_gang_across_three_nodes(cluster)
    cluster.server.add_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train", "namespace": "research"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"train-job": "t1"}}},
        }
    )

    # When the scaler runs
    response = run_reconcile(cluster)

    # Then the gang is evicted whole or not at all: never the first member alone
    assert sorted(cluster.server.evictions) == moved
    assert ("cordon", "small", "done") in kinds(response)
    if moved:
        assert cluster.cordoned("small")
        return
    # And a move the budget cannot allow is called off before any eviction, naming the budget, and
    # "small" is schedulable again
    assert not [k for k in kinds(response) if k[0] == "evict"]
    (skipped,) = [a for a in response["actions"] if a["kind"] == "migrate"]
    assert skipped["status"] == "skipped"
    assert skipped["detail"].startswith("PodDisruptionBudget research/train allows 1 disruption now")
    assert ("uncordon", "small", "done") in kinds(response) and not cluster.cordoned("small")


@pytest.fixture
def on_lease_renewal() -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run a callback before each renewal of the lease (DynamoDB UpdateItem of the scaler's client)."""
    client = clients.client("dynamodb", None)
    registered: list[Callable[..., Any]] = []

    def install(callback: Callable[[], None]) -> None:
        def before(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            callback()
            return None

        client.meta.events.register_first("before-call.dynamodb.UpdateItem", before)
        registered.append(before)

    yield install
    for handler in registered:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", handler)


def test_a_lease_lost_between_the_cordon_and_the_eviction_evicts_nothing(
    cluster: Cluster, on_lease_renewal: Callable[[Callable[[], None]], None]
) -> None:
    # Given the cluster, and another run that takes the lease once "small" is cordoned (the fence
    # before the eviction batch is the first renewal after the cordon)
    two_nodes(cluster)

    def take_over_after_the_cordon() -> None:
        if cluster.cordoned("small"):
            steal_lease(cluster)

    on_lease_renewal(take_over_after_the_cordon)

    # When the scaler runs
    response = run_reconcile(cluster)

    # Then it cordoned "small" but evicted nothing, and says the lease was lost
    assert ("cordon", "small", "done") in kinds(response)
    assert MOVER not in cluster.server.evictions
    assert cluster.server.get_pod(*MOVER) is not None
    assert any("lease was lost" in e for e in response["errors"])
