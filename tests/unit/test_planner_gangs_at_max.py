"""Gangs and groups at their max size: idle nodes are kept for a gang only if it could ever start,
every group that can launch at its max size, every pod outside the gang finished (the at-max rule,
shared/planner/scale_up/at_max.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.model import GroupState, ScalerState, Snapshot
from shared.domain.plan import Outcome
from shared.formats.aws import capacity_reservation_from_json
from shared.planner import plan
from tests.builders import NOW, a100_group, asg, config, node, pod, snapshot
from tests.builders_dra import (
    by_name,
    claim_spec,
    claim_template,
    device_class,
    dra_pod,
    from_template,
    gpu_device,
    gpu_slice,
    request,
    resource_claim,
    slice_spec,
)
from tests.builders_provisioning import pod_group, with_objects
from tests.unit.test_aws_capacity import BLOCK_JSON, configured, group, reserved, zoned
from tests.unit.test_planner_dra import _dra
from tests.unit.test_planner_gangs import (
    _apart,
    _idle_an_hour,
    _kueue,
    two_a100_groups_at_max,
    two_a100_groups_of_two,
)
from tests.unit.test_planner_mixed_gangs import _cpu_group, _full_a100, _mpijob, _mpijob_at_a100, _two_groups

A100 = "research-a100"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"


def test_a_gang_larger_than_two_groups_together_keeps_no_idle_node_for_it() -> None:
    # Given two a100 groups of at most 2 nodes each, each at its max with a busy and an idle node,
    # and a gang of 5 whole-node members: 5 > 2 + 2, it can never start
    cfg = two_a100_groups_of_two()
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 5)) for i in range(5)]  # type: ignore[arg-type]
    # When planned
    result = plan(two_a100_groups_at_max(members), cfg, NOW)
    # Then neither group keeps its idle node for it (only idle ones are cordoned), and the gang says
    # why once, for both groups
    assert result.cordon and {c.node for c in result.cordon} <= {"a0", "b0"}
    assert {p.reason for p in result.pods} == {
        "gang research/g: needs 5 nodes of a100-a and a100-b, more than the max sizes of a100-a (2) and"
        " a100-b (2) together"
    }


@pytest.mark.parametrize("off", ["max-size-0", "asg-missing"])
def test_a_group_that_can_never_launch_does_not_make_a_gang_that_never_starts_keep_idle_nodes(
    off: str,
) -> None:
    # Given three members that must each have a node of their own, a100 at its max of 2 (both nodes
    # idle for an hour), and one more a100 group that can never launch: switched off (max size 0) or
    # its Auto Scaling group gone
    other = a100_group(name="a100-off", asg_name="research-a100-off", price_per_hour=32.77)
    if off == "max-size-0":
        other["max_size"] = 0
    cfg = config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 2}, other])
    fleet = [asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])]
    if off == "max-size-0":
        fleet.append(asg("research-a100-off", desired=0, max_size=0))
    snap = snapshot(_apart("g1", 3), [node("n0", "i-0"), node("n1", "i-1")], fleet)
    # When planned
    result = plan(_idle_an_hour(snap, "n0", "n1"), cfg, NOW)
    # Then the gang never starts: a100's idle nodes are given back as without the other group
    assert [c.node for c in result.cordon] == ["n0"]  # one a run: max_scale_in_fraction
    (reason,) = {p.reason for p in result.pods}
    assert "never starts in a100: its members' own rules keep them apart" in reason


def _apart_member(i: int, on: str | None) -> dict[str, Any]:
    """A member of coscheduling gang g (1 GPU) that must run on a node of its own (required hostname
    anti-affinity against job=g), running on `on` or pending."""
    member = pod(f"g-{i}", gpus=1, node=on, labels={COSCHEDULING: "g", "job": "g"})
    term = {"labelSelector": {"matchLabels": {"job": "g"}}, "topologyKey": "kubernetes.io/hostname"}
    member["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return member


def test_the_running_members_rules_keep_the_pending_ones_off_their_nodes_in_the_at_max_check() -> None:
    # Given a gang of 4 members that must each have a node of their own: two run on n0 and n1 (7 GPUs
    # free on each), two pend; a100 at its max of 3, n2 idle for an hour. The pending members need
    # two nodes other than n0 and n1: only n2 can ever be one
    members = [_apart_member(0, "n0"), _apart_member(1, "n1"), _apart_member(2, None), _apart_member(3, None)]
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    group = asg(A100, desired=3, max_size=3, instances=[f"i-{i}" for i in range(3)])
    snap = with_objects(snapshot(members, nodes, [group]), [pod_group("g", 4)])
    # When planned
    result = plan(
        _idle_an_hour(snap, "n2"), config(node_groups=[a100_group(price_per_hour=32.77, max_size=3)]), NOW
    )
    # Then the gang never starts: n2 is given back, and the reason names the rule beside the running members
    assert [c.node for c in result.cordon] == ["n2"]
    reasons = {p.reason for p in result.pods if p.pod in ("research/g-2", "research/g-3")}
    assert reasons == {
        "gang research/g: never starts in a100: its members' own rules keep them apart (node(s) didn't"
        " satisfy existing pods anti-affinity rules); at the group's max size 3, every node empty but the 2"
        " its running members hold, 1 of the 2 members it must hold have a place"
    }


def test_a_node_a_running_member_holds_counts_the_room_its_other_jobs_will_free() -> None:
    # Given a gang of 4 4-GPU members: g-0 runs on n0 beside another 4-GPU job; n1 idle for an hour;
    # a100 at its max of 2. Once the job on n0 ends, g-1 starts on n0 and g-2, g-3 on n1
    members = [pod("g-0", gpus=4, node="n0", labels={COSCHEDULING: "g"})]
    members += [pod(f"g-{i}", gpus=4, labels={COSCHEDULING: "g"}) for i in range(1, 4)]
    nodes = [node("n0", "i-0"), node("n1", "i-1")]
    group = asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=2)])

    def planned(*others: dict[str, Any]) -> Any:
        snap = with_objects(snapshot([*members, *others], nodes, [group]), [pod_group("g", 4)])
        return plan(_idle_an_hour(snap, "n1"), cfg, NOW)

    # When planned with the job running
    result = planned(pod("job", gpus=4, node="n0"))
    # Then n1 is kept for the gang, not given back to be bought again once the job ends
    assert result.cordon == () and result.terminate == ()
    assert "1 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason
    # And once the job has ended the gang starts there with nothing bought
    after = planned()
    assert after.group("a100").desired == 2 and after.cordon == ()
    assert {p.outcome for p in after.pods if p.pod != "research/g-0"} == {Outcome.EXISTING}


def test_a_gang_that_starts_with_a_member_on_a_node_of_no_group_keeps_the_idle_node() -> None:
    # Given a100 at its max of 2 (g0 idle for an hour, g1 busy) and a busy a100 node no configured
    # group manages (u0, a static pool); a gang of 3 whole-node members: once the jobs on g1 and u0
    # end, it starts on g0, g1 and u0
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=2)])
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 3)) for i in range(3)]  # type: ignore[arg-type]
    nodes = [node("g0", "i-0"), node("g1", "i-1"), node("u0", "i-u0")]
    group = asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])
    busy = [pod("busy-g1", gpus=8, node="g1"), pod("busy-u0", gpus=8, node="u0")]
    # When planned
    result = plan(_idle_an_hour(snapshot(busy + members, nodes, [group]), "g0"), cfg, NOW)
    # Then g0 is kept for the gang
    assert result.cordon == () and result.terminate == ()
    assert "1 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason
    # And once the jobs have ended the gang starts on g0, g1 and u0 with nothing bought
    after = plan(_idle_an_hour(snapshot(members, nodes, [group]), "g0"), cfg, NOW)
    assert after.group("a100").desired == 2
    assert {p.outcome for p in after.pods} == {Outcome.EXISTING}


def test_a_mixed_gang_whose_group_at_max_is_in_capacity_backoff_keeps_its_idle_nodes() -> None:
    # Given an MPIJob of 16 8-GPU workers and a CPU launcher, a100 at its max size 16 (n0 and n1 idle
    # for an hour, the other 14 busy) and in capacity backoff: at its max it needs no launch
    snap = _mpijob_at_a100(16, 16)
    backoff = GroupState(backoff_until=NOW + timedelta(minutes=20))
    snap = replace(snap, state=ScalerState(nodes=snap.state.nodes, groups={"a100": backoff}))
    # When planned
    result = plan(snap, _two_groups(), NOW)
    # Then both idle nodes are kept for the gang, as without the backoff
    assert result.cordon == () and result.terminate == ()
    assert "2 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason
    (reason,) = {p.reason for p in result.pods if p.pod.startswith("research/mpi")}
    assert "has no place: a100: at max size 16; cpu: " in reason


def test_a_mixed_gang_that_never_starts_gives_back_the_idle_nodes_of_its_group_in_capacity_backoff() -> None:
    # Given an MPIJob of 17 8-GPU workers and a CPU launcher, a100 at its max size 16 (n0 and n1
    # idle for an hour) and in capacity backoff: 17 workers never start in 16 nodes
    snap = _mpijob_at_a100(17, 16)
    backoff = GroupState(backoff_until=NOW + timedelta(minutes=20))
    snap = replace(snap, state=ScalerState(nodes=snap.state.nodes, groups={"a100": backoff}))
    # When planned
    result = plan(snap, _two_groups(), NOW)
    # Then the gang says so, and an idle node is given back
    (reason,) = {p.reason for p in result.pods if p.pod.startswith("research/mpi")}
    assert "has no place: needs 17 a100 nodes, more than the group's max size 16; cpu: " in reason
    assert [c.node for c in result.cordon] == ["n0"]


def test_a_gang_only_a_retired_group_admits_keeps_none_of_its_idle_nodes() -> None:
    # Given a100 retired in config (max_size 0) while its ASG still runs two nodes, idle for an hour,
    # and a gang of 3 whole-node members only a100 admits
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=0)])
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 3)) for i in range(3)]  # type: ignore[arg-type]
    fleet = [asg(A100, desired=2, max_size=16, instances=["i-0", "i-1"])]
    snap = snapshot(members, [node("n0", "i-0"), node("n1", "i-1")], fleet)
    # When planned
    result = plan(_idle_an_hour(snap, "n0", "n1"), cfg, NOW)
    # Then the gang never starts: the retired group's idle nodes go, and the reason names the group
    assert result.cordon and {c.node for c in result.cordon} <= {"n0", "n1"}
    (reason,) = {p.reason for p in result.pods}
    assert "no group that admits it can launch: a100 (max size 0)" in reason


def test_an_mpijob_whose_launchers_only_group_has_max_size_0_keeps_no_idle_gpu_node() -> None:
    # Given an MPIJob (a CPU launcher and 4 GPU workers, minMember 5), a100 at its max 4 (n0 and n1
    # idle an hour, n2 and n3 busy) and the only group that admits the launcher switched off (its
    # ASG's max size 0): the launcher can run nowhere, ever
    busy, nodes = _full_a100(4)
    pods = _mpijob("mpi", 4, {"labels": {COSCHEDULING: "mpi"}}) + busy[2:]
    fleet = [asg(A100, desired=4, max_size=4, instances=[f"i-{i}" for i in range(4)])]
    fleet.append(asg("research-cpu", desired=0, max_size=0))
    snap = with_objects(snapshot(pods, nodes, fleet), [pod_group("mpi", 5)])
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=4), _cpu_group()])
    # When planned
    result = plan(_idle_an_hour(snap, "n0", "n1"), cfg, NOW)
    # Then the gang never starts: a100's idle nodes are given back
    assert result.cordon and {c.node for c in result.cordon} <= {"n0", "n1"}


def _blocked_world(kind: str) -> tuple[Snapshot, Any]:
    """a100 at its max 2 in zone a (n0 idle an hour, n1 busy) and a 4-node group that cannot
    launch: its reservation holds another instance type, or its Launch process is suspended; a gang
    of 4 whole-node members both admit."""
    a100 = zoned(asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"]), "us-west-2a")
    extra: dict[str, Any] = {}
    if kind == "launch-suspended":
        extra = {"SuspendedProcesses": [{"ProcessName": "Launch", "SuspensionReason": "User"}]}
    other = zoned(asg("research-block", desired=0, max_size=4), "us-west-2a", **extra)
    settings: dict[str, Any] = {"max_size": 4}
    if kind == "reservation-mismatch":
        settings |= {"instance_type": "g6e.48xlarge", "capacity_reservation_ids": ["cr-0123456789abcdef0"]}
    cfg = configured(group("a100", 32.77, max_size=2), group("block", 98.0, **settings))
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 4)) for i in range(4)]  # type: ignore[arg-type]
    snap = snapshot(
        [pod("busy", gpus=8, node="n1"), *members], [node("n0", "i-0"), node("n1", "i-1")], [a100, other]
    )
    if kind == "reservation-mismatch":
        snap = reserved(capacity_reservation_from_json(BLOCK_JSON), snap, "research-block")
    return _idle_an_hour(snap, "n0"), cfg


@pytest.mark.parametrize("kind", ["reservation-mismatch", "launch-suspended"])
def test_a_group_whose_growth_is_blocked_does_not_count_at_its_max_size(kind: str) -> None:
    # Given a gang of 4 that only a100's 2 nodes could ever hold, the other group blocked for good
    snap, cfg = _blocked_world(kind)
    # When planned
    result = plan(snap, cfg, NOW)
    # Then a100's idle node is given back, the gang never starting
    assert [c.node for c in result.cordon] == ["n0"]
    (reason,) = {p.reason for p in result.pods}
    assert "needs 4 a100 nodes, more than the group's max size 2" in reason


def _mpijob_waiting_for_a_gpu_node(job_on_n1: bool) -> Snapshot:
    """a100 at its max 2 (n0 idle an hour, n1 busy with a job when `job_on_n1`), cpu at its max 1
    (c0 idle an hour), and an MPIJob of 2 workers and a CPU launcher (minMember 3)."""
    pods = _mpijob("mpi", 2, {"labels": {COSCHEDULING: "mpi"}})
    if job_on_n1:
        pods.append(pod("busy", gpus=8, node="n1"))
    cpu = node("c0", "i-c0", gpus=0, cpu="31", memory="120Gi", labels={"node-role": "cpu"}, taints=[])
    fleet = [
        asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"]),
        asg("research-cpu", desired=1, max_size=1, instances=["i-c0"]),
    ]
    snap = with_objects(
        snapshot(pods, [node("n0", "i-0"), node("n1", "i-1"), cpu], fleet), [pod_group("mpi", 3)]
    )
    return _idle_an_hour(snap, "n0", "c0")


def test_a_mixed_gang_that_could_start_keeps_the_idle_node_of_its_launchers_group_too() -> None:
    # Given an MPIJob whose workers wait for the job on n1 to end, and whose launcher will need the
    # cpu group's idle node c0 (cpu at its max 1); once the job ends, nothing is bought
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=2), {**_cpu_group(), "max_size": 1}])
    after = plan(_mpijob_waiting_for_a_gpu_node(job_on_n1=False), cfg, NOW)
    assert {p.outcome for p in after.pods} == {Outcome.EXISTING}
    # When planned while the job runs
    result = plan(_mpijob_waiting_for_a_gpu_node(job_on_n1=True), cfg, NOW)
    # Then neither n0 (the workers') nor c0 (the launcher's) is given back
    assert result.cordon == () and result.terminate == ()


_EIGHT_DEVICES = [slice_spec([gpu_device(i) for i in range(8)], pool="gpus")]


def _running_dra(name: str, claim: str, on: str, gang: bool) -> dict[str, Any]:
    """A running pod holding the allocated claim `claim` on node `on` (a member of gang g or not)."""
    running = dra_pod(name, [by_name(claim)], statuses=None)
    if gang:
        running["metadata"]["labels"] = {COSCHEDULING: "g"}
    running["spec"]["nodeName"] = on
    running["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return running


def _pending_dra(i: int, template: str) -> dict[str, Any]:
    member = dra_pod(f"g-{i}", [from_template(template=template)])
    member["metadata"]["labels"] = {COSCHEDULING: "g"}
    return member


def _dra_world(
    pods: list[dict[str, Any]], objects: list[Any], nodes: list[dict[str, Any]], idle: str, members: int
) -> Any:
    """a100 (DRA, 8 devices a node) at its max 2 (n0, n1), `idle` idle an hour, gang g of `members`;
    planned."""
    fleet = [asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])]
    group = pod_group("g", members, namespace="ml")
    snap = with_objects(replace(snapshot(pods, nodes, fleet), dra=_dra(objects)), [group])
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=2, resource_slices=_EIGHT_DEVICES)])
    return plan(_idle_an_hour(snap, idle), cfg, NOW)


def test_a_dra_gang_keeps_the_idle_node_while_a_job_holds_the_devices_of_a_node_of_no_group() -> None:
    # Given a DRA gang of 3 (8 devices each), a100 at its max 2 (n0 idle an hour, n1 busy with a pod
    # of no device), and u0, a node of no group whose 8 devices a running job's claim holds: once
    # both jobs end the gang starts on n0, n1 and u0
    objects = [device_class(), claim_template("eight", claim_spec(request(count=8)), namespace="ml")]
    objects += [gpu_slice("n0"), gpu_slice("n1"), gpu_slice("u0")]
    objects.append(
        resource_claim(
            "job-gpus",
            claim_spec(request(count=8)),
            allocated_on="u0",
            devices=tuple(f"gpu-{i}" for i in range(8)),
        )
    )
    pods = [_pending_dra(i, "eight") for i in range(3)]
    pods += [pod("busy-n1", gpus=0, cpu="1", node="n1"), _running_dra("job", "job-gpus", "u0", gang=False)]
    nodes = [node("n0", "i-0", gpus=0), node("n1", "i-1", gpus=0), node("u0", "i-u0", gpus=0)]
    # When planned
    result = _dra_world(pods, objects, nodes, "n0", 3)
    # Then n0 is kept for it: the job's devices count as free in the world it could start in
    assert result.cordon == () and result.terminate == ()


def test_a_dra_gang_keeps_the_idle_node_while_a_job_beside_its_running_member_holds_devices() -> None:
    # Given a DRA gang of 4 (4 devices each, minimum 3 pending): g-0 runs on n0 (devices 0-3), a job
    # holds n0's devices 4-7, n1 idle an hour: once the job ends, g-1 on n0, g-2 and g-3 on n1
    objects = [device_class(), claim_template("four", claim_spec(request(count=4)), namespace="ml")]
    objects += [gpu_slice("n0"), gpu_slice("n1")]
    for claim, devices in (("g0-gpus", range(4)), ("job-gpus", range(4, 8))):
        held = tuple(f"gpu-{i}" for i in devices)
        objects.append(resource_claim(claim, claim_spec(request(count=4)), allocated_on="n0", devices=held))
    pods = [
        _running_dra("g-0", "g0-gpus", "n0", gang=True),
        _running_dra("job", "job-gpus", "n0", gang=False),
    ]
    pods += [_pending_dra(i, "four") for i in range(1, 4)]
    # When planned
    result = _dra_world(pods, objects, [node("n0", "i-0", gpus=0), node("n1", "i-1", gpus=0)], "n1", 4)
    # Then n1 is kept for it: the job's devices beside g-0 count as free, g-0's own stay taken
    assert result.cordon == () and result.terminate == ()


def test_a_gang_first_fit_places_badly_is_not_said_to_need_more_nodes_than_it_does() -> None:
    # Given a100-a (pool a) and a100-b (pool b), max 1 each, both at their max (a0 busy, b0 idle an
    # hour), and a gang of 2 whole-node members: g-0 may run in either pool, g-1 only in pool a
    def pool(name: str, asg_name: str, label: str) -> dict[str, Any]:
        labels = {"gpu": "a100", "pool": label}
        return a100_group(name=name, asg_name=asg_name, price_per_hour=32.77, max_size=1, labels=labels)

    cfg = config(node_groups=[pool("a100-a", "asg-a", "a"), pool("a100-b", "asg-b", "b")])
    members = [pod("g-0", gpus=8, **_kueue("g", 2))]  # type: ignore[arg-type]
    members.append(pod("g-1", gpus=8, node_selector={"pool": "a"}, **_kueue("g", 2)))  # type: ignore[arg-type]
    nodes = [node(f"{p}0", f"i-{p}0", labels={"gpu": "a100", "pool": p}) for p in "ab"]
    fleet = [asg(f"asg-{p}", desired=1, max_size=1, instances=[f"i-{p}0"]) for p in "ab"]
    snap = _idle_an_hour(snapshot([pod("busy", gpus=8, node="a0"), *members], nodes, fleet), "b0")
    # When planned (first fit puts g-0 on pool a's one node: the placement's own limit)
    result = plan(snap, cfg, NOW)
    # Then the reason claims no node count the gang does not need (2 nodes of a100-a), and says what
    # first fit found
    (reason,) = {p.reason for p in result.pods}
    assert "needs 2" not in reason
    assert "first fit, its members find no place together" in reason
    assert "1 of the 2 members it must hold have a place" in reason


def test_a_gang_that_could_start_keeps_no_idle_node_of_a_group_retired_to_max_size_zero() -> None:
    # Given a100 at its max of 2 (n0 idle, n1 busy), a100-b at its max of 1 (b0 busy), a group
    # a100-old retired in config (max size 0) whose ASG still runs an idle node o0, and a gang of 3
    # whole-node members every group admits: it can start on n0, n1 and b0 once their jobs end
    cfg = config(
        node_groups=[
            a100_group(price_per_hour=32.77, max_size=2),
            a100_group(name="a100-b", asg_name="research-a100-b", price_per_hour=32.77, max_size=1),
            a100_group(name="a100-old", asg_name="research-a100-old", price_per_hour=32.77, max_size=0),
        ]
    )
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 3)) for i in range(3)]  # type: ignore[arg-type]
    fleet = [
        asg("research-a100", desired=2, max_size=2, instances=["i-0", "i-1"]),
        asg("research-a100-b", desired=1, max_size=1, instances=["i-b0"]),
        asg("research-a100-old", desired=1, max_size=16, instances=["i-f0"]),
    ]
    nodes = [node("n0", "i-0"), node("n1", "i-1"), node("b0", "i-b0"), node("o0", "i-f0")]
    busy = [pod("busy", gpus=8, node="n1"), pod("busy-b", gpus=8, node="b0")]
    # When planned
    result = plan(_idle_an_hour(snapshot(busy + members, nodes, fleet), "n0", "o0"), cfg, NOW)
    # Then a100's idle node is kept for the gang, and the retired group's is not
    touched = {a.node for a in (*result.cordon, *result.terminate)}
    assert "n0" not in touched
    assert "o0" in touched
