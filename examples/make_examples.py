"""Regenerates the example dumps (pods, nodes, ASGs, state) used by `make demo` and the CLI tests."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from datetime import timedelta

from tests.builders import NOW, asg, iso, node, pod
from tests.builders_provisioning import CHECK, pod_group, pod_template, provisioning_request

pods = []
pods.append(pod("resnet-0", gpus=8, node="ip-10-0-1-11.us-west-2.compute.internal"))
pods.append(
    pod(
        "nvidia-device-plugin-abcde",
        gpus=0,
        cpu="100m",
        memory="128Mi",
        node="ip-10-0-1-12.us-west-2.compute.internal",
        owner_kind="DaemonSet",
        namespace="kube-system",
    )
)
pods.append(
    pod(
        "nvidia-device-plugin-fghij",
        gpus=0,
        cpu="100m",
        memory="128Mi",
        node="ip-10-0-1-13.us-west-2.compute.internal",
        owner_kind="DaemonSet",
        namespace="kube-system",
    )
)
for i in range(6):
    pods.append(pod(f"sweep-{i}", gpus=1))
for i in range(3):
    pods.append(pod(f"finetune-{i}", gpus=2))
pods.append(pod("eval-0", gpus=4))
for i in range(4):
    pods.append(
        pod(
            f"llm-pretrain-worker-{i}",
            gpus=8,
            labels={"app": "llm", "scheduling.x-k8s.io/pod-group": "llm-pretrain"},
        )
    )
pods.append(pod("h100-only", gpus=8, node_selector={"gpu": "h100"}))
pods.append(pod("too-big", gpus=16))
nodes = [
    node("ip-10-0-1-11.us-west-2.compute.internal", "i-0a1100000000001"),
    node("ip-10-0-1-12.us-west-2.compute.internal", "i-0a1100000000002"),
    node(
        "ip-10-0-1-13.us-west-2.compute.internal",
        "i-0a1100000000003",
        unschedulable=True,
        annotations={"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=2))},
    ),
]


def described(group: dict[str, object], zone: str, subnet: str) -> dict[str, object]:
    """The group with the fields `describe-auto-scaling-groups` always prints: one zone (one group per
    zone, so zone-bound pods can be placed), its subnet, no suspended process."""
    return {
        **group,
        "DefaultCooldown": 300,
        "AvailabilityZones": [zone],
        "HealthCheckType": "EC2",
        "HealthCheckGracePeriod": 300,
        "CreatedTime": "2026-11-01T10:00:00.000Z",
        "SuspendedProcesses": [],
        "VPCZoneIdentifier": subnet,
        "TerminationPolicies": ["Default"],
        "NewInstancesProtectedFromScaleIn": False,
    }


asgs = {
    "AutoScalingGroups": [
        described(
            asg(
                "research-a100",
                desired=3,
                instances=["i-0a1100000000001", "i-0a1100000000002", "i-0a1100000000003"],
                max_size=16,
            ),
            "us-west-2a",
            "subnet-0a2a000000000001",
        ),
        described(
            asg("research-v100", desired=0, instances=[], max_size=8), "us-west-2a", "subnet-0a2a000000000001"
        ),
    ]
}
state = {
    "nodes": {
        "ip-10-0-1-12.us-west-2.compute.internal": {"idle_since": iso(NOW - timedelta(minutes=25))},
        "ip-10-0-1-13.us-west-2.compute.internal": {"idle_since": iso(NOW - timedelta(minutes=40))},
    },
    "groups": {"a100": {"last_scale_up": iso(NOW - timedelta(hours=3))}},
}


def daemonset(name: str, cpu: str, memory: str, node_selector: dict[str, str] | None = None) -> dict:
    """An apps/v1 DaemonSet as `kubectl get ds -A -o json` prints it."""
    spec: dict = {
        "containers": [
            {"name": name, "image": f"{name}:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
        "tolerations": [{"operator": "Exists"}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-ds-{name}"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


# `kubectl get daemonsets,pvc,pv,storageclasses,namespaces -A -o json`: what every node runs, storage.
objects = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        daemonset("aws-node", "25m", "64Mi"),
        daemonset("kube-proxy", "100m", "64Mi"),
        daemonset("nvidia-device-plugin", "100m", "128Mi", {"gpu": "a100"}),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": "gp3",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "research",
                "labels": {"kubernetes.io/metadata.name": "research", "team": "ml"},
            },
        },
        # `kubectl get podgroups,provisioningrequests,podtemplates -A -o json`: a gang's PodGroup, and
        # a capacity check Kueue made for a 3 x 8-GPU job (no free room for it: Provisioned=False).
        pod_group("llm-pretrain", 4),
        pod_template("llm-eval-main"),
        provisioning_request("llm-eval", [("llm-eval-main", 3)], class_name=CHECK),
    ],
}
for name, doc in [
    ("objects", objects),
    ("pods", {"apiVersion": "v1", "kind": "List", "items": pods}),
    ("nodes", {"apiVersion": "v1", "kind": "List", "items": nodes}),
    ("asgs", asgs),
    ("state", state),
]:
    with open(Path(__file__).parent / f"{name}.json", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
