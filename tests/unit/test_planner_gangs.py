"""Gang markers (Kueue, Volcano, coscheduling, the configured label): whole gangs or nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.config import ScalerConfig
from shared.domain.model import GroupState, NodeState, ScalerState, Snapshot
from shared.domain.plan import Outcome, Plan, ReasonCode
from shared.planner import plan
from shared.planner.attrition import ATTRITION_TAINT_KEY
from shared.planner.gangs import pending_subject
from tests.builders import GPU_TAINT, NOW, a100_group, asg, config, iso, node, pod, snapshot
from tests.builders_provisioning import pod_group, with_objects

A100 = "research-a100"


def _kueue(name: str, total: int) -> dict[str, object]:
    return {
        "labels": {"kueue.x-k8s.io/pod-group-name": name, "kueue.x-k8s.io/managed": "true"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(total)},
    }


def _full_group(count: int) -> tuple[list[dict[str, object]], list[dict[str, object]], dict[str, object]]:
    """`count` registered a100 nodes, each busy with an 8-GPU pod: the group has no free room."""
    nodes = [node(f"n{i}", f"i-{i}") for i in range(count)]
    busy = [pod(f"busy-{i}", gpus=8, node=f"n{i}") for i in range(count)]
    return busy, nodes, asg(A100, desired=count, instances=[f"i-{i}" for i in range(count)])


def test_kueue_pod_group_that_cannot_fit_whole_buys_nothing_and_says_what_is_missing() -> None:
    # Given a Kueue pod group of four 8-GPU pods, and a100 at 13 of max 16 (room for 3 more nodes)
    pods = [pod(f"llm-4x8-{i}", gpus=8, **_kueue("llm-4x8", 4)) for i in range(4)]  # type: ignore[arg-type]
    busy, nodes, group = _full_group(13)
    # When planning
    result = plan(snapshot(busy + pods, nodes, [group]), config(), NOW)
    # Then nothing is bought, and every member says what the group lacks
    assert result.group("a100").desired == 13
    reasons = {p.reason for p in result.pods if p.pod.startswith("research/llm")}
    assert reasons == {"gang research/llm-4x8: needs 4 a100 nodes, group can add 3 (max 16)"}
    assert {p.code for p in result.pods} == {ReasonCode.GANG_DOES_NOT_FIT}


def test_volcano_group_is_bought_for_its_min_member_before_every_pod_exists() -> None:
    # Given a Volcano PodGroup of minMember 4 with only 2 of its pods created so far
    pods = [pod(f"w{i}", gpus=8, annotations={"scheduling.k8s.io/group-name": "llm"}) for i in range(2)]
    snap = with_objects(snapshot(pods, [], [asg(A100, desired=0)]), [pod_group("llm", 4, volcano=True)])
    # When planning
    result = plan(snap, config(), NOW)
    # Then nodes for the whole gang are bought (4, not 2), and only the real pods are reported
    assert result.group("a100").desired == 4
    assert sorted(p.pod for p in result.pods) == ["research/w0", "research/w1"]
    assert all(p.outcome is Outcome.SCALE_UP for p in result.pods)
    assert result.pod_memory.keys() <= {"research/w0", "research/w1"}


def test_volcano_group_that_does_not_fit_at_min_member_buys_nothing() -> None:
    # Given a Volcano PodGroup of minMember 5, 2 pods created, and a group that may add only 3 nodes
    pods = [pod(f"w{i}", gpus=8, annotations={"scheduling.k8s.io/group-name": "llm"}) for i in range(2)]
    busy, nodes, group = _full_group(13)
    snap = with_objects(snapshot(busy + pods, nodes, [group]), [pod_group("llm", 5, volcano=True)])
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought: the 2 pods alone would fit, the gang does not
    assert result.group("a100").desired == 13
    assert {p.reason for p in result.pods} == {
        "gang research/llm: needs 5 a100 nodes, group can add 3 (max 16)"
    }


def test_coscheduling_min_member_counts_members_that_run_already() -> None:
    # Given a coscheduling PodGroup of minMember 3: one member runs, one is pending
    label = {"scheduling.x-k8s.io/pod-group": "llm"}
    pods = [pod("w0", gpus=8, labels=label, node="n1"), pod("w1", gpus=8, labels=label)]
    snap = with_objects(
        snapshot(pods, [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])]), [pod_group("llm", 3)]
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then the two members still missing get nodes (the pending one and one not created yet)
    assert result.group("a100").desired == 3


def test_coscheduling_label_without_a_pod_group_is_the_pods_present() -> None:
    # Given three pods with the coscheduling label and no PodGroup listed
    label = {"scheduling.x-k8s.io/pod-group": "llm"}
    pods = [pod(f"w{i}", gpus=8, labels=label) for i in range(3)]
    # When planning
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), config(), NOW)
    # Then the gang is the three pods
    assert result.group("a100").desired == 3


def test_configured_gang_label_marks_a_gang() -> None:
    # Given a custom gang label and a gang of 2 that cannot fit in a group with room for 1
    pods = [pod(f"w{i}", gpus=8, labels={"team.example.com/gang": "g"}) for i in range(2)]
    cfg = config(policy={"gang_label": "team.example.com/gang"})
    busy, nodes, group = _full_group(15)
    # When planning
    result = plan(snapshot(busy + pods, nodes, [group]), cfg, NOW)
    # Then nothing is bought
    assert result.group("a100").desired == 15
    assert {p.code for p in result.pods} == {ReasonCode.GANG_DOES_NOT_FIT}


def test_kueue_total_count_that_is_not_a_number_falls_back_to_the_pods_present() -> None:
    # Given two Kueue pods whose total count annotation is garbage
    pods = [pod(f"w{i}", gpus=8, **_kueue("g", 0)) for i in range(2)]  # type: ignore[arg-type]
    for p in pods:
        p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "many"
    # When planning
    result = plan(snapshot(pods, [], [asg(A100, desired=0)]), config(), NOW)
    # Then the two pods are the gang
    assert result.group("a100").desired == 2


# How reasons name gangs and their stand-ins (members not created yet)


def test_group_reason_counts_the_whole_gang_with_its_members_not_created_yet() -> None:
    # Given a Kueue pod group of four 8-GPU pods with two created so far, and one plain 8-GPU pod
    gang = [pod(f"llm-4x8-{i}", gpus=8, **_kueue("llm-4x8", 4)) for i in range(2)]  # type: ignore[arg-type]
    result = plan(snapshot([*gang, pod("solo", gpus=8)], [], [asg(A100, desired=0)]), config(), NOW)
    # Then the group's reason names the gang with its full size, apart from the plain pod
    decision = result.group("a100")
    assert decision.desired == 5
    assert decision.reason.startswith(
        "+5 node(s) for 1 pending pod(s) (8 GPUs) and gang research/llm-4x8 (4 pods, 2 not created yet)"
    )
    # And no reason anywhere carries a stand-in's made-up name
    assert all(":" not in p.pod and ":member" not in p.reason for p in result.pods)


def test_group_reason_for_a_gang_alone() -> None:
    # Given only a Volcano gang of minMember 4 with 3 pods created
    pods = [pod(f"w{i}", gpus=8, annotations={"scheduling.k8s.io/group-name": "llm"}) for i in range(3)]
    snap = with_objects(snapshot(pods, [], [asg(A100, desired=0)]), [pod_group("llm", 4, volcano=True)])
    # When planning, Then the reason counts the gang, not its 3 real pods
    reason = plan(snap, config(), NOW).group("a100").reason
    assert reason.startswith("+4 node(s) for gang research/llm (4 pods, 1 not created yet)")
    assert "pending pod(s)" not in reason


def test_a_marked_node_kept_for_a_member_not_created_yet_names_the_gang() -> None:
    # Given two nodes marked NoSchedule for attrition with 4 free GPUs each, the rest full, and a
    # Kueue gang of two 4-GPU pods of which one exists
    mark = {"key": ATTRITION_TAINT_KEY, "effect": "NoSchedule"}
    nodes = [
        node("n1", "i-1", taints=[GPU_TAINT]),
        node("n2", "i-2", taints=[GPU_TAINT, mark]),
        node("n3", "i-3", taints=[GPU_TAINT, mark]),
    ]
    used = [
        pod("full", gpus=8, node="n1"),
        pod("half-2", gpus=4, node="n2"),
        pod("half-3", gpus=4, node="n3"),
    ]
    member = pod("llm-0", gpus=4, **_kueue("llm", 2))  # type: ignore[arg-type]
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": {"effect": "NoSchedule"}})
    group = asg(A100, desired=3, instances=["i-1", "i-2", "i-3"])
    # When planning
    result = plan(snapshot([*used, member], nodes, [group]), cfg, NOW)
    # Then both marks are lifted; the node kept for the missing member names its gang, not a stand-in
    reasons = sorted(m.reason for m in result.unmark)
    assert reasons == [
        "pending gang research/llm (a member not created yet) fits only here: the room is needed",
        "pending pod research/llm-0 fits only here: the room is needed",
    ]
    assert result.group("a100").desired == 3


def test_stand_ins_are_named_by_what_they_stand_for() -> None:
    # Given the keys of a real pod, a gang's missing member and a ProvisioningRequest's pod
    assert pending_subject("research/llm-0") == "pod research/llm-0"
    assert pending_subject("research/llm:member-1") == "gang research/llm (a member not created yet)"
    assert pending_subject("research/kueue-llm-2x8-prov:podset0-1") == (
        "provisioning request research/kueue-llm-2x8-prov"
    )


def test_a_node_uncordoned_for_a_gang_member_is_room_for_an_earlier_pod_too() -> None:
    # Given an idle node the scaler cordoned (n0), a node with 7 free GPUs (n1), a pending 1-GPU pod
    # and a gang of two 8-GPU pods
    cordoned = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=2))}
    gang = {"scheduling.x-k8s.io/pod-group": "g1"}
    pods = [pod("run-1", node="n1"), pod("small"), pod("big-0", gpus=8, labels=gang)]
    pods.append(pod("big-1", gpus=8, labels=gang))
    state = ScalerState(nodes={"n0": NodeState(NOW - timedelta(minutes=30))})

    def planned(n0: dict[str, object], desired: int) -> Plan:
        group = asg(A100, desired=desired, instances=["i-0", "i-1"])
        return plan(snapshot(pods, [n0, node("n1", "i-1")], [group], state), config(), NOW)

    first = planned(node("n0", "i-0", unschedulable=True, annotations=cordoned), 2)
    # Then n0 is uncordoned, and once schedulable it is the first fit of the small pod (as the
    # scheduler's LeastAllocated choice: the emptiest node), so the gang gets two new nodes
    assert [a.node for a in first.uncordon] == ["n0"]
    assert first.group("a100").desired == 4
    assert {p.pod: p.outcome for p in first.pods} == {
        "research/small": Outcome.EXISTING,
        "research/big-0": Outcome.SCALE_UP,
        "research/big-1": Outcome.SCALE_UP,
    }
    # And planning again once the plan is applied (n0 schedulable, desired 4) changes nothing
    second = planned(node("n0", "i-0"), 4)
    assert second.group("a100").desired == 4
    assert second.uncordon == () and second.cordon == () and second.terminate == ()


def test_a_gang_larger_than_the_group_ever_is_keeps_no_idle_node_for_it() -> None:
    # Given a Kueue pod group of seventeen 8-GPU pods (the group's max is 16), and two idle a100
    # nodes, idle for an hour
    pods = [pod(f"huge-{i}", gpus=8, **_kueue("huge", 17)) for i in range(17)]  # type: ignore[arg-type]
    nodes = [node("n0", "i-0"), node("n1", "i-1")]
    idle = ScalerState(nodes={n: NodeState(idle_since=NOW - timedelta(hours=1)) for n in ("n0", "n1")})
    snap = snapshot(pods, nodes, [asg(A100, desired=2, instances=["i-0", "i-1"])])
    # When planning
    result = plan(replace(snap, state=idle), config(), NOW)
    # Then the gang is told it can never fit, and the idle nodes are given back as usual (kept, they
    # would wait for a gang that no node of the group will ever start)
    reasons = {p.reason for p in result.pods}
    assert reasons == {"gang research/huge: needs 17 a100 nodes, more than the group's max size 16"}
    assert {p.code for p in result.pods} == {ReasonCode.GANG_DOES_NOT_FIT}
    assert "at max size with pods waiting for it" not in result.group("a100").reason
    assert result.cordon  # the first of them on its way out (one a run: max_scale_in_fraction)


def test_a_gang_member_nominated_by_preemption_is_present_not_stood_in_for() -> None:
    # Given a Kueue pod group of four 8-GPU pods: one nominated for n0, where the scheduler is
    # preempting a lower-priority pod, the other three pending
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 4)) for i in range(4)]  # type: ignore[arg-type]
    members[0] = pod("g-0", gpus=8, nominated="n0", **_kueue("g", 4))  # type: ignore[arg-type]
    victim = pod("victim", gpus=8, node="n0", priority=-5)
    snap = snapshot([victim, *members], [node("n0", "i-0")], [asg(A100, desired=1, instances=["i-0"])])
    # When planning
    result = plan(snap, config(), NOW)
    # Then three nodes are bought, for the three pending members: the nominated one has room on its way
    assert result.group("a100").desired == 4
    assert "not created yet" not in result.group("a100").reason


def test_succeeded_members_of_a_kueue_pod_group_count_and_a_failed_one_is_replaced() -> None:
    # Given a Kueue pod group of four: two running, one Succeeded, one Failed and its replacement
    # pending, with room for it on n2
    group = _kueue("kg", 4)
    pods = [
        pod("kg-0", gpus=8, node="n0", **group),  # type: ignore[arg-type]
        pod("kg-1", gpus=8, node="n1", **group),  # type: ignore[arg-type]
        pod("kg-2", gpus=8, node="n1", phase="Succeeded", **group),  # type: ignore[arg-type]
        pod("kg-3", gpus=8, node="n2", phase="Failed", **group),  # type: ignore[arg-type]
        pod("kg-3-retry", gpus=8, **group),  # type: ignore[arg-type]
    ]
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    snap = snapshot(pods, nodes, [asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])])
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought: the retry fits n2, and no stand-in is made for the member that finished
    assert result.group("a100").desired == 3
    (retry,) = [p for p in result.pods if p.pod.endswith("kg-3-retry")]
    assert str(retry.outcome) == "existing", retry.reason


@pytest.mark.parametrize("listed", [False, True], ids=["live-read", "dump"])
def test_a_volcano_gangs_finished_members_count_from_its_pod_group_status_once(listed: bool) -> None:
    # Given a Volcano gang of minMember 4: two running, one finished (the PodGroup's status.succeeded
    # says 1; a live read lists active pods only, a kubectl dump lists the Succeeded pod too) and one
    # pending, with room for it on n2
    marker = {"annotations": {"scheduling.k8s.io/group-name": "llm"}}
    pods = [
        pod("w0", gpus=8, node="n0", **marker),  # type: ignore[arg-type]
        pod("w1", gpus=8, node="n1", **marker),  # type: ignore[arg-type]
        pod("w3", gpus=8, **marker),  # type: ignore[arg-type]
    ]
    if listed:
        pods.append(pod("w2", gpus=8, node="n1", phase="Succeeded", **marker))  # type: ignore[arg-type]
    group = pod_group("llm", 4, volcano=True)
    group["status"] = {"phase": "Running", "running": 2, "succeeded": 1}
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    fleet = [asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])]
    snap = with_objects(snapshot(pods, nodes, fleet), [group])
    # When planning
    result = plan(snap, config(), NOW)
    # Then no stand-in is made for the finished member (whether listed or not), nothing is bought
    assert result.group("a100").desired == 3
    assert "not created yet" not in result.group("a100").reason


def test_a_gang_whose_members_need_a_running_pod_by_affinity_still_waits_for_its_group() -> None:
    # Given a gang of three 8-GPU members that must run in the zone of a running cache pod (required
    # pod affinity), a group at its max of 3 in that zone, one node busy, two idle for an hour
    zone = "topology.kubernetes.io/zone"
    cfg = config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 3}])
    nodes = [node(f"n{i}", f"i-{i}", labels={"gpu": "a100", zone: "us-west-2a"}) for i in range(3)]
    cache = pod("cache", gpus=0, node="n2")
    cache["metadata"]["labels"]["app"] = "cache"
    members = []
    for i in range(3):
        member = pod(f"g-{i}", gpus=8, **_kueue("g", 3))  # type: ignore[arg-type]
        term = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": zone}
        member["spec"]["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
        members.append(member)
    group = asg(A100, desired=3, max_size=3, instances=["i-0", "i-1", "i-2"])
    group["AvailabilityZones"] = ["us-west-2a"]
    snap = _idle_an_hour(
        snapshot([pod("busy", gpus=8, node="n2"), cache, *members], nodes, [group]), "n0", "n1"
    )
    # When planned
    result = plan(snap, cfg, NOW)
    # Then the gang could start once the busy node frees (the cache pod is outside the gang, which the
    # never-starts check does not hold): the idle nodes are kept for it, none given back
    assert not result.cordon and not result.terminate
    assert "2 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason


def _cache_world(members: list[dict[str, object]]) -> Snapshot:
    """A group at its max of 3 in one zone: n2 busy with a cache pod beside a job, n0 and n1 idle for
    an hour; the gang's `members` pending."""
    zone = "topology.kubernetes.io/zone"
    nodes = [node(f"n{i}", f"i-{i}", labels={"gpu": "a100", zone: "us-west-2a"}) for i in range(3)]
    cache = pod("cache", gpus=0, node="n2")
    cache["metadata"]["labels"]["app"] = "cache"
    group = asg(A100, desired=3, max_size=3, instances=["i-0", "i-1", "i-2"])
    group["AvailabilityZones"] = ["us-west-2a"]
    snap = snapshot([pod("busy", gpus=8, node="n2"), cache, *members], nodes, [group])
    return _idle_an_hour(snap, "n0", "n1")


def _member(i: int, total: int, gpus: int, **terms: dict[str, str]) -> dict[str, object]:
    """A member of Kueue gang g labelled app=g, with required pod (anti-)affinity terms: the
    keyword is "affinity" or "anti", the value a (topology key, app label) pair as a dict."""
    member = pod(f"g-{i}", gpus=gpus, **_kueue("g", total))  # type: ignore[arg-type]
    member["metadata"]["labels"]["app"] = "g"
    kinds = {"affinity": "podAffinity", "anti": "podAntiAffinity"}
    member["spec"]["affinity"] = {
        kinds[kind]: {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": term["app"]}}, "topologyKey": term["key"]}
            ]
        }
        for kind, term in terms.items()
    }
    return member


ZONE_TO_CACHE = {"key": "topology.kubernetes.io/zone", "app": "cache"}
APART = {"key": "kubernetes.io/hostname", "app": "g"}


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        # four whole-node members in the cache's zone: more nodes than the group may have
        (
            [_member(i, 4, 8, affinity=ZONE_TO_CACHE) for i in range(4)],
            "needs 4 a100 nodes, more than the group's max size 3",
        ),
        # four 1-GPU members in the cache's zone, each on a node of its own: four nodes again
        (
            [_member(i, 4, 1, affinity=ZONE_TO_CACHE, anti=APART) for i in range(4)],
            "node(s) didn't satisfy existing pods anti-affinity rules",
        ),
        # three whole-node members that must share one node (affinity to their own label by hostname)
        (
            [_member(i, 3, 8, affinity={"key": "kubernetes.io/hostname", "app": "g"}) for i in range(3)],
            "node(s) didn't match pod affinity rules",
        ),
    ],
    ids=["too-many-nodes", "apart-beyond-max", "together-beyond-a-node"],
)
def test_a_gang_with_pod_affinity_that_never_starts_gives_the_idle_nodes_back(
    members: list[dict[str, object]], reason: str
) -> None:
    # Given a gang that could never start in the group at its max size, whatever its affinity to the
    # running cache pod (counted as met: the empty world the check places it in holds no cache pod)
    # When planned
    result = plan(
        _cache_world(members), config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 3}]), NOW
    )
    # Then the group is not saturated by it: an idle node is cordoned to go, and the reason says why
    assert [c.node for c in result.cordon] == ["n0"]
    assert all(reason in p.reason for p in result.pods if "/g-" in p.pod)


def _apart(name: str, count: int) -> list[dict[str, object]]:
    """A Kueue pod group of `count` 1-GPU pods that must each run on a node of their own (required
    anti-affinity on the hostname against their own label): by requests one node holds them."""
    members = []
    for i in range(count):
        member = pod(f"{name}-{i}", gpus=1, **_kueue(name, count))  # type: ignore[arg-type]
        member["metadata"]["labels"]["job"] = name
        member["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"job": name}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
        members.append(member)
    return members


def _idle_an_hour(snap: Snapshot, *names: str) -> Snapshot:
    return replace(
        snap, state=ScalerState(nodes={n: NodeState(idle_since=NOW - timedelta(hours=1)) for n in names})
    )


def test_a_gang_whose_members_keep_apart_and_cannot_all_fit_buys_nothing_and_says_why() -> None:
    # Given a Kueue pod group of three 1-GPU pods that must each run on a node of their own, and
    # a100 at 0 with max 2: by requests one node would hold them, by their rule they need three
    cfg = config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 2}])
    # When planning (a rolled-back attempt once left nodes of removed bins behind: IndexError)
    result = plan(snapshot(_apart("g1", 3), [], [asg(A100, desired=0, max_size=2)]), cfg, NOW)
    # Then nothing is bought and the reason says the gang never starts in a100, naming the rule
    assert result.group("a100").desired == 0
    reasons = {p.reason for p in result.pods}
    assert reasons == {
        "gang research/g1: never starts in a100: its members' own rules keep them apart (node(s) didn't"
        " satisfy existing pods anti-affinity rules); at the group's max size 2, every node empty, 2 of the"
        " 3 members it must hold have a place"
    }
    assert {p.code for p in result.pods} == {ReasonCode.GANG_DOES_NOT_FIT}


def test_a_gang_whose_members_keep_apart_beyond_the_groups_max_keeps_no_idle_node_for_it() -> None:
    # Given three members that must each have a node of their own, and a100 at its max size 2: two
    # nodes, idle for an hour (by requests the gang fits one node; by its rule it never starts)
    cfg = config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 2}])
    group = asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])
    snap = snapshot(_apart("g1", 3), [node("n0", "i-0"), node("n1", "i-1")], [group])
    # When planning
    result = plan(_idle_an_hour(snap, "n0", "n1"), cfg, NOW)
    # Then the gang is told it never starts in a100, and the idle nodes are given back as usual
    # (kept, they would wait forever for a gang no node of the group will ever start)
    (reason,) = {p.reason for p in result.pods}
    assert reason.startswith("gang research/g1: never starts in a100: its members' own rules keep them apart")
    assert "at max size with pods waiting for it" not in result.group("a100").reason
    assert [a.node for a in result.cordon] == ["n0"]  # one a run: max_scale_in_fraction


def test_a_gang_that_fits_the_group_at_its_max_size_keeps_the_idle_nodes_it_waits_for() -> None:
    # Given three members that must each have a node of their own, and a100 at its max size 3: two
    # nodes idle for an hour, the third busy with an 8-GPU job (once it ends, the gang starts)
    cfg = config(node_groups=[{**a100_group(price_per_hour=32.77), "max_size": 3}])
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    pods = [pod("busy", gpus=8, node="n2"), *_apart("g1", 3)]
    group = asg(A100, desired=3, max_size=3, instances=["i-0", "i-1", "i-2"])
    # When planning
    result = plan(_idle_an_hour(snapshot(pods, nodes, [group]), "n0", "n1"), cfg, NOW)
    # Then nothing is bought and both idle nodes are kept for the gang
    assert result.group("a100").desired == 3
    assert "2 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason
    assert result.cordon == () and result.terminate == ()
    assert {p.code for p in result.pods if p.pod.startswith("research/g1")} == {ReasonCode.GANG_DOES_NOT_FIT}


def two_a100_groups_of_two() -> ScalerConfig:
    """Two a100 groups of at most 2 nodes each (one per zone in the tests that use it)."""
    groups = [
        a100_group(name=f"a100-{z}", asg_name=f"research-a100-{z}", price_per_hour=32.77, max_size=2)
        for z in ("a", "b")
    ]
    return config(node_groups=groups)


def two_a100_groups_at_max(members: list[dict[str, Any]]) -> Snapshot:
    """a100-a (zone a) and a100-b (zone b), each at its max of 2 with a busy and an idle node (an
    hour): a0 and b0 idle, a1 and b1 busy with an 8-GPU job."""
    a = asg("research-a100-a", desired=2, max_size=2, instances=["i-a0", "i-a1"])
    b = asg("research-a100-b", desired=2, max_size=2, instances=["i-b0", "i-b1"])
    for instance in b["Instances"]:
        instance["AvailabilityZone"] = "us-west-2b"
    nodes = [node("a0", "i-a0"), node("a1", "i-a1")]
    nodes += [node("b0", "i-b0", zone="us-west-2b"), node("b1", "i-b1", zone="us-west-2b")]
    busy = [pod("busy-a", gpus=8, node="a1"), pod("busy-b", gpus=8, node="b1")]
    return _idle_an_hour(snapshot(busy + members, nodes, [a, b]), "a0", "b0")


def test_a_gang_two_groups_start_together_keeps_the_idle_node_of_each() -> None:
    # Given two a100 groups of at most 2 nodes (one per zone), each at its max with a busy and an idle
    # node, and a gang of 4 whole-node members: from zero the planner buys 2 in each
    cfg = two_a100_groups_of_two()
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 4)) for i in range(4)]  # type: ignore[arg-type]
    snap = two_a100_groups_at_max(members)
    # When planned
    result = plan(snap, cfg, NOW)
    # Then neither group is judged alone (the gang starts across both once the jobs end): no idle
    # node is given back only to be bought again
    assert not result.cordon and not result.terminate


def test_a_group_at_max_in_capacity_backoff_keeps_its_idle_nodes_for_a_gang_that_fits() -> None:
    # Given a gang of 3 whole-node members, its group at its max of 3 (two idle nodes, one busy) and in
    # capacity backoff (a launch failed earlier): at its max the group needs no launch for the gang
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", 3)) for i in range(3)]  # type: ignore[arg-type]
    nodes = [node(f"n{i}", f"i-{i}") for i in range(3)]
    group = asg(A100, desired=3, max_size=3, instances=["i-0", "i-1", "i-2"])
    snap = _idle_an_hour(snapshot([pod("busy", gpus=8, node="n2"), *members], nodes, [group]), "n0", "n1")
    backoff = ScalerState(
        nodes=snap.state.nodes, groups={"a100": GroupState(backoff_until=NOW + timedelta(minutes=20))}
    )
    # When planned
    result = plan(
        replace(snap, state=backoff), config(node_groups=[a100_group(price_per_hour=32.77, max_size=3)]), NOW
    )
    # Then the idle nodes stay for it, backoff or not
    assert not result.cordon and not result.terminate
    assert "2 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason


@pytest.mark.parametrize(("max_size", "kept"), [(3, False), (4, True)])
def test_a_gangs_running_members_keep_their_nodes_in_the_at_max_check(max_size: int, kept: bool) -> None:
    # Given a coscheduling gang of 4 whole-node members, two running on n0 and n1 (a third was lost
    # with its node), two pending; n2 idle for an hour, and with max 4 a fourth node busy with a job
    mark = {"scheduling.x-k8s.io/pod-group": "g"}
    members = [pod(f"g-{i}", gpus=8, node=f"n{i}", labels=dict(mark)) for i in range(2)]
    members += [pod(f"g-{i}", gpus=8, labels=dict(mark)) for i in range(2, 4)]
    nodes = [node(f"n{i}", f"i-{i}") for i in range(max_size)]
    busy = [pod("busy", gpus=8, node="n3")] if max_size == 4 else []
    group = asg(A100, desired=max_size, max_size=max_size, instances=[f"i-{i}" for i in range(max_size)])
    snap = with_objects(snapshot(members + busy, nodes, [group]), [pod_group("g", 4)])
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=max_size)])
    # When planned
    result = plan(_idle_an_hour(snap, "n2"), cfg, NOW)
    # Then with max 3 the two pending members can never have a place beside the two running (n2 goes);
    # with max 4 they can once the job on n3 ends (n2 is kept for them)
    assert bool(result.cordon) is not kept
    if not kept:
        reasons = {p.reason for p in result.pods if p.pod in ("research/g-2", "research/g-3")}
        assert reasons == {
            "gang research/g: needs 2 a100 nodes beside the 2 its running members hold, more than the"
            " group's max size 3"
        }
