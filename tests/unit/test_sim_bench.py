"""bench/sim_bench.py: the settings it replays under reach the config, and change the replay."""

from __future__ import annotations

import argparse

from shared.local.sim.scheduler import Scoring
from shared.local.sim.trace import Job, Trace
from tests.bench_scripts import load_bench

bench = load_bench("sim_bench")
T0 = 1_500_000_000


def args(headroom_nodes: int = 0, spare_gpus: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        idle=600,
        max_size=10,
        boot_seconds=300,
        runtime_estimates=False,
        headroom_nodes=headroom_nodes,
        spare_gpus=spare_gpus,
    )


def test_headroom_and_spare_reach_the_one_group_config_only() -> None:
    config = bench.scaler_config("one-group", 600, 10, bench.attrition_policy("migrate:1", 16), 1)
    assert [g.headroom_nodes for g in config.node_groups] == [1]
    assert config.policy.attrition.spare_gpus == 16
    assert config.policy.attrition.enabled and config.policy.migration.enabled
    pools = bench.scaler_config("pools", 600, 10, bench.attrition_policy("PreferNoSchedule"), 1)
    assert [g.headroom_nodes for g in pools.node_groups] == [0, 0, 0]
    assert pools.policy.attrition.spare_gpus is None  # one node's GPUs, the default
    assert not bench.attrition_policy("off", 16)["attrition"]["enabled"]  # type: ignore[index]


def test_a_warm_node_starts_a_later_job_without_a_boot() -> None:
    # One 8-GPU job, then another long after the first ended: without headroom its node went idle
    # and was given back, so the second waits for a boot; with one warm node it starts at once.
    trace = Trace("test", "generic", (Job("a", T0, 600, 8), Job("b", T0 + 7200, 600, 8)))
    cold = bench.replay(trace, "one-group", Scoring.LEAST_ALLOCATED, "PreferNoSchedule", args())
    warm = bench.replay(trace, "one-group", Scoring.LEAST_ALLOCATED, "PreferNoSchedule", args(1))
    assert cold.mean_wait == 300  # both jobs wait for a boot (boot_seconds)
    assert warm.mean_wait == 150  # the first waits for its boot, the second for nothing
    assert warm.ratio > cold.ratio  # the warm node is paid for while nothing runs
