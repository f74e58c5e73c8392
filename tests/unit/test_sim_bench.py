"""bench/sim_bench.py: the settings it replays under reach the config, and change the replay."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from shared.local.sim.scheduler import Scoring
from shared.local.sim.trace import Job, Trace
from tests.bench_scripts import load_bench

bench = load_bench("sim_bench")
T0 = 1_500_000_000


def args(
    headroom_nodes: int = 0, spare_gpus: int | None = None, max_moves_per_job: int | None = None
) -> argparse.Namespace:
    return argparse.Namespace(
        idle=600,
        max_size=10,
        boot_seconds=300,
        runtime_estimates=False,
        headroom_nodes=headroom_nodes,
        spare_gpus=spare_gpus,
        max_moves_per_job=max_moves_per_job,
        last_checkpoint=False,
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


def test_the_cap_on_moves_per_job_reaches_the_migration_policy_only_when_given() -> None:
    capped = bench.scaler_config("one-group", 600, 10, bench.attrition_policy("migrate:1", None, 10))
    assert capped.policy.migration.max_moves_per_job == 10
    default = bench.scaler_config("one-group", 600, 10, bench.attrition_policy("migrate:1"))
    assert default.policy.migration.max_moves_per_job == 3  # the policy's default, the target
    assert "migration" not in bench.attrition_policy("PreferNoSchedule", None, 10)


def test_a_warm_node_starts_a_later_job_without_a_boot() -> None:
    # One 8-GPU job, then another long after the first ended: without headroom its node went idle
    # and was given back, so the second waits for a boot; with one warm node it starts at once.
    trace = Trace("test", "generic", (Job("a", T0, 600, 8), Job("b", T0 + 7200, 600, 8)))
    cold = bench.replay(trace, "one-group", Scoring.LEAST_ALLOCATED, "PreferNoSchedule", args())
    warm = bench.replay(trace, "one-group", Scoring.LEAST_ALLOCATED, "PreferNoSchedule", args(1))
    assert cold.mean_wait == 300  # both jobs wait for a boot (boot_seconds)
    assert warm.mean_wait == 150  # the first waits for its boot, the second for nothing
    assert warm.ratio > cold.ratio  # the warm node is paid for while nothing runs


def test_the_excess_over_ideal_is_split_by_cause_and_the_causes_add_up() -> None:
    # Given figures by hand: 10% above the ideal, every cause known
    fig = bench.Figures(
        "one-group", Scoring.LEAST_ALLOCATED, "migrate:1", 0.0, 1.1, 0.0, 0, 10.0, 20.0, 30.0, 35.0,
        0, 0, 0, 0, lost_over_used=0.005, ideal=1000.0, used=1000.0,
    )  # fmt: skip
    assert bench.excess(fig) == (
        "prov/ideal 1.100 = 1 + booting 0.010 + empty 0.020 + fragm 0.030 + held 0.035 + lost to moves"
        " 0.005, other +0.000; with no GPU held on a marked node it would be 1.065"
    )
    # And on a replay, the causes leave nothing unexplained
    trace = Trace(
        "test",
        "generic",
        (Job("a", T0, 600, 7), Job("b", T0, 40_000, 1), Job("c", T0 + 60, 40_000, 4)),
    )
    replayed = bench.replay(trace, "one-group", Scoring.LEAST_ALLOCATED, "migrate:1", args())
    assert replayed.ideal == pytest.approx((7 * 600 + 40_000 + 4 * 40_000) / 3600, abs=0.01)
    assert replayed.used >= replayed.ideal
    assert bench.excess(replayed).split("other ")[1].startswith(("+0.000", "+0.001", "-0.001"))


def test_the_migration_targets_of_each_scoring_read_its_own_runs() -> None:
    # Given migration runs under two scorings, each with its own run without migration
    def fig(scoring: Scoring, attrition: str, ratio: float, mean_wait: float) -> Any:
        return bench.Figures(
            "one-group", scoring, attrition, 0.0, ratio, mean_wait, 300, 0, 0, 0, 0, 0, 0, 0, 0
        )

    least, most = Scoring.LEAST_ALLOCATED, Scoring.MOST_ALLOCATED
    runs = {
        f.key: f
        for f in (
            fig(least, "PreferNoSchedule", 1.15, 50.0),
            fig(least, "migrate:1", 1.06, 85.0),
            fig(most, "PreferNoSchedule", 1.12, 60.0),
            fig(most, "migrate:1", 1.02, 63.0),
        )
    }
    # Then each scoring's targets name its own ratio, and its wait against its own run
    assert "  NO   100% checkpointable: provisioned/ideal <= 1.03: 1.060" in bench.migration_targets(
        runs, least, 300
    )
    assert (
        "  yes  100% checkpointable: mean wait / without migration <= 1.10: 1.050"
        in bench.migration_targets(runs, most, 300)
    )
    assert not any("1.060" in line for line in bench.migration_targets(runs, most, 300))
