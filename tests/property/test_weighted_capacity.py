"""Properties of the weighted-capacity rule (units <-> nodes) over generated groups (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.domain.model import nodes_for_units
from shared.formats.aws import asg_from_json

WEIGHTS = {"p4d.24xlarge": 8, "g6.12xlarge": 4, "g6.48xlarge": 8, "g5.2xlarge": 1}


@st.composite
def weighted_groups(draw: st.DrawFn) -> dict[str, Any]:
    """A DescribeAutoScalingGroups element of a weighted group with live instances of its types."""
    types = draw(st.lists(st.sampled_from(sorted(WEIGHTS)), min_size=1, max_size=4, unique=True))
    instances = draw(st.lists(st.sampled_from(types), max_size=6))
    live = sum(WEIGHTS[t] for t in instances)
    max_size = draw(st.integers(min_value=live, max_value=live + 64))
    desired = draw(st.integers(min_value=0, max_value=max_size))
    min_size = draw(st.integers(min_value=0, max_value=desired))
    return {
        "AutoScalingGroupName": "g",
        "MinSize": min_size,
        "MaxSize": max_size,
        "DesiredCapacity": desired,
        "AvailabilityZones": ["us-west-2a"],
        "MixedInstancesPolicy": {
            "LaunchTemplate": {
                "Overrides": [{"InstanceType": t, "WeightedCapacity": str(WEIGHTS[t])} for t in types]
            }
        },
        "Instances": [
            {
                "InstanceId": f"i-{n}",
                "InstanceType": t,
                "LifecycleState": "InService",
                "HealthStatus": "Healthy",
                "WeightedCapacity": str(WEIGHTS[t]),
            }
            for n, t in enumerate(instances)
        ],
    }


@given(weighted_groups())
def test_sizes_in_nodes_are_ordered_and_cover_what_runs(obj: dict[str, Any]) -> None:
    asg = asg_from_json(obj)
    live = len(asg.live_instances)
    assert 0 <= asg.min_size <= asg.desired <= asg.max_size
    assert asg.max_size >= live


@given(weighted_groups())
def test_units_set_for_a_node_count_read_back_as_that_count(obj: dict[str, Any]) -> None:
    # For every node count the planner may ask for (from what runs or min up to max), the units set make the
    # group that many nodes again, and never leave the group's bounds in units.
    asg = asg_from_json(obj)
    assert asg.units is not None
    live = [asg.instance_units(i) for i in asg.live_instances]
    for nodes in range(max(len(live), asg.min_size), asg.max_size + 1):
        units = asg.units_for(nodes)
        assert asg.units.min_size <= units <= asg.units.max_size
        if asg.units.min_size < units < asg.units.max_size:  # not clamped
            assert nodes_for_units(units, live, asg.units.per_node) == nodes


@given(weighted_groups())
def test_desired_in_nodes_never_promises_capacity_beyond_the_units(obj: dict[str, Any]) -> None:
    # The nodes still to come are at most what the missing units buy at the smallest weight.
    asg = asg_from_json(obj)
    assert asg.units is not None
    live_units = sum(asg.instance_units(i) for i in asg.live_instances)
    coming = asg.desired - len(asg.live_instances)
    missing = max(0, asg.units.desired - live_units)
    assert max(coming, 0) * asg.units.per_node < missing + asg.units.per_node
