"""bench/placement_bound.py: the idealised replay bounding what placement alone saves, hand-computed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from shared.local.sim.trace import Job


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "placement_bound.py"
    spec = importlib.util.spec_from_file_location("placement_bound", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["placement_bound"] = module
    spec.loader.exec_module(module)
    return module


bound = _load()


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
