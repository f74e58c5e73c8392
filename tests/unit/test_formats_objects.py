"""Any `kubectl get ... -o json` output to domain objects: DaemonSets, PVCs, PVs, StorageClasses,
Namespaces, pods and nodes, in mixed Lists, typed Lists or one object at a time; PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.errors import InputError
from shared.domain.labels import LabelSelector, Requirement
from shared.domain.model import DisruptionBudget, Toleration
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.kubernetes import (
    daemonset_from_json,
    objects_from_documents,
    pod_disruption_budgets_from_list,
)
from tests.builders import GPU_TOLERATION, node, pod
from tests.builders_dra import gpu_slice
from tests.builders_provisioning import ATOMIC, condition, pod_group, pod_template, provisioning_request

DAEMON_TOLERATIONS = {
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
}
NETWORK_UNAVAILABLE = Toleration("node.kubernetes.io/network-unavailable", "Exists", "", "NoSchedule")


def daemonset(
    name: str, *, host_network: bool = False, tolerations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A DaemonSet as `kubectl get ds -o json` shows it."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": name,
                "image": f"{name}:1",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "ports": [{"containerPort": 9400, "hostPort": 9400, "protocol": "TCP"}],
            }
        ],
        "nodeSelector": {"gpu": "a100"},
        "tolerations": tolerations if tolerations is not None else [GPU_TOLERATION],
        "priorityClassName": "system-node-critical",
    }
    if host_network:
        spec["hostNetwork"] = True
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            "updateStrategy": {"type": "RollingUpdate"},
        },
        "status": {"desiredNumberScheduled": 3, "numberReady": 3},
    }


def pvc(
    name: str, *, volume: str = "", storage_class: str | None = "gp3", phase: str = "Bound"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "research"},
        "spec": spec,
        "status": {"phase": phase},
    }


def ebs_pv(name: str, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
        "spec": {
            "capacity": {"storage": "100Gi"},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}
                            ]
                        },
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["ip-10-0-1-5"]}
                            ]
                        },
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }


def gp3_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [
            {
                "matchLabelExpressions": [
                    {"key": "topology.ebs.csi.aws.com/zone", "values": ["us-west-2a", "us-west-2b"]}
                ]
            }
        ],
        "reclaimPolicy": "Delete",
    }


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}


# --- DaemonSets ---


def test_daemonset_is_a_pending_pod_of_its_template_with_the_controllers_tolerations() -> None:
    # When a DaemonSet with its own GPU toleration is parsed
    ds = daemonset_from_json(daemonset("dcgm-exporter"))
    # Then its pod is the template in the DaemonSet's namespace, owned by it, pending and unbound
    assert (ds.namespace, ds.name, ds.key) == ("kube-system", "dcgm-exporter", "kube-system/dcgm-exporter")
    assert (ds.pod.namespace, ds.pod.owner_kind, ds.pod.owner_name) == (
        "kube-system",
        "DaemonSet",
        "dcgm-exporter",
    )
    assert ds.pod.phase == "Pending" and ds.pod.node_name is None and ds.pod.is_daemonset
    assert ds.pod.requests.get("cpu") == 100 and ds.pod.requests.get("pods") == 1
    assert ds.pod.scheduling.node_selector == (("gpu", "a100"),)
    assert ds.pod.labels == {"app": "dcgm-exporter"}
    assert [p.port for p in ds.pod.constraints.host_ports] == [9400]
    # And the tolerations the DaemonSet controller adds to every daemon pod, besides its own
    tolerations = set(ds.pod.scheduling.tolerations)
    assert tolerations == DAEMON_TOLERATIONS | {Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")}


def test_a_host_network_daemonset_also_tolerates_network_unavailable() -> None:
    ds = daemonset_from_json(daemonset("aws-node", host_network=True, tolerations=[]))
    assert set(ds.pod.scheduling.tolerations) == DAEMON_TOLERATIONS | {NETWORK_UNAVAILABLE}


def test_a_toleration_the_template_already_has_is_not_added_twice() -> None:
    # Given a template that tolerates not-ready already (with tolerationSeconds, which is not compared)
    own = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    ds = daemonset_from_json(daemonset("fluent-bit", tolerations=[own]))
    assert len(ds.pod.scheduling.tolerations) == len(DAEMON_TOLERATIONS)


def test_a_daemonset_pod_is_plain_pending_not_backlog() -> None:
    ds = daemonset_from_json(daemonset("dcgm-exporter"))
    assert not ds.pod.is_pending_unschedulable


# --- storage and namespaces ---


def test_storage_objects_and_namespaces_from_one_mixed_list() -> None:
    # Given what `kubectl get pvc,pv,storageclasses,namespaces -A -o json` prints
    document = kubectl_list(
        pvc("data-trainer-0", volume="pvc-1234"),
        pvc("scratch", storage_class=None, phase="Pending"),
        ebs_pv("pvc-1234", "us-west-2a"),
        gp3_class(),
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp2"},
            "provisioner": "kubernetes.io/aws-ebs",
        },
        namespace("research", {"kubernetes.io/metadata.name": "research", "team": "ml"}),
        namespace("legacy", {}),
    )
    # When parsed
    objects = objects_from_documents([(document, "storage.json")])
    # Then every object is there, with the API's defaults
    assert objects.pvcs == (
        PersistentVolumeClaim(
            "research", "data-trainer-0", volume_name="pvc-1234", storage_class="gp3", phase="Bound"
        ),
        PersistentVolumeClaim("research", "scratch", volume_name="", storage_class=None, phase="Pending"),
    )
    (pv,) = objects.pvs
    assert pv == PersistentVolume(
        name="pvc-1234",
        node_affinity=(
            (Requirement("topology.ebs.csi.aws.com/zone", "In", ("us-west-2a",)),),
        ),  # matchFields dropped
        labels={"topology.kubernetes.io/zone": "us-west-2a"},
    )
    gp3, gp2 = objects.storage_classes
    assert gp3 == StorageClass(
        name="gp3",
        provisioner="ebs.csi.aws.com",
        binding_mode="WaitForFirstConsumer",
        allowed_topologies=(
            (Requirement("topology.ebs.csi.aws.com/zone", "In", ("us-west-2a", "us-west-2b")),),
        ),
        is_default=True,
    )
    assert gp3.waits_for_consumer
    assert (gp2.binding_mode, gp2.is_default, gp2.allowed_topologies) == ("Immediate", False, ())
    # And namespaces carry the name label the API server sets, even when the dump lacks it
    assert objects.namespaces == {
        "research": {"kubernetes.io/metadata.name": "research", "team": "ml"},
        "legacy": {"kubernetes.io/metadata.name": "legacy"},
    }
    assert objects.skipped == ()


def test_the_legacy_storage_class_annotation_wins_over_the_field() -> None:
    raw = pvc("old", storage_class="gp3")
    raw["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "gp2"}
    (claim,) = objects_from_documents([(raw, "pvc.json")]).pvcs
    assert claim.storage_class == "gp2"


# --- documents: lists, single objects, unknown kinds, errors ---


def test_a_mixed_list_skips_unknown_kinds_and_says_which() -> None:
    # Given a List with pods, a node, a DaemonSet, and kinds the planner does not read
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shop"}}
    document = kubectl_list(
        pod("a"), service, node("n1", "i-0abc"), config_map, daemonset("dcgm"), service, pod("b")
    )
    # When parsed
    objects = objects_from_documents([(document, "all.json")])
    # Then the known kinds are parsed in order and each unknown object is counted by kind
    assert [p.name for p in objects.pods] == ["a", "b"]
    assert [n.name for n in objects.nodes] == ["n1"]
    assert [d.name for d in objects.daemonsets] == ["dcgm"]
    assert sorted(objects.skipped) == ["ConfigMap", "Service", "Service"]
    assert objects.kinds == {"Pod", "Node", "DaemonSet"}


def test_typed_lists_from_the_raw_api_and_single_objects_are_accepted() -> None:
    # Given a raw API PodList (items without kind), an empty NodeList, and one StorageClass object
    bare = pod("a")
    del bare["kind"]
    documents = [
        ({"apiVersion": "v1", "kind": "PodList", "items": [bare]}, "pods.json"),
        ({"apiVersion": "v1", "kind": "NodeList", "items": []}, "nodes.json"),
        (gp3_class(), "sc.json"),
    ]
    # When parsed together
    objects = objects_from_documents(documents)
    # Then the pod is parsed, the empty NodeList still counts as nodes given, and the class is there
    assert [p.name for p in objects.pods] == ["a"]
    assert objects.nodes == () and "Node" in objects.kinds
    assert [c.name for c in objects.storage_classes] == ["gp3"]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([1, 2], r"^bad.json: expected a Kubernetes object or List, got list$"),
        ({"items": []}, r"^bad.json: expected a Kubernetes object or List with a kind$"),
        ({"kind": "List", "items": {}}, r"^bad.json: expected items to be a list in List$"),
        (
            kubectl_list(pod("a"), {"metadata": {"name": "x"}}),
            r"^bad.json: items\[1\]: expected a Kubernetes object with a kind$",
        ),
        (kubectl_list(pod("a"), "pod"), r"^bad.json: items\[1\]: expected a Kubernetes object, got str$"),
        (
            kubectl_list(gp3_class(), {"kind": "PersistentVolumeClaim", "metadata": {"namespace": "x"}}),
            r"^bad.json: items\[1\]: malformed PersistentVolumeClaim: missing field 'name'$",
        ),
        (
            kubectl_list({"kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {}}),
            r"^bad.json: items\[0\]: malformed DaemonSet: missing field 'template'$",
        ),
        (
            {**gp3_class(), "volumeBindingMode": "Later"},
            r"^bad.json: malformed StorageClass: volumeBindingMode: expected one of",
        ),
    ],
)
def test_malformed_documents_name_the_source_and_the_item(document: object, expected: str) -> None:
    with pytest.raises(InputError, match=expected):
        objects_from_documents([(document, "bad.json")])


# ------------------------------------------------------------------ gangs and capacity requests


def test_queue_objects_are_parsed_from_kubectl_output() -> None:
    # Given what `kubectl get provisioningrequests,podtemplates,podgroups -A -o json` prints
    answered = provisioning_request(
        "llm",
        [("llm-main", 2), ("llm-side", 1)],
        parameters={"noRetry": "true"},
        conditions=[condition("Provisioned", "False", "CapacityIsNotFound", message="no room")],
        generation=3,
    )
    items = [
        answered,
        pod_template("llm-main", gpus=8),
        pod_group("coscheduled", 4),
        pod_group("volcano", 8, volcano=True),
    ]
    # When parsed
    found = objects_from_documents([({"apiVersion": "v1", "kind": "List", "items": items}, "queues.json")])
    # Then each kind is read with the fields the planner uses
    [request] = found.provisioning_requests
    assert (request.key, request.class_name, request.generation, request.version) == (
        "research/llm",
        ATOMIC,
        3,
        "v1",
    )
    assert [(s.template, s.count) for s in request.pod_sets] == [("llm-main", 2), ("llm-side", 1)]
    assert request.pod_count == 3 and request.parameters == {"noRetry": "true"}
    [provisioned] = request.conditions
    assert (provisioned.type, provisioned.status, provisioned.reason, provisioned.message) == (
        "Provisioned",
        "False",
        "CapacityIsNotFound",
        "no room",
    )
    [template] = found.pod_templates
    assert (template.key, template.pod.requests.gpus, template.pod.is_pending_unschedulable) == (
        "research/llm-main",
        8,
        False,
    )
    assert sorted((g.key, str(g.kind), g.min_member) for g in found.pod_groups) == [
        ("research/coscheduled", "coscheduling", 4),
        ("research/volcano", "volcano", 8),
    ]
    assert found.skipped == ()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda o: o.update(apiVersion="scheduling.example.com/v1"), "unknown API group"),
        (lambda o: o["spec"].update(minMember="4"), "spec.minMember: expected an integer"),
        (lambda o: o["spec"].update(minMember=-1), "must not be negative"),
    ],
    ids=["api-group", "string", "negative"],
)
def test_a_malformed_pod_group_is_an_error_naming_it(change: Any, expected: str) -> None:
    obj = pod_group("g", 4)
    change(obj)
    with pytest.raises(InputError, match=expected) as raised:
        objects_from_documents([(obj, "groups.json")])
    assert "groups.json: malformed PodGroup" in str(raised.value)


def test_a_device_capacity_beyond_what_kubernetes_holds_is_refused_at_once() -> None:
    # Given a ResourceSlice whose device advertises 1E100000000 bytes (its exact value, a
    # 100-million-digit integer, took minutes to build)
    document = gpu_slice("gpu-node-1", count=1, memory="1E100000000")
    # When read / Then it is refused, naming the file, the item and the value
    with pytest.raises(
        InputError, match=r"^slices.json: malformed ResourceSlice: .*'1E100000000' is out of range"
    ):
        objects_from_documents([(document, "slices.json")])


def test_a_malformed_template_names_the_field_under_its_template() -> None:
    # Given a DaemonSet and a PodTemplate whose container requests a fraction of a GPU
    ds = daemonset("dcgm-exporter")
    ds["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    template = pod_template("trainer")
    template["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    field = "spec.containers[0].resources.requests: nvidia.com/gpu: quantity '0.5' must be an integer"
    # When read / Then each error names the field where it is in its object
    with pytest.raises(InputError) as raised:
        objects_from_documents([(ds, "ds.json")])
    assert str(raised.value) == f"ds.json: malformed DaemonSet: spec.template: {field}"
    with pytest.raises(InputError) as raised:
        objects_from_documents([(template, "pt.json")])
    assert str(raised.value) == f"pt.json: malformed PodTemplate: template: {field}"


# ------------------------------------------------------------------ PodDisruptionBudgets


def pdb(name: str, selector: object, allowed: object = 1, namespace: str = "research") -> dict[str, Any]:
    """A PodDisruptionBudget as `kubectl get pdb -A -o json` lists it (policy/v1, with its status)."""
    spec: dict[str, Any] = {"minAvailable": 1}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": spec,
        "status": {
            "currentHealthy": 2,
            "desiredHealthy": 1,
            "disruptionsAllowed": allowed,
            "expectedPods": 2,
        },
    }


def test_pod_disruption_budgets_from_kubectl_output() -> None:
    # Given what `kubectl get pdb -A -o json` prints: a List of budgets, one with an empty selector and
    # one without a selector, and a new budget its controller has not given a status yet
    labelled = pdb(
        "train",
        {
            "matchLabels": {"job": "t1"},
            "matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}],
        },
        allowed=2,
    )
    fresh = pdb("fresh", {"matchLabels": {"job": "t2"}})
    del fresh["status"]
    document = kubectl_list(labelled, pdb("all", {}, namespace="serving"), pdb("none", None), fresh)

    # When it is parsed
    budgets = pod_disruption_budgets_from_list(document, "pdbs.json")

    # Then each keeps its namespace, its selector ({} selects all, null none) and disruptionsAllowed
    assert budgets == (
        DisruptionBudget(
            "research",
            "train",
            LabelSelector((("job", "t1"),), (Requirement("role", "In", ("worker",)),)),
            2,
        ),
        DisruptionBudget("serving", "all", LabelSelector(), 1),
        DisruptionBudget("research", "none", None, 1),
        DisruptionBudget("research", "fresh", LabelSelector((("job", "t2"),)), 0),
    )


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            pdb("train", {}, allowed="1"),
            r"^pdbs.json: items\[0\]: malformed PodDisruptionBudget: status.disruptionsAllowed: expected an"
            r" integer, got '1'$",
        ),
        (
            pdb("train", {"matchExpressions": [{"key": "job", "operator": "Gt", "values": ["1"]}]}),
            r"^pdbs.json: items\[0\]: malformed PodDisruptionBudget: spec.selector.matchExpressions\[0\]"
            r".operator: expected one of",
        ),
        (
            pdb("train", ["job"]),
            r"^pdbs.json: items\[0\]: malformed PodDisruptionBudget: spec.selector: expected an object,"
            r" got list$",
        ),
        (
            {"kind": "PodDisruptionBudget", "metadata": {"namespace": "research"}},
            r"^pdbs.json: items\[0\]: malformed PodDisruptionBudget: missing field 'name'$",
        ),
    ],
)
def test_a_malformed_pod_disruption_budget_names_the_source_the_item_and_the_field(
    item: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError, match=expected):
        pod_disruption_budgets_from_list(kubectl_list(item), "pdbs.json")


def test_a_list_of_another_kind_is_not_taken_for_budgets() -> None:
    with pytest.raises(InputError, match=r"^pdbs.json: expected kind PodDisruptionBudgetList with items"):
        pod_disruption_budgets_from_list({"kind": "PodList", "items": []}, "pdbs.json")
