"""The controller applies node health repair: busy unhealthy nodes cordoned and tainted (never evicted,
never terminated), idle ones replaced, recovered ones lifted, and the lifecycle metrics.

Common setting: one a100 group of five 8-GPU nodes (attrition off: its marks are not the subject);
n0's node monitoring agent has reported AcceleratedHardwareReady=False for an hour (past the 10 minute
toleration).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shared import constants
from shared.controller.repair import EVENT_UNHEALTHY
from shared.domain.operations import EventType
from shared.planner.repair import REPAIR_TAINT_KEY
from shared.reporting import ActionKind, ActionStatus
from tests.builders import GPU_TAINT, GPU_TOLERATION, NOW, asg, config, iso, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"


def broken_world(*, busy: bool, count: int = 5, broken: int = 1) -> FakeWorld:
    nodes = [node(f"n{i}", f"i-{i}") for i in range(count)]
    for index in range(broken):
        nodes[index]["status"]["conditions"].append(
            {
                "type": "AcceleratedHardwareReady",
                "status": "False",
                "reason": "NvidiaXID79Error",
                "lastTransitionTime": iso(NOW - timedelta(hours=1)),
            }
        )
    pods = [pod("job", gpus=4, node="n0", tolerations=[GPU_TOLERATION])] if busy else []
    group = [asg(A100, desired=count, instances=[f"i-{i}" for i in range(count)])]
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": {"enabled": False}})
    return FakeWorld(config=cfg, cluster=FakeCluster(pods, nodes), fleet=FakeFleet(group))


def records(result: Any, kind: ActionKind) -> list[tuple[str, ActionStatus]]:
    return [(a.target, a.status) for a in result.actions if a.kind is kind]


def test_a_busy_broken_node_is_cordoned_and_tainted_with_a_warning_and_nothing_is_evicted() -> None:
    w = broken_world(busy=True)

    result = w.controller().reconcile("schedule")

    obj = w.cluster.nodes["n0"]
    assert obj["spec"]["unschedulable"] is True
    assert {"key": REPAIR_TAINT_KEY, "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in obj["spec"]["taints"]
    ]
    assert records(result, ActionKind.MARK) == [("n0", ActionStatus.DONE)]
    assert records(result, ActionKind.CORDON) == [("n0", ActionStatus.DONE)]
    [event] = [e for e in w.cluster.events if e.reason == EVENT_UNHEALTHY]
    assert (event.target.kind, event.target.name, event.type) == ("Node", "n0", EventType.WARNING)
    assert w.cluster.calls_of("evict") == [] and w.cluster.calls_of("delete_pod") == []
    assert w.fleet.terminated == []
    assert w.reporter.metric_values(constants.METRIC_UNHEALTHY_NODES, "a100") == [1]
    # And the next run leaves it as it is (no second cordon, not uncordoned by scale-down)
    again = w.controller().reconcile("schedule")
    assert records(again, ActionKind.CORDON) == [] and records(again, ActionKind.UNCORDON) == []


def test_once_the_job_ends_the_cordoned_node_is_replaced() -> None:
    w = broken_world(busy=True)
    w.controller().reconcile("schedule")
    del w.cluster.pods["research/job"]
    w.clock.advance(60)

    result = w.controller().reconcile("schedule")

    assert records(result, ActionKind.TERMINATE) == [("n0", ActionStatus.DONE)]
    assert w.fleet.terminated == ["i-0"]
    assert w.reporter.metric_values(constants.METRIC_NODES_REPAIRED, "a100")[-1] == 1


def test_an_idle_broken_node_is_replaced_and_a_node_that_runs_a_pod_again_is_not() -> None:
    # Given the idle broken node gets a pod between planning and the termination's re-read
    w = broken_world(busy=False)
    w.cluster.before(
        "get_node",
        lambda name: w.cluster.add_pod(pod("late", gpus=1, node=name, tolerations=[GPU_TOLERATION])),
    )

    result = w.controller().reconcile("schedule")

    [(target, status)] = records(result, ActionKind.TERMINATE)
    assert (target, status) == ("n0", ActionStatus.SKIPPED)
    assert w.fleet.terminated == []


def test_paused_repair_is_a_metric_for_the_alarm() -> None:
    w = broken_world(busy=False, broken=2)

    result = w.controller().reconcile("schedule")

    assert records(result, ActionKind.TERMINATE) == []
    assert w.reporter.metric_values(constants.METRIC_REPAIR_PAUSED, "a100") == [1]
    assert w.reporter.metric_values(constants.METRIC_UNHEALTHY_NODES, "a100") == [2]


def test_a_node_that_recovers_is_uncordoned_and_untainted() -> None:
    w = broken_world(busy=True)
    w.controller().reconcile("schedule")
    conditions = w.cluster.nodes["n0"]["status"]["conditions"]
    w.cluster.nodes["n0"]["status"]["conditions"] = [c for c in conditions if c["type"] == "Ready"]

    result = w.controller().reconcile("schedule")

    assert records(result, ActionKind.UNCORDON) == [("n0", ActionStatus.DONE)]
    assert records(result, ActionKind.UNMARK) == [("n0", ActionStatus.DONE)]
    assert not w.cluster.nodes["n0"]["spec"].get("unschedulable")
    assert [t["key"] for t in w.cluster.nodes["n0"]["spec"]["taints"]] == [GPU_TAINT["key"]]


def _recovers(w: FakeWorld) -> Any:
    """A before-hook: the node monitoring agent reports the node healthy again."""

    def hook(name: str) -> None:
        for condition in w.cluster.nodes[name]["status"]["conditions"]:
            if condition["type"] == "AcceleratedHardwareReady":
                condition["status"] = "True"

    return hook


def test_a_broken_node_that_recovers_between_plan_and_termination_is_not_replaced() -> None:
    # Given the idle broken node reports AcceleratedHardwareReady=True again between planning and the
    # termination's fresh re-read
    w = broken_world(busy=False)
    w.cluster.before("get_node", _recovers(w))

    result = w.controller().reconcile("schedule")

    # Then the termination is skipped on the re-read, saying why, and the instance stays
    [action] = [a for a in result.actions if a.kind is ActionKind.TERMINATE]
    assert (action.target, action.status) == ("n0", ActionStatus.SKIPPED)
    assert "recovered since the plan: AcceleratedHardwareReady=True" in action.detail
    assert w.fleet.terminated == []
