"""The fault matrix of node repair and rotation: never a busy node terminated, never a pod evicted.

Through the real handlers on moto and the fake Kubernetes API server (the cluster of
test_e2e_handlers.py), as test_fault_matrix.py; the drift at min size and the race with a forced
scale-down run the controller on the in-memory fakes, whose ASG keeps the instances' own launch
template versions (moto rewrites them to the group's on UpdateAutoScalingGroup).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from functions.aws_events import handler as aws_events
from shared.domain.operations import DrainIntent
from shared.planner.repair import REPAIR_TAINT_KEY
from shared.reporting import ActionKind, ActionStatus
from tests.builders import GPU_TOLERATION, NOW, asg, config, iso, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld
from tests.integration import test_e2e_handlers as e2e
from tests.integration import test_fault_matrix as matrix
from tests.integration.test_e2e_handlers import EVENTS, Cluster, run_reconcile

aws = e2e.aws
cluster = e2e.cluster
aws_fault = matrix.aws_fault

pytestmark = pytest.mark.slow


def broken(cluster: Cluster, name: str, instance: str, *, since: timedelta, status: str = "False") -> None:
    """Register an a100 node whose node monitoring agent reports AcceleratedHardwareReady=`status`."""
    obj = node(name, instance, labels={"gpu": "a100"}, created=cluster.now - timedelta(hours=2))
    obj["status"]["conditions"].append(
        {
            "type": "AcceleratedHardwareReady",
            "status": status,
            "reason": "NvidiaXID79Error",
            "lastTransitionTime": iso(cluster.clock.now() - since),
        }
    )
    cluster.server.add_node(obj)


def set_condition(cluster: Cluster, name: str, status: str) -> None:
    def update(obj: dict[str, Any]) -> None:
        for condition in obj["status"]["conditions"]:
            if condition["type"] == "AcceleratedHardwareReady":
                condition["status"] = status
                condition["lastTransitionTime"] = iso(cluster.clock.now())

    cluster.server.update_node(name, update)


def terminations(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in response["actions"] if a["kind"] == "terminate"]


def test_a_flapping_condition_never_cordons_nor_replaces_the_node(cluster: Cluster) -> None:
    # Given a node running a job whose GPU condition flips every 5 minutes (shorter than the
    # 10-minute toleration)
    [instance] = cluster.launch(cluster.a100, 1)
    broken(cluster, "flappy", instance, since=timedelta(minutes=1))
    cluster.server.add_pod(pod("job", node="flappy", tolerations=[GPU_TOLERATION]))
    # When the scaler runs through six flips
    for flip in range(6):
        cluster.clock.advance(300)
        set_condition(cluster, "flappy", "True" if flip % 2 == 0 else "False")
        response = run_reconcile(cluster)
        # Then nothing is ever terminated or cordoned for it
        assert terminations(response) == []
        assert not cluster.cordoned("flappy")
    assert cluster.instances(cluster.a100) == [instance]


def test_every_node_of_a_group_unhealthy_pauses_repair_and_raises_the_alarm_metric(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given both a100 nodes broken for an hour, idle (a bad driver rolled out to the whole group)
    first, second = cluster.launch(cluster.a100, 2)
    broken(cluster, "a", first, since=timedelta(hours=1))
    broken(cluster, "b", second, since=timedelta(hours=1))
    capsys.readouterr()
    # When the scaler runs
    response = run_reconcile(cluster)
    # Then nothing is terminated for health, and RepairPaused is emitted for the group
    assert terminations(response) == []
    assert sorted(cluster.instances(cluster.a100)) == sorted([first, second])
    assert matrix.emitted(capsys, "RepairPaused") == 1


def test_a_spot_warning_for_a_gang_member_buys_its_room_ahead_and_evicts_nothing(cluster: Cluster) -> None:
    # Given a Job's pod of gang "llm" on a Spot node, the only a100 node
    [instance] = cluster.launch(cluster.a100, 1)
    cluster.register("spot", instance)
    member = pod("llm-worker-0", node="spot", labels={"scheduling.x-k8s.io/pod-group": "llm"})
    cluster.server.add_pod(member)
    event = json.loads((EVENTS / "spot_interruption.json").read_text())
    event["detail"]["instance-id"] = instance
    # When the interruption warning arrives
    aws_events.handler(event, FakeLambdaContext())
    # Then the node is cordoned, a node is bought for the member's recreation before it is gone,
    # and nothing is evicted or terminated by the scaler
    assert cluster.cordoned("spot")
    assert cluster.desired(cluster.a100) == 2
    assert cluster.server.evictions == []
    assert instance in cluster.instances(cluster.a100)


def test_a_lease_lost_mid_repair_writes_nothing_more(
    cluster: Cluster, aws_fault: Callable[[str, str, matrix.Fault], None]
) -> None:
    # Given a busy broken node (to cordon for health) and a pod pending for h100 (to scale up)
    [instance] = cluster.launch(cluster.a100, 1)
    broken(cluster, "sick", instance, since=timedelta(hours=1))
    cluster.server.add_pod(pod("job", node="sick", tolerations=[GPU_TOLERATION]))
    cluster.server.add_pod(matrix.pending_for("train", "h100"))
    writes_before: list[int] = []

    # When another run takes the lease as this one re-reads the groups before setting desired
    def on_describe(params: dict[str, Any]) -> None:
        if len(calls) == 1 and not writes_before:
            writes_before.append(len(cluster.writes()))
            matrix.steal_lease(cluster)
        calls.append(params)

    calls: list[dict[str, Any]] = []
    aws_fault("autoscaling", "DescribeAutoScalingGroups", on_describe)
    response = run_reconcile(cluster)
    # Then the health cordon and taint that come after are never written, nor anything else
    assert cluster.writes()[writes_before[0] :] == []
    assert not cluster.cordoned("sick")
    taints = [t["key"] for t in cluster.server.get_node("sick")["spec"].get("taints") or ()]
    assert REPAIR_TAINT_KEY not in taints
    assert any("lease was lost" in e for e in response["errors"])
    assert cluster.server.evictions == []


# ------------------------------------------------------------------------------ on the in-memory fakes

A100 = "research-a100"
TEMPLATE = "lt-0abc1234567890def"


def drifted_world(*, min_size: int) -> FakeWorld:
    described = asg(A100, desired=1, instances=["i-0"], min_size=min_size)
    described["LaunchTemplate"] = {"LaunchTemplateId": TEMPLATE, "Version": "3"}
    described["Instances"][0]["LaunchTemplate"] = {"LaunchTemplateId": TEMPLATE, "Version": "2"}
    job = pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": {"enabled": False}})
    return FakeWorld(
        config=cfg, cluster=FakeCluster([job], [node("n0", "i-0")]), fleet=FakeFleet([described])
    )


def test_a_drifted_node_at_min_size_is_marked_while_busy_and_replaced_only_once_empty() -> None:
    w = drifted_world(min_size=1)
    # When the scaler runs while the job runs: the node is marked, never terminated nor evicted
    first = w.controller().reconcile("schedule")
    assert [(a.target, a.status) for a in first.actions if a.kind is ActionKind.MARK] == [
        ("n0", ActionStatus.DONE)
    ]
    assert w.fleet.terminated == [] and w.cluster.calls_of("evict") == []
    # When the job ends / Then the node is replaced and the group keeps its min size (no decrement)
    del w.cluster.pods["research/job"]
    w.clock.advance(60)
    w.controller().reconcile("schedule")
    assert w.fleet.terminated == ["i-0"]
    assert w.fleet.desired(A100) == 1


def test_a_repair_racing_a_forced_scale_down_leaves_the_node_to_the_drain() -> None:
    # Given a busy broken node that an operator's forced scale-down is draining (its intent stored)
    nodes = [node("n0", "i-0")]
    nodes[0]["status"]["conditions"].append(
        {"type": "KernelReady", "status": "False", "lastTransitionTime": iso(NOW - timedelta(hours=1))}
    )
    job = pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": {"enabled": False}})
    w = FakeWorld(
        config=cfg,
        cluster=FakeCluster([job], nodes),
        fleet=FakeFleet([asg(A100, desired=1, instances=["i-0"])]),
    )
    intent = DrainIntent(group="a100", nodes=("n0",), requested_at=NOW, expires_at=NOW + timedelta(hours=1))
    lease = w.state.acquire_lease("operator", NOW, 60)
    w.state.put_drain_intent(lease, intent)
    w.state.release_lease(lease)
    # When the scaler runs
    result = w.controller().reconcile("schedule")
    # Then repair neither cordons, taints nor terminates it: the drain owns the node
    mine = [
        a for a in result.actions if a.target == "n0" and a.kind in (ActionKind.MARK, ActionKind.TERMINATE)
    ]
    assert mine == []
    assert w.fleet.terminated == []
