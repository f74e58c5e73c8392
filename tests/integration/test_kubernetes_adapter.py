"""`KubernetesCluster` with the real kubernetes client against the fake API server (real HTTP, no mocks).

429 on reads: the adapter retries a throttled GET (and patch/delete) up to `throttle_retries` times,
waiting Retry-After (capped) or an exponential backoff, then raises ThrottledError. Evictions are
never retried here: their 429 is a PodDisruptionBudget's answer, raised as EvictionBlockedError.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import subprocess
import sys
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from cdk.manifests import rbac_manifest
from shared import constants
from shared.adapters.kubernetes.auth import TOKEN_PREFIX, build_transport
from shared.adapters.kubernetes.cluster import (
    ClusterOptions,
    KubernetesCluster,
    _peek_continue,
    cluster_from_config,
)
from shared.adapters.kubernetes.transport import RestTransport
from shared.config import parse_config
from shared.domain.errors import (
    AuthError,
    ClusterActionError,
    ClusterReadError,
    ConflictError,
    EvictionBlockedError,
    NotFoundError,
    ThrottledError,
)
from shared.domain.labels import LabelSelector, Requirement
from shared.domain.model import ANNOTATION_CORDONED_AT, DisruptionBudget
from shared.domain.operations import ClusterEvent, EventType, ObjectRef
from shared.domain.provisioning import Condition, ConditionUpdate
from shared.domain.resources import GPU
from shared.local.kube_api_server import FakeKubeApiServer
from tests.builders_dra import claim_template, device_class, gpu_slice, resource_claim
from tests.builders_provisioning import condition, pod_group, pod_template, provisioning_request

TOKEN = "test-token"
ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
PODS_PATH = r"^/api/v1/pods$"


def pod(
    name: str,
    namespace: str = "batch",
    *,
    node: str | None = None,
    phase: str = "Pending",
    gpus: int = 1,
    ready: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = (
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        if not node
        else [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
        ]
    )
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {"app": "train"},
            "ownerReferences": [
                {"kind": "Job", "name": "train", "controller": True, "uid": "j1", "apiVersion": "batch/v1"}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "trainer:1",
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi", GPU: str(gpus)}},
                }
            ],
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {"phase": phase, "conditions": conditions},
    }


def node(name: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}},
        "spec": {
            "providerID": f"aws:///us-east-1a/i-0{zlib.crc32(name.encode()):012x}",
            "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
        },
        "status": {
            "allocatable": {"cpu": "95", "memory": "1100Gi", GPU: "8", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": "2026-12-02T11:00:00Z",
                }
            ],
        },
    }


CLUSTER_ROLE = next(yaml.safe_load_all(rbac_manifest("research")))


@pytest.fixture
def server() -> Iterator[FakeKubeApiServer]:
    # RBAC is the generated ClusterRole's: a call the manifest does not grant fails here as on a cluster.
    with FakeKubeApiServer() as fake:
        fake.require_token(TOKEN)
        fake.enforce_cluster_role(CLUSTER_ROLE)
        yield fake


@pytest.fixture
def api(server: FakeKubeApiServer) -> Iterator[RestTransport]:
    client = build_transport(server.url, token=TOKEN)
    yield client
    client.close()


class Sleeps(list[float]):
    """Records the waits the adapter asks for instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_cluster(api: RestTransport, sleeps: Sleeps, **options: Any) -> KubernetesCluster:
    return KubernetesCluster(
        api,
        ClusterOptions(**{"page_size": 3, "read_timeout": 2.0, **options}),
        sleep=sleeps,
        clock=lambda: NOW,
    )


@pytest.fixture
def cluster(api: RestTransport, sleeps: Sleeps) -> KubernetesCluster:
    return make_cluster(api, sleeps)


def list_calls(server: FakeKubeApiServer, path: str = "/api/v1/pods", *, finished: bool = False) -> list[Any]:
    """The list calls of `path`; of pods, the main list's (or with `finished`, the list of the finished
    members of Kueue pod groups that follows it)."""
    return [
        c
        for c in server.calls
        if c.method == "GET" and c.path == path and ("labelSelector" in c.query) == finished
    ]


# ---------------------------------------------------------------------------------------------- reads


def test_list_pods_reads_every_page_with_limit_and_continue(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 8 pods and a page size of 3
    for i in range(8):
        server.add_pod(pod(f"p{i}"))

    # When the pods are listed
    pods = cluster.list_pods()

    # Then all 8 come back, read in 3 pages chained by continue tokens
    assert sorted(p.name for p in pods) == [f"p{i}" for i in range(8)]
    calls = list_calls(server)
    assert len(calls) == 3
    assert all(c.query["limit"] == "3" for c in calls)
    assert "continue" not in calls[0].query
    assert calls[1].query["continue"] and calls[2].query["continue"] != calls[1].query["continue"]
    assert all(c.headers["authorization"] == f"Bearer {TOKEN}" for c in calls)


def continue_after(namespace: str, name: str) -> str:
    """A continue token the fake API server accepts: the list resumes after namespace/name."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": 1, "start": [namespace, name]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_list_body_with_items_before_metadata_is_read_to_the_end(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 8 pods and a first page whose body puts items before metadata (legal JSON, unusual order)
    for i in range(8):
        server.add_pod(pod(f"p{i}"))
    first_page = {
        "items": [server.get_pod("batch", f"p{i}") for i in range(3)],
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"continue": continue_after("batch", "p2")},
    }
    server.inject("GET", PODS_PATH, body=first_page)

    # When the pods are listed
    pods = cluster.list_pods()

    # Then the continue token is taken from the decoded page and the list goes on
    assert sorted(p.name for p in pods) == [f"p{i}" for i in range(8)]
    assert len(list_calls(server)) == 3


@pytest.mark.parametrize(
    ("body", "token"),
    [
        (b'{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"abc"},"items":[]}', "abc"),
        (b'{ "kind" : "PodList" ,\n "metadata" : { "resourceVersion" : "7" } , "items" : [ ] }', None),
        (b'{"items":[{"metadata":{"continue":"inner"}}],"metadata":{"continue":"abc"}}', None),  # unsure
        (b'{"kind":"PodList","metadata":{"continue":"ab', None),  # cut off
        (b"[]", None),
    ],
)
def test_continue_token_is_peeked_only_from_the_envelope_head(body: bytes, token: str | None) -> None:
    # Given a list body / When its head is peeked / Then the token, or None when the decode must decide
    assert _peek_continue(body) == token


def test_list_pods_leaves_out_terminal_pods_with_a_field_selector(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a pending, a running, a succeeded and a failed pod
    server.add_pod(pod("pending"))
    server.add_pod(pod("running", node="n1", phase="Running"))
    server.add_pod(pod("done", node="n1", phase="Succeeded"))
    server.add_pod(pod("crashed", node="n1", phase="Failed"))

    # When the pods are listed
    pods = cluster.list_pods()

    # Then the API server filtered out the terminal ones
    assert sorted(p.name for p in pods) == ["pending", "running"]
    assert list_calls(server)[0].query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"


def test_list_pods_adds_the_finished_members_of_kueue_pod_groups_by_label(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a Kueue pod group with a running and a Succeeded member, and a Succeeded pod of no gang
    gang = {"kueue.x-k8s.io/pod-group-name": "kg"}
    server.add_pod(pod("kg-0", node="n1", phase="Running", labels=gang))
    server.add_pod(pod("kg-1", node="n1", phase="Succeeded", labels=gang))
    server.add_pod(pod("done", node="n1", phase="Succeeded"))

    # When the pods are listed
    pods = cluster.list_pods()

    # Then the finished member is listed too (it counts toward its gang's total), by a second list
    # selecting Succeeded pods with the pod-group label; other terminal pods stay out
    assert sorted(p.name for p in pods) == ["kg-0", "kg-1"]
    (call,) = list_calls(server, finished=True)
    finished = call.query
    assert (finished["fieldSelector"], finished["labelSelector"]) == (
        "status.phase=Succeeded",
        "kueue.x-k8s.io/pod-group-name",
    )


def test_a_kueue_member_that_finishes_between_the_two_lists_is_listed_once(
    server: FakeKubeApiServer, cluster: KubernetesCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a running Kueue member that succeeds right after the main list is read
    gang = {"kueue.x-k8s.io/pod-group-name": "kg"}
    server.add_pod(pod("kg-0", node="n1", phase="Running", labels=gang))
    lister = cluster._reads._lister
    list_every = lister.list_every

    def then_finish(*args: Any, **kwargs: Any) -> Any:
        listed = list_every(*args, **kwargs)
        if kwargs.get("label_selector") is None:  # the main list: the member finishes after it
            server.update_pod("batch", "kg-0", lambda obj: obj["status"].update(phase="Succeeded"))
        return listed

    monkeypatch.setattr(lister, "list_every", then_finish)
    # When the pods are listed
    pods = cluster.list_pods()
    # Then it is listed once, as it is now (Succeeded): counted once toward its gang
    assert [(p.name, p.phase) for p in pods] == [("kg-0", "Succeeded")]


def test_listed_pods_are_domain_pods(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given an unschedulable pod asking for 2 GPUs
    server.add_pod(pod("big", gpus=2, labels={"team": "llm"}))

    # When the pods are listed
    (big,) = cluster.list_pods()

    # Then it is parsed into the planner's view of it
    assert big.key == "batch/big"
    assert (
        big.requests.gpus == 2
        and big.requests.get("cpu") == 4000
        and big.requests.get("memory") == 16 * 2**30
    )
    assert big.is_pending_unschedulable
    assert big.owner_kind == "Job"
    assert big.labels == {"team": "llm"}
    assert big.scheduling.tolerations[0].key == GPU
    assert big.uid and big.created_at is not None


def test_a_second_list_reuses_unchanged_pods_and_reparses_changed_ones(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given pods listed once, then one changed, one deleted, one added, and a per-node list in between
    for i in range(5):
        server.add_pod(pod(f"p{i}", node="n1" if i < 2 else None, phase="Running" if i < 2 else "Pending"))
    first = {p.name: p for p in cluster.list_pods()}
    cluster.list_pods_on_node("n1")
    server.update_pod("batch", "p3", lambda obj: obj["metadata"]["labels"].update(team="vision"))
    server.delete_pod("batch", "p4")
    server.add_pod(pod("p5"))

    # When the pods are listed again
    second = {p.name: p for p in cluster.list_pods()}

    # Then unchanged pods are the very same objects, the changed one is new, the deleted one gone
    assert sorted(second) == ["p0", "p1", "p2", "p3", "p5"]
    assert all(second[name] is first[name] for name in ("p0", "p1", "p2"))
    assert second["p3"] is not first["p3"] and second["p3"].labels["team"] == "vision"


def test_list_nodes_pages_and_parses(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given 7 GPU nodes, one not ready
    for i in range(6):
        server.add_node(node(f"gpu-{i}"))
    server.add_node(node("gpu-6", ready=False))

    # When the nodes are listed
    nodes = {n.name: n for n in cluster.list_nodes()}

    # Then all come back over 3 pages, with instance id, allocatable, taints and readiness
    assert len(nodes) == 7
    assert len(list_calls(server, "/api/v1/nodes")) == 3
    gpu0 = nodes["gpu-0"]
    assert gpu0.instance_id and gpu0.instance_id.startswith("i-")
    assert gpu0.allocatable.gpus == 8
    assert gpu0.taints[0].key == GPU
    assert gpu0.ready and not nodes["gpu-6"].ready
    assert gpu0.resource_version


def test_list_pods_on_node_selects_by_node_name(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given pods on two nodes
    server.add_pod(pod("a", node="n1", phase="Running"))
    server.add_pod(pod("b", node="n2", phase="Running"))
    server.add_pod(pod("c", node="n1", phase="Succeeded"))

    # When the pods of n1 are listed
    pods = cluster.list_pods_on_node("n1")

    # Then only its live pods come back, selected by the API server
    assert [p.name for p in pods] == ["a"]
    selector = list_calls(server)[0].query["fieldSelector"]
    assert selector.split(",") == ["spec.nodeName=n1", "status.phase!=Succeeded", "status.phase!=Failed"]


def test_get_node_reads_one_node(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given a node
    stored = server.add_node(node("gpu-0"))

    # When it is read
    got = cluster.get_node("gpu-0")

    # Then it is fresh, with the resourceVersion a conditional cordon needs
    assert got is not None and got.name == "gpu-0"
    assert got.resource_version == stored["metadata"]["resourceVersion"]


def test_get_missing_node_is_none(cluster: KubernetesCluster) -> None:
    # Given no node named ghost
    # When / Then
    assert cluster.get_node("ghost") is None


def test_a_malformed_bound_pod_is_a_read_error_naming_it(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a pod bound to a node whose request cannot be parsed, on the second page
    for i in range(4):
        server.add_pod(pod(f"p{i}", node="gpu-0", phase="Running"))
    server.update_pod(
        "batch", "p3", lambda obj: obj["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots")
    )

    # When / Then the list fails rather than returning a partial picture (that node's room and whether
    # it is busy are unknown: nothing destructive may be decided), and says where
    with pytest.raises(ClusterReadError, match=r"page 2.*items\[0\].*cpu"):
        cluster.list_pods()


@pytest.mark.parametrize("gpus", ["1e400", "1E100000000", "lots"])
def test_a_pending_pod_the_scaler_cannot_read_is_left_out_with_a_warning(
    server: FakeKubeApiServer, cluster: KubernetesCluster, caplog: pytest.LogCaptureFixture, gpus: str
) -> None:
    # Given a pending pod requesting more GPUs than Kubernetes holds (1e400 crashed the plan after the
    # list, 1E100000000 hung the parse until the Lambda's timeout), or a request that is no quantity,
    # beside a pod that is fine
    server.add_pod(pod("ok"))
    server.add_pod(pod("huge"))
    server.update_pod(
        "batch",
        "huge",
        lambda obj: obj["spec"]["containers"][0]["resources"]["requests"].update({GPU: gpus}),
    )

    # When the pods are listed
    with caplog.at_level(logging.WARNING):
        pods = cluster.list_pods()

    # Then the run goes on without it (one pod anyone may create must not stop every run of every
    # group), and a warning names the pod and the value
    assert [p.name for p in pods] == ["ok"]
    (line,) = [r.getMessage() for r in caplog.records if "left out of this run" in r.getMessage()]
    assert "(batch/huge): malformed Pod:" in line and GPU in line


def daemonset(name: str, namespace: str = "kube-system", *, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "agent", "image": "agent:1", "resources": {"requests": {"cpu": cpu}}}
                    ]
                },
            },
        },
    }


def pvc(
    name: str, namespace: str = "batch", *, volume: str = "", storage_class: str = "gp3"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"]}
    if volume:
        spec["volumeName"] = volume
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def pv(name: str, zone: str = "us-east-1a") -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}
    return {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "100Gi"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def storage_class(name: str, *, default: bool = False) -> dict[str, Any]:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def test_list_daemonsets_reads_every_namespace_page_by_page(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 4 DaemonSets in two namespaces and a page size of 3
    for i in range(3):
        server.add_daemonset(daemonset(f"agent-{i}"))
    server.add_daemonset(daemonset("dcgm-exporter", "gpu-operator", cpu="1"))

    # When they are listed
    daemonsets = {d.key: d for d in cluster.list_daemonsets()}

    # Then all come back over two apps/v1 pages, each as the pod it would put on a node
    assert sorted(daemonsets) == [
        "gpu-operator/dcgm-exporter",
        "kube-system/agent-0",
        "kube-system/agent-1",
        "kube-system/agent-2",
    ]
    calls = list_calls(server, "/apis/apps/v1/daemonsets")
    assert len(calls) == 2 and calls[1].query["continue"]
    exporter = daemonsets["gpu-operator/dcgm-exporter"].pod
    assert exporter.is_daemonset and exporter.requests.get("cpu") == 1000


def test_a_daemonset_or_pod_template_the_scaler_cannot_read_is_left_out_with_a_warning(
    server: FakeKubeApiServer, cluster: KubernetesCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a DaemonSet and a PodTemplate in some namespace asking 100E of memory (the API server
    # stores it; past 2^63-1 bytes, this scaler cannot read it), beside ones that are fine
    server.add_daemonset(daemonset("agent"))
    server.add_daemonset(daemonset("greedy", "team-a", cpu="100E"))
    server.add_pod_template(pod_template("ps", namespace="batch"))
    huge = pod_template("huge", namespace="team-a")
    huge["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "100E"
    server.add_pod_template(huge)

    # When they are listed
    with caplog.at_level(logging.WARNING):
        daemonsets, templates = cluster.list_daemonsets(), cluster.list_pod_templates()

    # Then the runs go on without them (one object anyone may create must not stop every run of every
    # group: the pods they describe could not fit any node either), each named in a warning
    assert [d.key for d in daemonsets] == ["kube-system/agent"]
    assert [t.key for t in templates] == ["batch/ps"]
    lines = [r.getMessage() for r in caplog.records if "left out of this run" in r.getMessage()]
    assert len(lines) == 2
    assert any("(team-a/greedy): malformed DaemonSet:" in line for line in lines)
    assert any("(team-a/huge): malformed PodTemplate:" in line for line in lines)


def test_list_volumes_claims_and_classes_page_and_parse(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 4 claims (one bound), 4 volumes and 2 storage classes, with a page size of 3
    for i in range(3):
        server.add_pvc(pvc(f"data-{i}"))
    server.add_pvc(pvc("bound", "ml", volume="pv-0"))
    for i in range(4):
        server.add_pv(pv(f"pv-{i}"))
    server.add_storage_class(storage_class("gp3", default=True))
    server.add_storage_class(storage_class("io2"))

    # When they are listed
    claims = {c.key: c for c in cluster.list_persistent_volume_claims()}
    volumes = {v.name: v for v in cluster.list_persistent_volumes()}
    classes = {c.name: c for c in cluster.list_storage_classes()}

    # Then every object comes back, read page by page from its API path, as domain objects
    assert len(claims) == 4 and claims["ml/bound"].volume_name == "pv-0"
    assert claims["batch/data-0"].storage_class == "gp3" and not claims["batch/data-0"].volume_name
    assert sorted(volumes) == ["pv-0", "pv-1", "pv-2", "pv-3"]
    assert volumes["pv-0"].node_affinity[0][0].key == "topology.kubernetes.io/zone"
    assert classes["gp3"].is_default and classes["gp3"].waits_for_consumer and not classes["io2"].is_default
    assert len(list_calls(server, "/api/v1/persistentvolumeclaims")) == 2
    assert len(list_calls(server, "/api/v1/persistentvolumes")) == 2
    assert len(list_calls(server, "/apis/storage.k8s.io/v1/storageclasses")) == 1


def test_list_namespaces_gives_their_labels_by_name(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 4 namespaces, one labelled for a team
    for name in ("default", "kube-system", "batch"):
        server.add_namespace({"metadata": {"name": name}})
    server.add_namespace({"metadata": {"name": "ml", "labels": {"team": "llm"}}})

    # When they are listed
    namespaces = cluster.list_namespaces()

    # Then each name maps to its labels, the API server's metadata.name label included
    assert sorted(namespaces) == ["batch", "default", "kube-system", "ml"]
    assert namespaces["ml"] == {"team": "llm", "kubernetes.io/metadata.name": "ml"}
    assert len(list_calls(server, "/api/v1/namespaces")) == 2


def budget(name: str, namespace: str, selector: dict[str, Any] | None, min_available: int) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget as created: the fake API server computes its status."""
    spec: dict[str, Any] = {"minAvailable": min_available}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def test_list_pod_disruption_budgets_reads_each_selector_and_the_status_as_it_is_now(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given three Ready pods of one job under a budget keeping 2 (1 disruption allowed), a budget with
    # the empty selector over namespace "ml", a budget without a selector, and a page size of 3
    for i in range(3):
        server.add_pod(pod(f"t1-{i}", "batch", node="n1", phase="Running", ready=True, labels={"job": "t1"}))
    server.add_pod(pod("serve", "ml", node="n1", phase="Running", ready=True))
    server.add_pdb(budget("train", "batch", {"matchLabels": {"job": "t1"}}, 2))
    server.add_pdb(budget("all", "ml", {}, 0))
    server.add_pdb(budget("none", "batch", None, 0))
    server.add_pdb(budget("late", "ml", {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, 1))

    # When they are listed
    budgets = {b.key: b for b in cluster.list_pod_disruption_budgets()}

    # Then every budget comes back from the cluster-wide list, paged, with its selector and the
    # status.disruptionsAllowed the API server computed
    assert budgets == {
        "batch/train": DisruptionBudget("batch", "train", LabelSelector((("job", "t1"),)), 1),
        "ml/all": DisruptionBudget("ml", "all", LabelSelector(), 1),
        "batch/none": DisruptionBudget("batch", "none", None, 0),
        "ml/late": DisruptionBudget("ml", "late", LabelSelector((), (Requirement("app", "Exists"),)), 0),
    }
    assert len(list_calls(server, "/apis/policy/v1/poddisruptionbudgets")) == 2

    # When one pod of the job is evicted and the budgets are listed again
    cluster.evict("batch", "t1-0")
    again = {b.key: b for b in cluster.list_pod_disruption_budgets()}

    # Then the budget shows its status now (the earlier list is not reused): no disruption left
    assert again["batch/train"].disruptions_allowed == 0


@pytest.mark.parametrize(
    ("path", "listing"),
    [
        (r"^/apis/policy/v1/poddisruptionbudgets$", KubernetesCluster.list_pod_disruption_budgets),
        (r"^/apis/apps/v1/daemonsets$", KubernetesCluster.list_daemonsets),
        (r"^/api/v1/persistentvolumeclaims$", KubernetesCluster.list_persistent_volume_claims),
        (r"^/api/v1/persistentvolumes$", KubernetesCluster.list_persistent_volumes),
        (r"^/apis/storage.k8s.io/v1/storageclasses$", KubernetesCluster.list_storage_classes),
        (r"^/api/v1/namespaces$", KubernetesCluster.list_namespaces),
    ],
)
def test_new_listings_map_failures_like_the_pod_list(
    server: FakeKubeApiServer, cluster: KubernetesCluster, path: str, listing: Any
) -> None:
    # Given an API server that answers 403, then 500, on this listing
    server.inject("GET", path, status=403)
    server.inject("GET", path, status=500)

    # When / Then 403 is an AuthError and 500 a ClusterReadError naming the list
    with pytest.raises(AuthError, match="403"):
        listing(cluster)
    with pytest.raises(ClusterReadError, match=r"list \w+ \(page 1\).*500"):
        listing(cluster)


def test_a_listing_the_cluster_role_does_not_grant_is_forbidden(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a ClusterRole without the storage class rule
    rules = [r for r in CLUSTER_ROLE["rules"] if "storageclasses" not in r["resources"]]
    server.enforce_cluster_role({**CLUSTER_ROLE, "rules": rules})

    # When / Then the list fails as on a cluster whose RBAC lacks the rule
    with pytest.raises(AuthError, match=r"403.*cannot list resource \"storageclasses\""):
        cluster.list_storage_classes()


# ---------------------------------------------------------------------------------------------- read failures


def test_unauthorized_is_an_auth_error(server: FakeKubeApiServer, sleeps: Sleeps) -> None:
    # Given a client with a token the API server rejects
    api = build_transport(server.url, token="wrong")
    cluster = make_cluster(api, sleeps)

    # When / Then
    with pytest.raises(AuthError, match="401"):
        cluster.list_nodes()
    api.close()


def test_forbidden_is_an_auth_error(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given RBAC forbids listing nodes
    server.inject("GET", r"^/api/v1/nodes$", status=403)

    # When / Then
    with pytest.raises(AuthError, match="403"):
        cluster.list_nodes()


def test_server_error_mid_pagination_is_a_read_error(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 7 pods (3 pages) and an API server failing on the second page only
    for i in range(7):
        server.add_pod(pod(f"p{i}"))
    server.inject("GET", PODS_PATH, times=1)  # the first page passes (no status: served normally)
    server.inject("GET", PODS_PATH, status=500, times=1)

    # When / Then the whole list fails: never act on the first page alone
    with pytest.raises(ClusterReadError, match=r"page 2.*500"):
        cluster.list_pods()
    assert len(list_calls(server)) == 2


def test_expired_continue_token_restarts_the_list_once(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given 7 pods and a continue token that expires on the second page
    for i in range(7):
        server.add_pod(pod(f"p{i}"))
    server.inject("GET", PODS_PATH, times=1)
    server.inject("GET", PODS_PATH, status=410, times=1)

    # When the pods are listed
    pods = cluster.list_pods()

    # Then the list started over without a token and read all pages
    assert len(pods) == 7
    calls = list_calls(server)
    assert ["continue" in c.query for c in calls] == [False, True, False, True, True]


def test_continue_token_expiring_twice_is_a_read_error(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a continue token that expires on every restart
    for i in range(7):
        server.add_pod(pod(f"p{i}"))
    for _ in range(2):
        server.inject("GET", PODS_PATH, times=1)
        server.inject("GET", PODS_PATH, status=410, times=1)

    # When / Then
    with pytest.raises(ClusterReadError, match="expired twice"):
        cluster.list_pods()


def test_read_timeout_is_a_read_error(server: FakeKubeApiServer, api: RestTransport, sleeps: Sleeps) -> None:
    # Given an API server slower than the read timeout
    server.add_node(node("gpu-0"))
    server.inject("GET", r"^/api/v1/nodes$", delay=1.0, times=-1)
    cluster = make_cluster(api, sleeps, read_timeout=0.2)

    # When / Then (urllib3 retries a GET once on a read error, then the adapter maps the failure).
    # The server answers after 1 s: a timeout error at all shows the configured 0.2 s read timeout
    # cut each request, however slow the machine (no wall-clock bound to race).
    with pytest.raises(ClusterReadError, match=r"(?i)timeout|timed out"):
        cluster.list_nodes()
    assert len(list_calls(server, "/api/v1/nodes")) == 2


def test_dropped_connection_is_a_read_error(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given an API server that closes every connection without answering
    server.inject("GET", r"^/api/v1/nodes$", drop=True, times=-1)

    # When / Then
    with pytest.raises(ClusterReadError, match="list nodes"):
        cluster.list_nodes()


def test_one_dropped_connection_on_a_read_is_retried(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given an API server that drops one connection
    server.add_node(node("gpu-0"))
    server.inject("GET", r"^/api/v1/nodes$", drop=True, times=1)

    # When the nodes are listed
    nodes = cluster.list_nodes()

    # Then urllib3 retried the idempotent GET
    assert [n.name for n in nodes] == ["gpu-0"]
    assert len(list_calls(server, "/api/v1/nodes")) == 2


def test_refused_connection_is_a_read_error(sleeps: Sleeps) -> None:
    # Given an address nobody listens on
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = build_transport(f"http://127.0.0.1:{port}", token=TOKEN)

    # When / Then
    with pytest.raises(ClusterReadError, match="list pods"):
        make_cluster(api, sleeps).list_pods()
    api.close()


def test_throttled_list_is_retried_after_retry_after(
    server: FakeKubeApiServer, cluster: KubernetesCluster, sleeps: Sleeps
) -> None:
    # Given an API server that throttles two requests, asking to come back in 2 s
    server.add_node(node("gpu-0"))
    server.inject("GET", r"^/api/v1/nodes$", status=429, retry_after=2, times=2)

    # When the nodes are listed
    nodes = cluster.list_nodes()

    # Then the adapter waited as asked and got the list
    assert [n.name for n in nodes] == ["gpu-0"]
    assert sleeps == [2.0, 2.0]


def test_persistent_throttling_is_a_throttled_error(
    server: FakeKubeApiServer, cluster: KubernetesCluster, sleeps: Sleeps
) -> None:
    # Given an API server that throttles every request, without Retry-After
    server.inject("GET", r"^/api/v1/nodes$", status=429, times=-1)

    # When / Then: 3 retries with exponential backoff, then ThrottledError
    with pytest.raises(ThrottledError):
        cluster.list_nodes()
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(list_calls(server, "/api/v1/nodes")) == 4


# ---------------------------------------------------------------------------------------------- cordon


def test_cordon_merge_patches_annotation_and_unschedulable(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a schedulable node
    server.add_node(node("gpu-0"))

    # When it is cordoned
    cluster.cordon("gpu-0", NOW)

    # Then one JSON merge patch set unschedulable and the cordoned-at annotation (RFC 3339, UTC)
    (patch,) = [c for c in server.calls if c.method == "PATCH"]
    assert patch.path == "/api/v1/nodes/gpu-0"
    assert patch.headers["content-type"] == "application/merge-patch+json"
    assert patch.body == {
        "metadata": {"annotations": {ANNOTATION_CORDONED_AT: "2026-12-02T12:00:00Z"}},
        "spec": {"unschedulable": True},
    }
    stored = server.get_node("gpu-0")
    assert stored is not None and stored["spec"]["unschedulable"] is True
    got = cluster.get_node("gpu-0")
    assert got is not None and got.cordoned_by_scaler and got.cordoned_at == NOW
    assert stored["metadata"]["labels"]  # a merge patch leaves the rest alone


def test_cordon_with_current_resource_version_applies(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node read just now
    server.add_node(node("gpu-0"))
    read = cluster.get_node("gpu-0")
    assert read is not None

    # When it is cordoned on that read
    cluster.cordon("gpu-0", NOW, resource_version=read.resource_version)

    # Then the precondition travelled in the patch and held
    (patch,) = [c for c in server.calls if c.method == "PATCH"]
    assert patch.body["metadata"]["resourceVersion"] == read.resource_version
    stored = server.get_node("gpu-0")
    assert stored is not None and stored["spec"]["unschedulable"] is True


def test_cordon_on_a_stale_read_is_a_conflict(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given a node read, then changed by someone else (say, a pod was bound and its labels changed)
    server.add_node(node("gpu-0"))
    read = cluster.get_node("gpu-0")
    assert read is not None
    server.update_node("gpu-0", lambda obj: obj["metadata"]["labels"].update(changed="yes"))

    # When it is cordoned on the stale read
    with pytest.raises(ConflictError, match="409"):
        cluster.cordon("gpu-0", NOW, resource_version=read.resource_version)

    # Then nothing was written
    stored = server.get_node("gpu-0")
    assert stored is not None and not stored["spec"].get("unschedulable")
    assert ANNOTATION_CORDONED_AT not in (stored["metadata"].get("annotations") or {})


def test_cordon_missing_node_is_not_found(cluster: KubernetesCluster) -> None:
    # Given no node named ghost
    # When / Then
    with pytest.raises(NotFoundError):
        cluster.cordon("ghost", NOW)


def test_uncordon_clears_annotation_and_unschedulable(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node the scaler cordoned
    server.add_node(node("gpu-0"))
    cluster.cordon("gpu-0", NOW)

    # When it is uncordoned
    cluster.uncordon("gpu-0")

    # Then the annotation is removed (merge patch null) and the node schedulable again
    patch = [c for c in server.calls if c.method == "PATCH"][-1]
    assert patch.body == {
        "metadata": {"annotations": {ANNOTATION_CORDONED_AT: None}},
        "spec": {"unschedulable": False},
    }
    got = cluster.get_node("gpu-0")
    assert got is not None and not got.unschedulable and got.cordoned_at is None


def test_failed_patch_is_an_action_error_and_not_retried(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given an API server that drops the connection of one PATCH
    server.add_node(node("gpu-0"))
    server.inject("PATCH", r"^/api/v1/nodes/gpu-0$", drop=True, times=1)

    # When / Then the write is not replayed blindly by the transport
    with pytest.raises(ClusterActionError, match="cordon node gpu-0"):
        cluster.cordon("gpu-0", NOW)
    assert len([c for c in server.calls if c.method == "PATCH"]) == 1


# ------------------------------------------------------------------------------------------- evict / delete


def add_pdb(server: FakeKubeApiServer, min_available: int) -> None:
    server.add_pdb(
        {
            "metadata": {"name": "train", "namespace": "batch"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "train"}}},
        }
    )


def test_evict_allowed_by_the_budget_removes_the_pod(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given two ready pods and a budget that needs one
    server.add_pod(pod("a", node="n1", phase="Running", ready=True))
    server.add_pod(pod("b", node="n1", phase="Running", ready=True))
    add_pdb(server, 1)

    # When one is evicted
    cluster.evict("batch", "a")

    # Then the Eviction API took it (a policy/v1 Eviction POSTed to the subresource)
    assert server.evictions == [("batch", "a")]
    (call,) = [c for c in server.calls if c.method == "POST"]
    assert call.path == "/api/v1/namespaces/batch/pods/a/eviction"
    assert call.body["apiVersion"] == "policy/v1" and call.body["kind"] == "Eviction"


def test_evict_blocked_by_the_budget_is_eviction_blocked(
    server: FakeKubeApiServer, cluster: KubernetesCluster, sleeps: Sleeps
) -> None:
    # Given a ready pod whose budget allows no disruption
    server.add_pod(pod("a", node="n1", phase="Running", ready=True))
    add_pdb(server, 1)

    # When / Then: a distinct, retry-later error, raised at once (no waiting inside the run)
    with pytest.raises(EvictionBlockedError, match="disruption budget"):
        cluster.evict("batch", "a")
    assert server.get_pod("batch", "a") is not None
    assert sleeps == []


def test_evict_missing_pod_is_success(cluster: KubernetesCluster) -> None:
    # Given no such pod
    # When / Then no error: the pod is gone, which is what eviction wanted
    cluster.evict("batch", "ghost")


def test_delete_pod_bypasses_budgets_and_missing_is_success(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a pod protected by a budget
    server.add_pod(pod("a", node="n1", phase="Running", ready=True))
    add_pdb(server, 1)

    # When it is deleted (forced drain), twice
    cluster.delete_pod("batch", "a", grace_seconds=30)
    cluster.delete_pod("batch", "a", grace_seconds=30)

    # Then it is gone, with the grace period sent, and the second delete was a no-op
    assert server.get_pod("batch", "a") is None
    delete = next(c for c in server.calls if c.method == "DELETE")
    assert delete.query["gracePeriodSeconds"] == "30"


def test_delete_node_and_missing_node_is_success(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a node
    server.add_node(node("gpu-0"))

    # When it is deleted twice
    cluster.delete_node("gpu-0")
    cluster.delete_node("gpu-0")

    # Then it is gone and the 404 of the second delete counted as success
    assert server.get_node("gpu-0") is None


def test_delete_node_server_error_is_an_action_error(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given an API server failing deletes
    server.add_node(node("gpu-0"))
    server.inject("DELETE", r"^/api/v1/nodes/", status=503)

    # When / Then
    with pytest.raises(ClusterActionError, match="503"):
        cluster.delete_node("gpu-0")


# ---------------------------------------------------------------------------------------------- events


def test_events_are_written_on_pods_and_nodes(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given an event about a pod and one about a node
    events = [
        ClusterEvent(
            ObjectRef("Pod", "big", "batch", "uid-1"),
            "NotTriggerScaleUp",
            "no group matches the node selector",
            EventType.WARNING,
        ),
        ClusterEvent(ObjectRef("Node", "gpu-0"), "ScaleDown", "cordoned: idle for 10 min"),
    ]

    # When they are recorded
    written = cluster.record_events(events)

    # Then both exist as core/v1 Events (the node's in "default"), from our component
    assert written == 2
    by_kind = {e["involvedObject"]["kind"]: e for e in server.events()}
    pod_event, node_event = by_kind["Pod"], by_kind["Node"]
    assert pod_event["metadata"]["namespace"] == "batch"
    assert pod_event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "big",
        "namespace": "batch",
        "uid": "uid-1",
    }
    assert pod_event["reason"] == "NotTriggerScaleUp" and pod_event["type"] == "Warning"
    assert pod_event["source"] == {"component": constants.EVENT_SOURCE}
    assert pod_event["reportingComponent"] == constants.EVENT_SOURCE
    assert pod_event["count"] == 1
    assert datetime.fromisoformat(pod_event["firstTimestamp"]) == NOW
    assert node_event["metadata"]["namespace"] == "default"
    assert "namespace" not in node_event["involvedObject"]
    assert node_event["type"] == "Normal"


def test_events_are_bounded_and_messages_truncated(
    server: FakeKubeApiServer, api: RestTransport, sleeps: Sleeps
) -> None:
    # Given more events than one call may write, with a 5 KB message
    cluster = make_cluster(api, sleeps, max_events_per_call=4)
    events = [
        ClusterEvent(ObjectRef("Pod", f"p{i}", "batch"), "NotTriggerScaleUp", "é" * 2500) for i in range(6)
    ]

    # When they are recorded
    written = cluster.record_events(events)

    # Then only the first 4 were written, each message cut to 1 KB
    assert written == 4
    stored = server.events()
    assert len(stored) == 4
    assert all(len(e["message"].encode()) <= 1024 for e in stored)


def test_failing_event_endpoint_does_not_raise(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given an API server failing every event write
    server.inject("POST", r"/events$", status=500, times=-1)
    events = [ClusterEvent(ObjectRef("Pod", f"p{i}", "batch"), "R", "m") for i in range(10)]

    # When they are recorded
    written = cluster.record_events(events)

    # Then nothing is written, nothing raised, and it gave up after 3 failures in a row
    assert written == 0
    assert len([c for c in server.calls if c.method == "POST"]) == 3


def test_events_stop_at_the_first_auth_failure(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given RBAC forbidding event creation
    server.inject("POST", r"/events$", status=403, times=-1)
    events = [ClusterEvent(ObjectRef("Pod", f"p{i}", "batch"), "R", "m") for i in range(10)]

    # When they are recorded
    written = cluster.record_events(events)

    # Then the first refusal ends the call
    assert written == 0
    assert len([c for c in server.calls if c.method == "POST"]) == 1


def test_one_failed_event_does_not_stop_the_others(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given one failing event write
    server.inject("POST", r"/events$", status=500, times=1)
    events = [ClusterEvent(ObjectRef("Pod", f"p{i}", "batch"), "R", "m") for i in range(3)]

    # When / Then the other two are written
    assert cluster.record_events(events) == 2


# ---------------------------------------------------------------------------------------------- factory


def test_cluster_from_config_authenticates_with_an_eks_token(server: FakeKubeApiServer) -> None:
    # Given a config naming the endpoint and CA (no DescribeCluster needed) and STS credentials
    server.require_token(None)
    server.add_node(node("gpu-0"))
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    config = parse_config(
        {
            "cluster_name": "gpu-cluster",
            "region": "us-west-2",
            "node_groups": [{"name": "a100", "asg_name": "asg-a100", "instance_type": "p4d.24xlarge"}],
            "kubernetes": {"endpoint": server.url, "certificate_authority": ca},
        }
    )
    with mock_aws():
        sts = boto3.client("sts", region_name="us-west-2")

        # When the cluster is built from config and listed
        cluster = cluster_from_config(config, sts_client=sts)
        nodes = cluster.list_nodes()

    # Then the request carried an EKS token bound to the cluster name
    assert [n.name for n in nodes] == ["gpu-0"]
    authorization = list_calls(server, "/api/v1/nodes")[0].headers["authorization"]
    assert authorization.startswith("Bearer " + TOKEN_PREFIX)
    encoded = authorization.removeprefix("Bearer " + TOKEN_PREFIX)
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    assert url.startswith("https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity")
    assert "x-k8s-aws-id" in url


def test_status_message_is_kept_in_errors(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given a 409 with the API server's explanation
    server.inject(
        "PATCH",
        r"^/api/v1/nodes/",
        status=409,
        body={
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "Conflict",
            "code": 409,
            "message": 'Operation cannot be fulfilled on nodes "gpu-0": the object has been modified',
        },
    )
    server.add_node(node("gpu-0"))

    # When / Then the message names what happened (for the operator's log, never for branching)
    with pytest.raises(ConflictError, match="the object has been modified"):
        cluster.cordon("gpu-0", NOW)
    assert server.calls[-1].body["spec"]["unschedulable"] is True


# --------------------------------------------------------------------------- gangs and capacity requests


def _provisioning_request(name: str) -> dict[str, Any]:
    return provisioning_request(name, [("ps", 2)], namespace="batch")


def test_provisioning_requests_and_templates_page_and_parse(
    server: FakeKubeApiServer, api: RestTransport, sleeps: Sleeps
) -> None:
    # Given three requests (one already answered) and their PodTemplate
    server.add_pod_template(pod_template("ps", namespace="batch"))
    for name in ("a", "b"):
        server.add_provisioning_request(_provisioning_request(name))
    answered = _provisioning_request("c")
    answered["status"] = {"conditions": [condition("Provisioned", "True", "CapacityIsProvisioned")]}
    server.add_provisioning_request(answered)
    cluster = make_cluster(api, sleeps, page_size=2)
    # When they are listed
    requests = cluster.list_provisioning_requests()
    templates = cluster.list_pod_templates()
    # Then every page is read and parsed into domain objects
    assert [r.key for r in requests] == ["batch/a", "batch/b", "batch/c"]
    assert requests[0].class_name == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert requests[0].generation == 1 and requests[0].uid
    assert requests[2].is_true("Provisioned")
    assert [(t.key, t.pod.requests.gpus) for t in templates] == [("batch/ps", 8)]
    calls = list_calls(server, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests")
    assert len(calls) == 2


def test_pod_groups_of_both_apis_are_listed(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    server.add_pod_group(pod_group("llm", 4, namespace="batch"))
    server.add_pod_group(pod_group("vc", 8, volcano=True, namespace="batch"))
    groups = cluster.list_pod_groups()
    assert sorted((g.key, str(g.kind), g.min_member) for g in groups) == [
        ("batch/llm", "coscheduling", 4),
        ("batch/vc", "volcano", 8),
    ]


def test_a_missing_crd_lists_nothing(server: FakeKubeApiServer, cluster: KubernetesCluster) -> None:
    # Given an API server without the ProvisioningRequest and PodGroup CRDs (their paths answer 404)
    server.inject("GET", r"^/apis/(autoscaling\.x-k8s\.io|scheduling\.)", status=404, times=-1)
    # When listing, Then nothing is found and nothing raises
    assert cluster.list_provisioning_requests() == ()
    assert cluster.list_pod_groups() == ()


def test_conditions_are_merge_patched_on_the_status_subresource(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a request
    created = server.add_provisioning_request(_provisioning_request("a"))
    uid = created["metadata"]["uid"]
    conditions = (
        Condition("Accepted", "True", "Accepted", "accepted", 1, NOW),
        Condition("Provisioned", "True", "CapacityIsProvisioned", "2 pod(s) on 2 new a100 node(s)", 1, NOW),
    )
    # When its conditions are set
    cluster.set_provisioning_request_conditions(ConditionUpdate("batch", "a", uid, conditions, "x"))
    # Then the status holds them in the API's format, through a merge patch of the status subresource
    stored = server.get_provisioning_request("batch", "a")
    assert stored is not None
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in stored["status"]["conditions"]] == [
        ("Accepted", "True", 1),
        ("Provisioned", "True", 1),
    ]
    assert stored["status"]["conditions"][1]["lastTransitionTime"] == "2026-12-02T12:00:00Z"
    [patch] = [c for c in server.calls if c.method == "PATCH"]
    assert patch.path.endswith("/provisioningrequests/a/status")
    assert patch.headers["content-type"].startswith("application/merge-patch+json")


def test_conditions_of_a_recreated_or_deleted_request_are_not_written(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    server.add_provisioning_request(_provisioning_request("a"))
    condition = (Condition("Accepted", "True", "Accepted", "accepted", 1, NOW),)
    # A uid read before the request was re-created is a conflict; a deleted one is not found
    with pytest.raises(ConflictError):
        cluster.set_provisioning_request_conditions(ConditionUpdate("batch", "a", "old-uid", condition, "x"))
    with pytest.raises(NotFoundError):
        cluster.set_provisioning_request_conditions(ConditionUpdate("batch", "gone", "", condition, "x"))


def test_requests_of_an_older_crd_are_read_and_answered_at_v1beta1(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a cluster whose ProvisioningRequest CRD serves only v1beta1 (cluster-autoscaler < 1.31)
    server.inject("GET", r"^/apis/autoscaling\.x-k8s\.io/v1/", status=404, times=-1)
    server.add_provisioning_request(_provisioning_request("a"))
    # When the requests are listed and one is answered
    [request] = cluster.list_provisioning_requests()
    condition = (Condition("Accepted", "True", "Accepted", "accepted", 1, NOW),)
    update = ConditionUpdate("batch", "a", request.uid, condition, "x", request.version)
    cluster.set_provisioning_request_conditions(update)
    # Then both go to v1beta1
    assert request.version == "v1beta1"
    [patch] = [c for c in server.calls if c.method == "PATCH"]
    assert patch.path.startswith("/apis/autoscaling.x-k8s.io/v1beta1/")


# ---------------------------------------------------------------------------------------------- DRA


def test_dra_objects_are_listed_from_resource_k8s_io_v1(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given a cluster with a GPU node's ResourceSlice, a DeviceClass, a template and an allocated claim
    server.add_dra_object(gpu_slice("gpu-0", 8))
    server.add_dra_object(device_class())
    server.add_dra_object(claim_template())
    server.add_dra_object(resource_claim("train-0-gpu", allocated_on="gpu-0", devices=("gpu-3",)))
    # When each is listed (one paged call each)
    slices, classes = cluster.list_resource_slices(), cluster.list_device_classes()
    claims, templates = cluster.list_resource_claims(), cluster.list_resource_claim_templates()
    # Then they arrive parsed
    assert [(s.node_name, len(s.devices)) for s in slices] == [("gpu-0", 8)]
    assert [c.name for c in classes] == ["gpu.nvidia.com"] and [t.key for t in templates] == ["ml/one-gpu"]
    assert claims[0].allocated and claims[0].devices == (("gpu.nvidia.com", "gpu-0", "gpu-3"),)


def test_a_cluster_without_the_dra_api_has_no_dra(
    server: FakeKubeApiServer, cluster: KubernetesCluster
) -> None:
    # Given an API server that does not serve resource.k8s.io/v1 (before Kubernetes 1.34)
    server.inject("GET", r"^/apis/resource\.k8s\.io/", status=404, times=-1)
    # When / Then every DRA list is empty, not an error
    assert cluster.list_resource_slices() == () and cluster.list_device_classes() == ()
    assert cluster.list_resource_claims() == () and cluster.list_resource_claim_templates() == ()


GENERATED_CLASSES_PROBE = """
import sys
from datetime import UTC, datetime
from shared.adapters.kubernetes.auth import build_transport
from shared.adapters.kubernetes.cluster import ClusterOptions, KubernetesCluster
from shared.domain.operations import ClusterEvent, EventType, ObjectRef
from shared.local.kube_api_server import FakeKubeApiServer
from tests.builders import node, pod

with FakeKubeApiServer() as server:
    server.add_node(node("gpu-1", "i-0123456789abcdef0"))
    server.add_pod(pod("train-0", gpus=1, node="gpu-1"))
    cluster = KubernetesCluster(build_transport(server.url, token="t"), ClusterOptions())
    assert [p.name for p in cluster.list_pods()] == ["train-0"]
    assert [n.name for n in cluster.list_nodes()] == ["gpu-1"]
    cluster.cordon("gpu-1", datetime.now(UTC))
    cluster.record_events([ClusterEvent(ObjectRef("Node", "gpu-1"), "Probe", "a probe", EventType.NORMAL)])
    cluster.evict("default", "train-0")
    cluster.list_resource_slices()
    cluster.list_provisioning_requests()
loaded = [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]
print(loaded)
"""


def test_the_adapter_never_imports_the_kubernetes_package() -> None:
    # Given a fresh interpreter (this one has loaded whatever other tests loaded)
    # When the adapter reads, cordons, records an event and evicts through the fake API server
    done = subprocess.run(
        [sys.executable, "-c", GENERATED_CLASSES_PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    # Then no module of the kubernetes package was imported: the adapter builds its requests and parses
    # every body itself; `import kubernetes.client` alone (its ~1,000 generated modules) took ~190 ms of
    # each cold start, and its generated API classes ~1 s more at the first run
    assert done.stdout.strip() == "[]"
