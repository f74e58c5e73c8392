"""bench/placement_bound.py: the idealised replay bounding what placement alone saves, hand-computed."""

from __future__ import annotations

from typing import Any

import pytest

from shared.local.sim.loading import is_checkpointable
from shared.local.sim.trace import Job
from tests.bench_scripts import load_bench

bound = load_bench("placement_bound")


def job(name: str, submit: int, duration: int, gpus: int) -> Job:
    return Job(job_id=name, submit=submit, duration=duration, gpus=gpus)


def test_one_node_for_overlapping_jobs_paid_from_launch_to_last_end() -> None:
    jobs = [job("a", 0, 100, 1), job("b", 50, 100, 1)]
    # One 8-GPU node from 0 to 150: 1,200 GPU-seconds for 200 used.
    assert bound.replay(jobs, "one-group", bound.first_fit, 0, 0).ratio == pytest.approx(1200 / 200)


def test_a_launch_pays_its_boot_and_an_emptied_node_its_idle_time() -> None:
    jobs = [job("a", 0, 100, 1)]
    # (100 s running + 600 s idle + 300 s boot) x 8 GPUs over 100 GPU-seconds.
    assert bound.replay(jobs, "one-group", bound.first_fit, 300, 600).ratio == pytest.approx(8000 / 100)


def test_an_emptied_node_is_reused_within_its_idle_time_and_removed_after_it() -> None:
    reused = [job("a", 0, 100, 8), job("b", 500, 100, 8)]
    # One node: 0..600 running or idle, then 600 s idle: 1,200 s x 8.
    assert bound.replay(reused, "one-group", bound.first_fit, 0, 600).ratio == pytest.approx(1200 * 8 / 1600)
    gone = [job("a", 0, 100, 8), job("b", 800, 100, 8)]
    # Two nodes of 700 s each.
    assert bound.replay(gone, "one-group", bound.first_fit, 0, 600).ratio == pytest.approx(1400 * 8 / 1600)


def test_clairvoyant_puts_a_job_where_it_does_not_extend_the_node() -> None:
    # Node 1 holds a 7-GPU job ending at 10, node 2 one ending at 1,000; a 1-GPU job of 500 s at t=1.
    jobs = [job("short", 0, 10, 7), job("long", 0, 1000, 7), job("x", 1, 500, 1)]
    ideal = 7 * 10 + 7 * 1000 + 500
    assert bound.replay(jobs, "one-group", bound.first_fit, 0, 0).ratio == pytest.approx(
        (501 + 1000) * 8 / ideal
    )
    assert bound.replay(jobs, "one-group", bound.clairvoyant, 0, 0).ratio == pytest.approx(
        (10 + 1000) * 8 / ideal
    )


def test_oldest_job_first_fills_the_node_whose_job_has_run_longest() -> None:
    newer = bound._Node(born=0, size=8, free=7, running=[(50, 10_000)])
    older = bound._Node(born=10, size=8, free=6, running=[(5, 10_000), (60, 70)])
    empty = bound._Node(born=0, size=8, free=8)
    assert bound.oldest_job_first([empty, newer, older], 1, 100, 200) is older
    assert bound.first_fit([empty, newer, older], 1, 100, 200) is empty
    assert bound.best_fit([empty, newer, older], 1, 100, 200) is older
    assert older.running == [(5, 10_000)]  # jobs that ended are dropped as it looks


def test_multi_node_jobs_take_whole_nodes_and_pools_route_by_size() -> None:
    assert bound.replay([job("a", 0, 100, 16)], "one-group", bound.first_fit, 0, 0).ratio == pytest.approx(
        1.0
    )
    assert bound.replay([job("a", 0, 100, 12)], "one-group", bound.first_fit, 0, 0).ratio == pytest.approx(
        16 / 12
    )
    # A 2-GPU job on a 4-GPU node of the pools; a 1-GPU job on a 1-GPU node.
    assert bound.replay([job("a", 0, 100, 2)], "pools", bound.first_fit, 0, 0).ratio == pytest.approx(2.0)
    assert bound.replay([job("a", 0, 100, 1)], "pools", bound.first_fit, 0, 0).ratio == pytest.approx(1.0)


def test_migration_floor_counts_whole_nodes_for_the_busy_gpus() -> None:
    jobs = [job("a", 0, 100, 4), job("b", 0, 100, 4), job("c", 50, 100, 1)]
    # 0..50: 8 busy -> 1 node; 50..100: 9 -> 2 nodes; 100..150: 1 -> 1 node.
    paid = 8 * 50 + 16 * 50 + 8 * 50
    assert bound.migration_floor(jobs, "one-group") == pytest.approx(paid / (400 + 400 + 100))


def test_fragmented_hours_are_the_free_gpus_beside_running_jobs_only() -> None:
    # One 8-GPU node: a 2-GPU job for an hour, 600 s idle, a 300 s boot: 6 GPUs x 1 h free beside it
    replayed = bound.replay([job("a", 0, 3600, 2)], "one-group", bound.first_fit, 300, 600)
    assert replayed.fragmented_hours == pytest.approx(6.0)
    assert replayed.ratio == pytest.approx((3600 + 600 + 300) * 8 / (2 * 3600))


# Checkpoint-aware migration rows. The trace: a 6-GPU job of 100 s fills node 1, a long 4-GPU job
# opens node 2, and a long 2-GPU job joins node 1 (oldest-job-first: the fuller of two equally old
# nodes). When the 6-GPU job ends, node 1 holds 2 busy GPUs and node 2 has 4 free: one node too many.
STRANDED = [job("a", 0, 100, 6), job("b", 0, 10_000, 4), job("c", 0, 10_000, 2)]
STRANDED_IDEAL = 6 * 100 + 4 * 10_000 + 2 * 10_000


def replay_stranded(movable: list[bool], cost: Any) -> Any:
    return bound.replay_migrating(STRANDED, movable, bound.oldest_job_first, 0, 0, cost)


def test_a_stranded_job_moves_right_after_a_save_and_its_node_goes() -> None:
    # Given every job checkpoints and a move costs its 300 s restart (right after a save)
    moved = replay_stranded([True] * 3, bound.MoveCost(restart=300, lost=0))
    # Then at t=100 c moves onto node 2 and ends 300 s later: node 1 up 100 s, node 2 10,300 s
    assert moved.ratio == pytest.approx((100 + 10_300) * 8 / STRANDED_IDEAL)
    assert (moved.emptied, moved.moves, moved.moved_twice) == (1, 1, 0)
    assert moved.lost_over_used == pytest.approx(2 * 300 / (STRANDED_IDEAL + 2 * 300))


def test_a_move_loses_the_work_since_the_last_save_but_never_more_than_the_job_ran() -> None:
    # Given half an interval (900 s) lost per move: c has run only 100 s, so it loses 100 s
    moved = replay_stranded([True] * 3, bound.MoveCost(restart=300, lost=900))
    assert moved.ratio == pytest.approx((100 + 10_400) * 8 / STRANDED_IDEAL)
    assert moved.lost_over_used == pytest.approx(2 * 400 / (STRANDED_IDEAL + 2 * 400))


def test_nothing_moves_without_opt_in_budget_moves_left_or_enough_gain() -> None:
    kept = (100 + 10_000 + 10_000 - 100) * 8 / STRANDED_IDEAL  # both nodes up to 10,000 s
    cheap = bound.MoveCost(restart=300, lost=0)
    blocked = {
        "neither b nor c checkpoints": replay_stranded([True, False, False], cheap),
        "no move left": replay_stranded([True] * 3, bound.MoveCost(restart=300, max_moves=0)),
        "no budget this hour": replay_stranded([True] * 3, bound.MoveCost(restart=300, per_hour=0)),
        # saving 8 x 9,900 s; cost 2 x 300 s lost + 8 x 300 s that node 2 stays up longer: 3,000
        "gain 27 not beaten": replay_stranded([True] * 3, bound.MoveCost(restart=300, gain=27)),
    }
    for why, replayed in blocked.items():
        assert replayed.ratio == pytest.approx(kept), why
        assert replayed.moves == 0, why
    assert replay_stranded([True] * 3, bound.MoveCost(restart=300, gain=26)).moves == 1
    # When only b checkpoints, b moves onto c's node instead and its own node goes
    instead = replay_stranded([True, True, False], cheap)
    assert (instead.moves, instead.ratio) == (1, pytest.approx((100 + 10_300) * 8 / STRANDED_IDEAL))


def test_a_move_leaves_the_spare_free_on_the_other_busy_nodes() -> None:
    # Given node 2 has 4 free GPUs and c takes 2 of them: 2 stay free for arrivals
    assert replay_stranded([True] * 3, bound.MoveCost(restart=300, spare=2)).moves == 1
    # Then a spare of 3 GPUs forbids the move, and both nodes stay up to 10,000 s
    kept = replay_stranded([True] * 3, bound.MoveCost(restart=300, spare=3))
    assert kept.moves == 0
    assert kept.ratio == pytest.approx((100 + 10_000 + 10_000 - 100) * 8 / STRANDED_IDEAL)


def test_a_gang_moves_its_piece_but_pays_and_waits_with_all_its_gpus() -> None:
    # Given a 10-GPU job (one whole node and 2 GPUs beside the 6-GPU job) and a long 4-GPU job alone
    jobs = [job("a", 0, 100, 6), job("g", 0, 10_000, 10), job("b", 1, 10_000, 4)]
    moved = bound.replay_migrating(jobs, [True] * 3, bound.oldest_job_first, 0, 0, bound.MoveCost(lost=0))
    # Then at t=100 the gang's 2-GPU piece joins b's node, and all 10 GPUs restart: 300 s later
    ideal = 600 + 100_000 + 40_000
    assert moved.moves == 1
    assert moved.lost_over_used == pytest.approx(10 * 300 / (ideal + 10 * 300))
    # node 1 (a, then the piece) 0..100; the gang's whole node 0..10,300; b's node 1..10,300
    assert moved.ratio == pytest.approx((100 + 10_300 + 10_299) * 8 / ideal)


def test_a_policy_that_estimates_ends_as_the_scaler_does_moves_old_jobs_only() -> None:
    online = bound.MoveCost(restart=300, lost=0, clairvoyant=False)
    # Given c has run 100 s when node 1 strands it: expected to end 100 s later, not worth a move
    # (saving 8 x 100 s; cost 2 x 300 s restart + 8 x 300 s that node 2 is expected to stay up longer)
    young = replay_stranded([True] * 3, online)
    assert young.moves == 0
    # Given it has run 5,000 s: expected to end 5,000 s later, it moves (saving 8 x 5,000 s)
    jobs = [job("a", 0, 5_000, 6), job("b", 0, 20_000, 4), job("c", 0, 20_000, 2)]
    old = bound.replay_migrating(jobs, [True] * 3, bound.oldest_job_first, 0, 0, online)
    assert old.moves == 1
    # node 1 up until c moves at 5,000 s; node 2 until c ends, 300 s of restart later
    assert old.ratio == pytest.approx((5_000 + 20_300) * 8 / (6 * 5_000 + 4 * 20_000 + 2 * 20_000))


def test_a_move_spends_the_room_a_later_arrival_would_have_started_on() -> None:
    # Given a 4-GPU job d arriving at t=200, after c's move at t=100 (node 1 then goes: idle 0 s)
    jobs = [*STRANDED, job("d", 200, 1_000, 4)]
    cheap = bound.MoveCost(restart=300, lost=0)
    kept = bound.replay_migrating(jobs, [False] * 4, bound.oldest_job_first, 0, 0, cheap)
    moved = bound.replay_migrating(jobs, [True] * 4, bound.oldest_job_first, 0, 0, cheap)
    # Then without moves a and b launched a node each and d starts beside c on node 1; with the move
    # d finds 2 free GPUs on node 2 only and needs a third launch
    assert (kept.moves, kept.booted) == (0, 2)
    assert (moved.moves, moved.booted) == (1, 3)


def test_the_movable_jobs_are_the_simulators_pick_by_trace_index() -> None:
    jobs = [job(str(i), i, 10, 1) for i in range(10)]
    assert bound.movable_jobs(jobs, 1.0) == [True] * 10
    assert bound.movable_jobs(jobs, 0.0) == [False] * 10
    half = bound.movable_jobs(jobs, 0.5)
    assert half == [is_checkpointable(i, 0.5) for i in range(10)]
    assert sum(half) == 5


def test_the_launch_floor_pays_boot_and_idle_and_takes_the_latest_emptied_node_back() -> None:
    # One 1-GPU job: 300 s boot, 100 s running, 600 s idle, as `replay` pays it
    assert bound.launch_floor([job("a", 0, 100, 1)], "one-group", 300, 600) == pytest.approx(8000 / 100)
    # Two nodes emptied at 100 and 200; the node needed at 250 is the one emptied at 200 (50 s idle)
    jobs = [job("a", 0, 100, 8), job("b", 0, 200, 8), job("c", 250, 50, 8)]
    running, waiting = 200 + 100 + 50, 50 + 600 + 600
    assert bound.launch_floor(jobs, "one-group", 0, 600) == pytest.approx((running + waiting) * 8 / 2800)
    assert bound.migration_floor(jobs, "one-group") == pytest.approx(1.0)
