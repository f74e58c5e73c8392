"""Plan output says what will happen: the desired the controller really sets (safety.desired_to_set,
never below the instances that run), and a weighted group's desired in the units AWS shows."""

from __future__ import annotations

from shared.local.plan_output import plan_to_json, plan_to_table
from shared.planner import plan
from tests.builders import NOW, a100_group, asg, config, node, pod, snapshot

A100 = "research-a100"


def test_desired_never_drops_below_the_busy_instances_when_max_size_is_lower() -> None:
    # Given three busy nodes in a group whose config max_size is 2
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    pods = [pod(f"job-{i}", gpus=8, node=f"n{i}") for i in range(3)]
    group = asg(A100, desired=3, instances=[f"i-{i}" for i in range(3)])
    cfg = config(node_groups=[a100_group(max_size=2)])
    # When planned
    decision = plan(snapshot(pods, nodes, [group]), cfg, NOW).group("a100")
    # Then the plan says what the controller does (desired_to_set leaves 3 alone) and why
    assert (decision.current_desired, decision.desired, decision.max_size) == (3, 3, 2)
    assert decision.reason == "above max_size 2: 3 busy nodes kept"
    assert not decision.changed


def test_above_max_the_reason_counts_busy_nodes_and_the_rest_apart() -> None:
    # Given two busy nodes and one that just registered (not idle long enough), config max_size 1
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    pods = [pod(f"job-{i}", gpus=8, node=f"n{i}") for i in range(2)]
    group = asg(A100, desired=3, instances=[f"i-{i}" for i in range(3)])
    cfg = config(node_groups=[a100_group(max_size=1)])
    decision = plan(snapshot(pods, nodes, [group]), cfg, NOW).group("a100")
    assert decision.desired == 3
    assert decision.reason == (
        "above max_size 1: 2 busy nodes kept, 1 idle or booting instance(s) until scale-down removes them"
    )


def weighted_plan() -> tuple[dict[str, object], str]:
    # Given a weighted group (8 units per p4d node): 2 nodes = 16 units, and a pod needing a third node
    nodes = [node("n0", "i-0"), node("n1", "i-1")]
    pods = [pod("job-0", gpus=8, node="n0"), pod("job-1", gpus=8, node="n1"), pod("waiting", gpus=8)]
    group = asg(A100, desired=16, max_size=128, instances=["i-0", "i-1"], weights={"p4d.24xlarge": 8})
    result = plan(snapshot(pods, nodes, [group]), config(), NOW)
    (decision,) = plan_to_json(result)["groups"]
    return decision, plan_to_table(result)


def test_a_weighted_group_shows_its_units_beside_its_nodes_in_the_json() -> None:
    decision, _ = weighted_plan()
    # Then nodes 2 -> 3 are units 16 -> 24, as the console and the CLI show them
    assert (decision["current_desired"], decision["desired"]) == (2, 3)
    assert (decision["current_desired_units"], decision["desired_units"]) == (16, 24)


def test_a_weighted_group_shows_its_units_in_the_table() -> None:
    _, table = weighted_plan()
    row = next(line for line in table.splitlines() if line.startswith("a100"))
    assert "2 -> 3 (16 -> 24 units)" in row


def test_a_group_counted_in_instances_has_no_units() -> None:
    result = plan(snapshot([], [], [asg(A100, desired=0)]), config(), NOW)
    (decision,) = plan_to_json(result)["groups"]
    assert (decision["current_desired_units"], decision["desired_units"]) == (None, None)
    assert "units" not in plan_to_table(result)
