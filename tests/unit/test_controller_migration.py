"""Migration on the apply side (shared.controller.migration), through the controller on in-memory fakes:
what is really evicted when a PodDisruptionBudget refuses one pod of a gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.domain.checkpoint import ANNOTATION_CHECKPOINT_INTERVAL
from shared.domain.errors import AuthError, ClusterReadError
from shared.reporting import ActionKind, ActionStatus
from tests.builders import GPU_TAINT, NOW, asg, config, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"
TEN_HOURS_AGO = NOW - timedelta(hours=10)
EVERY_30_MIN = {ANNOTATION_CHECKPOINT_INTERVAL: "1800"}
GANG = {"scheduling.x-k8s.io/pod-group": "train"}


def world() -> FakeWorld:
    """A three-member gang that checkpoints: one member on "half", two on "small"."""
    nodes = [node(name, f"i-{i}", taints=[GPU_TAINT]) for i, name in enumerate(("full", "half", "small"))]
    member: dict[str, Any] = {
        "gpus": 1,
        "labels": GANG,
        "annotations": EVERY_30_MIN,
        "created": TEN_HOURS_AGO,
    }
    pods = [
        pod("stay-full", gpus=4, node="full", created=TEN_HOURS_AGO),
        pod("stay-half", gpus=4, node="half", created=TEN_HOURS_AGO),
        pod("a-member", node="half", **member),
        pod("b-member", node="small", **member),
        pod("c-member", node="small", **member),
    ]
    policy = {
        "cordon_settle_seconds": 30,
        "attrition": {"enabled": False, "spare_gpus": 0},
        "migration": {"enabled": True},
    }
    return FakeWorld(
        config=config(policy=policy),
        cluster=FakeCluster(pods, nodes),
        fleet=FakeFleet([asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])]),
    )


def test_a_gang_one_of_whose_evictions_a_budget_refuses_is_not_moved_at_all() -> None:
    # Given the gang worth moving off "small", and a PodDisruptionBudget that refuses evicting c-member
    w = world()
    w.cluster.block_evictions("research/c-member")
    # When the scaler runs
    result = w.controller().reconcile("schedule")
    # Then no member is evicted (the dry run of every eviction comes first: the gang moves whole or
    # not at all), the move is called off with the reason, and "small" is schedulable again
    assert w.cluster.evicted == []
    skipped = [a for a in result.actions if a.kind is ActionKind.MIGRATE]
    assert [a.status for a in skipped] == [ActionStatus.SKIPPED]
    assert "PodDisruptionBudget refuses evicting research/c-member" in skipped[0].detail
    assert not w.cluster.is_cordoned("small")
    # When the budget allows it again and the scaler runs a minute later: the whole gang moves
    w.cluster.unblock_evictions("research/c-member")
    w.clock.advance(60)
    w.controller().reconcile("schedule")
    assert sorted(w.cluster.evicted) == ["research/a-member", "research/b-member", "research/c-member"]


def gang_budget(allowed: int, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """One PodDisruptionBudget over the whole gang, allowing `allowed` disruptions now."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "train", "namespace": "research"},
        "spec": {"minAvailable": 3 - allowed, "selector": selector or {"matchLabels": GANG}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 3 - allowed},
    }


def migrations(result: Any) -> list[Any]:
    return [a for a in result.actions if a.kind is ActionKind.MIGRATE]


def test_a_gang_under_one_budget_allowing_fewer_disruptions_than_members_is_not_moved() -> None:
    # Given the gang under one PodDisruptionBudget that allows 1 disruption: each member's dry run
    # passes alone (a dry run uses none up), the real evictions would stop at the second member
    w = world()
    w.cluster.add_pdb(gang_budget(1))
    # When the scaler runs
    result = w.controller().reconcile("schedule")
    # Then the budget was read before anything was evicted, no member is evicted, the move is called
    # off naming the budget, and "small" is schedulable again
    assert w.cluster.evicted == []
    (skipped,) = migrations(result)
    assert skipped.status is ActionStatus.SKIPPED
    assert skipped.detail == (
        "PodDisruptionBudget research/train allows 1 disruption now and the move would evict 3 of its"
        " pods (research/a-member, research/b-member, research/c-member)"
    )
    assert not w.cluster.is_cordoned("small")
    assert w.cluster.calls_of("list_pod_disruption_budgets") and not w.cluster.calls_of("can_evict")


def test_a_gang_whose_budget_allows_every_member_moves_whole() -> None:
    # Given the gang under one PodDisruptionBudget that allows 3 disruptions
    w = world()
    w.cluster.add_pdb(gang_budget(3))
    # When the scaler runs
    w.controller().reconcile("schedule")
    # Then the budget was read, every member's dry run passed, and the whole gang moved
    assert sorted(w.cluster.evicted) == ["research/a-member", "research/b-member", "research/c-member"]
    assert len(w.cluster.calls_of("list_pod_disruption_budgets")) == 1
    assert len(w.cluster.calls_of("can_evict")) == 3


@pytest.mark.parametrize(
    "error", [ClusterReadError("list poddisruptionbudgets: HTTP 500"), AuthError("HTTP 403")]
)
def test_budgets_that_cannot_be_read_call_the_move_off(error: Exception) -> None:
    # Given the gang, and a cluster whose budgets cannot be read
    w = world()
    w.cluster.fail_next("list_pod_disruption_budgets", error)
    # When the scaler runs
    result = w.controller().reconcile("schedule")
    # Then no member is evicted, the move is called off with the read's error, "small" is uncordoned;
    # credentials refused (403) stop every destructive write of the run, as a failed re-read does
    assert w.cluster.evicted == [] and not w.cluster.calls_of("can_evict")
    (skipped,) = migrations(result)
    assert skipped.status is ActionStatus.SKIPPED
    assert skipped.detail == f"could not read the PodDisruptionBudgets: {error}"
    assert not w.cluster.is_cordoned("small")
    stopped = "read failed: destructive actions stopped" in w.reporter.messages("error")
    assert stopped is isinstance(error, AuthError)
