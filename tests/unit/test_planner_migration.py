"""Migration of jobs that checkpoint: which node the plan empties, and every pod it never moves.

Common setting: one group of 8-GPU nodes (a100), migration switched on with its defaults (300 s
restart, gain 2, one node per run), attrition off so marks do not change the room, no spare GPUs
kept for new pods unless a test says so. "full" runs 7
GPUs of jobs that do not checkpoint (1 free), "half" 6 (2 free), "small" one 1-GPU job that has run
10 hours (expected to run 10 more: emptying it saves 80 GPU-hours).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.domain.checkpoint import (
    ANNOTATION_CA_SAFE_TO_EVICT,
    ANNOTATION_CHECKPOINT_INTERVAL,
    ANNOTATION_LAST_CHECKPOINT,
    remember_moves,
)
from shared.domain.model import GroupState, ScalerState
from shared.planner import plan
from shared.planner.attrition import ANNOTATION_EXPECTED_RUNTIME, ATTRITION_TAINT_KEY
from shared.planner.migration import migration_blocker
from tests.builders import GPU_TAINT, NOW, asg, config, iso, node, pod, snapshot

A100 = "research-a100"
TEN_HOURS_AGO = NOW - timedelta(hours=10)
EVERY_30_MIN = {ANNOTATION_CHECKPOINT_INTERVAL: "1800"}
GANG = "scheduling.x-k8s.io/pod-group"


def migration(**policy: Any) -> Any:
    attrition = {"enabled": False, "spare_gpus": 0}
    return config(policy={"attrition": attrition, "migration": {"enabled": True, **policy}})


def cluster(extra_nodes: tuple[str, ...] = ()) -> list[Any]:
    names = ("full", "half", "small", *extra_nodes)
    return [node(name, f"i-{i}", taints=[GPU_TAINT]) for i, name in enumerate(names)]


def stay(name: str, gpus: int, on: str, **kw: Any) -> Any:
    """A job that does not checkpoint."""
    return pod(name, gpus=gpus, node=on, created=TEN_HOURS_AGO, **kw)


def background() -> list[Any]:
    return [stay("stay-full", 7, "full"), stay("stay-half", 6, "half")]


def small_job(annotations: dict[str, str] | None = None, **kw: Any) -> Any:
    kw.setdefault("created", TEN_HOURS_AGO)
    kw.setdefault("gpus", 1)
    return pod("mover", node="small", annotations=EVERY_30_MIN if annotations is None else annotations, **kw)


def run(pods: list[Any], cfg: Any = None, nodes: list[Any] | None = None, state: Any = None) -> Any:
    nodes = nodes or cluster()
    group = asg(A100, desired=len(nodes), instances=[f"i-{i}" for i in range(len(nodes))])
    return plan(snapshot(pods, nodes, [group], state), cfg or migration(), NOW)


def test_a_node_whose_checkpointing_jobs_fit_elsewhere_is_emptied_when_the_saving_beats_the_loss() -> None:
    # Given "small" running one 1-GPU job that saves every 30 minutes and has run 10 hours
    result = run([*background(), small_job()])

    # Then it is emptied: the job loses at most 30 minutes plus a 5-minute restart on one GPU
    # (2100 GPU-seconds) against the node's 8 GPUs for the 10 hours its job was expected to keep it
    [move] = result.migrate
    assert (move.node, move.group, move.pods) == ("small", "a100", ("research/mover",))
    assert move.lost_gpu_seconds == 2100.0
    assert move.saved_gpu_seconds == 8 * 10 * 3600.0
    assert "fit on free room elsewhere" in move.reason
    # And nothing is bought for it
    assert result.group("a100").desired == 3


def test_migration_is_off_by_default() -> None:
    result = run([*background(), small_job()], config(policy={"attrition": {"enabled": False}}))
    assert result.migrate == ()


def test_a_pod_without_the_checkpoint_annotations_is_never_moved() -> None:
    assert run([*background(), small_job(annotations={})]).migrate == ()


def test_a_pod_annotated_do_not_disrupt_is_never_moved() -> None:
    annotations = {**EVERY_30_MIN, "karpenter.sh/do-not-disrupt": "true"}
    assert run([*background(), small_job(annotations)]).migrate == ()


def test_a_pod_cluster_autoscaler_may_not_evict_is_never_moved() -> None:
    annotations = {**EVERY_30_MIN, ANNOTATION_CA_SAFE_TO_EVICT: "false"}
    assert run([*background(), small_job(annotations)]).migrate == ()


def test_a_malformed_checkpoint_annotation_is_no_opt_in() -> None:
    for malformed in ({ANNOTATION_CHECKPOINT_INTERVAL: "often"}, {ANNOTATION_LAST_CHECKPOINT: "yesterday"}):
        assert run([*background(), small_job(malformed)]).migrate == ()


@pytest.mark.parametrize(
    "raw",
    ["²", "1²", "١٢٠٠", "9" * 5000, "1" * 13],
    ids=["superscript", "digit-then-superscript", "arabic-indic", "5000-digits", "13-digits"],
)
@pytest.mark.parametrize("enabled", [True, False], ids=["migration-on", "defaults"])
def test_numbers_isdigit_accepts_but_int_refuses_or_misreads_are_ignored_not_a_crash(
    raw: str, enabled: bool
) -> None:
    # Given a pod whose interval or expected runtime is what str.isdigit calls digits (a superscript,
    # another script's digits, more digits than int converts): one such pod raised out of every run
    weird = {ANNOTATION_CHECKPOINT_INTERVAL: raw, ANNOTATION_EXPECTED_RUNTIME: raw}
    # When planned, with migration on or the defaults (attrition reads the expected runtime)
    result = run([*background(), small_job(weird)], migration() if enabled else config())
    # Then the run completes and the pod is not taken as one that checkpoints
    assert result.migrate == ()


def test_a_node_protected_from_scale_down_is_never_emptied() -> None:
    nodes = cluster()
    nodes[2]["metadata"]["annotations"] = {"backlog-scaler/scale-down-disabled": "true"}
    assert run([*background(), small_job()], nodes=nodes).migrate == ()


def test_a_node_with_one_pod_that_does_not_checkpoint_is_never_emptied() -> None:
    pods = [*background(), small_job(), pod("other", gpus=1, node="small", created=TEN_HOURS_AGO)]
    assert run(pods).migrate == ()


def test_a_gang_moves_only_when_every_member_is_movable() -> None:
    # Given a two-member gang: one member on "small" (checkpoints), the other on "half" (does not)
    gang = {GANG: "train"}
    pods = [
        *background(),
        small_job(labels=gang),
        pod("mate", gpus=1, node="half", labels=gang, created=TEN_HOURS_AGO),
    ]
    assert run(pods).migrate == ()


def test_a_movable_gang_moves_whole_and_its_loss_is_counted_whole() -> None:
    gang = {GANG: "train"}
    mate = pod("mate", gpus=1, node="half", labels=gang, annotations=EVERY_30_MIN, created=TEN_HOURS_AGO)
    [move] = run([*background(), small_job(labels=gang), mate]).migrate
    assert move.pods == ("research/mate", "research/mover")
    assert move.lost_gpu_seconds == 2 * 2100.0


@pytest.mark.parametrize(
    "guard",
    [
        {"karpenter.sh/do-not-disrupt": "true"},
        {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        {"backlog-scaler/scale-down-disabled": "true"},
    ],
    ids=["karpenter-do-not-disrupt", "ca-scale-down-disabled", "ours"],
)
def test_a_gang_whose_mate_runs_on_a_protected_node_is_never_moved(guard: dict[str, str]) -> None:
    # Given a movable two-member gang: one member on "small", its mate on "half", and "half" protected
    # from disruption (the node, not the pod)
    gang = {GANG: "train"}
    mate = pod("mate", gpus=1, node="half", labels=gang, annotations=EVERY_30_MIN, created=TEN_HOURS_AGO)
    nodes = cluster()
    nodes[1]["metadata"]["annotations"] = guard
    # When planned: emptying "small" would evict the mate too (the gang moves whole)
    result = run([*background(), small_job(labels=gang), mate], nodes=nodes)
    # Then nothing moves: the protection of the mate's node holds wherever the move starts
    assert result.migrate == ()


def test_a_fresh_last_checkpoint_is_preferred_to_the_interval() -> None:
    annotations = {**EVERY_30_MIN, ANNOTATION_LAST_CHECKPOINT: iso(NOW - timedelta(seconds=60))}
    [move] = run([*background(), small_job(annotations)]).migrate
    assert move.lost_gpu_seconds == 60 + 300


def test_a_stale_last_checkpoint_counts_the_full_interval() -> None:
    annotations = {**EVERY_30_MIN, ANNOTATION_LAST_CHECKPOINT: iso(NOW - timedelta(hours=2))}
    [move] = run([*background(), small_job(annotations)]).migrate
    assert move.lost_gpu_seconds == 1800 + 300


def test_no_move_when_the_pods_do_not_fit_on_free_room_elsewhere() -> None:
    # Given a 4-GPU job on "small": 1 + 2 GPUs are free elsewhere (3 < 4)
    assert run([*background(), small_job(gpus=4)]).migrate == ()


def test_no_move_when_the_loss_times_the_gain_exceeds_the_saving() -> None:
    # Given a 2-GPU job started 10 minutes ago that saves every 5 minutes: it would keep the node 10
    # more minutes (4800 GPU-seconds saved) and loses at most 5 minutes plus a 5-minute restart on
    # 2 GPUs (1200): x2 and x3 are below the saving
    young = small_job({ANNOTATION_CHECKPOINT_INTERVAL: "300"}, gpus=2, created=NOW - timedelta(minutes=10))
    assert len(run([*background(), young]).migrate) == 1
    # And with a gain of 5 (6000 > 4800) it stays
    assert run([*background(), young], migration(min_gain=5)).migrate == ()


def test_a_pod_that_has_not_saved_since_it_started_is_not_moved() -> None:
    # Given a job that saves every 30 minutes, started (or re-created by a move) 10 minutes ago
    young = small_job(created=NOW - timedelta(minutes=10))
    assert run([*background(), young]).migrate == ()
    # And once it wrote a checkpoint after it started, it may move
    saved = {**EVERY_30_MIN, ANNOTATION_LAST_CHECKPOINT: iso(NOW - timedelta(minutes=2))}
    young = small_job(saved, created=NOW - timedelta(minutes=10))
    assert len(run([*background(), young]).migrate) == 1


def test_room_the_plan_counts_for_a_pending_pod_is_not_room_to_move_onto() -> None:
    # Given a pending 2-GPU pod that fits only on "half": the 1-GPU mover then fits only on "full"
    pending = pod("waiting", gpus=2, created=NOW - timedelta(minutes=5))
    pods = [stay("stay-full", 8, "full"), stay("stay-half", 6, "half"), small_job(), pending]
    assert run(pods).migrate == ()


def test_a_node_marked_for_attrition_is_not_room_to_move_onto() -> None:
    nodes = cluster()
    nodes[1]["spec"]["taints"] = [GPU_TAINT, {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}]
    pods = [stay("stay-full", 8, "full"), stay("stay-half", 6, "half"), small_job()]
    cfg = config(policy={"attrition": {"spare_gpus": 0}, "migration": {"enabled": True}})
    result = run(pods, cfg, nodes=nodes)
    assert "half" not in {m.node for m in result.unmark}
    assert result.migrate == ()


def test_at_most_one_node_per_run_and_the_largest_net_saving_first() -> None:
    # Given a second candidate, "tiny", whose job started 5 hours ago (saves less)
    nodes = cluster(("tiny",))
    tiny = pod("tiny-job", gpus=1, node="tiny", annotations=EVERY_30_MIN, created=NOW - timedelta(hours=5))
    result = run([*background(), small_job(), tiny], nodes=nodes)
    assert [m.node for m in result.migrate] == ["small"]


def test_a_node_that_receives_moved_pods_is_not_emptied_in_the_same_run() -> None:
    # Given two candidates and room for two moves, but the only free room is on each other
    nodes = [node(n, f"i-{i}", taints=[GPU_TAINT]) for i, n in enumerate(("a", "b"))]
    pods = [
        pod(f"job-{n}", gpus=1, node=n, annotations=EVERY_30_MIN, created=TEN_HOURS_AGO) for n in ("a", "b")
    ]
    result = run(pods, migration(max_nodes_per_run=2), nodes=nodes)
    assert [m.node for m in result.migrate] == ["a"]


def test_the_hourly_budget_counts_the_stored_migrations() -> None:
    state = ScalerState(groups={"a100": GroupState(migrated_at=(NOW - timedelta(minutes=30),))})
    assert run([*background(), small_job()], migration(max_nodes_per_hour=1), state=state).migrate == ()
    # And a migration more than an hour ago no longer counts
    state = ScalerState(groups={"a100": GroupState(migrated_at=(NOW - timedelta(minutes=61),))})
    assert len(run([*background(), small_job()], migration(max_nodes_per_hour=1), state=state).migrate) == 1


def test_no_move_while_pending_pods_of_the_group_wait_for_a_node() -> None:
    # Given a pending 8-GPU pod no registered node holds: the plan buys a node for it
    pending = pod("waiting", gpus=8, created=NOW - timedelta(minutes=5))
    result = run([*background(), small_job(), pending])
    assert result.group("a100").desired == 4
    # Then no node is emptied while the group grows (the move would spend room the arrivals need)
    assert result.migrate == ()


def test_no_move_within_the_delay_after_the_group_grew() -> None:
    # Given the group grew 5 minutes ago (scale_down_delay_after_add_seconds: 600)
    grew = ScalerState(groups={"a100": GroupState(last_scale_up=NOW - timedelta(minutes=5))})
    assert run([*background(), small_job()], state=grew).migrate == ()
    # And once the delay is over, the move is planned
    grew = ScalerState(groups={"a100": GroupState(last_scale_up=NOW - timedelta(minutes=10))})
    assert [m.node for m in run([*background(), small_job()], state=grew).migrate] == ["small"]


def test_never_below_the_group_min_size() -> None:
    nodes = cluster()
    group = asg(A100, desired=3, min_size=3, instances=["i-0", "i-1", "i-2"])
    result = plan(snapshot([*background(), small_job()], nodes, [group]), migration(), NOW)
    assert result.migrate == ()


def test_a_node_cordoned_for_migration_stays_cordoned_while_its_evicted_pods_terminate() -> None:
    # Given "small" cordoned by the scaler, its evicted job terminating (deletionTimestamp set)
    nodes = cluster()
    nodes[2]["spec"]["unschedulable"] = True
    nodes[2]["metadata"]["annotations"] = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(seconds=40))}
    leaving = small_job(deleted=NOW - timedelta(seconds=5))
    # Then it is not uncordoned (a pod that started after the cordon would be)
    assert "small" not in {a.node for a in run([*background(), leaving], nodes=nodes).uncordon}
    assert "small" in {a.node for a in run([*background(), small_job()], nodes=nodes).uncordon}


def test_revalidation_refuses_when_the_pods_changed_or_the_room_is_gone() -> None:
    # Given the planned move of "small"
    pods = [*background(), small_job()]
    nodes = cluster()
    group = [asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])]
    [move] = plan(snapshot(pods, nodes, group), migration(), NOW).migrate
    cordoned = [dict(n) for n in nodes]
    cordoned[2] = {**nodes[2], "spec": {**nodes[2]["spec"], "unschedulable": True}}

    def blocker(fresh_pods: list[Any]) -> str | None:
        return migration_blocker(snapshot(fresh_pods, cordoned, group), migration(), NOW, move)

    # Then on the same picture (the node now cordoned) it goes ahead
    assert blocker(pods) is None
    # And not when another pod started on the node, nor when the room elsewhere was taken
    assert "its pods changed" in (
        blocker([*pods, pod("late", gpus=1, node="small", annotations=EVERY_30_MIN, created=TEN_HOURS_AGO)])
        or ""
    )
    crowded = [stay("stay-full", 8, "full"), stay("stay-half", 8, "half"), small_job()]
    assert blocker(crowded) == "its pods no longer fit on free room elsewhere"
    # And not when the job no longer says it checkpoints
    assert "does not say it checkpoints" in (blocker([*background(), small_job(annotations={})]) or "")


def test_a_move_never_eats_the_spare_room_kept_for_new_pods() -> None:
    # Given 1 + 2 free GPUs elsewhere and a spare of 3 kept for new pods: the mover would leave 2
    cfg = config(policy={"attrition": {"enabled": False, "spare_gpus": 3}, "migration": {"enabled": True}})
    assert run([*background(), small_job()], cfg).migrate == ()
    # And with a spare of 2 it moves
    cfg = config(policy={"attrition": {"enabled": False, "spare_gpus": 2}, "migration": {"enabled": True}})
    assert len(run([*background(), small_job()], cfg).migrate) == 1


def test_a_job_moved_max_moves_per_job_times_is_not_moved_again() -> None:
    # Given the store remembers the mover's job was moved 3 times this week (the default limit)
    job = small_job()  # its Job: research/mover-owner (the builder's owner reference)
    moved = {"research/Job/mover-owner": (3, NOW - timedelta(hours=5))}
    state = ScalerState(groups={"a100": GroupState(moved_jobs=moved)})
    assert run([*background(), job], state=state).migrate == ()
    # And twice is below the limit
    moved = {"research/Job/mover-owner": (2, NOW - timedelta(hours=5))}
    state = ScalerState(groups={"a100": GroupState(moved_jobs=moved)})
    assert len(run([*background(), job], state=state).migrate) == 1


def test_moves_from_every_group_count_toward_max_moves_per_job() -> None:
    # Given the mover's job was moved twice from group v100 and once from a100 (each group's store
    # counts the moves made from it: the job ran in one, then the other)
    job = small_job()
    state = ScalerState(
        groups={
            "v100": GroupState(moved_jobs={"research/Job/mover-owner": (2, NOW - timedelta(hours=9))}),
            "a100": GroupState(moved_jobs={"research/Job/mover-owner": (1, NOW - timedelta(hours=5))}),
        }
    )
    # Then it has moved 3 times, the default limit: it is not moved again
    assert run([*background(), job], state=state).migrate == ()


def test_a_job_still_present_is_remembered_however_long_ago_it_moved() -> None:
    # Given a job moved 3 times two months ago that still runs (a job of months, as Philly has)
    long_ago = NOW - timedelta(days=60)
    previous = {"a/Job/long": (3, long_ago), "a/Job/x": (1, NOW - timedelta(hours=1))}
    # When another job of the group moves
    moves = remember_moves(previous, ["a/Job/x"], NOW, present={"a/Job/long", "a/Job/x"})
    # Then the long job's count is kept: it is never moved a 4th time
    assert moves == {"a/Job/long": (3, long_ago), "a/Job/x": (2, NOW)}


def test_a_job_moving_again_keeps_its_count_whatever_the_present_jobs_say() -> None:
    # Given a job last moved two days ago, moving again, and a caller that listed the present jobs
    # after evicting its pods (as the replay does)
    previous = {"a/Job/long": (2, NOW - timedelta(days=2))}
    # When its move is remembered
    moves = remember_moves(previous, ["a/Job/long"], NOW, present=set())
    # Then it is its third move, not a first
    assert moves == {"a/Job/long": (3, NOW)}


def test_the_store_forgets_a_job_that_is_gone_after_a_day() -> None:
    # Given a job gone for good (moved 2 days ago) and one between its evicted and re-created pods
    previous = {"a/Job/gone": (1, NOW - timedelta(days=2)), "a/Job/restarting": (1, NOW - timedelta(hours=2))}
    # When another job moves and neither of them has a pod now
    moves = remember_moves(previous, ["a/Job/x"], NOW, present={"a/Job/x"})
    # Then only the gone job is forgotten
    assert moves == {"a/Job/restarting": (1, NOW - timedelta(hours=2)), "a/Job/x": (1, NOW)}


def test_a_last_checkpoint_stamped_in_the_future_is_not_trusted() -> None:
    # Given the small job whose last-checkpoint says 2099 (a writer's bug), and no interval
    future = {ANNOTATION_LAST_CHECKPOINT: "2099-01-01T00:00:00Z"}
    # When planned: the save time cannot be trusted, so the job has not saved, and is not moved
    assert run([*background(), small_job(future)]).migrate == ()
    # And with an interval too, the move costs the whole interval, not nothing
    [move] = run([*background(), small_job({**EVERY_30_MIN, **future})]).migrate
    assert move.lost_gpu_seconds == 1800 + 300
