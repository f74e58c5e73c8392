"""The controller applies the plan's attrition marks: re-validated on a fresh read, conflict-safe, lifted
first, and never an eviction.

Common setting: one a100 group of four 8-GPU nodes using 7, 2, 1 and 3 GPUs (the planner marks n3,
see test_planner_attrition.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shared.domain.model import Taint, TaintEffect
from shared.planner.attrition import ATTRITION_TAINT_KEY
from shared.reporting import ActionKind, ActionStatus
from tests.builders import GPU_TAINT, NOW, asg, config, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"
USED = {"n1": 7, "n2": 2, "n3": 1, "n4": 3}
MARK = {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}


def fragmented_world(
    *, marked: tuple[str, ...] = (), extra: list[Any] | None = None, **policy: Any
) -> FakeWorld:
    nodes = [
        node(name, f"i-{i}", taints=[GPU_TAINT, MARK] if name in marked else [GPU_TAINT],
             created=NOW - timedelta(hours=10 - i))
        for i, name in enumerate(USED)
    ]  # fmt: skip
    pods = [pod(f"job-{name}", gpus=gpus, node=name) for name, gpus in USED.items()] + (extra or [])
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": policy})
    group = [asg(A100, desired=4, instances=[f"i-{i}" for i in range(4)])]
    return FakeWorld(config=cfg, cluster=FakeCluster(pods, nodes), fleet=FakeFleet(group))


def statuses(result: Any, kind: ActionKind) -> list[tuple[str, ActionStatus]]:
    return [(a.target, a.status) for a in result.actions if a.kind is kind]


def taints(w: FakeWorld, name: str) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in w.cluster.nodes[name]["spec"].get("taints") or ()]


def test_the_planned_mark_is_put_on_with_the_fresh_reads_resource_version() -> None:
    w = fragmented_world()

    result = w.controller().reconcile("schedule")

    assert statuses(result, ActionKind.MARK) == [("n3", ActionStatus.DONE)]
    assert taints(w, "n3") == [("nvidia.com/gpu", "NoSchedule"), (ATTRITION_TAINT_KEY, "PreferNoSchedule")]
    [call] = w.cluster.calls_of("taint_node")
    assert call.args[1] == Taint(ATTRITION_TAINT_KEY, "", TaintEffect.PREFER_NO_SCHEDULE)
    assert call.kwargs["resource_version"]  # the re-validation read's, as for a cordon
    # And nothing was evicted, cordoned or terminated for it
    assert w.cluster.calls_of("evict") == [] and w.cluster.calls_of("cordon") == []
    assert w.fleet.terminated == []
    # And the next run, on the marked cluster, changes nothing
    again = w.controller().reconcile("schedule")
    assert statuses(again, ActionKind.MARK) == [] and statuses(again, ActionKind.UNMARK) == []


def test_a_mark_is_skipped_when_the_node_was_cordoned_after_planning() -> None:
    w = fragmented_world()
    w.cluster.before("get_node", lambda name: w.cluster.cordon(name, NOW))

    result = w.controller().reconcile("schedule")

    [skipped] = [a for a in result.actions if a.kind is ActionKind.MARK]
    assert skipped.status is ActionStatus.SKIPPED and skipped.detail == "it is cordoned"
    assert w.cluster.calls_of("taint_node") == []


def test_a_node_changed_between_the_re_read_and_the_patch_is_not_marked() -> None:
    # Given someone edits n3 right after the controller re-read it
    w = fragmented_world()

    def edit(name: str, *args: Any, **kwargs: Any) -> None:
        w.cluster.nodes[name]["metadata"]["labels"]["edited"] = "yes"
        w.cluster.nodes[name]["metadata"]["resourceVersion"] = "999"

    w.cluster.before("taint_node", edit)

    result = w.controller().reconcile("schedule")

    # Then the conflict is recorded, not retried, and the node carries no mark
    [record] = [a for a in result.actions if a.kind is ActionKind.MARK]
    assert record.status is not ActionStatus.DONE
    assert (ATTRITION_TAINT_KEY, "PreferNoSchedule") not in taints(w, "n3")


def test_a_mark_is_lifted_in_the_run_a_pending_pod_needs_its_room() -> None:
    # Given n2 and n3 marked NoSchedule and a pod needing 7 GPUs, which only n3 has
    w = fragmented_world(marked=("n2", "n3"), extra=[pod("big", gpus=7)], effect="NoSchedule")
    for name in ("n2", "n3"):
        w.cluster.nodes[name]["spec"]["taints"][-1]["effect"] = "NoSchedule"

    result = w.controller().reconcile("schedule")

    # Then n3's mark is lifted in this run and no node is bought for the pod
    assert ("n3", ActionStatus.DONE) in statuses(result, ActionKind.UNMARK)
    assert all(key != ATTRITION_TAINT_KEY for key, _ in taints(w, "n3"))
    assert w.fleet.desired(A100) == 4


def test_switching_attrition_off_lifts_the_marks() -> None:
    w = fragmented_world(marked=("n3",), enabled=False)

    result = w.controller().reconcile("schedule")

    assert statuses(result, ActionKind.UNMARK) == [("n3", ActionStatus.DONE)]
    assert taints(w, "n3") == [("nvidia.com/gpu", "NoSchedule")]


def test_a_dry_run_records_the_mark_and_writes_nothing() -> None:
    w = fragmented_world()

    result = w.controller(dry_run=True).reconcile("schedule")

    assert statuses(result, ActionKind.MARK) == [("n3", ActionStatus.DRY_RUN)]
    assert w.cluster.calls_of("taint_node") == []
