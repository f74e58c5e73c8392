"""Template nodes carry the instance type's whole identity (issue 21, point 3).

Instance types come from `tests/fixtures/aws/describe-instance-types.json`, the output of
`aws ec2 describe-instance-types --instance-types g5g.xlarge g5.xlarge p4d.24xlarge trn1.32xlarge`
(moto's copy of EC2's own data). The rules mirrored, from kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/aws_manager.go:
- buildGenericLabels: kubernetes.io/arch from the instance type's architecture, os, instance-type,
  region, zone (and the EBS CSI zone), hostname. Neither it nor the EKS AMI sets an accelerator label:
  `k8s.amazonaws.com/accelerator` is cluster-autoscaler's GPULabel, put on nodes by their operator (node
  group labels, node-template tags), so the template carries it only when those say so;
- buildNodeFromTemplate: capacity from the instance type, overridden by extractAllocatableResourcesFromAsg
  (the `k8s.io/cluster-autoscaler/node-template/resources/*` tags);
- a group with a registered node gets its template from that node (simulator/node_info_utils.go).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shared.config import parse_config
from shared.domain.model import InstanceType, Snapshot
from shared.domain.plan import Plan
from shared.domain.resources import (
    ACCELERATORS,
    CPU,
    GPU,
    MEMORY,
    NEURON,
    NEURONCORE,
    PODS,
    is_accelerator,
    needs_accelerator,
)
from shared.formats.aws import GPU_RESOURCE_BY_MANUFACTURER, instance_types_from_describe, neuron_resources
from shared.formats.kubernetes import daemonset_from_json
from shared.planner import plan
from shared.planner.eks import instance_store_capacity
from shared.planner.template import EFA, UNKNOWN_EPHEMERAL_STORAGE, build_template, is_efa_device_plugin
from tests.builders import GPU_TAINT, GPU_TOLERATION, NOW, asg, node, pod, snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "aws" / "describe-instance-types.json"
TYPES, _ = instance_types_from_describe(json.loads(FIXTURE.read_text()), str(FIXTURE))
GIB = 2**30
EKS_REGISTRY = "602401143452.dkr.ecr.us-west-2.amazonaws.com"  # where EKS publishes its add-on images
EFA_TAG = "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"


def group(name: str, instance_type: str, price: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "asg_name": f"research-{name}",
        "instance_type": instance_type,
        "taints": [GPU_TAINT],
        "price_per_hour": price,
        "max_size": 8,
        **extra,
    }


def cfg(*groups: dict[str, Any]) -> Any:
    return parse_config({"cluster_name": "research", "region": "us-west-2", "node_groups": list(groups)})


def tagged(asg_json: dict[str, Any], **tags: str) -> dict[str, Any]:
    asg_json["Tags"] = [*asg_json["Tags"], *({"Key": k, "Value": v} for k, v in tags.items())]
    return asg_json


def requesting(pod_json: dict[str, Any], **extra: str) -> dict[str, Any]:
    """The pod with extra requests (and equal limits, as extended resources need)."""
    resources = pod_json["spec"]["containers"][0]["resources"]
    resources["requests"] = {**resources["requests"], **extra}
    resources["limits"] = dict(resources["requests"])
    return pod_json


def efa_device_plugin(*, tolerations: list[dict[str, str]]) -> dict[str, Any]:
    """The EFA device plugin's DaemonSet as aws/eks-charts' aws-efa-k8s-device-plugin chart renders it
    (`kubectl get ds -n kube-system -o json`): EFA instance types only, hostNetwork, no requests."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "efa-aws-efa-k8s-device-plugin", "namespace": "kube-system", "uid": "uid-efa"},
        "spec": {
            "selector": {"matchLabels": {"name": "efa-aws-efa-k8s-device-plugin"}},
            "template": {
                "metadata": {"labels": {"name": "efa-aws-efa-k8s-device-plugin"}},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "node.kubernetes.io/instance-type",
                                                "operator": "In",
                                                "values": ["p4d.24xlarge", "p5.48xlarge", "trn1.32xlarge"],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "containers": [
                        {
                            "name": "aws-efa-k8s-device-plugin",
                            "image": f"{EKS_REGISTRY}/eks/aws-efa-k8s-device-plugin:v0.5.6",
                            "volumeMounts": [
                                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}
                            ],
                        }
                    ],
                    "hostNetwork": True,
                    "priorityClassName": "system-node-critical",
                    "tolerations": tolerations,
                    "volumes": [
                        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}
                    ],
                },
            },
        },
    }


def desired(result: Plan, name: str) -> int:
    return result.group(name).desired


def outcome(result: Plan, name: str) -> tuple[str, str | None]:
    found = next(p for p in result.pods if p.pod.endswith(f"/{name}"))
    return str(found.outcome), found.group


def with_types(snap: Snapshot, **objects: Any) -> Snapshot:
    return replace(snap, instance_types=TYPES, **objects)


# ------------------------------------------------------------------ DescribeInstanceTypes parsing


def test_describe_instance_types_gives_architecture_accelerators_efa_and_nvme() -> None:
    # Given EC2's own entries (moto's copy): then each type's identity is read from its fields
    assert TYPES["g5g.xlarge"].architecture == "arm64"  # ProcessorInfo.SupportedArchitectures arm64
    assert TYPES["g5.xlarge"].architecture == "amd64"  # x86_64
    assert TYPES["g5g.xlarge"].capacity.gpus == 1
    assert TYPES["p4d.24xlarge"].efa_interfaces == 4  # NetworkInfo.EfaInfo.MaximumEfaInterfaces
    assert TYPES["g5.xlarge"].efa_interfaces == 0  # EfaSupported false
    assert TYPES["p4d.24xlarge"].nvme_instance_store_gb == 8000  # 8 x 1000 GB, NvmeSupport required
    assert TYPES["g5g.xlarge"].nvme_instance_store_gb == 0  # EBS only
    # NeuronDevices[].Count devices of CoreInfo.Count cores each, as the Neuron device plugin names them
    trn1 = TYPES["trn1.32xlarge"].capacity
    assert (trn1.get("aws.amazon.com/neuron"), trn1.get("aws.amazon.com/neuroncore")) == (16, 32)


def test_trainium2_cores_are_counted_at_the_default_logical_core_size() -> None:
    # Given trn2.48xlarge's NeuronInfo as EC2 reports it: 16 devices of 8 NeuronCore-v3 each
    neuron_info = {
        "NeuronDevices": [
            {
                "Count": 16,
                "Name": "Trainium2",
                "CoreInfo": {"Count": 8, "Version": 3},
                "MemoryInfo": {"SizeInMiB": 524288},
            }
        ],
        "TotalNeuronDeviceMemoryInMiB": 8388608,
    }
    # When / Then the device plugin's 64 logical cores (LNC=2, Trainium2's default), not 128 physical
    assert neuron_resources(neuron_info) == {"aws.amazon.com/neuron": 16, "aws.amazon.com/neuroncore": 64}


def test_every_accelerator_a_template_takes_from_ec2_is_one_the_webhook_wakes_the_scaler_for() -> None:
    # Given the accelerators the planner's templates take from DescribeInstanceTypes (the fixture's
    # GPU and Trainium types, every GPU manufacturer's resource) and the devices node repair watches
    from_types = {name for t in TYPES.values() for name in t.capacity.names()} - {CPU, MEMORY, PODS}
    names = from_types | set(GPU_RESOURCE_BY_MANUFACTURER.values()) | set(ACCELERATORS)
    assert {GPU, NEURON, NEURONCORE} <= names

    # Then the one rule of "needs an accelerator" (the webhook's, and its matchCondition's) takes each
    assert [name for name in sorted(names) if not is_accelerator(name)] == []
    # ... and a pod asking for any of them needs one; a pod asking for EFA or memory alone does not
    assert all(needs_accelerator([CPU, name], claims_devices=False) for name in names)
    assert not needs_accelerator([CPU, MEMORY, EFA], claims_devices=False)


def test_a_malformed_instance_type_entry_is_named_and_the_others_kept() -> None:
    # Given a document whose second entry lacks VCpuInfo
    document = json.loads(FIXTURE.read_text())
    del document["InstanceTypes"][1]["VCpuInfo"]
    # When it is parsed
    found, problems = instance_types_from_describe(document, "types.json")
    # Then that entry is left out with its reason, and the three others are read
    assert len(found) == 3
    assert problems == ("types.json: InstanceTypes[1]: malformed entry, left out: missing field 'VCpuInfo'",)


# ------------------------------------------------------------------ kubernetes.io/arch


def test_an_amd64_pod_does_not_buy_the_cheaper_graviton_gpu_node() -> None:
    # Given a cheaper g5g (arm64) group and a g5 (amd64) group, both with their allocatable in the
    # config (the architecture must still come from the instance type), and no node in either
    shape = {"cpu": "3", "memory": "7Gi", "nvidia.com/gpu": "1", "pods": "58"}
    config = cfg(
        group("t4g", "g5g.xlarge", 0.42, allocatable=shape),
        group("a10g", "g5.xlarge", 1.006, allocatable=shape),
    )
    amd64 = pod("x86-only", gpus=1, cpu="2", memory="4Gi", node_selector={"kubernetes.io/arch": "amd64"})
    anywhere = pod("any-arch", gpus=1, cpu="2", memory="4Gi")
    asgs = [asg("research-t4g", desired=0), asg("research-a10g", desired=0)]
    # When the planner plans
    result = plan(with_types(snapshot([amd64, anywhere], [], asgs)), config, NOW)
    # Then the amd64 pod buys the g5 (buildGenericLabels: kubernetes.io/arch of the instance type), and
    # the pod that runs anywhere the cheaper g5g
    assert outcome(result, "x86-only") == ("scale-up", "a10g")
    assert outcome(result, "any-arch") == ("scale-up", "t4g")
    assert (desired(result, "t4g"), desired(result, "a10g")) == (1, 1)


def test_the_template_carries_no_accelerator_label_nobody_set() -> None:
    # Given a g5g group with no label in the config, no tag and no node
    config = cfg(group("t4g", "g5g.xlarge", 0.42))
    template = build_template(config, "t4g", None, [], TYPES, ())
    # Then its labels are buildGenericLabels' (arch, os, instance type, region): no invented
    # k8s.amazonaws.com/accelerator value, which only operators set
    assert template.labels["kubernetes.io/arch"] == "arm64"
    assert template.labels["node.kubernetes.io/instance-type"] == "g5g.xlarge"
    assert "k8s.amazonaws.com/accelerator" not in template.labels
    assert template.allocatable is not None and template.allocatable.gpus == 1


# ------------------------------------------------------------------ EFA


EFA_POD = requesting(pod("nccl", gpus=8, cpu="90", memory="1000Gi"), **{EFA: "4"})


def test_efa_pod_is_helped_from_zero_where_the_efa_device_plugin_runs() -> None:
    # Given a p4d group at zero, and the EFA device plugin tolerating the group's GPU taint
    config = cfg(group("a100", "p4d.24xlarge", 32.77))
    plugin = daemonset_from_json(efa_device_plugin(tolerations=[GPU_TOLERATION]))
    snap = with_types(snapshot([EFA_POD], [], [asg("research-a100", desired=0)]), daemonsets=(plugin,))
    # When the planner plans
    result = plan(snap, config, NOW)
    # Then the template has the type's 4 EFA interfaces and one node is bought
    assert is_efa_device_plugin(plugin)
    assert desired(result, "a100") == 1
    assert outcome(result, "nccl") == ("scale-up", "a100")


def test_no_efa_on_the_template_where_the_device_plugin_would_not_run() -> None:
    # Given the same group, but an EFA device plugin that does not tolerate its GPU taint
    config = cfg(group("a100", "p4d.24xlarge", 32.77))
    plugin = daemonset_from_json(
        efa_device_plugin(tolerations=[{"key": "CriticalAddonsOnly", "operator": "Exists"}])
    )
    # When its template is built
    template = build_template(config, "a100", None, [], TYPES, (plugin,))
    # Then nothing would advertise EFA on a new node: the template has none
    assert template.allocatable is not None and template.allocatable.get(EFA) == 0


def test_efa_from_the_node_template_resources_tag() -> None:
    # Given a group whose config gives its allocatable (silent on EFA), no instance type data, no
    # node, and cluster-autoscaler's node-template resources tag on its ASG
    shape = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}
    config = cfg(group("a100", "p4d.24xlarge", 32.77, allocatable=shape))
    asgs = [tagged(asg("research-a100", desired=0), **{EFA_TAG: "4"})]
    # When the planner plans the EFA pod
    result = plan(snapshot([EFA_POD], [], asgs), config, NOW)
    # Then the tag is read as extractAllocatableResourcesFromAsg reads it, and a node is bought
    assert desired(result, "a100") == 1


def test_efa_the_registered_nodes_advertise_is_on_the_template() -> None:
    # Given a group whose config gives cpu, memory and GPUs, and a busy registered node that
    # advertises vpc.amazonaws.com/efa: 4 (cluster-autoscaler builds the template from such a node)
    shape = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}
    config = cfg(group("a100", "p4d.24xlarge", 32.77, allocatable=shape))
    registered = node("n1", "i-1", labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"})
    registered["status"]["allocatable"][EFA] = "4"
    busy = pod("running", gpus=8, cpu="1", node="n1")
    snap = snapshot([busy, EFA_POD], [registered], [asg("research-a100", desired=1, instances=["i-1"])])
    # When the planner plans
    result = plan(snap, config, NOW)
    # Then a second node is bought for the EFA pod
    assert desired(result, "a100") == 2


def test_the_config_wins_where_it_names_a_resource() -> None:
    # Given a config that says 2 EFA interfaces where the tag says 4
    shape = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", EFA: "2"}
    config = cfg(group("a100", "p4d.24xlarge", 32.77, allocatable=shape))
    asg_state = tagged(asg("research-a100", desired=0), **{EFA_TAG: "4"})
    snap = with_types(snapshot([], [], [asg_state]))
    # When the template is built
    template = build_template(config, "a100", snap.asgs["research-a100"], [], TYPES, ())
    # Then the config's 2 stand, and what it is silent on (pods: the VPC CNI's 737) comes from AWS
    assert template.allocatable is not None
    assert template.allocatable.get(EFA) == 2
    assert template.allocatable.get("pods") == 737
    assert "pods" in template.source and "p4d.24xlarge" in template.source


# ------------------------------------------------------------------ NVMe instance store


@pytest.mark.parametrize(
    ("local_storage", "expected"),
    [
        # 8000 GB striped, 95 % of it the filesystem's, minus the 10 % nodefs eviction and 1Gi reserved
        ("RAID0", 8000 * 10**9 * 95 // 100 - 8000 * 10**9 * 95 // 100 * 10 // 100 - GIB),
        ("RAID10", 4000 * 10**9 * 95 // 100 - 4000 * 10**9 * 95 // 100 * 10 // 100 - GIB),
        ("Mount", UNKNOWN_EPHEMERAL_STORAGE),  # disks mounted apart: the kubelet stays on the root volume
        (None, UNKNOWN_EPHEMERAL_STORAGE),  # the AMI leaves the instance store alone
    ],
)
def test_nvme_instance_store_is_ephemeral_storage_only_where_the_ami_mounts_it(
    local_storage: str | None, expected: int
) -> None:
    # Given a p4d group whose launch template sets nodeadm's localStorage strategy (or none)
    config = cfg(group("a100", "p4d.24xlarge", 32.77, local_storage=local_storage))
    # When its template is built
    template = build_template(config, "a100", None, [], TYPES, ())
    # Then its ephemeral storage is the instance store the kubelet lives on, or not limiting
    assert template.allocatable is not None
    assert template.allocatable.get("ephemeral-storage") == expected


def test_a_pod_larger_than_the_raid0_instance_store_is_not_bought_a_node() -> None:
    # Given a g5.xlarge group whose AMI stripes its 250 GB instance store, and a pod asking 300Gi scratch
    config = cfg(group("a10g", "g5.xlarge", 1.006, local_storage="RAID0"))
    scratch = requesting(pod("scratch", gpus=1, cpu="2", memory="4Gi"), **{"ephemeral-storage": "300Gi"})
    result = plan(with_types(snapshot([scratch], [], [asg("research-a10g", desired=0)])), config, NOW)
    # Then no node is bought: no new node could hold it
    assert desired(result, "a10g") == 0
    assert outcome(result, "scratch")[0] == "unhelped"
    assert instance_store_capacity(250, "RAID0") < 300 * GIB


# ------------------------------------------------------------------ Neuron


def test_neuron_cores_of_a_trainium_group_from_zero() -> None:
    # Given a trn1 group at zero and a pod asking 32 Neuron cores
    config = cfg(group("trn1", "trn1.32xlarge", 21.5, taints=[]))
    cores = requesting(pod("train", gpus=0, cpu="8", memory="64Gi"), **{"aws.amazon.com/neuroncore": "32"})
    result = plan(with_types(snapshot([cores], [], [asg("research-trn1", desired=0)])), config, NOW)
    # Then one node is bought: 16 devices x 2 cores
    assert desired(result, "trn1") == 1


def test_instance_type_without_the_new_fields_keeps_its_defaults() -> None:
    # Given an InstanceType built as before (tests, fakes): no EFA, no instance store
    p4d = InstanceType("p4d.24xlarge", TYPES["p4d.24xlarge"].capacity)
    assert (p4d.efa_interfaces, p4d.nvme_instance_store_gb, p4d.architecture) == (0, 0, "amd64")


def test_the_efa_device_plugin_is_known_by_its_image_whatever_its_release_name() -> None:
    # Given the chart installed under another name, and the NVIDIA device plugin
    renamed = efa_device_plugin(tolerations=[])
    renamed["metadata"]["name"] = "efa-plugin"
    nvidia = efa_device_plugin(tolerations=[])
    nvidia["metadata"]["name"] = "nvidia-device-plugin-daemonset"
    nvidia["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
    # When / Then the image says which one advertises EFA
    assert is_efa_device_plugin(daemonset_from_json(renamed))
    assert not is_efa_device_plugin(daemonset_from_json(nvidia))
