"""Simulator scenario: one zone's group is in capacity backoff; the pods bound to that zone wait for
it (and say why) instead of being sent to another zone, while unbound pods spill there."""

from __future__ import annotations

from shared.config import parse_config
from shared.domain.constraints import ZONE
from shared.domain.plan import ReasonCode
from shared.local.sim.engine import SimOptions, simulate
from shared.local.sim.trace import TRACE_ORIGIN, Job, Trace
from tests.builders import GPU_TAINT

T0 = int(TRACE_ORIGIN.timestamp())
HOUR = 3600
A100 = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}


def zone_group(name: str, zone: str, price: float) -> dict[str, object]:
    """One group per zone, as cluster-autoscaler's AWS guide recommends: its nodes carry the zone."""
    return {
        "name": name,
        "asg_name": f"research-{name}",
        "allocatable": A100,
        "labels": {"gpu": "a100", ZONE: zone},
        "taints": [GPU_TAINT],
        "price_per_hour": price,
        "max_size": 4,
    }


def test_zone_bound_jobs_wait_for_their_zone_in_backoff_and_unbound_jobs_spill() -> None:
    # Given the cheaper us-west-2a group, where EC2 has no capacity at all, and a us-west-2b group
    config = parse_config(
        {
            "cluster_name": "research",
            "region": "us-west-2",
            "node_groups": [zone_group("a", "us-west-2a", 30.0), zone_group("b", "us-west-2b", 35.0)],
            "policy": {"cordon_settle_seconds": 30},
        }
    )
    pinned = ((ZONE, "us-west-2a"),)  # e.g. their checkpoint volume lives in us-west-2a
    trace = Trace(
        "inline",
        "csv",
        (
            Job("pinned-0", T0, HOUR, 8, selector=pinned),
            Job("pinned-1", T0, HOUR, 8, selector=pinned),
            Job("free", T0, HOUR, 8),
        ),
    )
    # When replayed (the simulator stops once nothing can progress)
    result = simulate(trace, config, SimOptions(capacity={"a": 0}, stall_seconds=2 * HOUR))
    a, b = result.groups
    # Then the 2a group failed to launch and backed off; the 2b group bought one node, for the free job only
    assert a.launched == 0 and a.backoffs >= 1
    assert b.launched == 1
    assert result.used_gpu_seconds == 8 * HOUR
    # And the pinned jobs never ran elsewhere: they wait, reported as waiting for the backoff
    assert result.not_started == {str(ReasonCode.BACKOFF): 2}
