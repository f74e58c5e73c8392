"""AWS capacity as it really behaves, planned from real `describe-auto-scaling-groups` output:
suspended processes, launches that never come, weighted mixed-instance groups, lifecycle states,
zone-bound pods and capacity reservations (ODCR and Capacity Blocks)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.config import parse_config
from shared.domain.model import CapacityReservation, GroupState, InstanceType, ScalerState, Snapshot
from shared.domain.plan import Plan
from shared.domain.resources import Resources
from shared.formats.aws import capacity_reservation_from_json
from shared.formats.kubernetes import pv_from_json, pvc_from_json
from shared.local.explain import explain_pod, group_summaries
from shared.local.plan_output import plan_to_table
from shared.planner import plan
from shared.planner.capacity import launch_clock_key
from shared.planner.context import build_context
from tests.builders import GPU_TAINT, NOW, asg, node, pod, snapshot

A100 = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}


def group(name: str, price: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "asg_name": f"research-{name}",
        "allocatable": A100,
        "labels": {"gpu": "a100"},
        "taints": [GPU_TAINT],
        "price_per_hour": price,
        **extra,
    }


def configured(*groups: dict[str, Any], **policy: Any) -> Any:
    return parse_config(
        {
            "cluster_name": "research",
            "region": "us-west-2",
            "node_groups": list(groups),
            "policy": {"cordon_settle_seconds": 30, **policy},
        }
    )


def zoned(obj: dict[str, Any], *zones: str, **fields: Any) -> dict[str, Any]:
    """An ASG element with its AvailabilityZones (and any other DescribeAutoScalingGroups fields)."""
    return {**obj, "AvailabilityZones": list(zones), **fields}


def outcome(result: Plan, name: str) -> tuple[str, str | None, str]:
    found = next(p for p in result.pods if p.pod.endswith(f"/{name}"))
    return str(found.outcome), found.group, found.reason


SUSPENDED_LAUNCH = [
    {"ProcessName": "Launch", "SuspensionReason": "User suspended at 2026-12-02T09:00:00Z"},
]


# Suspended processes


def test_launch_suspended_group_cannot_grow_and_its_backlog_spills_in_the_same_run() -> None:
    # Given the cheaper group with Launch suspended and desired 2 above no instance, and a second group
    cheap = zoned(asg("research-cheap", desired=2), "us-west-2a", SuspendedProcesses=SUSPENDED_LAUNCH)
    other = zoned(asg("research-other", desired=0), "us-west-2a")
    cfg = configured(group("cheap", 20.0), group("other", 30.0))
    # When two 8-GPU pods are planned
    result = plan(snapshot([pod("p1", gpus=8), pod("p2", gpus=8)], [], [cheap, other]), cfg, NOW)
    # Then the launches that cannot come are not waited on: the other group grows for both pods
    assert outcome(result, "p1")[:2] == ("scale-up", "other")
    assert outcome(result, "p2")[:2] == ("scale-up", "other")
    assert result.group("other").desired == 2
    assert result.group("cheap").desired == 2
    assert "Launch process is suspended" in result.group("cheap").reason


def test_launch_suspended_is_why_a_pod_only_that_group_admits_waits() -> None:
    # Given one group, Launch suspended
    only = zoned(asg("research-a100", desired=0), "us-west-2a", SuspendedProcesses=SUSPENDED_LAUNCH)
    result = plan(snapshot([pod("p1", gpus=8)], [], [only]), configured(group("a100", 20.0)), NOW)
    # Then the pod is unhelped, saying why
    state, _, reason = outcome(result, "p1")
    assert state == "unhelped"
    assert "Launch process is suspended" in reason


def test_terminate_suspended_group_cordons_but_never_terminates() -> None:
    # Given an idle node the scaler cordoned long ago, in a group whose Terminate process is suspended
    cordoned_at = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    idle = node("n1", "i-1", unschedulable=True, annotations={"backlog-scaler/cordoned-at": cordoned_at})
    spare = node("n2", "i-2")
    suspended = [{"ProcessName": "Terminate", "SuspensionReason": "User suspended"}]
    g = zoned(
        asg("research-a100", desired=2, instances=["i-1", "i-2"]), "us-west-2a", SuspendedProcesses=suspended
    )
    state = ScalerState(groups={"a100": GroupState(last_scale_up=NOW - timedelta(hours=2))})
    snap = replace(snapshot([], [idle, spare], [g]), state=state)
    result = plan(snap, configured(group("a100", 20.0, idle_seconds=0)), NOW)
    # Then nothing is terminated, the reason says why, and cordoning still happens
    assert result.terminate == ()
    assert "Terminate process is suspended" in result.group("a100").reason
    assert [a.node for a in result.cordon] == ["n2"]


# Launches that never come


def test_launches_that_never_come_are_a_capacity_failure_and_the_backlog_spills() -> None:
    # Given a group asked for 2 nodes 21 minutes ago that has no instance, and a second group
    waiting = zoned(asg("research-cheap", desired=2), "us-west-2a")
    other = zoned(asg("research-other", desired=0), "us-west-2a")
    state = ScalerState(
        instances_first_seen={launch_clock_key("research-cheap"): NOW - timedelta(minutes=21)}
    )
    snap = replace(snapshot([pod("p1", gpus=8)], [], [waiting, other]), state=state)
    result = plan(snap, configured(group("cheap", 20.0), group("other", 30.0)), NOW)
    # Then the group backs off, desired is set back to what runs, and the pod goes to the other group
    cheap = result.group("cheap")
    assert (cheap.desired, cheap.enter_backoff) == (0, True)
    assert "produced no instance within 1200s" in cheap.reason
    assert outcome(result, "p1")[:2] == ("scale-up", "other")
    # And the clock of the failed group is dropped; the other group's starts now
    assert launch_clock_key("research-cheap") not in result.instances_first_seen
    assert result.instances_first_seen[launch_clock_key("research-other")] == NOW


def test_launches_within_the_provision_time_are_waited_on_and_their_clock_kept() -> None:
    # Given a group asked for 1 node 10 minutes ago
    waiting = zoned(asg("research-a100", desired=1), "us-west-2a")
    since = NOW - timedelta(minutes=10)
    snap = replace(
        snapshot([pod("p1", gpus=8)], [], [waiting]),
        state=ScalerState(instances_first_seen={launch_clock_key("research-a100"): since}),
    )
    result = plan(snap, configured(group("a100", 20.0)), NOW)
    # Then the pod waits for the launching node and the clock is kept, not restarted
    assert outcome(result, "p1")[0] == "in-flight"
    assert result.group("a100").desired == 1
    assert result.instances_first_seen[launch_clock_key("research-a100")] == since


# Mixed instances, weights and lifecycle states

P4D = InstanceType(
    "p4d.24xlarge", Resources.of({"cpu": 96000, "memory": 1152 * 2**30, "nvidia.com/gpu": 8, "pods": 737})
)
G6 = InstanceType(
    "g6.12xlarge", Resources.of({"cpu": 48000, "memory": 192 * 2**30, "nvidia.com/gpu": 4, "pods": 234})
)


def mixed(desired: int, instances: list[tuple[str, str, str]], **extra: Any) -> dict[str, Any]:
    """A MixedInstancesPolicy group with p4d (weight 8) and g6.12xlarge (weight 4) overrides."""
    obj = zoned(asg("research-mixed", desired=desired, max_size=64), "us-west-2a")
    obj["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0abc", "Version": "$Latest"},
            "Overrides": [
                {"InstanceType": "p4d.24xlarge", "WeightedCapacity": "8"},
                {"InstanceType": "g6.12xlarge", "WeightedCapacity": "4"},
            ],
        },
        "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100},
    }
    obj["Instances"] = [
        {
            "InstanceId": iid,
            "InstanceType": itype,
            "AvailabilityZone": "us-west-2a",
            "LifecycleState": state,
            "HealthStatus": "Healthy",
            "WeightedCapacity": "8" if itype.startswith("p4d") else "4",
        }
        for iid, itype, state in instances
    ]
    return {**obj, **extra}


def mixed_config() -> Any:
    return configured(
        {
            "name": "mixed",
            "asg_name": "research-mixed",
            "instance_type": "p4d.24xlarge",
            "taints": [GPU_TAINT],
            "price_per_hour": 20.0,
        }
    )


def with_types(snap: Snapshot) -> Snapshot:
    return replace(snap, instance_types={"p4d.24xlarge": P4D, "g6.12xlarge": G6})


def test_weighted_desired_is_read_in_nodes_so_pods_do_not_wait_on_launches_that_are_units() -> None:
    # Given desired 16 units with two p4d (weight 8) in service: the group is complete
    g = mixed(16, [("i-1", "p4d.24xlarge", "InService"), ("i-2", "p4d.24xlarge", "InService")])
    nodes = [
        node(f"n{i}", f"i-{i}", labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"}) for i in (1, 2)
    ]
    busy = [pod(f"busy{i}", gpus=8, node=f"n{i}") for i in (1, 2)]
    snap = with_types(snapshot([*busy, pod("p1", gpus=4, memory="100Gi")], nodes, [g]))
    result = plan(snap, mixed_config(), NOW)
    # Then the 4-GPU pod needs a new node (nothing is "launching"), and one node is 4 units more
    assert outcome(result, "p1")[:2] == ("scale-up", "mixed")
    decision = result.group("mixed")
    assert (decision.current_desired, decision.desired) == (2, 3)
    assert snap.asgs["research-mixed"].units_for(decision.desired) == 20


def test_mixed_group_template_is_the_smallest_type_it_may_launch() -> None:
    # Given a group mixing an 8-GPU and a 4-GPU type, with only p4d nodes registered so far
    g = mixed(8, [("i-1", "p4d.24xlarge", "InService")])
    registered = node("n1", "i-1", labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"})
    snap = with_types(
        snapshot(
            [pod("busy", gpus=8, node="n1"), pod("big", gpus=8), pod("small", gpus=4, memory="100Gi")],
            [registered],
            [g],
        )
    )
    result = plan(snap, mixed_config(), NOW)
    # Then an 8-GPU pod is larger than any node a launch is guaranteed to give; a 4-GPU pod scales up
    state, _, reason = outcome(result, "big")
    assert state == "unhelped"
    assert "the smallest of p4d.24xlarge, g6.12xlarge" in reason
    assert outcome(result, "small")[:2] == ("scale-up", "mixed")


def test_weighted_units_still_to_launch_count_as_template_nodes_in_flight() -> None:
    # Given desired 16 units and one p4d (8 units) in service: 8 units, two 4-unit nodes, to come
    g = mixed(16, [("i-1", "p4d.24xlarge", "InService")])
    registered = node("n1", "i-1", labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"})
    pods = [
        pod("busy", gpus=8, node="n1"),
        pod("p1", gpus=4, memory="100Gi"),
        pod("p2", gpus=4, memory="100Gi"),
        pod("p3", gpus=4, memory="100Gi"),
    ]
    result = plan(with_types(snapshot(pods, [registered], [g])), mixed_config(), NOW)
    # Then two pods wait for the launching nodes and the third buys one node
    states = sorted(outcome(result, name)[0] for name in ("p1", "p2", "p3"))
    assert states == ["in-flight", "in-flight", "scale-up"]
    assert (result.group("mixed").current_desired, result.group("mixed").desired) == (3, 4)


def test_standby_and_terminating_wait_nodes_are_never_free_room() -> None:
    # Given two idle registered nodes: one in Standby, one held in Terminating:Wait by a lifecycle hook
    g = zoned(
        asg(
            "research-a100",
            desired=0,
            instances=["i-1", "i-2"],
            lifecycle={"i-1": "Standby", "i-2": "Terminating:Wait"},
        ),
        "us-west-2a",
    )
    snap = snapshot([pod("p1", gpus=8)], [node("n1", "i-1"), node("n2", "i-2")], [g])
    result = plan(snap, configured(group("a100", 20.0)), NOW)
    # Then the pod is not counted on them: a node is bought
    assert outcome(result, "p1")[:2] == ("scale-up", "a100")
    assert result.group("a100").desired == 1


def test_warm_pool_instances_are_not_capacity_on_its_way() -> None:
    # Given a group with desired 1 and its only instance listed as Warmed:Stopped (in the warm pool)
    g = zoned(
        asg("research-a100", desired=1, instances=["i-1"], lifecycle={"i-1": "Warmed:Stopped"}),
        "us-west-2a",
        WarmPoolConfiguration={"MinSize": 2, "PoolState": "Stopped"},
        WarmPoolSize=2,
    )
    result = plan(
        snapshot([pod("p1", gpus=8), pod("p2", gpus=8)], [], [g]), configured(group("a100", 20.0)), NOW
    )
    # Then one pod waits for the launch desired already asks for, the other buys a node
    assert sorted(outcome(result, n)[0] for n in ("p1", "p2")) == ["in-flight", "scale-up"]
    assert "2 instance(s) in its warm pool" in result.group("a100").reason


# Zones


def _pv_objects(zone: str) -> dict[str, Any]:
    """A bound claim on a legacy in-tree EBS volume: zone labels only, no node affinity."""
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt", "namespace": "research"},
        "spec": {"volumeName": "pv-ckpt", "storageClassName": ""},
        "status": {"phase": "Bound"},
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pv-ckpt",
            "labels": {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-west-2"},
        },
        "spec": {"awsElasticBlockStore": {"volumeID": "vol-0abc"}},
    }
    return {"pvcs": (pvc_from_json(pvc),), "pvs": (pv_from_json(pv),)}


def with_claim(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["volumes"] = [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    return obj


def test_zone_bound_pod_goes_only_to_the_group_of_its_zone() -> None:
    # Given a cheap multi-zone group and a dearer group in us-west-2b, and a pod whose volume is in 2b
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    b = zoned(asg("research-b", desired=0), "us-west-2b")
    snap = replace(snapshot([with_claim(pod("ckpt", gpus=8))], [], [multi, b]), **_pv_objects("us-west-2b"))
    result = plan(snap, configured(group("multi", 10.0), group("b", 30.0)), NOW)
    # Then only the 2b group grows
    assert outcome(result, "ckpt")[:2] == ("scale-up", "b")
    assert result.group("multi").desired == 0


def test_zone_bound_pod_with_only_a_multi_zone_group_is_told_to_use_one_group_per_zone() -> None:
    # Given only a multi-zone group and a pod pinned to us-west-2b by its nodeSelector
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    pinned = pod("pinned", gpus=8, node_selector={"topology.kubernetes.io/zone": "us-west-2b"})
    result = plan(snapshot([pinned], [], [multi]), configured(group("multi", 10.0)), NOW)
    # Then it is unhelped and the reason says what to change
    state, _, reason = outcome(result, "pinned")
    assert state == "unhelped"
    assert "spans us-west-2a, us-west-2b" in reason
    assert "use one group per zone" in reason


def zone_affinity(operator: str, *zones: str) -> list[list[dict[str, Any]]]:
    """A required node affinity term on the zone label (values only where the operator takes them)."""
    requirement: dict[str, Any] = {"key": "topology.kubernetes.io/zone", "operator": operator}
    if zones:
        requirement["values"] = list(zones)
    return [[requirement]]


@pytest.mark.parametrize(
    "affinity",
    [
        zone_affinity("In", "us-west-2a", "us-west-2b"),
        zone_affinity("Exists"),
        zone_affinity("NotIn", "us-west-2c"),
    ],
    ids=["in-both", "exists", "notin-another"],
)
def test_a_multi_zone_group_takes_a_pod_that_every_one_of_its_zones_admits(affinity: Any) -> None:
    # Given only a group in us-west-2a and us-west-2b, and a pod whose zone affinity every node it
    # launches satisfies, whichever of the two zones EC2 picks
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    zoned_pod = pod("zoned", gpus=8, affinity=affinity)
    # When the planner runs
    result = plan(snapshot([zoned_pod], [], [multi]), configured(group("multi", 10.0)), NOW)
    # Then the group grows for it
    assert outcome(result, "zoned")[:2] == ("scale-up", "multi")
    assert result.group("multi").desired == 1


def test_a_multi_zone_group_refuses_a_pod_one_of_its_zones_does_not_admit() -> None:
    # Given only a group in us-west-2a and us-west-2b, a pod that must not run in us-west-2a and one
    # that asks for nodes without a zone label (every EKS node has one)
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    not_a = pod("not-a", gpus=8, affinity=zone_affinity("NotIn", "us-west-2a"))
    no_zone = pod("no-zone", gpus=8, affinity=zone_affinity("DoesNotExist"))
    # When the planner runs
    result = plan(snapshot([not_a, no_zone], [], [multi]), configured(group("multi", 10.0)), NOW)
    # Then nothing is bought: half the launches would land where the first cannot run (the zone is the
    # reason), and no node of the group ever matches the second (its affinity is the reason)
    assert result.group("multi").desired == 0
    state, _, reason = outcome(result, "not-a")
    assert state == "unhelped" and "use one group per zone" in reason
    state, _, reason = outcome(result, "no-zone")
    assert state == "unhelped" and "didn't match Pod's node affinity" in reason


def test_zone_bound_pods_wait_for_their_zone_group_in_backoff_instead_of_another_zone() -> None:
    # Given one group per zone; the 2a group is in capacity backoff
    a = zoned(asg("research-a", desired=0), "us-west-2a")
    b = zoned(asg("research-b", desired=0), "us-west-2b")
    until = NOW + timedelta(minutes=4)
    state = ScalerState(groups={"a": GroupState(backoff_until=until)})
    pinned = pod("pinned", gpus=8, node_selector={"topology.kubernetes.io/zone": "us-west-2a"})
    snap = replace(snapshot([pinned], [], [a, b]), state=state)
    result = plan(snap, configured(group("a", 20.0), group("b", 20.0)), NOW)
    # Then nothing is bought in 2b and the pod says it waits for the 2a group's backoff
    state_, _, reason = outcome(result, "pinned")
    assert state_ == "unhelped"
    assert f"a: in capacity backoff until {until.isoformat()}" in reason
    assert result.group("b").desired == 0


# Capacity reservations

BLOCK_JSON = {
    "CapacityReservationId": "cr-0123456789abcdef0",
    "OwnerId": "123456789012",
    "CapacityReservationArn": "arn:aws:ec2:us-west-2:123456789012:capacity-reservation/cr-0123456789abcdef0",
    "AvailabilityZoneId": "usw2-az1",
    "InstanceType": "p5.48xlarge",
    "InstancePlatform": "Linux/UNIX",
    "AvailabilityZone": "us-west-2a",
    "Tenancy": "default",
    "TotalInstanceCount": 4,
    "AvailableInstanceCount": 2,
    "EbsOptimized": True,
    "EphemeralStorage": False,
    "State": "active",
    "StartDate": "2026-12-01T11:30:00+00:00",
    "EndDate": "2026-12-03T11:30:00+00:00",
    "EndDateType": "limited",
    "InstanceMatchCriteria": "targeted",
    "CreateDate": "2026-11-20T08:00:00+00:00",
    "Tags": [],
    "ReservationType": "capacity-block",
}


def reserved(reservation: CapacityReservation, snap: Snapshot, asg_name: str) -> Snapshot:
    """The snapshot with the reservation attached to the group, as the fleet adapter attaches it."""
    asgs = dict(snap.asgs)
    asgs[asg_name] = replace(asgs[asg_name], reservations=(reservation,))
    return replace(snap, asgs=asgs)


def test_free_capacity_block_is_used_first_then_the_backlog_spills_to_priced_groups() -> None:
    # Given a dear group launching into a Capacity Block with 2 free instances, and a cheaper group
    block = zoned(asg("research-block", desired=0), "us-west-2a")
    cheap = zoned(asg("research-cheap", desired=0), "us-west-2a")
    cfg = configured(
        group("block", 98.0, capacity_reservation_ids=["cr-0123456789abcdef0"]), group("cheap", 40.0)
    )
    pods = [pod(f"p{i}", gpus=8) for i in range(3)]
    snap = reserved(
        capacity_reservation_from_json(BLOCK_JSON), snapshot(pods, [], [block, cheap]), "research-block"
    )
    result = plan(snap, cfg, NOW)
    # Then the two reserved instances are bought first (already paid for), the third pod goes elsewhere
    assert result.group("block").desired == 2
    assert result.group("cheap").desired == 1
    assert "2 free reserved instance(s), launches only there" in result.group("block").reason


def test_a_reservation_of_another_instance_type_or_zone_gives_the_group_nothing() -> None:
    # Given a group launching only into a p5.48xlarge Capacity Block in us-west-2a, and a cheaper group
    cheap = zoned(asg("research-cheap", desired=0), "us-west-2a")
    pods = [pod(f"p{i}", gpus=8) for i in range(2)]
    for instance_type, zone in (("g6e.48xlarge", "us-west-2a"), ("p5.48xlarge", "us-west-2b")):
        # When the group launches another instance type, or in another zone
        block = zoned(asg("research-block", desired=0), zone)
        cfg = configured(
            group(
                "block", 98.0, instance_type=instance_type, capacity_reservation_ids=["cr-0123456789abcdef0"]
            ),
            group("cheap", 400.0),
        )
        snap = reserved(
            capacity_reservation_from_json(BLOCK_JSON), snapshot(pods, [], [block, cheap]), "research-block"
        )
        result = plan(snap, cfg, NOW)
        # Then EC2 would place none of its instances in the block: it cannot grow and says why, and
        # the backlog goes to the dearer group
        assert result.group("block").desired == 0
        assert result.group("cheap").desired == 2
        reason = result.group("block").reason
        assert (
            "capacity reservation cr-0123456789abcdef0 holds p5.48xlarge in us-west-2a, but the group"
            f" launches {instance_type} in {zone}"
        ) in reason, reason


def test_odcr_with_on_demand_fallback_competes_at_its_price_once_the_reservation_is_used() -> None:
    # Given a group preferring its ODCR (1 free) then On-Demand at 50/h, and a group at 40/h
    odcr = {
        **BLOCK_JSON,
        "ReservationType": "default",
        "AvailableInstanceCount": 1,
        "EndDateType": "unlimited",
    }
    spec = {
        "CapacityReservationPreference": "capacity-reservations-first",
        "CapacityReservationTarget": {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    }
    first = zoned(asg("research-first", desired=0), "us-west-2a", CapacityReservationSpecification=spec)
    cheap = zoned(asg("research-cheap", desired=0), "us-west-2a")
    pods = [pod(f"p{i}", gpus=8) for i in range(3)]
    snap = reserved(
        capacity_reservation_from_json(odcr), snapshot(pods, [], [first, cheap]), "research-first"
    )
    result = plan(snap, configured(group("first", 50.0), group("cheap", 40.0)), NOW)
    # Then one node goes into the reservation and the rest to the cheaper group
    assert (result.group("first").desired, result.group("cheap").desired) == (1, 2)


def test_no_scale_up_into_a_capacity_block_near_its_end_and_its_nodes_are_cordoned() -> None:
    # Given a Capacity Block ending in 35 minutes (inside the 40-minute margin) with free instances
    ending = {**BLOCK_JSON, "EndDate": (NOW + timedelta(minutes=35)).isoformat()}
    block = zoned(asg("research-block", desired=1, instances=["i-1"]), "us-west-2a")
    cheap = zoned(asg("research-cheap", desired=0), "us-west-2a")
    cfg = configured(
        group("block", 98.0, capacity_reservation_ids=["cr-0123456789abcdef0"]), group("cheap", 40.0)
    )
    running = pod("running", gpus=4, memory="100Gi", node="n1")
    snap = reserved(
        capacity_reservation_from_json(ending),
        snapshot([running, pod("p1", gpus=4, memory="100Gi")], [node("n1", "i-1")], [block, cheap]),
        "research-block",
    )
    result = plan(snap, cfg, NOW)
    # Then the pod is not put beside the running one nor on a new block node: the cheap group grows
    assert outcome(result, "p1")[:2] == ("scale-up", "cheap")
    assert result.group("block").desired == 1
    # And the block's node is cordoned (its running pod is never evicted)
    assert [(a.node, a.group) for a in result.cordon] == [("n1", "block")]
    assert "ends at" in result.cordon[0].reason
    assert result.terminate == ()


def test_scheduled_capacity_block_gives_no_capacity_before_it_starts() -> None:
    # Given a Capacity Block that starts tomorrow (State scheduled)
    later = {**BLOCK_JSON, "State": "scheduled", "StartDate": (NOW + timedelta(days=1)).isoformat()}
    block = zoned(asg("research-block", desired=0), "us-west-2a")
    cfg = configured(group("block", 98.0, capacity_reservation_ids=["cr-0123456789abcdef0"]))
    snap = reserved(
        capacity_reservation_from_json(later), snapshot([pod("p1", gpus=8)], [], [block]), "research-block"
    )
    result = plan(snap, cfg, NOW)
    # Then nothing is launched into it and the pod says why
    state, _, reason = outcome(result, "p1")
    assert state == "unhelped"
    assert "no free instance in its capacity reservation(s) cr-0123456789abcdef0" in reason


def test_vcpu_counted_group_with_unknown_node_size_cannot_grow() -> None:
    # Given a vcpu-counted group whose instance types are not known (attribute-based selection)
    g = zoned(
        asg("research-a100", desired=0),
        "us-west-2a",
        DesiredCapacityType="vcpu",
        MixedInstancesPolicy={
            "LaunchTemplate": {"Overrides": [{"InstanceRequirements": {"VCpuCount": {"Min": 96}}}]}
        },
    )
    result = plan(snapshot([pod("p1", gpus=8)], [], [g]), configured(group("a100", 20.0)), NOW)
    # Then it is not grown blindly (units would be read as nodes)
    assert result.group("a100").desired == 0
    assert "counted in vcpu" in outcome(result, "p1")[2]


def test_plan_table_shows_the_zones_and_the_aws_facts_of_each_group() -> None:
    # Given a multi-zone group with Launch suspended and a single-zone group
    multi = zoned(
        asg("research-multi", desired=0), "us-west-2a", "us-west-2b", SuspendedProcesses=SUSPENDED_LAUNCH
    )
    b = zoned(asg("research-b", desired=0), "us-west-2b")
    snap = snapshot([pod("p1", gpus=8)], [], [multi, b])
    cfg = configured(group("multi", 10.0), group("b", 30.0))
    # When the plan is printed as `backlog-scaler plan` prints it
    text = plan_to_table(plan(snap, cfg, NOW), group_summaries(snap, cfg, NOW))
    # Then the zones and the suspended process are shown
    assert (
        "Zones (zone-bound pods go only to single-zone groups): multi us-west-2a, us-west-2b; b us-west-2b"
        in text
    )
    assert "Launch process is suspended" in text


def test_zone_spread_on_a_multi_zone_group_names_the_fix_and_the_scheduler_words() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    pending = pod("spread", gpus=8)
    pending["spec"]["topologySpreadConstraints"] = spread
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    result = plan(snapshot([pending], [], [multi]), configured(group("multi", 10.0)), NOW)
    reason = outcome(result, "spread")[2]
    assert "use one group per zone" in reason
    assert "missing required label" in reason


def test_open_odcr_is_used_first_and_never_limits_the_group() -> None:
    # Given a group with an open ODCR of 1 free instance (no ASG preference), price 50/h, and a 40/h group
    odcr = {
        **BLOCK_JSON,
        "ReservationType": "default",
        "InstanceMatchCriteria": "open",
        "AvailableInstanceCount": 1,
        "EndDateType": "unlimited",
    }
    first = zoned(asg("research-first", desired=0), "us-west-2a")
    only = zoned(asg("research-only", desired=0, max_size=1), "us-west-2a")
    pods = [pod(f"p{i}", gpus=8) for i in range(3)]
    snap = reserved(capacity_reservation_from_json(odcr), snapshot(pods, [], [first, only]), "research-first")
    cfg = configured(
        group("first", 50.0, capacity_reservation_ids=["cr-0123456789abcdef0"]), group("only", 40.0)
    )
    result = plan(snap, cfg, NOW)
    # Then the reserved node comes first, the cheap group takes what its max allows, and the rest
    # runs On-Demand in the reservation's group
    assert (result.group("first").desired, result.group("only").desired) == (2, 1)
    assert "1 free reserved instance(s), then On-Demand" in result.group("first").reason


def test_explain_shows_the_zone_guarantee_a_multi_zone_group_lacks() -> None:
    # Given a pod whose legacy EBS volume is in us-west-2b and a multi-zone group
    multi = zoned(asg("research-multi", desired=0), "us-west-2a", "us-west-2b")
    snap = replace(snapshot([with_claim(pod("ckpt", gpus=8))], [], [multi]), **_pv_objects("us-west-2b"))
    cfg = configured(group("multi", 10.0))
    # When `plan --explain` looks at it
    explanation = explain_pod(snap, cfg, NOW, "research/ckpt")
    # Then besides the scheduler's verdicts, the group is shown to be unable to guarantee the zone,
    # which is why the pod is unhelped
    (verdicts,) = explanation.groups
    zone = [v for v in verdicts.verdicts if v.filter == "zone_guarantee"]
    assert zone and "use one group per zone" in (zone[0].reason or "")
    assert not verdicts.fits
    assert explanation.outcome is not None and "use one group per zone" in explanation.outcome.reason


def test_capacity_block_group_of_a_managed_node_group_is_labelled_capacity_block() -> None:
    block = zoned(
        asg("research-block", desired=0),
        "us-west-2a",
        Tags=[{"Key": "eks:nodegroup-name", "Value": "p5-block"}],
    )
    cfg = configured(group("block", 98.0, capacity_reservation_ids=["cr-0123456789abcdef0"]))
    snap = reserved(capacity_reservation_from_json(BLOCK_JSON), snapshot([], [], [block]), "research-block")
    (view,) = build_context(snap, cfg, NOW).groups
    assert view.labels["eks.amazonaws.com/capacityType"] == "CAPACITY_BLOCK"
