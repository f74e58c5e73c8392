"""Consolidation by attrition: which nodes the plan marks, and when it lifts a mark.

Common setting: one group of 8-GPU nodes (a100), no pending pods unless a test adds them, the default
policy (attrition on, PreferNoSchedule, 8 spare GPUs kept unmarked for new pods).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from shared.domain.plan import Outcome
from shared.planner import plan
from shared.planner.attrition import ANNOTATION_EXPECTED_RUNTIME, ATTRITION_TAINT_KEY
from tests.builders import GPU_TAINT, NOW, a100_group, asg, config, node, pod, snapshot

A100 = "research-a100"
MARK = {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}
HARD_MARK = {"key": ATTRITION_TAINT_KEY, "effect": "NoSchedule"}


def nodes_with(
    used: dict[str, int], *, marked: tuple[str, ...] = (), mark: dict[str, str] = MARK
) -> list[Any]:
    """One node per entry (name -> GPUs in use), created an hour apart in the order given."""
    out = []
    for index, name in enumerate(used):
        taints = [GPU_TAINT, mark] if name in marked else [GPU_TAINT]
        created = NOW - timedelta(hours=10 - index)
        out.append(node(name, f"i-{index}", taints=taints, created=created))
    return out


def running(used: dict[str, int], **kw: Any) -> list[Any]:
    return [pod(f"job-{name}", gpus=gpus, node=name, **kw) for name, gpus in used.items() if gpus]


def group(count: int, **kw: Any) -> list[Any]:
    return [asg(A100, desired=count, instances=[f"i-{i}" for i in range(count)], **kw)]


def attrition(**policy: Any) -> Any:
    return config(policy={"cordon_settle_seconds": 30, "attrition": policy})


def run(used: dict[str, int], pending: list[Any] | None = None, cfg: Any = None, **kw: Any) -> Any:
    nodes = nodes_with(used, **kw)
    pods = running(used) + (pending or [])
    return plan(snapshot(pods, nodes, group(len(nodes))), cfg or attrition(), NOW)


def test_the_nodes_cheapest_to_empty_are_marked_while_spare_room_stays_unmarked() -> None:
    # Given four nodes using 7, 2, 1 and 3 of their 8 GPUs: 1 + 6 + 7 + 5 = 19 free GPUs
    result = run({"n1": 7, "n2": 2, "n3": 1, "n4": 3})

    # Then the fewest-used node is marked, n3 (7 free), leaving 12 free on unmarked nodes; marking
    # the next, n2, would leave 6, below the 8 spare GPUs kept for new pods, and ends the marks
    assert [(m.node, m.key, m.effect) for m in result.mark] == [
        ("n3", ATTRITION_TAINT_KEY, "PreferNoSchedule")
    ]
    assert "1/8 GPUs in use" in next(m.reason for m in result.mark if m.node == "n3")
    assert result.unmark == ()
    # And a mark evicts nothing and buys nothing
    assert result.group("a100").desired == 4 and result.cordon == () and result.terminate == ()


def test_the_least_expected_remaining_work_goes_first_then_the_newest_node() -> None:
    # Given three nodes with 1 GPU in use each: n1's job started 5 minutes ago and is expected to run
    # 15 minutes (10 left); n2's and n3's jobs carry no estimate and have run for 2 hours
    nodes = nodes_with({"n1": 1, "n2": 1, "n3": 1})
    two_hours_ago = NOW - timedelta(hours=2)
    pods = [
        pod("job-n1", gpus=1, node="n1", annotations={ANNOTATION_EXPECTED_RUNTIME: "900"}),
        pod("job-n2", gpus=1, node="n2", created=two_hours_ago),
        pod("job-n3", gpus=1, node="n3", created=two_hours_ago),
    ]
    cfg = attrition(spare_gpus=7)

    # When planned with room for two marks (21 free GPUs, 7 kept)
    result = plan(snapshot(pods, nodes, group(3)), cfg, NOW)

    # Then n1 (known to end soon) goes first, then n3 (the newest of two expected to run 2 more hours)
    assert [m.node for m in result.mark] == ["n1", "n3"]


def test_a_node_whose_jobs_have_run_long_is_filled_rather_than_marked() -> None:
    # Given "old" running one 1-GPU job for 3 days and "young" three 1-GPU jobs started 10 minutes ago
    nodes = nodes_with({"old": 1, "young": 3})
    pods = [pod("job-old", gpus=1, node="old", created=NOW - timedelta(days=3))] + [
        pod(f"job-young-{i}", gpus=1, node="young", created=NOW - timedelta(minutes=10)) for i in range(3)
    ]

    # When planned with room for one mark (7 + 5 free GPUs, 7 kept)
    result = plan(snapshot(pods, nodes, group(2)), attrition(spare_gpus=7), NOW)

    # Then the young node is marked although it uses more GPUs: a job that has run for 3 days is
    # expected to run on, so the old node stays anyway and its free GPUs are the ones to fill
    assert [m.node for m in result.mark] == ["young"]
    assert "3/8 GPUs in use, its jobs expected to end within 10m00s" in result.mark[0].reason


def test_no_mark_when_the_free_room_is_what_new_pods_need() -> None:
    # Given two nodes with 7 and 6 free GPUs: marking either leaves fewer than the 8 spare
    result = run({"n1": 1, "n2": 2})
    assert result.mark == () and result.unmark == ()


def test_headroom_nodes_add_to_the_spare_room() -> None:
    # Given no spare GPUs but one headroom node: 8 spare GPUs again, the first test's answer
    cfg = config(
        node_groups=[a100_group(max_size=16, headroom_nodes=1)], policy={"attrition": {"spare_gpus": 0}}
    )
    result = run({"n1": 7, "n2": 2, "n3": 1, "n4": 3}, cfg=cfg)
    assert [m.node for m in result.mark] == ["n3"]  # 19 - 7 = 12 >= 8; then 12 - 6 = 6 < 8


def test_a_pending_pod_that_fits_only_on_a_marked_node_lifts_the_mark_in_the_same_run() -> None:
    # Given n2 marked NoSchedule (new pods cannot land there), n1 full, and a 4-GPU pod pending
    waiting = pod("big", gpus=4)
    cfg = attrition(effect="NoSchedule")
    result = run({"n1": 8, "n2": 1}, [waiting], cfg=cfg, marked=("n2",), mark=HARD_MARK)

    # Then the plan counts the pod on n2's room, lifts the mark for it and buys no node
    outcome = next(p for p in result.pods if p.pod == "research/big")
    assert outcome.outcome is Outcome.EXISTING and "n2" in outcome.reason
    assert [(m.node, m.reason) for m in result.unmark] == [
        ("n2", "pending pod research/big fits only here: the room is needed")
    ]
    assert result.mark == () and result.group("a100").desired == 2


def test_marks_are_kept_while_the_room_allows_and_lifted_when_the_spare_needs_it() -> None:
    # Given n3 and n2 marked, 6 + 6 + 7 + 5 = 24 free GPUs: keeping both leaves 11 >= 8, and n1 is
    # not added (11 - 6 = 5 < 8)
    stay = run({"n1": 2, "n2": 2, "n3": 1, "n4": 3}, marked=("n2", "n3"))
    assert stay.mark == () and stay.unmark == ()

    # When n1 and n4 fill up (0 and 3 free, 16 in all): n3 keeps its mark (16 - 7 = 9 >= 8), n2's
    # room is needed (9 - 6 = 3 < 8)
    lifted = run({"n1": 8, "n2": 2, "n3": 1, "n4": 5}, marked=("n2", "n3"))

    # Then the mark of the busier marked node is lifted in this run, the other stays
    assert [(m.node, m.reason) for m in lifted.unmark] == [
        ("n2", "its room is needed: 9 free GPU(s) unmarked, 8 kept for new pods")
    ]
    assert lifted.mark == ()


def test_switching_attrition_off_lifts_every_mark() -> None:
    result = run({"n1": 7, "n2": 2, "n3": 1, "n4": 3}, cfg=attrition(enabled=False), marked=("n2", "n3"))
    assert result.mark == ()
    assert [(m.node, m.reason) for m in result.unmark] == [
        ("n2", "consolidation by attrition is switched off"),
        ("n3", "consolidation by attrition is switched off"),
    ]


def test_protected_nodes_are_never_marked_and_lose_a_mark() -> None:
    # Given the node cheapest to empty is annotated scale-down-disabled and carries a mark
    nodes = nodes_with({"n1": 7, "n2": 2, "n3": 1, "n4": 3}, marked=("n3",))
    nodes[2]["metadata"]["annotations"] = {"backlog-scaler/scale-down-disabled": "true"}
    pods = running({"n1": 7, "n2": 2, "n3": 1, "n4": 3})
    result = plan(snapshot(pods, nodes, group(4)), attrition(), NOW)

    # Then its mark is lifted (it will never be scaled down: emptying it gains nothing), and the next
    # cheapest are marked instead while 8 free GPUs stay unmarked (n3's 7 among them): n2, then n4
    assert [m.node for m in result.unmark] == ["n3"]
    assert "scale-down disabled" in result.unmark[0].reason
    assert [m.node for m in result.mark] == ["n2", "n4"]


def test_every_candidate_is_marked_when_a_protected_node_holds_the_spare() -> None:
    # Given n1, never scaled down, with its 8 GPUs free (the spare), and n2 and n3 with 2 and 3 free
    nodes = nodes_with({"n1": 0, "n2": 6, "n3": 5})
    nodes[0]["metadata"]["annotations"] = {"backlog-scaler/scale-down-disabled": "true"}
    pods = running({"n1": 0, "n2": 6, "n3": 5})
    result = plan(snapshot(pods, nodes, group(3)), attrition(), NOW)

    # Then both candidates are marked, in their order (fewer GPUs in use first): 13 - 3 = 10, then
    # 10 - 2 = 8 free GPUs stay unmarked
    assert [(m.node, m.reason.partition(" (")[2]) for m in result.mark] == [
        ("n2", "8 free GPU(s) stay on unmarked nodes, 8 kept for new pods)"),
        ("n3", "10 free GPU(s) stay on unmarked nodes, 8 kept for new pods)"),
    ]


def test_min_size_caps_the_marks() -> None:
    # Given a group at min size 3 of 4 nodes: only one node can ever be given back
    nodes = nodes_with({"n1": 1, "n2": 1, "n3": 1, "n4": 1})
    pods = running({"n1": 1, "n2": 1, "n3": 1, "n4": 1})
    result = plan(snapshot(pods, nodes, group(4, min_size=3)), attrition(), NOW)
    assert len(result.mark) == 1


def test_the_planner_sees_through_its_own_no_schedule_mark_on_every_node() -> None:
    # Given every node marked NoSchedule (so a template built from them would carry the mark) and a
    # pending pod too large for any free room
    cfg = attrition(effect="NoSchedule")
    result = run({"n1": 6, "n2": 6}, [pod("whole", gpus=8)], cfg=cfg, marked=("n1", "n2"), mark=HARD_MARK)

    # Then a new node is bought for it: the mark is not a taint of the group
    outcome = next(p for p in result.pods if p.pod == "research/whole")
    assert outcome.outcome is Outcome.SCALE_UP
    assert result.group("a100").desired == 3


def test_marked_nodes_are_judged_without_the_mark_and_share_what_is_left() -> None:
    # The placement rules see marked nodes unmarked; nodes left with equal taints share one tuple
    # (per-run memos key on it), and the copy of an unchanged node is the same from run to run.
    from shared.planner.attrition import marked_nodes, without_marks

    mark = {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}
    other = {"key": "dedicated", "value": "research", "effect": "NoSchedule"}
    snap = snapshot(
        [],
        [
            node("n0", "i-0", taints=[GPU_TAINT, mark]),
            node("n1", "i-1", taints=[mark, GPU_TAINT]),
            node("n2", "i-2", taints=[GPU_TAINT, other, mark]),
            node("n3", "i-3", taints=[GPU_TAINT]),
        ],
        [asg("a100", desired=4, instances=["i-0", "i-1", "i-2", "i-3"])],
    )

    seen = without_marks(snap, marked_nodes(snap))
    again = without_marks(snap, marked_nodes(snap))

    n0, n1, n2, n3 = seen.nodes
    assert [[t.key for t in n.taints] for n in seen.nodes] == [
        ["nvidia.com/gpu"],
        ["nvidia.com/gpu"],
        ["nvidia.com/gpu", "dedicated"],
        ["nvidia.com/gpu"],
    ]
    assert n0.taints is n1.taints and n2.taints is not n0.taints
    assert n3 is snap.nodes[3]  # not marked: the node as read
    assert all(a is b for a, b in zip(seen.nodes, again.nodes, strict=True))
