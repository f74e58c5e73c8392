"""The at-max rule (shared/planner/scale_up/at_max.py, at_max_world.py) beside a Capacity Block,
beside gangs that run whole, for an elastic gang of several sizes, and for a member of a gang of
several shapes in a group below its max."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from shared.domain.model import Snapshot
from shared.domain.plan import Outcome, PodOutcome
from shared.formats.aws import capacity_reservation_from_json
from shared.formats.kubernetes import daemonset_from_json
from shared.planner import plan, simulation
from shared.planner.scale_up import at_max_world
from tests.builders import NOW, a100_group, asg, config, node, pod, snapshot
from tests.builders_provisioning import pod_group, with_objects
from tests.native import needs_sources
from tests.unit.test_aws_capacity import BLOCK_JSON, configured, group, reserved, zoned
from tests.unit.test_planner_gangs import _idle_an_hour, _kueue
from tests.unit.test_planner_mixed_gangs import _mpijob_at_a100, _two_groups
from tests.unit.test_planner_scheduler_model import daemonset

A100 = "research-a100"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"


def _beside_a_capacity_block(total: int, gang: int) -> tuple[Snapshot, Any]:
    """a100 at its max 2 in zone a (n0 idle an hour, n1 busy), and a group of max size 8 that
    launches only into a Capacity Block of `total` instances, all free; a gang of `gang` whole-node
    members both groups admit."""
    a100 = zoned(asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"]), "us-west-2a")
    block = zoned(asg("research-block", desired=0, max_size=8), "us-west-2a")
    cfg = configured(
        group("a100", 32.77, max_size=2),
        group("block", 98.0, max_size=8, capacity_reservation_ids=["cr-0123456789abcdef0"]),
    )
    members = [pod(f"g-{i}", gpus=8, **_kueue("g", gang)) for i in range(gang)]  # type: ignore[arg-type]
    snap = snapshot(
        [pod("busy", gpus=8, node="n1"), *members], [node("n0", "i-0"), node("n1", "i-1")], [a100, block]
    )
    capacity_block = {**BLOCK_JSON, "TotalInstanceCount": total, "AvailableInstanceCount": total}
    snap = reserved(capacity_reservation_from_json(capacity_block), snap, "research-block")
    return _idle_an_hour(snap, "n0"), cfg


def test_a_group_that_launches_only_into_a_capacity_block_never_grows_beyond_the_block_for_a_gang() -> None:
    # Given a gang of 5 whole-node members: a100 holds 2 at most, the block group 2 (its Capacity
    # Block has 2 instances, whatever its max size 8): 4 nodes, never 5
    snap, cfg = _beside_a_capacity_block(total=2, gang=5)
    # When planned
    result = plan(snap, cfg, NOW)
    # Then the gang never starts: a100's idle node is given back, not kept for as long as the block lasts
    assert [c.node for c in result.cordon] == ["n0"]
    (reason,) = {p.reason for p in result.pods if p.pod.startswith("research/g-")}
    assert "at the max sizes of a100 (2) and block (2 reserved)" in reason, reason
    assert "4 of the 5 members they must hold have a place" in reason, reason


def test_a_gang_a_capacity_block_can_hold_with_the_group_at_max_still_keeps_the_idle_node() -> None:
    # Given the same world with a Capacity Block of 3 instances: 2 + 3 nodes hold the gang of 5 once
    # the job on n1 ends
    snap, cfg = _beside_a_capacity_block(total=3, gang=5)
    # When planned
    result = plan(snap, cfg, NOW)
    # Then a100's idle node is kept for it
    assert result.cordon == () and result.terminate == ()


@needs_sources  # counts calls through a patched module function: the sources only
def test_the_nodes_of_gangs_that_run_whole_are_read_once_a_run_not_once_per_waiting_gang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a100 at its max 2 (both busy), three nodes of no group each running a member of gang r
    # (running whole, nothing of it pending), and three gangs of 3 whole-node members waiting: each
    # could start on a100's 2 nodes and one node of no group once the jobs end
    calls: list[int] = []
    real = at_max_world.existing_classes

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(at_max_world, "existing_classes", counted)
    running = [pod(f"r-{i}", gpus=8, node=f"u{i}", labels={COSCHEDULING: "r"}) for i in range(3)]
    waiting = [
        pod(f"{g}-{i}", gpus=8, **_kueue(g, 3))  # type: ignore[arg-type]
        for g in "abc"
        for i in range(3)
    ]
    # When planned
    waited = _waiting_beside_nodes_of_no_group(running, waiting)
    # Then each gang waits, judged able to start, and the registered nodes kept in their worlds were
    # classed once for all of them: gang r's nodes are emptied in every world alike, so no waiting
    # gang's world rebuilds them (with thousands of such nodes, once per gang was the 3 s plan the
    # shared room was built to avoid)
    assert len(waited) == 9 and {p.outcome for p in waited} == {Outcome.UNHELPED}
    assert not any("never starts" in p.reason or "more than" in p.reason for p in waited)
    assert len(calls) == 1


def _waiting_beside_nodes_of_no_group(on_them: list[Any], waiting: list[Any]) -> list[PodOutcome]:
    """The outcomes of the `waiting` pods (gangs a, b and c), planned with a100 at its max of 2 (n0
    and n1 busy) beside three registered nodes of no group (u0-u2) running `on_them`."""
    busy = [pod(f"busy-{i}", gpus=8, node=f"n{i}") for i in range(2)]
    nodes = [node(f"n{i}", f"i-{i}") for i in range(2)] + [node(f"u{i}", f"i-u{i}") for i in range(3)]
    fleet = [asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"])]
    cfg = config(node_groups=[a100_group(price_per_hour=32.77, max_size=2)])
    result = plan(snapshot(on_them + busy + waiting, nodes, fleet), cfg, NOW)
    return [p for p in result.pods if p.pod[len("research/") :][0] in "abc"]


def test_an_elastic_gang_is_not_said_to_need_more_nodes_than_its_smallest_members_do() -> None:
    # Given a100 at its max 1 (n0 busy) and a coscheduling gang of minMember 2 with three pending
    # members: g-0 asks 8 GPUs, g-1 and g-2 4 each. g-1 and g-2 alone are 2 members on one node
    members = [pod("g-0", gpus=8, labels={COSCHEDULING: "g"})]
    members += [pod(f"g-{i}", gpus=4, labels={COSCHEDULING: "g"}) for i in (1, 2)]
    fleet = [asg(A100, desired=1, max_size=1, instances=["i-0"])]
    snap = with_objects(
        snapshot([pod("busy", gpus=8, node="n0"), *members], [node("n0", "i-0")], fleet), [pod_group("g", 2)]
    )
    # When planned
    result = plan(snap, config(node_groups=[a100_group(price_per_hour=32.77, max_size=1)]), NOW)
    # Then whatever the verdict (first fit places g-0 first), the reason claims no node count that
    # does not hold in any order: 2 members need 1 node, not 2
    reasons = {p.reason for p in result.pods}
    assert not any("needs 2 a100 nodes" in reason for reason in reasons), reasons


def test_a_mixed_gangs_member_is_not_said_to_wait_for_a_group_at_its_max_when_the_group_is_below_it() -> None:
    # Given an MPIJob of 5 8-GPU workers and a CPU launcher, a100 at 14 nodes of its max 16 (n0 and
    # n1 idle, 12 busy): 2 idle and 2 new nodes hold 4 workers, the fifth has no place
    snap = _mpijob_at_a100(5, 14)
    # When planned
    result = plan(snap, _two_groups(), NOW)
    # Then the reason does not say a100 is at its max size (it can add 2), but what it lacks
    (reason,) = {p.reason for p in result.pods if p.pod.startswith("research/mpi")}
    assert "at max size 16" not in reason, reason
    assert "needs more a100 nodes for the gang's members than the group can add (2, max 16)" in reason


def test_a_group_whose_nodes_hold_no_member_after_its_daemonsets_keeps_no_idle_node_for_the_gang() -> None:
    # Given a100 at its max of 2 (n0 idle, n1 busy), a100-b at its max of 1 with b0 idle an hour, a
    # DaemonSet on a100-b's nodes only taking 10 of their 95 cpus, and a gang of two members of 8 GPUs
    # and 90 cpus: it starts on n0 and n1 once n1's job ends; a b0 holds no member (85 cpus left)
    cfg = config(
        node_groups=[
            a100_group(price_per_hour=32.77, max_size=2),
            a100_group(
                name="a100-b",
                asg_name="research-a100-b",
                price_per_hour=32.77,
                max_size=1,
                labels={"gpu": "a100", "pool": "b"},
            ),
        ]
    )
    agent = daemonset("b-agent", cpu="10")
    agent["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "b"}
    members = [pod(f"g-{i}", gpus=8, cpu="90", **_kueue("g", 2)) for i in range(2)]  # type: ignore[arg-type]
    fleet = [
        asg(A100, desired=2, max_size=2, instances=["i-0", "i-1"]),
        asg("research-a100-b", desired=1, max_size=1, instances=["i-b0"]),
    ]
    nodes = [node("n0", "i-0"), node("n1", "i-1"), node("b0", "i-b0", labels={"gpu": "a100", "pool": "b"})]
    on_b0 = pod("b-agent-b0", gpus=0, cpu="10", namespace="kube-system", node="b0", owner_kind="DaemonSet")
    snap = snapshot([pod("busy", gpus=8, node="n1"), on_b0, *members], nodes, fleet)
    snap = replace(_idle_an_hour(snap, "n0", "b0"), daemonsets=(daemonset_from_json(agent),))
    # When planned
    result = plan(snap, cfg, NOW)
    # Then a100's idle node is kept for the gang, and a100-b's is given back: it would be kept for
    # a gang none of whose members it can hold
    touched = {a.node for a in (*result.cordon, *result.terminate)}
    assert "n0" not in touched
    assert "b0" in touched


@needs_sources  # counts calls through a patched method: the sources only
def test_the_daemonset_pods_of_the_kept_nodes_are_indexed_once_a_run_not_once_per_waiting_gang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a100 at its max 2 (both busy), three nodes of no group each running a job and a
    # DaemonSet pod, and three gangs of 2 whole-node members kept apart (hostname anti-affinity):
    # each gang's world indexes the bound pods its members' rules read
    indexed: list[str] = []
    real = simulation.PodIndex.add

    def counted(self: simulation.PodIndex, bound: Any, node_name: str) -> None:
        indexed.append(bound.key)
        real(self, bound, node_name)

    monkeypatch.setattr(simulation.PodIndex, "add", counted)
    kept = [pod(f"job-{i}", gpus=8, node=f"u{i}") for i in range(3)] + [
        pod(f"ds-{i}", gpus=0, cpu="100m", node=f"u{i}", owner_kind="DaemonSet") for i in range(3)
    ]
    waiting = []
    for g in "abc":
        for i in range(2):
            member = pod(f"{g}-{i}", gpus=8, **_kueue(g, 2))  # type: ignore[arg-type]
            member["metadata"]["labels"]["job"] = g
            term = {"labelSelector": {"matchLabels": {"job": g}}, "topologyKey": "kubernetes.io/hostname"}
            member["spec"]["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
            waiting.append(member)
    # When planned
    waited = _waiting_beside_nodes_of_no_group(kept, waiting)
    # Then every gang waits, judged able to start, and each DaemonSet pod was indexed twice: by the
    # run's simulation, and once for every gang's world (thousands of kept nodes indexed again per
    # gang doubled the plan's time)
    assert len(waited) == 6 and {p.outcome for p in waited} == {Outcome.UNHELPED}
    assert not any("never starts" in p.reason or "more than" in p.reason for p in waited)
    assert sorted(k for k in indexed if "/ds-" in k) == sorted(2 * [f"research/ds-{i}" for i in range(3)])
