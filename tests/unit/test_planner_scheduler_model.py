"""The planner decides like kube-scheduler: template nodes that match real nodes, the scheduler's
filters on every node, and the scheduler as the ground truth. One test per failure the issue found
on real-format inputs."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import timedelta
from typing import Any

from shared.domain.model import InstanceType, PodMemory, ScalerState, Snapshot
from shared.domain.plan import Outcome, Plan, ReasonCode
from shared.domain.resources import Resources
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import (
    daemonset_from_json,
    pod_from_json,
    pv_from_json,
    pvc_from_json,
    storage_class_from_json,
)
from shared.planner import plan
from tests.builders import GPU_TAINT, GPU_TOLERATION, NOW, asg, config, node, pod, snapshot

GIB = 2**30


def daemonset(name: str, *, cpu: str, memory: str = "100Mi", host_port: int | None = None) -> dict[str, Any]:
    """An apps/v1 DaemonSet as `kubectl get ds -o json` shows it, tolerating every taint."""
    container: dict[str, Any] = {
        "name": name,
        "image": f"{name}:1",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    if host_port:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-{name}"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "tolerations": [{"operator": "Exists"}]},
            },
        },
    }


def with_spec(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The pod with extra spec fields (podAntiAffinity, topologySpreadConstraints, volumes, ...)."""
    obj["spec"].update(fields)
    return obj


def outcome(result: Plan, name: str) -> tuple[str, str | None, ReasonCode, str]:
    found = next(p for p in result.pods if p.pod.endswith(f"/{name}"))
    return str(found.outcome), found.group, found.code, found.reason


def p4d_group(**extra: Any) -> dict[str, Any]:
    group = {
        "name": "a100",
        "asg_name": "research-a100",
        "instance_type": "p4d.24xlarge",
        "labels": {"gpu": "a100"},
        "taints": [GPU_TAINT],
        "price_per_hour": 32.77,
        "max_size": 16,
    }
    group.update(extra)
    return group


P4D = InstanceType(
    "p4d.24xlarge",
    Resources.of({"cpu": 96_000, "memory": 1152 * GIB, "nvidia.com/gpu": 8, "pods": 737}),
    "amd64",
)


def with_objects(snap: Snapshot, **objects: Any) -> Snapshot:
    return replace(snap, **objects)


# ---------------------------------------------------------------------------- template nodes


def test_a_pod_that_fits_the_shape_but_not_what_daemonsets_leave_buys_nothing() -> None:
    # Given a p4d group known only by its instance type, and DaemonSets taking 515m cpu per node
    cfg = config(node_groups=[p4d_group()])
    daemonsets = (
        daemonset_from_json(daemonset("aws-node", cpu="25m")),
        daemonset_from_json(daemonset("dcgm", cpu="490m")),
    )
    snap = snapshot([pod("big", gpus=8, cpu="95500m", memory="900Gi")], [], [asg("research-a100", desired=0)])
    snap = with_objects(snap, instance_types={"p4d.24xlarge": P4D}, daemonsets=daemonsets)
    # When the planner plans
    result = plan(snap, cfg, NOW)
    # Then no node is bought and the reason says what takes the room
    assert result.group("a100").desired == 0
    state, group, code, reason = outcome(result, "big")
    assert (state, group, code) == ("unhelped", None, ReasonCode.DAEMONSET_OVERHEAD)
    assert "2 DaemonSet(s) need 515m cpu on every a100 node" in reason


def test_the_kubelet_reservation_of_the_eks_ami_shrinks_a_scale_from_zero_node() -> None:
    # Given a pod asking for all 96 vCPUs of a p4d.24xlarge, and no node of the group yet
    cfg = config(node_groups=[p4d_group()])
    snap = snapshot([pod("all-cpus", gpus=8, cpu="96")], [], [asg("research-a100", desired=0)])
    result = plan(with_objects(snap, instance_types={"p4d.24xlarge": P4D}), cfg, NOW)
    # Then it is larger than a node: the AMI keeps 310m cpu for the kubelet (6/1/0.5/0.5/0.25% tiers)
    state, _, code, reason = outcome(result, "all-cpus")
    assert (state, code) == ("unhelped", ReasonCode.TOO_LARGE)
    assert "EKS AMI reservation" in reason
    assert result.group("a100").desired == 0


def test_eight_pods_of_an_eighth_of_the_cpu_plus_daemonsets_need_two_nodes() -> None:
    # Given 95-cpu nodes, a DaemonSet of 1 cpu, and 8 one-GPU pods of 95/8 cpu each
    cfg = config()
    pods = [pod(f"p{i}", gpus=1, cpu="11875m", memory="100Gi") for i in range(8)]
    snap = with_objects(
        snapshot(pods, [], [asg("research-a100", desired=0)]),
        daemonsets=(daemonset_from_json(daemonset("agent", cpu="1")),),
    )
    # When the planner plans
    result = plan(snap, cfg, NOW)
    # Then two nodes are bought: one node holds 7 of them once the DaemonSet runs
    assert result.group("a100").desired == 2


def test_the_smallest_registered_node_gives_the_template_its_allocatable() -> None:
    # Given no allocatable in config, and registered nodes advertising 90 and 92 cpu
    cfg = config(node_groups=[p4d_group()])
    nodes = [node("n1", "i-1", cpu="92"), node("n2", "i-2", cpu="90")]
    busy = [pod(f"run{i}", gpus=8, cpu="1", node=f"n{i}") for i in (1, 2)]
    pending = [pod("wide", gpus=8, cpu="91")]
    snap = snapshot([*busy, *pending], nodes, [asg("research-a100", desired=2, instances=["i-1", "i-2"])])
    result = plan(with_objects(snap, instance_types={"p4d.24xlarge": P4D}), cfg, NOW)
    # Then a 91-cpu pod is larger than a new node would be
    assert outcome(result, "wide")[2] is ReasonCode.TOO_LARGE
    assert result.group("a100").desired == 2


def test_a_label_every_registered_node_shares_is_on_the_template() -> None:
    # Given nodes labelled by GPU feature discovery, a label the config does not list
    product = {"gpu": "a100", "nvidia.com/gpu.product": "A100-SXM4-40GB"}
    nodes = [node(f"n{i}", f"i-{i}", labels=product) for i in (1, 2)]
    busy = [pod(f"run{i}", gpus=8, node=f"n{i}") for i in (1, 2)]
    pending = [pod("picky", node_selector={"nvidia.com/gpu.product": "A100-SXM4-40GB"})]
    snap = snapshot([*busy, *pending], nodes, [asg("research-a100", desired=2, instances=["i-1", "i-2"])])
    # When the planner plans
    result = plan(snap, config(), NOW)
    # Then a new node of the group is bought for it
    assert outcome(result, "picky")[:2] == ("scale-up", "a100")
    assert result.group("a100").desired == 3


def test_cluster_autoscaler_node_template_tags_label_and_taint_the_template() -> None:
    # Given an ASG set up for cluster-autoscaler: a label tag and a taint tag
    group = asg("research-a100", desired=0)
    group["Tags"] += [
        {"Key": "k8s.io/cluster-autoscaler/node-template/label/team", "Value": "vision"},
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/dedicated", "Value": "vision:NoSchedule"},
    ]
    tolerant = pod(
        "vision",
        node_selector={"team": "vision"},
        tolerations=[GPU_TOLERATION, {"key": "dedicated", "operator": "Equal", "value": "vision"}],
    )
    intolerant = pod("other", node_selector={"team": "vision"})
    result = plan(snapshot([tolerant, intolerant], [], [group]), config(), NOW)
    # Then the label admits one pod, and the taint keeps out the one that does not tolerate it
    assert outcome(result, "vision")[:2] == ("scale-up", "a100")
    state, _, code, reason = outcome(result, "other")
    assert (state, code) == ("unhelped", ReasonCode.NO_MATCHING_GROUP)
    assert "untolerated taint {dedicated: vision}" in reason


def test_a_single_zone_group_carries_its_zone_label() -> None:
    # Given a group whose ASG has one zone, and a pod selecting that zone
    group = asg("research-a100", desired=0)
    group["AvailabilityZones"] = ["us-west-2b"]
    zoned = pod("zoned", node_selector={"topology.kubernetes.io/zone": "us-west-2b"})
    result = plan(snapshot([zoned], [], [group]), config(), NOW)
    assert outcome(result, "zoned")[:2] == ("scale-up", "a100")


# ---------------------------------------------------------------------------- filters


def _anti_affinity(app: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }


def test_required_anti_affinity_keeps_a_pod_off_the_free_room_beside_its_sibling() -> None:
    # Given a node running one worker of app=ps with room for another, and a second ps worker pending
    nodes = [node("n1", "i-1")]
    running = with_spec(pod("ps-0", gpus=1, labels={"app": "ps"}, node="n1"), affinity=_anti_affinity("ps"))
    pending = with_spec(pod("ps-1", gpus=1, labels={"app": "ps"}), affinity=_anti_affinity("ps"))
    snap = snapshot([running, pending], nodes, [asg("research-a100", desired=1, instances=["i-1"])])
    # When the planner plans
    result = plan(snap, config(), NOW)
    # Then the free room of n1 is not counted: a new node is bought
    assert outcome(result, "ps-1")[:2] == ("scale-up", "a100")
    assert result.group("a100").desired == 2


def test_pods_placed_earlier_in_the_run_count_for_anti_affinity() -> None:
    # Given three pending pods of one app with hostname anti-affinity and an empty group
    pending = [
        with_spec(pod(f"w{i}", gpus=1, labels={"app": "w"}), affinity=_anti_affinity("w")) for i in range(3)
    ]
    result = plan(snapshot(pending, [], [asg("research-a100", desired=0)]), config(), NOW)
    # Then each needs its own node, though one node has room for all three
    assert result.group("a100").desired == 3


def test_a_taken_host_port_rules_the_node_out() -> None:
    # Given n1 runs a pod bound to hostPort 9000, and a pending pod wants the same port
    ports = [
        {
            "name": "main",
            "image": "x",
            "ports": [{"containerPort": 9000, "hostPort": 9000}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
        }
    ]
    running = with_spec(pod("exporter", node="n1"), containers=ports)
    pending = with_spec(pod("exporter-2"), containers=ports)
    snap = snapshot(
        [running, pending], [node("n1", "i-1")], [asg("research-a100", desired=1, instances=["i-1"])]
    )
    result = plan(snap, config(), NOW)
    # Then it needs a new node
    assert outcome(result, "exporter-2")[:2] == ("scale-up", "a100")


def test_zone_spread_is_refused_by_a_group_that_cannot_guarantee_a_zone() -> None:
    # Given a pod with a DoNotSchedule zone spread and a multi-zone group (its template has no zone)
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    pending = with_spec(pod("spread"), topologySpreadConstraints=spread)
    group = asg("research-a100", desired=0)
    group["AvailabilityZones"] = ["us-west-2a", "us-west-2b"]
    result = plan(snapshot([pending], [], [group]), config(), NOW)
    # Then nothing is bought and the reason is the scheduler's
    state, _, code, reason = outcome(result, "spread")
    assert (state, code) == ("unhelped", ReasonCode.FILTERED)
    assert "missing required label" in reason
    assert result.group("a100").desired == 0


def _zonal_claim_objects(zone: str) -> dict[str, Any]:
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "ckpt", "namespace": "research"},
        "spec": {"volumeName": "pv-ckpt", "storageClassName": "gp3"},
        "status": {"phase": "Bound"},
    }
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-ckpt"},
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
                            ]
                        }
                    ]
                }
            }
        },
    }
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    return {
        "pvcs": (pvc_from_json(pvc),),
        "pvs": (pv_from_json(pv),),
        "storage_classes": (storage_class_from_json(sc),),
    }


def test_a_volume_bound_to_one_zone_is_not_placed_on_a_node_in_another() -> None:
    # Given free room on a node in us-west-2a, and a pod whose bound PV lives in us-west-2b
    nodes = [node("n1", "i-1", labels={"gpu": "a100", "topology.kubernetes.io/zone": "us-west-2a"})]
    pending = with_spec(
        pod("resume"), volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    )
    zone_a = asg("research-a100", desired=1, instances=["i-1"])
    zone_a["AvailabilityZones"] = ["us-west-2a"]
    snap = with_objects(snapshot([pending], nodes, [zone_a]), **_zonal_claim_objects("us-west-2b"))
    result = plan(snap, config(), NOW)
    # Then neither the free room nor a new node of the 2a group is counted for it
    state, _, code, reason = outcome(result, "resume")
    assert (state, code) == ("unhelped", ReasonCode.FILTERED)
    assert "volume node affinity conflict" in reason
    assert "n1" in {a.node for a in result.cordon} or result.group("a100").desired == 1


def test_a_volume_bound_to_one_zone_is_served_by_the_group_of_that_zone() -> None:
    cfg = config(
        node_groups=[
            {
                "name": "a100-2a",
                "asg_name": "a100-2a",
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"},
                "taints": [GPU_TAINT],
                "price_per_hour": 30.0,
            },
            {
                "name": "a100-2b",
                "asg_name": "a100-2b",
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8"},
                "taints": [GPU_TAINT],
                "price_per_hour": 33.0,
            },
        ]
    )
    groups = []
    for zone in ("a", "b"):
        group = asg(f"a100-2{zone}", desired=0)
        group["AvailabilityZones"] = [f"us-west-2{zone}"]
        groups.append(group)
    pending = with_spec(
        pod("resume"), volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    )
    snap = with_objects(snapshot([pending], [], groups), **_zonal_claim_objects("us-west-2b"))
    result = plan(snap, cfg, NOW)
    # Then the more expensive group of the volume's zone grows, not the cheaper one
    assert outcome(result, "resume")[:2] == ("scale-up", "a100-2b")


def test_a_missing_claim_and_a_dra_claim_are_left_to_the_scheduler() -> None:
    missing = with_spec(
        pod("lost"), volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "nope"}}]
    )
    dra = with_spec(pod("dra"), resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}])
    result = plan(snapshot([missing, dra], [], [asg("research-a100", desired=0)]), config(), NOW)
    assert outcome(result, "lost")[2] is ReasonCode.UNVERIFIABLE
    assert 'persistentvolumeclaim "nope" not found' in outcome(result, "lost")[3]
    assert outcome(result, "dra")[2] is ReasonCode.UNVERIFIABLE
    assert result.group("a100").desired == 0


# ---------------------------------------------------------------------------- in flight, priorities


def test_a_nominated_pod_triggers_no_scale_up() -> None:
    preemptor = pod("urgent", gpus=8)
    preemptor["status"]["nominatedNodeName"] = "n1"
    victims = [pod("victim", gpus=8, node="n1", priority=-5)]
    snap = snapshot(
        [preemptor, *victims], [node("n1", "i-1")], [asg("research-a100", desired=1, instances=["i-1"])]
    )
    result = plan(snap, config(), NOW)
    assert outcome(result, "urgent")[2] is ReasonCode.NOMINATED
    assert result.group("a100").desired == 1


def test_a_node_with_a_startup_taint_is_in_flight_not_a_reason_to_buy() -> None:
    # Given a ready node still tainted by the Cilium agent, and a pod that would fit it
    taints = [GPU_TAINT, {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}]
    fresh = node("n1", "i-1", taints=taints, created=NOW - timedelta(minutes=2))
    snap = snapshot([pod("waiting")], [fresh], [asg("research-a100", desired=1, instances=["i-1"])])
    result = plan(snap, config(), NOW)
    assert outcome(result, "waiting")[:2] == ("in-flight", "a100")
    assert result.group("a100").desired == 1


def test_expendable_pods_neither_buy_nodes_nor_keep_them() -> None:
    # Given a node idle for an hour but for a priority -20 pod, and a pending priority -20 pod
    idle = node("n1", "i-1")
    filler = pod("filler", node="n1", priority=-20)
    waiting = pod("backfill", priority=-20)
    state = ScalerState()
    from shared.domain.model import NodeState

    state = ScalerState(nodes={"n1": NodeState(idle_since=NOW - timedelta(hours=1))})
    snap = snapshot([filler, waiting], [idle], [asg("research-a100", desired=1, instances=["i-1"])], state)
    result = plan(snap, config(), NOW)
    assert outcome(result, "backfill")[2] is ReasonCode.BELOW_PRIORITY_CUTOFF
    assert [a.node for a in result.cordon] == ["n1"]


def test_a_pod_too_large_for_every_node_does_not_block_scale_down_of_a_group_at_max() -> None:
    # Given a group at max size with one idle node, and a 16-GPU pod no node can hold
    from shared.domain.model import NodeState

    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    busy = pod("run", gpus=8, node="n2")
    huge = pod("huge", gpus=16)
    state = ScalerState(nodes={"n1": NodeState(idle_since=NOW - timedelta(hours=1))})
    group = asg("research-a100", desired=2, max_size=2, instances=["i-1", "i-2"])
    result = plan(snapshot([busy, huge], nodes, [group], state), config(), NOW)
    assert outcome(result, "huge")[2] is ReasonCode.TOO_LARGE
    assert [a.node for a in result.cordon] == ["n1"]


# ---------------------------------------------------------------------------- ground truth


def _counted_since(minutes: int, **extra: Any) -> ScalerState:
    memory = PodMemory(
        uid="uid-research-stuck", counted_on="n1", counted_since=NOW - timedelta(minutes=minutes), **extra
    )
    return ScalerState(pods={"research/stuck": memory})


def test_a_fit_the_scheduler_did_not_use_within_its_retry_period_is_a_model_error() -> None:
    # Given n1 has room by the planner's model, and the pod has been counted there for 6 minutes
    nodes = [node("n1", "i-1")]
    snap = snapshot(
        [pod("stuck")], nodes, [asg("research-a100", desired=1, instances=["i-1"])], _counted_since(6)
    )
    # When the planner plans
    result = plan(snap, config(), NOW)
    # Then the fit is reported as a model error and no longer trusted: a node is bought instead
    assert [(e.pod, e.node) for e in result.model_errors] == [("research/stuck", "n1")]
    assert outcome(result, "stuck")[:2] == ("scale-up", "a100")
    memory = result.pod_memory["research/stuck"]
    assert memory.distrusted == ("n1",) and "a100" in memory.bought


def test_a_fit_within_the_retry_period_is_still_counted_and_its_start_kept() -> None:
    snap = snapshot(
        [pod("stuck")],
        [node("n1", "i-1")],
        [asg("research-a100", desired=1, instances=["i-1"])],
        _counted_since(2),
    )
    result = plan(snap, config(), NOW)
    assert outcome(result, "stuck")[:2] == ("existing", "a100")
    assert result.model_errors == ()
    assert result.pod_memory["research/stuck"].counted_since == NOW - timedelta(minutes=2)


def test_capacity_bought_for_a_pod_the_scheduler_still_refuses_is_not_bought_again() -> None:
    # Given the scaler bought a node for the pod 20 minutes ago, the node registered 15 minutes ago,
    # and the planner has counted the pod on it for 10 minutes while the scheduler kept refusing it
    bought = {"a100": NOW - timedelta(minutes=20)}
    fresh = node("n1", "i-1", created=NOW - timedelta(minutes=15))
    stuck = pod("stuck")
    stuck["status"]["conditions"][0]["message"] = (
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict."
    )
    snap = snapshot(
        [stuck],
        [fresh],
        [asg("research-a100", desired=1, instances=["i-1"])],
        _counted_since(10, bought=bought),
    )
    # When the planner plans
    result = plan(snap, config(), NOW)
    # Then it buys nothing more, and says why in the scheduler's own words
    assert result.group("a100").desired == 1
    state, _, code, reason = outcome(result, "stuck")
    assert (state, code) == ("unhelped", ReasonCode.SCHEDULER_REJECTED)
    assert "volume node affinity conflict" in reason
    refused_until = result.pod_memory["research/stuck"].refused["a100"]
    assert refused_until > NOW
    # And the next run, with that memory, still buys nothing
    again = plan(
        replace(snap, state=ScalerState(pods=dict(result.pod_memory))), config(), NOW + timedelta(minutes=1)
    )
    assert again.group("a100").desired == 1


def test_a_refused_pod_is_not_counted_on_a_node_bought_since_for_another_pod() -> None:
    # Given the group is refused for `early` (the scheduler refused it on n1, bought for it), and n2,
    # created since, was bought for `late`, which is pending with room only there (`early` is
    # placed first: same size, its name first)
    refused = PodMemory(
        uid="uid-research-early",
        distrusted=("n1",),
        bought={"a100": NOW - timedelta(minutes=20)},
        refused={"a100": NOW + timedelta(minutes=30)},
    )
    waiting = PodMemory(uid="uid-research-late", bought={"a100": NOW - timedelta(minutes=5)})
    n1 = node("n1", "i-1", created=NOW - timedelta(minutes=15))
    n2 = node("n2", "i-2", created=NOW - timedelta(minutes=4))
    busy = pod("busy", gpus=8, node="n1")
    snap = snapshot(
        [busy, pod("early", gpus=8), pod("late", gpus=8)],
        [n1, n2],
        [asg("research-a100", desired=2, instances=["i-1", "i-2"])],
        ScalerState(pods={"research/early": refused, "research/late": waiting}),
    )
    # When the planner plans
    result = plan(snap, config(), NOW)
    # Then n2 is counted for the pod it was bought for, not for the refused one (which would make
    # the plan buy a node again for `late`), and nothing more is bought
    assert outcome(result, "late")[:2] == ("existing", "a100")
    assert outcome(result, "early")[2] is ReasonCode.SCHEDULER_REJECTED
    assert result.group("a100").desired == 2
    # And the refused pod's memory keeps only the node it was refused on
    assert result.pod_memory["research/early"].distrusted == ("n1",)


def test_a_pod_recreated_under_the_same_name_starts_afresh() -> None:
    memory = PodMemory(
        uid="uid-old", counted_on="n1", counted_since=NOW - timedelta(hours=1), distrusted=("n1",)
    )
    snap = snapshot(
        [pod("stuck")],
        [node("n1", "i-1")],
        [asg("research-a100", desired=1, instances=["i-1"])],
        ScalerState(pods={"research/stuck": memory}),
    )
    result = plan(snap, config(), NOW)
    assert outcome(result, "stuck")[:2] == ("existing", "a100")
    assert result.model_errors == ()


def test_memory_of_pods_no_longer_pending_is_forgotten() -> None:
    snap = snapshot(
        [], [node("n1", "i-1")], [asg("research-a100", desired=1, instances=["i-1"])], _counted_since(2)
    )
    assert plan(snap, config(), NOW).pod_memory == {}


def test_asgs_parse_availability_zones_for_templates() -> None:
    group = asg("research-a100", desired=0)
    group["AvailabilityZones"] = ["us-west-2b", "us-west-2a", "us-west-2b"]
    assert asgs_from_describe({"AutoScalingGroups": [group]})["research-a100"].availability_zones == (
        "us-west-2a",
        "us-west-2b",
    )


def test_pod_builder_goes_through_the_real_parser() -> None:
    assert pod_from_json(pod("x")).key == "research/x"
    assert Outcome.SCALE_UP == "scale-up"


def test_a_managed_spot_node_group_labels_its_template_with_its_capacity_type() -> None:
    # Given an EKS managed node group (its ASG tag) whose mixed-instances policy launches only Spot
    group = asg("research-a100", desired=0)
    group["Tags"].append({"Key": "eks:nodegroup-name", "Value": "a100-spot"})
    group["MixedInstancesPolicy"] = {
        "LaunchTemplate": {"LaunchTemplateSpecification": {"LaunchTemplateName": "a100"}},
        "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0},
    }
    spot = pod("spot", node_selector={"eks.amazonaws.com/capacityType": "SPOT"})
    on_demand = pod("on-demand", node_selector={"eks.amazonaws.com/capacityType": "ON_DEMAND"})
    result = plan(snapshot([spot, on_demand], [], [group]), config(), NOW)
    # Then the Spot pod scales the group up and the on-demand one does not
    assert outcome(result, "spot")[:2] == ("scale-up", "a100")
    assert outcome(result, "on-demand")[2] is ReasonCode.NO_MATCHING_GROUP


def test_the_memory_of_the_next_run_keeps_every_field_it_does_not_set() -> None:
    # PodMemory.recalled and .counted build the next run's memory field by field: one that left a
    # field out would forget it (every field here differs from its default)
    memory = PodMemory(
        uid="uid-1",
        counted_on="n1",
        counted_since=NOW,
        distrusted=("n2",),
        bought={"a100": NOW},
        refused={"h100": NOW + timedelta(minutes=5)},
    )
    again = memory.recalled(
        memory.uid, memory.counted_on, memory.counted_since, memory.distrusted, memory.refused
    )
    assert again == memory
    assert memory.counted(memory.counted_on, memory.counted_since, memory.bought) == memory
    assert {f.name for f in fields(PodMemory)} == {
        "uid",
        "counted_on",
        "counted_since",
        "distrusted",
        "bought",
        "refused",
    }
