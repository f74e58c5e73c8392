"""The real ``kubectl`` against the fake Kubernetes API server (what `make demo --hold` offers).

kubectl sends no bearer token over plain HTTP, so the server lets tokenless requests from loopback
in (``allow_anonymous_loopback``) while the token's identity stays RBAC-enforced. Skipped when
kubectl is not on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from shared.local.kube_api_server import FakeKubeApiServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
TOKEN = "scaler-token"
TIMEOUT = 30  # seconds per kubectl call


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.34.1"},
        },
    }


def pod(name: str, namespace: str, node_name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "metadata": meta,
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "registry.example/a:1"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def server() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer(allow_anonymous_loopback=True) as fake:
        fake.require_token(TOKEN)
        fake.enforce_cluster_role(
            {"kind": "ClusterRole", "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}
        )
        for name in ("gpu-1", "gpu-2"):
            fake.add_node(node(name))
        ds = fake.add_daemonset(
            {"metadata": {"name": "device-plugin", "namespace": "kube-system"}, "spec": {}, "status": {}}
        )
        owner = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "device-plugin",
            "uid": ds["metadata"]["uid"],
            "controller": True,
        }
        fake.add_pod(pod("device-plugin-gpu-1", "kube-system", "gpu-1", owner))
        job = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-1", "controller": True}
        fake.add_pod(pod("train-a", "research", "gpu-1", job))
        fake.add_pod(pod("train-b", "research", "gpu-2"))
        yield fake


@pytest.fixture
def kubeconfig(server: FakeKubeApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig", TOKEN)


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    command = [KUBECTL, "--kubeconfig", str(kubeconfig), "--request-timeout=10s", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"{' '.join(args)}:\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_get_nodes_and_pods_in_all_namespaces_prints_server_side_tables(kubeconfig: Path) -> None:
    # Given a fake server seeded with two nodes and three pods
    # When kubectl lists them
    nodes = rows(kubectl(kubeconfig, "get", "nodes").stdout)
    pods = rows(kubectl(kubeconfig, "get", "pods", "-A").stdout)
    # Then the tables have the real columns and one row per object
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(r[0], r[1], r[4]) for r in nodes[1:]] == [
        ("gpu-1", "Ready", "v1.34.1"),
        ("gpu-2", "Ready", "v1.34.1"),
    ]
    assert pods[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"]
    assert [(r[0], r[1], r[2], r[3], r[6]) for r in pods[1:]] == [
        ("kube-system", "device-plugin-gpu-1", "1/1", "Running", "gpu-1"),
        ("research", "train-a", "1/1", "Running", "gpu-1"),
        ("research", "train-b", "1/1", "Running", "gpu-2"),
    ]


def test_get_of_several_kinds_and_json_output(kubeconfig: Path) -> None:
    # When kubectl gets two kinds at once, and one node as JSON
    both = kubectl(kubeconfig, "get", "nodes,pods", "-A").stdout
    one = kubectl(kubeconfig, "get", "node", "gpu-2", "-o", "jsonpath={.metadata.name}").stdout
    # Then both tables are printed, kind-prefixed, and the object is the stored one
    assert "node/gpu-1" in both and "pod/train-a" in both
    assert one == "gpu-2"


def test_cordon_then_drain_evicts_the_pods_but_not_the_daemonset_pod(
    server: FakeKubeApiServer, kubeconfig: Path
) -> None:
    # When kubectl cordons gpu-1, then drains it as docs/demo.md says (a Job's pod, a DaemonSet's pod)
    kubectl(kubeconfig, "cordon", "gpu-1")
    cordoned = rows(kubectl(kubeconfig, "get", "nodes").stdout)
    kubectl(kubeconfig, "drain", "gpu-1", "--ignore-daemonsets", "--timeout=20s")
    # Then the node is unschedulable, its job pod was evicted through the API, the DaemonSet pod stays
    assert cordoned[1][:2] == ["gpu-1", "Ready,SchedulingDisabled"]
    assert (server.get_node("gpu-1") or {})["spec"]["unschedulable"] is True
    assert server.evictions == [("research", "train-a")]
    assert server.get_pod("kube-system", "device-plugin-gpu-1") is not None
    assert server.get_pod("research", "train-b") is not None


def test_get_events_lists_the_events(server: FakeKubeApiServer, kubeconfig: Path) -> None:
    # Given an event about a node, written through the API
    http = urllib3.PoolManager()
    event = {
        "metadata": {"name": "gpu-1.cordon", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "gpu-1"},
        "reason": "ScaleDown",
        "message": "cordoned: idle",
        "type": "Normal",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    created = http.request(
        "POST",
        f"{server.url}/api/v1/namespaces/default/events",
        json=event,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    # (the token's identity may not create events: only tokenless kubectl is unrestricted)
    assert created.status == 403
    server.enforce_cluster_role(None)
    created = http.request(
        "POST",
        f"{server.url}/api/v1/namespaces/default/events",
        json=event,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert created.status == 201
    # When kubectl lists the events
    output = rows(kubectl(kubeconfig, "get", "events").stdout)
    # Then it shows it
    assert output[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert output[1][1:5] == ["Normal", "ScaleDown", "node/gpu-1", "cordoned:"]


def test_watch_streams_the_initial_objects_then_changes(server: FakeKubeApiServer, kubeconfig: Path) -> None:
    # Given kubectl watching the nodes (it ends after the server's timeout)
    assert KUBECTL is not None
    command = [KUBECTL, "--kubeconfig", str(kubeconfig), "get", "nodes", "-w", "--request-timeout=3s"]
    watcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        first = [watcher.stdout.readline() for _ in range(3)]
        # When a node is cordoned meanwhile
        server.update_node("gpu-2", lambda n: n["spec"].update(unschedulable=True))
        changed = watcher.stdout.readline()
    finally:
        watcher.kill()
        watcher.communicate(timeout=TIMEOUT)
    # Then the list came first, then the change
    assert first[0].split()[0] == "NAME" and [line.split()[0] for line in first[1:]] == ["gpu-1", "gpu-2"]
    assert changed.split()[:2] == ["gpu-2", "Ready,SchedulingDisabled"]


def test_a_request_without_token_is_refused_unless_anonymous_loopback_is_allowed(
    server: FakeKubeApiServer,
) -> None:
    # Given the flag off
    server.allow_anonymous_loopback = False
    # When a tokenless request comes in, Then it is refused; with the flag on it is served
    http = urllib3.PoolManager()
    assert http.request("GET", f"{server.url}/api/v1/nodes").status == 401
    server.allow_anonymous_loopback = True
    assert http.request("GET", f"{server.url}/api/v1/nodes").status == 200
    # and a wrong token is refused either way
    assert (
        http.request("GET", f"{server.url}/api/v1/nodes", headers={"Authorization": "Bearer x"}).status == 401
    )
