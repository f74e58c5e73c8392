"""Scale-up rules of the planner, one behaviour per test, on real-format fixtures."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from shared.domain.model import GroupState, InstanceType, ScalerState
from shared.domain.plan import Outcome, ReasonCode
from shared.domain.resources import Resources
from shared.planner import plan
from tests.builders import GPU_TAINT, NOW, a100_group, asg, config, node, pod, snapshot

scale_up = importlib.import_module("shared.planner.scale_up")

A100 = "research-a100"


def two_groups(**a100: object) -> object:
    """a100 ($32.77, prio 0) and v100 ($24.48, prio 0), both 8-GPU nodes."""
    return config(
        node_groups=[
            a100_group(price_per_hour=32.77, **a100),
            {
                "name": "v100",
                "asg_name": "research-v100",
                "allocatable": {"cpu": "63", "memory": "480Gi", "nvidia.com/gpu": "8", "pods": "110"},
                "labels": {"gpu": "v100"},
                "taints": [GPU_TAINT],
                "price_per_hour": 24.48,
            },
        ]
    )


def outcomes(result: object) -> dict[str, tuple[str, str | None]]:
    return {p.pod.split("/")[1]: (str(p.outcome), p.group) for p in result.pods}  # type: ignore[attr-defined]


def test_only_unschedulable_pending_pods_form_the_backlog() -> None:
    # Given a pending pod the scheduler has not tried yet, a DaemonSet pod, a running pod and a
    # pending unschedulable pod
    pods = [
        pod("untried", unschedulable=False),
        pod("ds", owner_kind="DaemonSet"),
        pod("running", node="n1"),
        pod("waiting"),
    ]
    # When planning
    result = plan(
        snapshot(pods, [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])]), config(), NOW
    )
    # Then only the unschedulable one has an outcome
    assert [p.pod for p in result.pods] == ["research/waiting"]


def test_first_fit_decreasing_packs_new_nodes() -> None:
    # Given one 8-GPU pod and eight 1-GPU pods, no nodes
    pods = [pod("big", gpus=8)] + [pod(f"small-{i}", gpus=1) for i in range(8)]
    # When planning
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), config(), NOW)
    # Then exactly two nodes are bought and every pod is a scale-up
    assert result.group("a100").desired == 2
    assert {o for o, _ in outcomes(result).values()} == {"scale-up"}


def test_free_room_on_existing_nodes_is_used_before_buying() -> None:
    # Given a node with 2 of 8 GPUs used
    pods = [pod("run", gpus=2, node="n1"), pod("a", gpus=4), pod("b", gpus=2)]
    # When planning
    result = plan(
        snapshot(pods, [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])]), config(), NOW
    )
    # Then both pending pods fit the existing node and nothing is bought
    assert result.group("a100").desired == 1
    assert outcomes(result) == {"a": ("existing", "a100"), "b": ("existing", "a100")}


def test_desired_above_instances_counts_as_in_flight() -> None:
    # Given the ASG already asked for 2 nodes that have not launched
    result = plan(snapshot([pod("a", gpus=8), pod("b", gpus=8)], [], [asg(A100, desired=2)]), config(), NOW)
    # Then the pods wait for them and no more are bought
    assert result.group("a100").desired == 2
    assert outcomes(result) == {"a": ("in-flight", "a100"), "b": ("in-flight", "a100")}


def test_unregistered_instances_and_nodes_without_gpus_are_in_flight() -> None:
    # Given one instance with no node yet and one node whose device plugin has not advertised GPUs
    nodes = [node("n2", "i-2", gpus=0, created=NOW - timedelta(minutes=2))]
    pods = [pod("a", gpus=8), pod("b", gpus=8), pod("c", gpus=8)]
    result = plan(snapshot(pods, nodes, [asg(A100, desired=2, instances=["i-1", "i-2"])]), config(), NOW)
    # Then two pods go in-flight (no duplicate GPU node while the plugin starts) and one buys a node
    assert sorted(o for o, _ in outcomes(result).values()) == ["in-flight", "in-flight", "scale-up"]
    assert result.group("a100").desired == 3


def test_node_selector_and_taints_decide_the_group() -> None:
    # Given pods selecting v100, pods without the GPU toleration, and an a100-only pod
    pods = [
        pod("v", node_selector={"gpu": "v100"}),
        pod("untolerated", tolerations=[]),
        pod("a", node_selector={"gpu": "a100"}),
    ]
    result = plan(
        snapshot(pods, [], [asg(A100, desired=0), asg("research-v100", desired=0)]), two_groups(), NOW
    )
    # Then each lands in its group and the untolerating pod is unhelped with a reason naming the taint
    got = outcomes(result)
    assert got["v"] == ("scale-up", "v100")
    assert got["a"] == ("scale-up", "a100")
    assert got["untolerated"] == ("unhelped", None)
    reason = next(p for p in result.pods if p.pod.endswith("untolerated"))
    assert reason.code is ReasonCode.NO_MATCHING_GROUP
    assert "node(s) had untolerated taint {nvidia.com/gpu: true}" in reason.reason


def test_required_node_affinity_operators() -> None:
    # Given a100 nodes labelled with a generation number
    cfg = config(
        node_groups=[
            {
                "name": "a100",
                "asg_name": A100,
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"},
                "labels": {"gpu": "a100", "gen": "4"},
                "taints": [GPU_TAINT],
            }
        ]
    )
    cases = {
        "in": ([[{"key": "gpu", "operator": "In", "values": ["a100", "h100"]}]], True),
        "notin": ([[{"key": "gpu", "operator": "NotIn", "values": ["a100"]}]], False),
        "exists": ([[{"key": "gen", "operator": "Exists"}]], True),
        "dne": ([[{"key": "gen", "operator": "DoesNotExist"}]], False),
        "gt": ([[{"key": "gen", "operator": "Gt", "values": ["3"]}]], True),
        "lt": ([[{"key": "gen", "operator": "Lt", "values": ["4"]}]], False),
        "or-terms": (
            [
                [{"key": "gpu", "operator": "In", "values": ["h100"]}],
                [{"key": "gen", "operator": "Gt", "values": ["2"]}],
            ],
            True,
        ),
        "and-exprs": (
            [
                [
                    {"key": "gpu", "operator": "In", "values": ["a100"]},
                    {"key": "gen", "operator": "Lt", "values": ["2"]},
                ]
            ],
            False,
        ),
    }
    pods = [pod(name, affinity=terms) for name, (terms, _) in cases.items()]
    # When planning
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), cfg, NOW)
    # Then exactly the pods whose affinity holds trigger a scale-up
    got = outcomes(result)
    for name, (_, matches) in cases.items():
        assert (got[name][0] == "scale-up") is matches, name


def test_toleration_semantics() -> None:
    # Given tolerations: wildcard Exists, wrong effect, wrong value with Equal, right value
    cases = {
        "wildcard": ([{"operator": "Exists"}], True),
        "wrong-effect": ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], False),
        "wrong-value": ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "no"}], False),
        "equal": (
            [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            True,
        ),
    }
    pods = [pod(name, tolerations=tols) for name, (tols, _) in cases.items()]
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), config(), NOW)
    got = outcomes(result)
    for name, (_, tolerated) in cases.items():
        assert (got[name][0] == "scale-up") is tolerated, name


def test_cheaper_group_wins_within_a_priority_tier() -> None:
    # Given two groups of equal priority where v100 is cheaper per GPU
    pods = [pod(f"p{i}", gpus=8) for i in range(3)]
    result = plan(
        snapshot(pods, [], [asg(A100, desired=0), asg("research-v100", desired=0)]), two_groups(), NOW
    )
    # Then all pods go to v100
    assert result.group("v100").desired == 3
    assert result.group("a100").desired == 0


def test_higher_priority_beats_price() -> None:
    # Given a100 has a higher priority than the cheaper v100
    pods = [pod(f"p{i}", gpus=8) for i in range(2)]
    result = plan(
        snapshot(pods, [], [asg(A100, desired=0), asg("research-v100", desired=0)]),
        two_groups(priority=5),
        NOW,
    )
    # Then a100 is used
    assert result.group("a100").desired == 2


def test_clamp_to_max_and_spill_to_the_next_group() -> None:
    # Given v100 (cheaper) may only grow to 2 nodes
    pods = [pod(f"p{i}", gpus=8) for i in range(5)]
    asgs = [asg(A100, desired=0), asg("research-v100", desired=0, max_size=2)]
    result = plan(snapshot(pods, [], asgs), two_groups(), NOW)
    # Then v100 takes 2 and the other 3 spill to a100
    assert result.group("v100").desired == 2
    assert result.group("a100").desired == 3


def test_all_groups_at_max_leaves_pods_unhelped_with_reason() -> None:
    result = plan(snapshot([pod("p", gpus=8)], [], [asg(A100, desired=0, max_size=0)]), config(), NOW)
    only = result.pods[0]
    assert only.outcome is Outcome.UNHELPED
    assert only.code is ReasonCode.AT_MAX
    assert "at max size 0" in only.reason


def test_pod_larger_than_any_node_is_unhelped() -> None:
    result = plan(snapshot([pod("huge", gpus=16)], [], [asg(A100, desired=0)]), config(), NOW)
    assert result.pods[0].code is ReasonCode.TOO_LARGE
    assert "nvidia.com/gpu 16 > 8" in result.pods[0].reason
    assert result.group("a100").desired == 0


def test_gang_is_placed_all_or_nothing_in_one_group() -> None:
    # Given a gang of three 8-GPU pods; v100 can only grow by 2, a100 by 4
    gang = {"scheduling.x-k8s.io/pod-group": "llm"}
    pods = [pod(f"w{i}", gpus=8, labels=gang) for i in range(3)]
    asgs = [asg(A100, desired=0, max_size=4), asg("research-v100", desired=0, max_size=2)]
    result = plan(snapshot(pods, [], asgs), two_groups(), NOW)
    # Then the whole gang goes to a100 and none of it to the cheaper but too small v100
    assert {g for _, g in outcomes(result).values()} == {"a100"}
    assert result.group("v100").desired == 0
    assert result.group("a100").desired == 3


def test_gang_that_fits_nowhere_is_unhelped_and_buys_nothing() -> None:
    gang = {"scheduling.x-k8s.io/pod-group": "llm"}
    pods = [pod(f"w{i}", gpus=8, labels=gang) for i in range(3)]
    result = plan(snapshot(pods, [], [asg(A100, desired=0, max_size=2)]), config(), NOW)
    assert {p.code for p in result.pods} == {ReasonCode.GANG_DOES_NOT_FIT}
    assert result.group("a100").desired == 0


def test_group_in_backoff_is_skipped_and_the_backlog_spills() -> None:
    # Given v100 (cheaper) is in capacity backoff with 1 node asked for that never launched
    state = ScalerState(groups={"v100": GroupState(backoff_until=NOW + timedelta(minutes=5))})
    asgs = [asg(A100, desired=0), asg("research-v100", desired=1)]
    result = plan(snapshot([pod("p", gpus=8)], [], asgs, state), two_groups(), NOW)
    # Then the pod goes to a100 and v100's desired is set back to what runs
    assert outcomes(result)["p"] == ("scale-up", "a100")
    assert result.group("v100").desired == 0
    assert "backoff" in result.group("v100").reason


def test_scale_from_zero_uses_the_instance_type_shape() -> None:
    # Given a group without allocatable in config, and the instance type's shape known
    cfg = config(
        node_groups=[
            {"name": "g5", "asg_name": "research-g5", "instance_type": "g5.12xlarge", "taints": [GPU_TAINT]}
        ]
    )
    snap = snapshot([pod("p", gpus=4, cpu="40", memory="100Gi")], [], [asg("research-g5", desired=0)])
    capacity = Resources.of({"cpu": 48000, "memory": 192 * 2**30, "nvidia.com/gpu": 4, "pods": 234})
    from dataclasses import replace

    g5 = InstanceType("g5.12xlarge", capacity, "amd64")
    result = plan(replace(snap, instance_types={"g5.12xlarge": g5}), cfg, NOW)
    # Then a node is bought without any node of the group ever having existed
    assert result.group("g5").desired == 1


def test_missing_asg_makes_the_group_unavailable() -> None:
    result = plan(snapshot([pod("p")], [], []), config(), NOW)
    assert result.group("a100").reason == "Auto Scaling group research-a100 not found"
    assert result.pods[0].code is ReasonCode.GROUP_UNAVAILABLE


def test_priority_cutoff_and_new_pod_delay() -> None:
    # Given a low-priority pod and a pod created 5 s ago, with a cutoff of 0 and a 30 s delay
    cfg = config(policy={"pod_priority_cutoff": 0, "new_pod_delay_seconds": 30})
    pods = [pod("low", priority=-10), pod("fresh", created=NOW - timedelta(seconds=5)), pod("old")]
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), cfg, NOW)
    codes = {p.pod.split("/")[1]: p.code for p in result.pods}
    # Then only the old pod triggers a scale-up
    assert codes == {
        "low": ReasonCode.BELOW_PRIORITY_CUTOFF,
        "fresh": ReasonCode.TOO_YOUNG,
        "old": ReasonCode.PLACED,
    }
    assert result.group("a100").desired == 1


def test_headroom_keeps_spare_nodes_warm() -> None:
    # Given a group that wants 2 spare nodes and has none
    cfg = config(
        node_groups=[
            {
                "name": "a100",
                "asg_name": A100,
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"},
                "taints": [GPU_TAINT],
                "labels": {"gpu": "a100"},
                "headroom_nodes": 2,
            }
        ]
    )
    result = plan(snapshot([pod("p", gpus=8)], [], [asg(A100, desired=0)]), cfg, NOW)
    # Then it buys one node for the pod and two for headroom
    assert result.group("a100").desired == 3
    assert "headroom" in result.group("a100").reason


def test_gang_uses_free_room_of_an_idle_node_and_buys_the_rest() -> None:
    # Given one idle registered 8-GPU node, a group that may hold 2 nodes, and a gang of two 8-GPU pods
    gang = {"scheduling.x-k8s.io/pod-group": "llm"}
    pods = [pod(f"w{i}", gpus=8, labels=gang) for i in range(2)]
    result = plan(
        snapshot(pods, [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"], max_size=2)]),
        config(),
        NOW,
    )
    # Then one member goes to the idle node, the other to one new node: the whole gang fits
    assert sorted(o for o, _ in outcomes(result).values()) == ["existing", "scale-up"]
    assert result.group("a100").desired == 2


def test_a_full_node_left_out_of_the_room_still_orders_its_class_first() -> None:
    # Given registered nodes of two pools a pending pod may use, by name: n1 (pool a, full), n2
    # (pool b, room), n3 (pool a, room): classes are met in the order of their first node, n1's first
    pools = {"n1": "a", "n2": "b", "n3": "a"}
    nodes = [node(name, f"i-{i}", labels={"pool": pool}) for i, (name, pool) in enumerate(pools.items())]
    busy = [pod("big", gpus=8, node="n1"), pod("half-2", gpus=4, node="n2"), pod("half-3", gpus=4, node="n3")]
    either = [[{"key": "pool", "operator": "In", "values": ["a", "b"]}]]
    snap = snapshot(
        [*busy, pod("new", gpus=1, affinity=either)],
        nodes,
        [asg("research-a100", desired=3, instances=["i-0", "i-1", "i-2"])],
    )
    # When the planner plans (n1, without room for any pending pod, is left out of the room)
    result = plan(snap, config(), NOW)
    # Then the pod is counted on n3, pool a's class first as when n1 was in it: the plan is the one
    # without the shortcut
    assert [p.reason for p in result.pods] == ["fits free room on n3; the scheduler will place it"]
    with pytest.MonkeyPatch.context() as full_reading:
        full_reading.setattr(scale_up, "least_request", lambda units, ctx: None)
        assert plan(snap, config(), NOW) == result
