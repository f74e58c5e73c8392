"""Gangs of several shapes and elastic gangs: all-or-nothing as a whole, each member placed where
the scheduler would put it (free room of any node, booting capacity, new nodes of any group)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from shared.domain.model import NodeState, ScalerState, Snapshot
from shared.domain.plan import Outcome, ReasonCode
from shared.domain.provisioning import RequestOutcome
from shared.planner import plan
from tests.builders import NOW, a100_group, asg, config, node, pod, snapshot
from tests.builders_provisioning import pod_group, pod_template, provisioning_request, with_objects

A100, CPU = "research-a100", "research-cpu"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"
VOLCANO = "scheduling.k8s.io/group-name"


def _cpu_group() -> dict[str, Any]:
    """A CPU group (m6i.8xlarge-like nodes, untainted) beside the a100 group."""
    return {
        "name": "cpu",
        "asg_name": CPU,
        "allocatable": {"cpu": "31", "memory": "120Gi", "pods": "110"},
        "labels": {"node-role": "cpu"},
        "price_per_hour": 1.54,
        "max_size": 10,
    }


def _two_groups() -> Any:
    return config(node_groups=[a100_group(price_per_hour=32.77, max_size=16), _cpu_group()])


def _mpijob(name: str, workers: int, marker: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """An MPIJob (kubeflow.org/v2beta1) as mpi-operator creates its pods: a CPU launcher (no GPU,
    no GPU toleration) and GPU workers, all carrying the job's gang marker."""
    role = "training.kubeflow.org/job-role"
    launcher = pod(
        f"{name}-launcher",
        gpus=0,
        cpu="2",
        memory="4Gi",
        tolerations=[],
        owner_kind="MPIJob",
        labels={**marker.get("labels", {}), role: "launcher"},
        annotations=marker.get("annotations"),
    )
    return [launcher] + [
        pod(
            f"{name}-worker-{i}",
            gpus=8,
            owner_kind="MPIJob",
            labels={**marker.get("labels", {}), role: "worker"},
            annotations=marker.get("annotations"),
        )
        for i in range(workers)
    ]


def _full_a100(count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node(f"n{i}", f"i-{i}") for i in range(count)]
    busy = [pod(f"busy-{i}", gpus=8, node=f"n{i}") for i in range(count)]
    return busy, nodes


def test_mpijob_launcher_and_workers_land_in_different_groups() -> None:
    # Given an MPIJob with scheduler-plugins coscheduling: mpi-operator sets the PodGroup's minMember
    # to workers + 1 (the launcher), and a CPU launcher no GPU group admits (it has no GPU toleration)
    pods = _mpijob("mpi", 4, {"labels": {COSCHEDULING: "mpi"}})
    snap = with_objects(
        snapshot(pods, [], [asg(A100, desired=0), asg(CPU, desired=0)]), [pod_group("mpi", 5)]
    )
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then the whole gang has a place: 4 a100 nodes for the workers, 1 cpu node for the launcher
    assert result.group("a100").desired == 4
    assert result.group("cpu").desired == 1
    by_pod = {p.pod: p for p in result.pods}
    assert by_pod["research/mpi-launcher"].group == "cpu"
    assert {by_pod[f"research/mpi-worker-{i}"].group for i in range(4)} == {"a100"}
    assert all(p.outcome is Outcome.SCALE_UP for p in result.pods)


def test_launcher_uses_free_room_of_a_node_no_group_manages() -> None:
    # Given an MPIJob and a CPU system node with room that belongs to no managed group
    pods = _mpijob("mpi", 2, {"labels": {COSCHEDULING: "mpi"}})
    system = node("system-1", "i-sys", gpus=0, cpu="15", memory="60Gi", labels={"role": "system"}, taints=[])
    snap = with_objects(snapshot(pods, [system], [asg(A100, desired=0)]), [pod_group("mpi", 3)])
    # When planning with only the a100 group managed
    result = plan(snap, config(), NOW)
    # Then the launcher is counted on the system node and only the workers' nodes are bought
    by_pod = {p.pod: p for p in result.pods}
    assert by_pod["research/mpi-launcher"].outcome is Outcome.EXISTING
    assert "system-1" in by_pod["research/mpi-launcher"].reason
    assert result.group("a100").desired == 2


def test_mixed_gang_whose_workers_do_not_fit_buys_nothing_and_names_the_member() -> None:
    # Given an MPIJob of 4 workers + launcher, and a100 at 13 of max 16 (room for 3 workers)
    busy, nodes = _full_a100(13)
    pods = _mpijob("mpi", 4, {"labels": {COSCHEDULING: "mpi"}})
    a100 = asg(A100, desired=13, instances=[f"i-{i}" for i in range(13)])
    snap = with_objects(snapshot(busy + pods, nodes, [a100, asg(CPU, desired=0)]), [pod_group("mpi", 5)])
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then nothing is bought in either group (all or nothing holds across groups), and the reason
    # names the member shape that found no place
    assert result.group("a100").desired == 13
    assert result.group("cpu").desired == 0
    gang = [p for p in result.pods if p.pod.startswith("research/mpi")]
    assert {p.outcome for p in gang} == {Outcome.UNHELPED}
    assert {p.code for p in gang} == {ReasonCode.GANG_DOES_NOT_FIT}
    (reason,) = {p.reason for p in gang}
    assert reason.startswith(
        "gang research/mpi: nothing bought, pod research/mpi-worker-3 (8 GPUs) has no place"
    )
    assert "needs more a100 nodes for the gang's members than the group can add (3, max 16)" in reason


def test_kueue_pod_group_with_a_cpu_driver_and_gpu_executors() -> None:
    # Given a Kueue plain-pod group (kueue.x-k8s.io/pod-group-name, total count 3): a Spark-like
    # CPU driver and two GPU executors; Kueue admits the group only once all its pods exist
    marker = {
        "labels": {"kueue.x-k8s.io/pod-group-name": "spark", "kueue.x-k8s.io/managed": "true"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
    }
    driver = pod("spark-driver", gpus=0, cpu="4", memory="16Gi", tolerations=[], **marker)  # type: ignore[arg-type]
    executors = [pod(f"spark-exec-{i}", gpus=8, **marker) for i in range(2)]  # type: ignore[arg-type]
    # When planning
    result = plan(
        snapshot([driver, *executors], [], [asg(A100, desired=0), asg(CPU, desired=0)]), _two_groups(), NOW
    )
    # Then the driver gets a cpu node and the executors a100 nodes
    assert (result.group("a100").desired, result.group("cpu").desired) == (2, 1)


def test_kuberay_head_and_workers_through_volcano_group_name() -> None:
    # Given a KubeRay RayCluster under Volcano: KubeRay annotates its pods with
    # scheduling.k8s.io/group-name and makes a PodGroup whose minMember is the head + workers
    marker = {"annotations": {VOLCANO: "ray-demo-pg"}}
    head = pod("ray-head", gpus=0, cpu="8", memory="32Gi", tolerations=[], owner_kind="RayCluster", **marker)  # type: ignore[arg-type]
    workers = [pod(f"ray-worker-{i}", gpus=4, owner_kind="RayCluster", **marker) for i in range(2)]  # type: ignore[arg-type]
    snap = with_objects(
        snapshot([head, *workers], [], [asg(A100, desired=0), asg(CPU, desired=0)]),
        [pod_group("ray-demo-pg", 3, volcano=True)],
    )
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then the head lands on a cpu node, the two 4-GPU workers share one a100 node
    assert (result.group("a100").desired, result.group("cpu").desired) == (1, 1)


def test_elastic_volcano_gang_buys_every_replica_that_fits_beyond_its_minimum() -> None:
    # Given a Volcano PodGroup of minMember 2 with 4 replicas, and room for 3 more a100 nodes:
    # Volcano's gang plugin binds once minAvailable members are allocated (JobReady)
    busy, nodes = _full_a100(13)
    pods = [pod(f"w{i}", gpus=8, annotations={VOLCANO: "elastic"}) for i in range(4)]
    a100 = asg(A100, desired=13, instances=[f"i-{i}" for i in range(13)])
    snap = with_objects(snapshot(busy + pods, nodes, [a100]), [pod_group("elastic", 2, volcano=True)])
    # When planning
    result = plan(snap, config(), NOW)
    # Then 3 nodes are bought (the minimum and one more), the fourth replica says why it waits
    assert result.group("a100").desired == 16
    gang = sorted((p for p in result.pods if p.pod.startswith("research/w")), key=lambda p: p.pod)
    assert [p.outcome for p in gang].count(Outcome.SCALE_UP) == 3
    (left,) = [p for p in gang if p.outcome is Outcome.UNHELPED]
    assert left.reason.startswith(
        "gang research/elastic runs with its minimum; no place for this member beyond it"
    )
    assert left.code is ReasonCode.AT_MAX


def test_elastic_gang_whose_minimum_cannot_fit_buys_nothing_and_says_so() -> None:
    # Given a coscheduling PodGroup of minMember 3 with 5 replicas, and room for 2 more a100 nodes
    busy, nodes = _full_a100(14)
    pods = [pod(f"w{i}", gpus=8, labels={COSCHEDULING: "elastic"}) for i in range(5)]
    a100 = asg(A100, desired=14, instances=[f"i-{i}" for i in range(14)])
    snap = with_objects(snapshot(busy + pods, nodes, [a100]), [pod_group("elastic", 3)])
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought and the reason gives the minimum and the shortfall
    assert result.group("a100").desired == 14
    assert {p.reason for p in result.pods if p.pod.startswith("research/w")} == {
        "gang research/elastic (minimum 3 of 5 pending members): needs 3 a100 nodes, group can add 2 (max 16)"
    }


def test_elastic_minimum_counts_members_already_running() -> None:
    # Given a coscheduling PodGroup of minMember 2 with one member running and two pending, and room
    # for one more a100 node
    busy, nodes = _full_a100(14)
    label = {COSCHEDULING: "elastic"}
    running = pod("w0", gpus=8, labels=label, node="n14")
    pending = [pod(f"w{i}", gpus=8, labels=label) for i in (1, 2)]
    nodes.append(node("n14", "i-14"))
    a100 = asg(A100, desired=15, instances=[f"i-{i}" for i in range(15)])
    snap = with_objects(snapshot([*busy, running, *pending], nodes, [a100]), [pod_group("elastic", 2)])
    # When planning
    result = plan(snap, config(), NOW)
    # Then one node is bought: one pending member completes the minimum, the other waits
    assert result.group("a100").desired == 16
    outcomes = sorted(p.outcome.value for p in result.pods if p.pod in ("research/w1", "research/w2"))
    assert outcomes == sorted([Outcome.SCALE_UP.value, Outcome.UNHELPED.value])


def test_leaderworkerset_leader_and_workers_of_different_sizes_share_nodes_as_they_fit() -> None:
    # Given a LeaderWorkerSet group under Volcano (LWS annotates the leader and its workers with
    # scheduling.k8s.io/group-name; the PodGroup's minMember is the group size): a 4-GPU leader and
    # two 8-GPU workers, with one registered a100 node that has 4 GPUs free
    marker = {"annotations": {VOLCANO: "lws-0"}}
    lws = {"owner_kind": "LeaderWorkerSet"}
    leader = pod("lws-0", gpus=4, **marker, **lws)  # type: ignore[arg-type]
    workers = [pod(f"lws-0-{i}", gpus=8, **marker, **lws) for i in (1, 2)]  # type: ignore[arg-type]
    running = pod("other", gpus=4, node="n0")
    snap = with_objects(
        snapshot([running, leader, *workers], [node("n0", "i-0")], [asg(A100, desired=1, instances=["i-0"])]),
        [pod_group("lws-0", 3, volcano=True)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then the leader takes the free room and only the workers' two nodes are bought
    by_pod = {p.pod: p for p in result.pods}
    assert by_pod["research/lws-0"].outcome is Outcome.EXISTING
    assert result.group("a100").desired == 3


def test_provisioning_request_with_a_cpu_pod_set_beside_gpu_pod_sets_is_provisioned_across_groups() -> None:
    # Given a best-effort-atomic ProvisioningRequest (Kueue, one pod set per role): a CPU driver's
    # PodTemplate (no GPU, no GPU toleration) and 2 x 8-GPU workers; cluster-autoscaler provisions a
    # request when every pod of every pod set has a place
    driver = pod_template("driver", gpus=0)
    driver["template"]["spec"]["tolerations"] = []
    driver["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2", "memory": "8Gi"}
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0), asg(CPU, desired=0)]),
        [driver, pod_template("workers"), provisioning_request("spark", [("driver", 1), ("workers", 2)])],
    )
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then both groups grow and the request is provisioned, its answer naming both
    assert (result.group("a100").desired, result.group("cpu").desired) == (2, 1)
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.PROVISIONED
    assert answer.reason == "3 pod(s) on 2 new a100 node(s) and 1 new cpu node(s)"


def _idle_an_hour(snap: Snapshot, *names: str) -> Snapshot:
    return replace(
        snap, state=ScalerState(nodes={n: NodeState(idle_since=NOW - timedelta(hours=1)) for n in names})
    )


def _mpijob_at_a100(workers: int, desired: int) -> Snapshot:
    """An MPIJob of `workers` 8-GPU workers and a CPU launcher (coscheduling, minMember workers + 1),
    a100 at `desired` nodes of which n0 and n1 are idle for an hour and the rest busy, cpu at 0."""
    busy, nodes = _full_a100(desired)
    pods = _mpijob("mpi", workers, {"labels": {COSCHEDULING: "mpi"}}) + busy[2:]
    a100 = asg(A100, desired=desired, instances=[f"i-{i}" for i in range(desired)])
    snap = snapshot(pods, nodes, [a100, asg(CPU, desired=0)])
    return _idle_an_hour(with_objects(snap, [pod_group("mpi", workers + 1)]), "n0", "n1")


def test_mixed_gang_larger_than_its_group_ever_is_keeps_no_idle_node_for_it() -> None:
    # Given an MPIJob of 17 8-GPU workers and a CPU launcher (only the cpu group takes it), and two
    # a100 nodes idle for an hour: a100's max is 16, so its workers never all start
    snap = _mpijob_at_a100(17, 2)
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then nothing is bought, the gang says it needs more a100 nodes than the group's max size, and
    # the idle nodes are given back as for a uniform gang of 17
    assert result.group("a100").desired == 2 and result.group("cpu").desired == 0
    (reason,) = {p.reason for p in result.pods if p.pod.startswith("research/mpi")}
    assert reason.startswith("gang research/mpi: nothing bought, pod research/mpi-worker-")
    assert "has no place: needs 17 a100 nodes, more than the group's max size 16; cpu: " in reason
    assert "at max size with pods waiting for it" not in result.group("a100").reason
    assert [a.node for a in result.cordon] == ["n0"]  # one a run: max_scale_in_fraction


def test_mixed_gang_that_fits_its_group_at_max_size_keeps_the_idle_nodes_it_waits_for() -> None:
    # Given an MPIJob of 16 8-GPU workers and a CPU launcher, and a100 at its max size 16: n0 and n1
    # idle for an hour, the other 14 busy (once they end, the workers start; the launcher needs cpu)
    snap = _mpijob_at_a100(16, 16)
    # When planning
    result = plan(snap, _two_groups(), NOW)
    # Then nothing is bought, and both idle nodes are kept for the gang
    assert result.group("a100").desired == 16 and result.group("cpu").desired == 0
    assert "2 idle node(s) kept: at max size with pods waiting for it" in result.group("a100").reason
    assert result.cordon == () and result.terminate == ()
