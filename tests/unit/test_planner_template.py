"""Template nodes built from registered nodes whose GPUs are not advertised yet: kubelet has
registered the Node, the NVIDIA device plugin has not yet put `nvidia.com/gpu` in its allocatable."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.config import parse_config
from shared.domain.model import InstanceType
from shared.domain.resources import Resources
from shared.planner import plan
from shared.planner.template import build_template
from tests.builders import GPU_TAINT, NOW, asg, node, pod, snapshot

P4D = InstanceType(
    "p4d.24xlarge", Resources.of({"cpu": 96000, "memory": 1152 * 2**30, "nvidia.com/gpu": 8, "pods": 737})
)
P4D_LABELS = {"gpu": "a100", "node.kubernetes.io/instance-type": "p4d.24xlarge"}


def typed_config(**group: Any) -> Any:
    """A group known only by its instance type: no `allocatable` in the config."""
    return parse_config(
        {
            "cluster_name": "research",
            "region": "us-west-2",
            "node_groups": [
                {
                    "name": "a100",
                    "asg_name": "research-a100",
                    "instance_type": "p4d.24xlarge",
                    "labels": {"gpu": "a100"},
                    "taints": [GPU_TAINT],
                    "price_per_hour": 32.77,
                    **group,
                }
            ],
            "policy": {"cordon_settle_seconds": 30},
        }
    )


def test_node_without_advertised_gpus_is_not_the_template_source() -> None:
    # Given the group's only registered node, Ready but with no nvidia.com/gpu in its allocatable yet
    snap = snapshot([], [node("n1", "i-1", gpus=0, labels=P4D_LABELS)], [asg("research-a100", desired=1)])
    snap = replace(snap, instance_types={"p4d.24xlarge": P4D})
    # When the template is built
    template = build_template(
        typed_config(), "a100", snap.asgs["research-a100"], list(snap.nodes), {"p4d.24xlarge": P4D}, ()
    )
    # Then its shape comes from the instance type, with the type's 8 GPUs
    assert template.allocatable is not None
    assert template.allocatable.gpus == 8
    assert template.source.startswith("p4d.24xlarge minus")


def test_pending_gpu_pod_waits_for_the_node_still_advertising_its_gpus() -> None:
    # Given a 1-node group whose node registered without its GPUs yet, and a pending 8-GPU pod
    registering = node("n1", "i-1", gpus=0, labels=P4D_LABELS, created=NOW - timedelta(minutes=2))
    snap = snapshot([pod("p1", gpus=8)], [registering], [asg("research-a100", desired=1, instances=["i-1"])])
    snap = replace(snap, instance_types={"p4d.24xlarge": P4D})
    # When planned
    result = plan(snap, typed_config(), NOW)
    # Then the pod is not "larger than a node": it waits for the booting node, and nothing is bought
    found = next(p for p in result.pods if p.pod.endswith("/p1"))
    assert str(found.outcome) == "in-flight", found.reason
    assert result.group("a100").desired == 1


def test_gpu_label_marks_a_node_whose_type_is_unknown() -> None:
    # Given one node labelled as a GPU node (cluster-autoscaler's AWS GPU label) with no GPUs advertised
    # and one node of the group that does advertise 8
    labels = {"gpu": "a100", "k8s.amazonaws.com/accelerator": "nvidia-tesla-a100"}
    nodes = [node("n1", "i-1", gpus=0, labels=labels), node("n2", "i-2", gpus=8, cpu="90", labels=labels)]
    snap = snapshot([], nodes, [asg("research-a100", desired=2)])
    # When the template is built with no instance type data
    template = build_template(typed_config(), "a100", snap.asgs["research-a100"], list(snap.nodes), {}, ())
    # Then only the node with its GPUs is the source
    assert template.allocatable is not None
    assert template.allocatable.gpus == 8
    assert template.source == "the smallest registered node (1 seen)"


def test_no_other_source_leaves_the_shape_unknown_and_says_why() -> None:
    # Given only a GPU-labelled node without advertised GPUs, no instance type data and no config shape
    labels = {"gpu": "a100", "nvidia.com/gpu.present": "true"}
    snap = snapshot([], [node("n1", "i-1", gpus=0, labels=labels)], [asg("research-a100", desired=1)])
    # When the template is built
    template = build_template(typed_config(), "a100", snap.asgs["research-a100"], list(snap.nodes), {}, ())
    # Then the shape is unknown (not zero GPUs) and the source names the node waiting on its GPUs
    assert template.allocatable is None
    assert "1 registered node(s) not advertising their GPUs yet" in template.source


def test_config_allocatable_is_not_capped_to_zero_gpus() -> None:
    # Given a config shape and a node not advertising its GPUs yet
    cfg = typed_config(allocatable={"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"})
    snap = snapshot(
        [], [node("n1", "i-1", gpus=0, cpu="90", labels=P4D_LABELS)], [asg("research-a100", desired=1)]
    )
    # When the template is built
    template = build_template(
        cfg, "a100", snap.asgs["research-a100"], list(snap.nodes), {"p4d.24xlarge": P4D}, ()
    )
    # Then the config's shape stands, uncapped by the node's partial allocatable (what it is silent
    # on, ephemeral storage, comes from the instance type)
    assert template.source.startswith("config allocatable;")
    assert template.allocatable is not None and template.allocatable.gpus == 8


def _dropped_gpu(raw: dict[str, Any], allocatable_gpus: int) -> dict[str, Any]:
    """The Node after the NVIDIA device plugin withdrew unhealthy GPUs: capacity keeps them."""
    status = raw["status"]
    status["capacity"] = dict(status["capacity"])
    status["allocatable"] = {**status["allocatable"], "nvidia.com/gpu": str(allocatable_gpus)}
    return raw


def test_node_whose_device_plugin_dropped_a_gpu_does_not_shrink_the_template() -> None:
    # Given the group's only registered node, with 1 of its 8 GPUs withdrawn from allocatable
    broken = _dropped_gpu(node("n1", "i-1", labels=P4D_LABELS), 7)
    snap = snapshot([], [broken], [asg("research-a100", desired=1)])
    # When the template is built from it (no instance type data: the node is the only source)
    template = build_template(typed_config(), "a100", snap.asgs["research-a100"], list(snap.nodes), {}, ())
    # Then a new node comes with the group's 8 GPUs, from the node's capacity
    assert template.allocatable is not None
    assert template.allocatable.gpus == 8
    assert template.source.startswith("the smallest registered node")


def test_config_shape_is_not_capped_by_a_node_with_dropped_gpus() -> None:
    # Given a config shape of 8 GPUs and two registered nodes, one with 2 GPUs dropped
    cfg = typed_config(allocatable={"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"})
    nodes = [node("n1", "i-1", labels=P4D_LABELS), _dropped_gpu(node("n2", "i-2", labels=P4D_LABELS), 6)]
    snap = snapshot([], nodes, [asg("research-a100", desired=2)])
    # When the template is built
    template = build_template(cfg, "a100", snap.asgs["research-a100"], list(snap.nodes), {}, ())
    # Then the config's 8 GPUs stand (the broken node's 6 cap nothing)
    assert template.allocatable is not None and template.allocatable.gpus == 8
    assert "capped" not in template.source


def test_pod_asking_for_a_whole_node_gets_one_beside_a_node_with_a_dropped_gpu() -> None:
    # Given the group's only node busy with a 1-GPU pod and one GPU dropped (7 of 8 allocatable),
    # and a pending pod asking for all 8 GPUs of a node
    broken = _dropped_gpu(node("n1", "i-1", labels=P4D_LABELS), 7)
    snap = snapshot(
        [pod("busy", gpus=1, node="n1", phase="Running"), pod("whole", gpus=8)],
        [broken],
        [asg("research-a100", desired=1, instances=["i-1"])],
    )
    # When planned
    result = plan(snap, typed_config(), NOW)
    # Then a node is bought for it: it is not "larger than any node"
    found = next(p for p in result.pods if p.pod.endswith("/whole"))
    assert str(found.outcome) == "scale-up", found.reason
    assert result.group("a100").desired == 2


@pytest.mark.parametrize(
    "mark",
    [
        {"key": "backlog-scaler/unhealthy", "value": "gpu", "effect": "NoSchedule"},
        {"key": "backlog-scaler/rotation", "value": "drift", "effect": "NoSchedule"},
        {"key": "backlog-scaler/attrition", "value": "", "effect": "NoSchedule"},
    ],
    ids=["repair", "rotation", "attrition"],
)
def test_the_scalers_own_mark_on_the_only_node_is_not_a_taint_of_new_nodes(mark: dict[str, Any]) -> None:
    # Given the group's only node, busy, carrying one of the scaler's own taints (broken, one GPU
    # lost, and cordoned by repair; due for rotation; marked by attrition), and a pending pod that
    # tolerates the GPU taint
    only = _dropped_gpu(node("n1", "i-1", labels=P4D_LABELS, taints=[GPU_TAINT, mark], unschedulable=True), 7)
    snap = snapshot(
        [pod("busy", gpus=7, node="n1", phase="Running"), pod("next", gpus=8)],
        [only],
        [asg("research-a100", desired=1, instances=["i-1"])],
    )
    # When planned
    result = plan(replace(snap, instance_types={"p4d.24xlarge": P4D}), typed_config(), NOW)
    # Then a new node is bought: the mark says something of n1, not of the nodes the group launches
    found = next(p for p in result.pods if p.pod.endswith("/next"))
    assert str(found.outcome) == "scale-up", found.reason
    assert result.group("a100").desired == 2
