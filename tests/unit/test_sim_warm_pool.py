"""Simulator: a group with a warm pool boots faster while its pool has warm instances."""

from __future__ import annotations

import pytest

from shared.domain.errors import ConfigError
from shared.local.sim.engine import SimOptions, simulate
from shared.local.sim.trace import TRACE_ORIGIN, Job, Trace
from shared.local.sim.world import WarmPool, take_warm
from tests.builders import config

T0 = int(TRACE_ORIGIN.timestamp())
HOUR = 3600


def trace(*submits: int) -> Trace:
    return Trace("inline", "csv", tuple(Job(f"j{i}", T0 + s, HOUR, 8) for i, s in enumerate(submits)))


def test_a_warm_instance_registers_sooner_and_its_replacement_warms_in_a_full_boot() -> None:
    # Given a warm pool of one instance (60 s from the pool to a Node) and a 300 s cold boot
    options = SimOptions(boot_seconds=300, warm_pools={"a100": WarmPool(size=1, boot_seconds=60)})
    # When two whole-node jobs arrive together, and a third 2 minutes later
    result = simulate(trace(0, 0, 120), config(policy={"cordon_settle_seconds": 30}), options)
    # Then one job gets the warm instance (60 s), the other boots cold (300 s); the third comes while
    # the pool re-warms (ready at 300 s) and boots cold too
    assert sorted(result.waits) == [60, 300, 300]


def test_without_a_warm_pool_every_launch_boots_in_full() -> None:
    result = simulate(trace(0, 0), config(policy={"cordon_settle_seconds": 30}), SimOptions(boot_seconds=300))
    assert result.waits == [300, 300]


def test_take_warm_takes_only_ready_instances() -> None:
    ready = [0, 500]
    assert take_warm(ready, 100, 300) and ready == [400, 500]
    assert not take_warm(ready, 200, 300)


def test_warm_pool_of_an_unknown_group_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="warm pools of unknown group"):
        simulate(trace(0), config(), SimOptions(warm_pools={"nope": WarmPool(size=1)}))
