"""Scale-down rules: idle -> cordon -> terminate, batch-safe limits, replacements."""

from __future__ import annotations

from datetime import timedelta

from shared.domain.model import GroupState, NodeState, ScalerState
from shared.planner import plan
from tests.builders import NOW, asg, config, iso, node, pod, snapshot

A100 = "research-a100"
CORDONED = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=2))}


def idle_state(*names: str, minutes: int = 30) -> ScalerState:
    return ScalerState(nodes={n: NodeState(idle_since=NOW - timedelta(minutes=minutes)) for n in names})


def group(instances: list[str], **kw: object) -> list[dict[str, object]]:
    return [asg(A100, desired=len(instances), instances=instances, **kw)]  # type: ignore[arg-type]


def test_node_idle_past_threshold_is_cordoned() -> None:
    # Given a node running only a DaemonSet and a mirror pod, idle for 30 minutes
    pods = [
        pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet"),
        pod("static", gpus=0, node="n1", owner_kind="Node", annotations={"kubernetes.io/config.mirror": "x"}),
    ]
    result = plan(snapshot(pods, [node("n1", "i-1")], group(["i-1"]), idle_state("n1")), config(), NOW)
    # Then it is cordoned, not yet terminated, and desired is unchanged
    assert [a.node for a in result.cordon] == ["n1"]
    assert result.terminate == ()
    assert result.group("a100").desired == 1


def test_node_idle_shorter_than_threshold_is_kept_and_its_idle_time_starts_now() -> None:
    result = plan(snapshot([], [node("n1", "i-1")], group(["i-1"])), config(), NOW)
    assert result.cordon == ()
    assert result.idle_since == {"n1": NOW}


def test_busy_node_is_never_cordoned_and_forgets_idle_time() -> None:
    pods = [pod("job", node="n1")]
    result = plan(snapshot(pods, [node("n1", "i-1")], group(["i-1"]), idle_state("n1")), config(), NOW)
    assert result.cordon == ()
    assert result.idle_since == {}


def test_cordoned_idle_node_is_terminated_with_decrement() -> None:
    # Given a node the scaler cordoned 2 minutes ago, still idle
    nodes = [node("n1", "i-1", unschedulable=True, annotations=CORDONED), node("n2", "i-2")]
    pods = [pod("job", node="n2")]
    result = plan(snapshot(pods, nodes, group(["i-1", "i-2"]), idle_state("n1")), config(), NOW)
    # Then it is terminated with decrement and desired drops by one
    assert [(t.node, t.instance_id, t.decrement) for t in result.terminate] == [("n1", "i-1", True)]
    assert result.group("a100").desired == 1


def test_cordon_settle_time_delays_termination() -> None:
    just_now = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(seconds=5))}
    nodes = [node("n1", "i-1", unschedulable=True, annotations=just_now)]
    result = plan(snapshot([], nodes, group(["i-1"]), idle_state("n1")), config(), NOW)
    assert result.terminate == ()


def test_cordoned_node_that_got_a_pod_is_uncordoned() -> None:
    nodes = [node("n1", "i-1", unschedulable=True, annotations=CORDONED)]
    result = plan(snapshot([pod("job", node="n1")], nodes, group(["i-1"])), config(), NOW)
    assert [a.node for a in result.uncordon] == ["n1"]
    assert result.terminate == ()


def test_node_cordoned_by_someone_else_is_left_alone() -> None:
    nodes = [node("n1", "i-1", unschedulable=True)]
    result = plan(snapshot([], nodes, group(["i-1"]), idle_state("n1")), config(), NOW)
    assert (result.cordon, result.uncordon, result.terminate) == ((), (), ())


def test_protected_nodes_are_not_scaled_down() -> None:
    # Given idle nodes protected by either annotation, and one running a do-not-disrupt pod
    nodes = [
        node("n1", "i-1", annotations={"backlog-scaler/scale-down-disabled": "true"}),
        node("n2", "i-2", annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}),
        node("n3", "i-3"),
    ]
    pods = [
        pod(
            "ds",
            gpus=0,
            node="n3",
            owner_kind="DaemonSet",
            annotations={"karpenter.sh/do-not-disrupt": "true"},
        )
    ]
    cfg = config(policy={"max_scale_in_fraction": 1.0})
    result = plan(snapshot(pods, nodes, group(["i-1", "i-2", "i-3"]), idle_state("n1", "n2", "n3")), cfg, NOW)
    assert result.cordon == ()


def test_min_size_is_respected() -> None:
    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    cfg = config(policy={"max_scale_in_fraction": 1.0})
    result = plan(snapshot([], nodes, group(["i-1", "i-2"], min_size=1), idle_state("n1", "n2")), cfg, NOW)
    assert len(result.cordon) == 1


def test_at_most_a_fraction_of_the_group_per_run_but_at_least_one() -> None:
    names = [f"n{i}" for i in range(25)]
    nodes = [node(n, f"i-{i}") for i, n in enumerate(names)]
    instances = [f"i-{i}" for i in range(25)]
    result = plan(snapshot([], nodes, group(instances, max_size=30), idle_state(*names)), config(), NOW)
    assert len(result.cordon) == 2  # floor(0.1 * 25)
    small = plan(snapshot([], nodes[:3], group(instances[:3]), idle_state(*names[:3])), config(), NOW)
    assert len(small.cordon) == 1


def test_longest_idle_nodes_go_first() -> None:
    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    state = ScalerState(
        nodes={"n1": NodeState(NOW - timedelta(minutes=20)), "n2": NodeState(NOW - timedelta(minutes=50))}
    )
    result = plan(snapshot([], nodes, group(["i-1", "i-2"]), state), config(), NOW)
    assert [a.node for a in result.cordon] == ["n2"]


def test_no_scale_down_soon_after_a_scale_up() -> None:
    state = ScalerState(
        nodes={"n1": NodeState(NOW - timedelta(minutes=30))},
        groups={"a100": GroupState(last_scale_up=NOW - timedelta(minutes=3))},
    )
    result = plan(snapshot([], [node("n1", "i-1")], group(["i-1"]), state), config(), NOW)
    assert result.cordon == ()


def test_cordoned_node_is_uncordoned_instead_of_buying_a_new_one() -> None:
    # Given an idle node the scaler cordoned, and a pending pod that fits it
    nodes = [node("n1", "i-1", unschedulable=True, annotations=CORDONED)]
    result = plan(snapshot([pod("p", gpus=8)], nodes, group(["i-1"]), idle_state("n1")), config(), NOW)
    # Then it is uncordoned, not terminated, and nothing is bought
    assert [a.node for a in result.uncordon] == ["n1"]
    assert result.terminate == ()
    assert result.group("a100").desired == 1
    assert result.pods[0].outcome == "existing"


def test_instance_that_never_registers_is_replaced_and_the_group_backs_off() -> None:
    # Given an instance first seen 25 minutes ago with no node (provision timeout 20 min)
    state = ScalerState(instances_first_seen={"i-1": NOW - timedelta(minutes=25)})
    result = plan(snapshot([], [], group(["i-1"]), state), config(), NOW)
    # Then it is terminated without decrement (the group replaces it) and the group enters backoff
    assert [(t.instance_id, t.decrement) for t in result.terminate] == [("i-1", False)]
    assert result.group("a100").enter_backoff
    assert result.group("a100").desired == 1


def test_unseen_instance_starts_its_provisioning_clock_now() -> None:
    result = plan(snapshot([], [], group(["i-1"])), config(), NOW)
    assert result.terminate == ()
    assert result.instances_first_seen == {"i-1": NOW}


def test_headroom_nodes_are_kept_idle() -> None:
    cfg = config(
        node_groups=[
            {
                "name": "a100",
                "asg_name": A100,
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"},
                "labels": {"gpu": "a100"},
                "headroom_nodes": 1,
            }
        ],
        policy={"max_scale_in_fraction": 1.0},
    )
    nodes = [node("n1", "i-1", taints=[]), node("n2", "i-2", taints=[])]
    result = plan(snapshot([], nodes, group(["i-1", "i-2"]), idle_state("n1", "n2")), cfg, NOW)
    assert len(result.cordon) == 1


def test_group_at_max_with_waiting_pods_is_not_shrunk() -> None:
    # Given a group at its max of 2: a busy node, and an idle cordoned node whose GPUs never appeared,
    # and a pending 8-GPU pod that only this group can run
    nodes = [
        node("n1", "i-1"),
        node("n2", "i-2", gpus=0, unschedulable=True, annotations=CORDONED),
    ]
    pods = [pod("job", gpus=4, node="n1"), pod("waiting", gpus=8)]
    result = plan(snapshot(pods, nodes, group(["i-1", "i-2"], max_size=2), idle_state("n2")), config(), NOW)
    # Then the idle node is not terminated only to be bought again for the waiting pod
    assert result.terminate == ()
    assert result.group("a100").desired == 2
