"""Migration on the apply side (shared.controller.migration), through the controller on in-memory fakes:
what is really evicted when a PodDisruptionBudget refuses one pod of a gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shared.domain.checkpoint import ANNOTATION_CHECKPOINT_INTERVAL
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
