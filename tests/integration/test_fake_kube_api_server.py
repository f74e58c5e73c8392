"""The fake Kubernetes API server, exercised through the unmodified official ``kubernetes`` client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import ApiClient, ApiException, Configuration, CoreV1Api, PolicyV1Api

from shared.local.kube_api_server import FakeKubeApiServer, RecordedCall

TOKEN = "s3cr3t-token"


def make_pod(
    name: str,
    namespace: str = "default",
    *,
    phase: str = "Running",
    ready: bool = True,
    node: str | None = "node-a",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "registry.example/app:1"}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def make_node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


def make_api_client(server: FakeKubeApiServer, token: str = TOKEN, **settings: Any) -> ApiClient:
    configuration = Configuration(host=server.url, api_key={"authorization": f"Bearer {token}"})
    for key, value in settings.items():
        setattr(configuration, key, value)
    return ApiClient(configuration)


@pytest.fixture
def server() -> Iterator[FakeKubeApiServer]:
    with FakeKubeApiServer() as fake:
        fake.require_token(TOKEN)
        yield fake


@pytest.fixture
def api(server: FakeKubeApiServer) -> Iterator[ApiClient]:
    with make_api_client(server) as api_client:
        yield api_client


@pytest.fixture
def core(api: ApiClient) -> CoreV1Api:
    return CoreV1Api(api)


def raw_json(response: Any) -> Any:
    return json.loads(response.data)


def status_of(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


# --------------------------------------------------------------------------- lists


def test_list_pods_across_pages_with_limit_and_continue(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given 25 pods in two namespaces
    for i in range(25):
        server.add_pod(make_pod(f"pod-{i:02d}", namespace="team-a" if i % 2 else "team-b"))
    # When they are listed 10 at a time, following the continue token
    pages = []
    token = None
    while True:
        page = core.list_pod_for_all_namespaces(limit=10, _continue=token)
        pages.append(page)
        token = page.metadata._continue
        if not token:
            break
    # Then there are 3 pages with every pod exactly once, sorted by namespace then name
    assert [len(p.items) for p in pages] == [10, 10, 5]
    assert [p.metadata.remaining_item_count for p in pages] == [15, 5, None]
    names = [(p.metadata.namespace, p.metadata.name) for page in pages for p in page.items]
    assert names == sorted(names)
    assert len(set(names)) == 25
    assert all(page.metadata.resource_version == str(server.resource_version) for page in pages)


def test_raw_list_read_has_the_real_wire_shape(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given three pods
    for i in range(3):
        server.add_pod(make_pod(f"p{i}"))
    # When the first page of two is read as raw JSON
    body = raw_json(core.list_namespaced_pod("default", limit=2, _preload_content=False))
    # Then the envelope is a PodList whose items omit kind/apiVersion, like the real server's
    assert body["kind"] == "PodList"
    assert body["apiVersion"] == "v1"
    assert body["metadata"]["continue"]
    assert [item["metadata"]["name"] for item in body["items"]] == ["p0", "p1"]
    assert all("kind" not in item and "apiVersion" not in item for item in body["items"])
    assert all(item["metadata"]["uid"] and item["metadata"]["creationTimestamp"] for item in body["items"])
    # And the last page has no continue token
    rest = raw_json(
        core.list_namespaced_pod(
            "default", limit=2, _continue=body["metadata"]["continue"], _preload_content=False
        )
    )
    assert [item["metadata"]["name"] for item in rest["items"]] == ["p2"]
    assert "continue" not in rest["metadata"]


def test_namespaced_list_only_returns_that_namespace(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given pods in neighbouring namespaces
    for namespace in ("ml", "ml-batch", "mlx"):
        server.add_pod(make_pod("worker", namespace=namespace))
    # When one namespace is listed
    pods = core.list_namespaced_pod("ml-batch").items
    # Then only its pod is returned
    assert [(p.metadata.namespace, p.metadata.name) for p in pods] == [("ml-batch", "worker")]


def test_invalid_continue_token_is_a_bad_request(core: CoreV1Api) -> None:
    # Given / When a list is continued with a token the server never issued
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(limit=5, _continue="not-a-token")
    # Then the answer is a 400 BadRequest Status
    assert err.value.status == 400
    assert status_of(err.value)["reason"] == "BadRequest"


def test_field_selectors_on_phase_and_node_name(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given running, pending-unscheduled and pending-bound pods
    server.add_pod(make_pod("running", node="node-a"))
    server.add_pod(make_pod("pending-unscheduled", phase="Pending", ready=False, node=None))
    server.add_pod(make_pod("pending-bound", phase="Pending", ready=False, node="node-b"))

    def names(**kwargs: Any) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items]

    # When / Then pods are filtered by the selected fields
    assert names(field_selector="status.phase=Pending") == ["pending-bound", "pending-unscheduled"]
    assert names(field_selector="spec.nodeName=") == ["pending-unscheduled"]
    assert names(field_selector="status.phase==Pending,spec.nodeName!=") == ["pending-bound"]
    assert names(field_selector="status.phase!=Pending") == ["running"]
    assert names(field_selector="metadata.name=running,metadata.namespace=default") == ["running"]


def test_unsupported_field_selector_is_rejected_like_the_real_api(core: CoreV1Api) -> None:
    # Given / When a field the server does not index is used in a field selector
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.priority=5")
    # Then the request is a 400 that names the field
    assert err.value.status == 400
    assert "field label not supported: spec.priority" in status_of(err.value)["message"]


def test_node_field_selector_on_unschedulable(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given one cordoned node and one schedulable node
    server.add_node({"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}})
    server.add_node(make_node("open"))
    # When nodes are listed by spec.unschedulable
    cordoned = core.list_node(field_selector="spec.unschedulable=true").items
    schedulable = core.list_node(field_selector="spec.unschedulable=false").items
    # Then each list holds the matching node
    assert [n.metadata.name for n in cordoned] == ["cordoned"]
    assert [n.metadata.name for n in schedulable] == ["open"]


def test_label_selectors(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given pods with assorted labels
    server.add_pod(make_pod("web-1", labels={"app": "web", "tier": "front"}))
    server.add_pod(make_pod("web-2", labels={"app": "web"}))
    server.add_pod(make_pod("db-1", labels={"app": "db", "tier": "back"}))
    server.add_pod(make_pod("bare"))

    def names(selector: str) -> list[str]:
        return sorted(
            p.metadata.name for p in core.list_namespaced_pod("default", label_selector=selector).items
        )

    # When / Then every selector form filters as on the real server
    assert names("app=web") == ["web-1", "web-2"]
    assert names("app==web,tier=front") == ["web-1"]
    assert names("app!=web") == ["bare", "db-1"]
    assert names("tier") == ["db-1", "web-1"]
    assert names("!tier") == ["bare", "web-2"]
    assert names("app in (db, web),tier") == ["db-1", "web-1"]
    assert names("app notin (web)") == ["bare", "db-1"]
    assert names("") == ["bare", "db-1", "web-1", "web-2"]


def test_malformed_label_selector_is_a_bad_request(core: CoreV1Api) -> None:
    # Given / When a set-based selector lacks its parentheses
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(label_selector="app in web")
    # Then it is rejected with 400
    assert err.value.status == 400


# --------------------------------------------------------------------------- get / create / delete


def test_get_missing_pod_is_a_not_found_status(core: CoreV1Api) -> None:
    # Given an empty cluster
    # When a pod is read
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("ghost", "default")
    # Then the answer is a NotFound Status with details
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"
    assert body["message"] == 'pods "ghost" not found'
    assert body["details"] == {"name": "ghost", "kind": "pods"}
    assert err.value.headers["Content-Type"] == "application/json"


def test_get_node_returns_the_seeded_object(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a seeded node
    seeded = server.add_node(make_node("gpu-1", **{"node.kubernetes.io/instance-type": "g5.xlarge"}))
    # When it is read through the client
    node = core.read_node("gpu-1")
    # Then it carries the server-filled metadata
    assert node.kind == "Node"
    assert node.metadata.uid == seeded["metadata"]["uid"]
    assert node.metadata.resource_version == seeded["metadata"]["resourceVersion"]
    assert node.metadata.labels == {"node.kubernetes.io/instance-type": "g5.xlarge"}


def test_create_pod_and_node_then_conflict_when_they_exist(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a pod and a node created through the client
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="made"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
        status=client.V1PodStatus(phase="Running"),
    )
    created = core.create_namespaced_pod("default", pod)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="made-node")))
    # Then the pod starts Pending (the server ignores a posted status) and both are stored
    assert created.status.phase == "Pending"
    assert server.get_pod("default", "made")["metadata"]["uid"] == created.metadata.uid
    assert server.get_node("made-node") is not None
    # When the pod is created again
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod)
    # Then it is a 409 AlreadyExists
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"


def test_delete_node(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node
    server.add_node(make_node("doomed"))
    # When it is deleted
    result = core.delete_node("doomed")
    # Then the server answers a Success Status and forgets the node
    assert result["status"] == "Success"
    assert result["details"]["name"] == "doomed"
    assert server.get_node("doomed") is None
    # And deleting it again is a 404
    with pytest.raises(ApiException) as err:
        core.delete_node("doomed")
    assert err.value.status == 404


def test_delete_node_with_a_stale_uid_precondition_conflicts(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a node
    server.add_node(make_node("guarded"))
    # When it is deleted with a precondition on another uid
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="another-uid"))
    with pytest.raises(ApiException) as err:
        core.delete_node("guarded", body=options)
    # Then it is a 409 and the node survives
    assert err.value.status == 409
    assert server.get_node("guarded") is not None


def test_delete_pod_returns_the_pod(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a pod
    server.add_pod(make_pod("short-lived"))
    # When it is deleted
    deleted = core.delete_namespaced_pod("short-lived", "default")
    # Then the pod object comes back and is gone from the store
    assert deleted.metadata.name == "short-lived"
    assert server.get_pod("default", "short-lived") is None


# --------------------------------------------------------------------------- patches


def test_patch_node_with_a_dict_merges_annotations_and_cordons(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a node with an annotation
    server.add_node({"metadata": {"name": "n1", "annotations": {"keep": "1", "drop": "2"}}, "spec": {}})
    # When it is patched with a plain dict body
    node = core.patch_node(
        "n1", {"metadata": {"annotations": {"added": "3", "drop": None}}, "spec": {"unschedulable": True}}
    )
    # Then annotations are merged (null deletes) and the node is cordoned
    assert node.metadata.annotations == {"keep": "1", "added": "3"}
    assert node.spec.unschedulable is True
    assert server.get_node("n1")["spec"]["unschedulable"] is True
    # And the client sent a strategic merge patch (it rewrites json-patch for non-list bodies)
    assert server.calls[-1].headers["content-type"] == "application/strategic-merge-patch+json"


def test_patch_node_with_explicit_merge_patch_replaces_taints(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a node with two taints
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    server.add_node({"metadata": {"name": "n1"}, "spec": {"taints": taints}})
    # When a merge patch sets one taint
    patch = {"spec": {"taints": [{"key": "scaler/draining", "effect": "NoSchedule"}]}}
    node = core.patch_node("n1", patch, _content_type="application/merge-patch+json")
    # Then the list is replaced, not merged
    assert [t.key for t in node.spec.taints] == ["scaler/draining"]
    assert server.calls[-1].headers["content-type"] == "application/merge-patch+json"


def test_patch_node_with_a_json_patch_list(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node with a label
    server.add_node(make_node("n1", pool="gpu"))
    # When a JSON patch tests and replaces the label and adds an annotation
    ops = [
        {"op": "test", "path": "/metadata/labels/pool", "value": "gpu"},
        {"op": "replace", "path": "/metadata/labels/pool", "value": "gpu-draining"},
        {"op": "add", "path": "/metadata/annotations", "value": {"scaler/owner": "me"}},
    ]
    node = core.patch_node("n1", ops)
    # Then all operations apply, sent as application/json-patch+json
    assert node.metadata.labels == {"pool": "gpu-draining"}
    assert node.metadata.annotations == {"scaler/owner": "me"}
    assert server.calls[-1].headers["content-type"] == "application/json-patch+json"


def test_failed_json_patch_test_is_unprocessable(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node labelled pool=gpu
    server.add_node(make_node("n1", pool="gpu"))
    rv_before = server.get_node("n1")["metadata"]["resourceVersion"]
    # When a JSON patch's test op expects another value
    with pytest.raises(ApiException) as err:
        core.patch_node("n1", [{"op": "test", "path": "/metadata/labels/pool", "value": "cpu"}])
    # Then it is a 422 and nothing changes
    assert err.value.status == 422
    assert server.get_node("n1")["metadata"]["resourceVersion"] == rv_before


def test_patch_with_a_stale_resource_version_conflicts(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node read at some resourceVersion, then changed by someone else
    server.add_node(make_node("n1"))
    stale_rv = core.read_node("n1").metadata.resource_version
    server.update_node("n1", lambda node: node["metadata"].setdefault("labels", {}).update(other="writer"))
    # When it is patched with the stale resourceVersion
    patch = {"metadata": {"resourceVersion": stale_rv, "annotations": {"mine": "1"}}}
    with pytest.raises(ApiException) as err:
        core.patch_node("n1", patch)
    # Then the server answers 409 Conflict and keeps the node unchanged
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    assert "annotations" not in server.get_node("n1")["metadata"]
    # And the same patch with the current resourceVersion succeeds and bumps it
    current_rv = server.get_node("n1")["metadata"]["resourceVersion"]
    node = core.patch_node("n1", {"metadata": {"resourceVersion": current_rv, "annotations": {"mine": "1"}}})
    assert int(node.metadata.resource_version) > int(current_rv)


def test_patch_of_the_main_resource_keeps_status_but_the_status_subresource_changes_it(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a pending pod
    server.add_pod(make_pod("p", phase="Pending", ready=False, node=None))
    # When its status is patched through the main resource, then through /status
    core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    after_main = server.get_pod("default", "p")["status"]["phase"]
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    # Then only the /status patch changes the phase, as on the real server
    assert after_main == "Pending"
    assert server.get_pod("default", "p")["status"]["phase"] == "Running"


def test_dry_run_patch_answers_without_storing(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a schedulable node
    server.add_node(make_node("n1"))
    rv_before = server.resource_version
    # When it is cordoned with dryRun=All
    node = core.patch_node("n1", {"spec": {"unschedulable": True}}, dry_run="All")
    # Then the answer shows the change but nothing is stored
    assert node.spec.unschedulable is True
    assert "unschedulable" not in server.get_node("n1")["spec"]
    assert server.resource_version == rv_before


def test_replace_with_a_stale_resource_version_conflicts(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node read by the client, then labelled by someone else
    server.add_node(make_node("n1"))
    node = core.read_node("n1")
    server.update_node("n1", lambda obj: obj["metadata"].setdefault("labels", {}).update(x="y"))
    # When the stale copy is written back with PUT
    node.spec.unschedulable = True
    with pytest.raises(ApiException) as err:
        core.replace_node("n1", node)
    # Then the write is refused with 409
    assert err.value.status == 409


# --------------------------------------------------------------------------- evictions and PDBs


def eviction(name: str, namespace: str = "default") -> client.V1Eviction:
    return client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))


def test_eviction_without_a_budget_deletes_the_pod(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a running pod not covered by any PDB
    server.add_pod(make_pod("free"))
    # When it is evicted
    _, status, _ = core.create_namespaced_pod_eviction_with_http_info("free", "default", eviction("free"))
    # Then the server answers 201, deletes the pod and records the eviction
    assert status == 201
    assert server.get_pod("default", "free") is None
    assert server.evictions == [("default", "free")]


def test_eviction_of_a_missing_pod_is_not_found(core: CoreV1Api) -> None:
    # Given / When a pod that does not exist is evicted
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("ghost", "default", eviction("ghost"))
    # Then it is a 404
    assert err.value.status == 404


def test_eviction_blocked_by_a_pdb_until_another_pod_is_ready(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given three web pods, two of them Ready, and a PDB needing two available
    server.add_pod(make_pod("web-0", labels={"app": "web"}))
    server.add_pod(make_pod("web-1", labels={"app": "web"}))
    server.add_pod(make_pod("web-2", labels={"app": "web"}, ready=False))
    server.add_pdb(
        {
            "metadata": {"name": "web-pdb", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    # When a Ready pod is evicted
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("web-0", "default", eviction("web-0"))
    # Then the eviction is refused with 429 and the budget as the cause
    assert err.value.status == 429
    body = status_of(err.value)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
        }
    ]
    assert server.get_pod("default", "web-0") is not None
    # When the third pod becomes Ready and the eviction is retried
    server.update_pod("default", "web-2", lambda pod: pod["status"]["conditions"][0].update(status="True"))
    core.create_namespaced_pod_eviction("web-0", "default", eviction("web-0"))
    # Then it succeeds, and a further eviction is refused again
    assert server.evictions == [("default", "web-0")]
    with pytest.raises(ApiException) as again:
        core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    assert again.value.status == 429


def test_pending_pods_are_evicted_without_consulting_the_budget(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a PDB that allows no disruption and a Pending pod it selects
    server.add_pod(make_pod("stuck", phase="Pending", ready=False, node=None, labels={"app": "x"}))
    server.add_pdb(
        {
            "metadata": {"name": "x", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "x"}}},
        }
    )
    # When the Pending pod is evicted
    core.create_namespaced_pod_eviction("stuck", "default", eviction("stuck"))
    # Then it is gone, as the real eviction API skips PDBs for pods that are not running
    assert server.get_pod("default", "stuck") is None


def test_pdb_status_with_a_percentage_max_unavailable(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given four Ready pods and a PDB allowing 30% unavailable (rounded up to 2)
    for i in range(4):
        server.add_pod(make_pod(f"w{i}", labels={"app": "w"}))
    server.add_pdb(
        {
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {
                "maxUnavailable": "30%",
                "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["w"]}]},
            },
        }
    )
    # When the PDB is read through PolicyV1Api
    pdbs = PolicyV1Api(api).list_namespaced_pod_disruption_budget("default").items
    # Then its computed status allows two disruptions
    assert len(pdbs) == 1
    status = pdbs[0].status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (4, 2, 4)
    assert status.disruptions_allowed == 2


def test_eviction_can_mark_the_pod_terminating(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a server that keeps evicted pods as terminating
    server.eviction_marks_terminating = True
    server.add_pod(make_pod("slow"))
    # When the pod is evicted
    core.create_namespaced_pod_eviction("slow", "default", eviction("slow"))
    # Then the pod remains with a deletionTimestamp and phase Succeeded
    pod = server.get_pod("default", "slow")
    assert pod is not None
    assert pod["metadata"]["deletionTimestamp"]
    assert pod["status"]["phase"] == "Succeeded"


# --------------------------------------------------------------------------- events


def test_event_creation_in_core_and_events_v1(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given a core/v1 event and an events.k8s.io/v1 event
    core_event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="node-a.scale-up"),
        involved_object=client.V1ObjectReference(kind="Node", name="node-a"),
        reason="ScaleUp",
        message="added 2 nodes",
        type="Normal",
    )
    new_event = client.EventsV1Event(
        metadata=client.V1ObjectMeta(generate_name="scaler-"),
        event_time=datetime(2026, 1, 1, tzinfo=UTC),
        reason="ScaleDown",
        note="removed a node",
        action="Drain",
        reporting_controller="backlog-scaler",
        reporting_instance="scaler-1",
        type="Normal",
    )
    # When both are created
    created = CoreV1Api(api).create_namespaced_event("kube-system", core_event)
    created_v1 = client.EventsV1Api(api).create_namespaced_event("kube-system", new_event)
    # Then they are stored with server metadata and listed back
    assert created.metadata.uid and created.metadata.resource_version
    assert created_v1.metadata.name.startswith("scaler-")
    assert {e["reason"] for e in server.events()} == {"ScaleUp", "ScaleDown"}
    listed = CoreV1Api(api).list_namespaced_event("kube-system", field_selector="reason=ScaleUp").items
    assert [e.message for e in listed] == ["added 2 nodes"]


def test_event_patch_updates_the_count(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given an event
    core.create_namespaced_event(
        "default",
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="e1"),
            involved_object=client.V1ObjectReference(kind="Pod", name="p"),
            count=1,
        ),
    )
    # When it is patched
    patched = core.patch_namespaced_event("e1", "default", {"count": 2})
    # Then the count is updated
    assert patched.count == 2
    assert server.events()[0]["count"] == 2


def test_a_repeated_event_is_counted_into_the_first(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given the scaler's Warning on a pod, told again later under a new name (as the adapter does)
    def warning(name: str, at: datetime) -> client.CoreV1Event:
        return client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=name),
            involved_object=client.V1ObjectReference(
                kind="Pod", name="train", namespace="research", uid="u1"
            ),
            reason="LargerThanAnyNode",
            message="needs 16 GPUs",
            type="Warning",
            source=client.V1EventSource(component="backlog-scaler"),
            first_timestamp=at,
            last_timestamp=at,
            count=1,
        )

    first, later = datetime(2026, 12, 2, 12, 0, tzinfo=UTC), datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
    core.create_namespaced_event("research", warning("train.a", first))
    core.create_namespaced_event("research", warning("train.b", later))
    # And another reason on the same pod
    other = warning("train.c", later)
    other.reason = "GroupsAtMaxSize"
    core.create_namespaced_event("research", other)

    # Then the repeat is one Event counted twice, last seen at the repeat, as client-go's correlator
    # leaves it on a cluster; the other reason is its own Event
    events = {e["reason"]: e for e in server.events()}
    assert len(server.events()) == 2
    repeated = events["LargerThanAnyNode"]
    assert (repeated["metadata"]["name"], repeated["count"]) == ("train.a", 2)
    stamps = (repeated["firstTimestamp"], repeated["lastTimestamp"])
    assert tuple(datetime.fromisoformat(t.replace("Z", "+00:00")) for t in stamps) == (first, later)
    assert events["GroupsAtMaxSize"]["count"] == 1


def test_the_server_clock_sets_creation_times_and_table_ages(
    server: FakeKubeApiServer, core: CoreV1Api
) -> None:
    # Given a server on a simulated clock, an hour ahead of the wall clock
    now = [datetime(2030, 1, 1, 12, 0, tzinfo=UTC)]
    server.set_clock(lambda: now[0])
    # When a namespace is created, and the clock moves on 90 minutes
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="research")))
    now[0] = datetime(2030, 1, 1, 13, 30, tzinfo=UTC)
    # Then it was created at the clock's time, and `kubectl get ns` shows its age on that clock
    assert core.read_namespace("research").metadata.creation_timestamp == datetime(
        2030, 1, 1, 12, 0, tzinfo=UTC
    )
    headers = {**AUTH, "Accept": TABLE_ACCEPT}
    table = raw_json(urllib3.PoolManager().request("GET", f"{server.url}/api/v1/namespaces", headers=headers))
    assert [row["cells"] for row in table["rows"]] == [["research", "Active", "90m"]]


# --------------------------------------------------------------------------- auth, misc endpoints


def test_wrong_token_is_unauthorized(server: FakeKubeApiServer) -> None:
    # Given a client with the wrong bearer token
    # When it lists nodes
    with make_api_client(server, token="wrong") as bad, pytest.raises(ApiException) as err:
        CoreV1Api(bad).list_node()
    # Then the server answers the real 401 Status
    assert err.value.status == 401
    assert status_of(err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_version_healthz_and_unknown_paths(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given / When the version, health and an unknown path are requested
    version = client.VersionApi(api).get_code()
    health = urllib3.request("GET", f"{server.url}/healthz", headers={"Authorization": f"Bearer {TOKEN}"})
    unknown = urllib3.request(
        "GET", f"{server.url}/api/v1/widgets", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    # Then the version is plausible, healthz is ok and the unknown path is a 404 Status
    assert version.major == "1"
    assert version.git_version.startswith("v1.")
    assert (health.status, health.data) == (200, b"ok")
    assert unknown.status == 404
    assert unknown.json()["kind"] == "Status"


def test_cluster_role_grants_exactly_its_group_resource_and_verb(
    server: FakeKubeApiServer, api: ApiClient
) -> None:
    # Given a ClusterRole that lets nodes be listed and patched and pods be evicted, nothing else
    server.add_node(make_node("n1"))
    server.add_pod(make_pod("p1", node="n1"))
    server.enforce_cluster_role(
        {
            "kind": "ClusterRole",
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            ],
        },
        user="scaler",
    )
    core = CoreV1Api(api)

    # When the granted calls are made, Then they succeed
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]
    core.patch_node("n1", {"spec": {"unschedulable": True}})
    core.create_namespaced_pod_eviction(
        "p1", "default", client.V1Eviction(metadata=client.V1ObjectMeta(name="p1", namespace="default"))
    )

    # And a verb, a resource or a group the role lacks is 403 with the real API server's message
    with pytest.raises(ApiException) as get_node:
        core.read_node("n1")
    with pytest.raises(ApiException) as list_pods:
        core.list_namespaced_pod("default")
    with pytest.raises(ApiException) as list_daemonsets:
        client.AppsV1Api(api).list_daemon_set_for_all_namespaces()
    assert status_of(get_node.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "n1" is forbidden: User "scaler" cannot get resource "nodes" in API group "" '
        "at the cluster scope",
        "reason": "Forbidden",
        "details": {"name": "n1", "kind": "nodes"},
        "code": 403,
    }
    assert status_of(list_pods.value)["message"] == (
        'pods is forbidden: User "scaler" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    )
    assert status_of(list_daemonsets.value)["message"] == (
        'daemonsets.apps is forbidden: User "scaler" cannot list resource "daemonsets" '
        'in API group "apps" at the cluster scope'
    )
    # And non-resource paths stay open, and None lifts the enforcement
    assert client.VersionApi(api).get_code().major == "1"
    server.enforce_cluster_role(None)
    assert core.read_node("n1").metadata.name == "n1"


def test_wildcards_in_a_cluster_role_match_anything(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given a role granting every verb on every resource of every group
    server.enforce_cluster_role(
        {"kind": "ClusterRole", "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    )
    # When / Then any call is allowed
    assert client.StorageV1Api(api).list_storage_class().items == []


def test_scheduler_inputs_are_served_in_the_real_wire_format(
    server: FakeKubeApiServer, api: ApiClient
) -> None:
    # Given a DaemonSet, a claim, a volume, a storage class and two namespaces
    server.add_daemonset(
        {
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
                },
            },
        }
    )
    server.add_pvc({"metadata": {"name": "data", "namespace": "ml"}, "spec": {"storageClassName": "gp3"}})
    server.add_pv({"metadata": {"name": "pv-1"}, "spec": {"capacity": {"storage": "1Gi"}}})
    server.add_storage_class({"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"})
    server.add_namespace({"metadata": {"name": "ml", "labels": {"team": "llm"}}})
    server.add_namespace({"metadata": {"name": "batch"}})
    core, apps, storage = CoreV1Api(api), client.AppsV1Api(api), client.StorageV1Api(api)

    # When each is listed with the official client's typed models
    daemonsets = apps.list_daemon_set_for_all_namespaces()
    claims = core.list_persistent_volume_claim_for_all_namespaces()
    volumes = core.list_persistent_volume()
    classes = storage.list_storage_class()
    namespaces = core.list_namespace(limit=1)

    # Then kinds and API versions are the real ones and the objects are as seeded
    assert (daemonsets.kind, daemonsets.api_version) == ("DaemonSetList", "apps/v1")
    assert [(d.metadata.namespace, d.metadata.name) for d in daemonsets.items] == [("kube-system", "agent")]
    assert [c.spec.storage_class_name for c in claims.items] == ["gp3"]
    assert [v.metadata.name for v in volumes.items] == ["pv-1"]
    assert (classes.api_version, [c.provisioner for c in classes.items]) == (
        "storage.k8s.io/v1",
        ["ebs.csi.aws.com"],
    )
    # And namespaces page, carry the metadata.name label and phase Active, and are read one by one
    assert [n.metadata.name for n in namespaces.items] == ["batch"] and namespaces.metadata._continue
    rest = core.list_namespace(limit=1, _continue=namespaces.metadata._continue)
    assert [n.metadata.name for n in rest.items] == ["ml"]
    ml = core.read_namespace("ml")
    assert ml.metadata.labels == {"team": "llm", "kubernetes.io/metadata.name": "ml"}
    assert ml.status.phase == "Active"
    assert core.read_namespace_status("ml").metadata.name == "ml"


# --------------------------------------------------------------------------- error injection


def test_injected_500_fails_once_then_the_server_recovers(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a 500 injected on the next node list
    server.add_node(make_node("n1"))
    server.inject("GET", r"^/api/v1/nodes$", status=500)
    # When nodes are listed twice
    with pytest.raises(ApiException) as err:
        core.list_node()
    nodes = core.list_node().items
    # Then the first call fails with an InternalError Status and the second succeeds
    assert err.value.status == 500
    assert status_of(err.value)["reason"] == "InternalError"
    assert [n.metadata.name for n in nodes] == ["n1"]


def test_injected_429_carries_retry_after(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a 429 with Retry-After injected on evictions
    server.add_pod(make_pod("p"))
    server.inject("POST", r"/eviction$", status=429, retry_after=7)
    # When a pod is evicted
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("p", "default", eviction("p"))
    # Then the 429 has the header and the pod is untouched
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "7"
    assert status_of(err.value)["reason"] == "TooManyRequests"
    assert server.get_pod("default", "p") is not None


def test_client_go_retries_honour_an_injected_retry_after(server: FakeKubeApiServer) -> None:
    # Given two 429s with Retry-After: 0 and a client with client-go style retries
    server.inject("GET", r"^/api/v1/pods$", status=429, retry_after=0, times=2)
    with make_api_client(server, client_go_retries=True) as retrying:
        # When pods are listed
        pods = CoreV1Api(retrying).list_pod_for_all_namespaces().items
    # Then the client retried transparently: three requests reached the server
    assert pods == []
    assert len([c for c in server.calls if c.path == "/api/v1/pods"]) == 3


def test_injected_delay_causes_a_client_read_timeout(server: FakeKubeApiServer) -> None:
    # Given every node list delayed beyond the client's timeout, and a client without urllib3 retries
    server.inject("GET", r"^/api/v1/nodes$", delay=2.0, times=-1)
    # When nodes are listed with a 0.2 s timeout
    with (
        make_api_client(server, retries=0) as no_retry,
        pytest.raises(urllib3.exceptions.MaxRetryError) as err,
    ):
        CoreV1Api(no_retry).list_node(_request_timeout=0.2)
    # Then urllib3 gives up on the read: a read timeout at all means it stopped waiting before the
    # server's 2 s delay ended (the server would have answered then), whatever the machine's load
    assert isinstance(err.value.reason, urllib3.exceptions.ReadTimeoutError)
    server.clear_injections()


def test_dropped_connection_raises_without_retries_and_is_retried_by_default(
    server: FakeKubeApiServer,
) -> None:
    # Given one dropped node list
    server.add_node(make_node("n1"))
    server.inject("GET", r"^/api/v1/nodes$", drop=True)
    # When a client without retries lists nodes
    with (
        make_api_client(server, retries=0) as no_retry,
        pytest.raises(urllib3.exceptions.MaxRetryError) as err,
    ):
        CoreV1Api(no_retry).list_node()
    # Then urllib3 reports the remote disconnect as a protocol error
    assert isinstance(err.value.reason, urllib3.exceptions.ProtocolError)
    # Given another dropped list, when a default client (urllib3 Retry(3) for GET) lists nodes
    server.inject("GET", r"^/api/v1/nodes$", drop=True)
    with make_api_client(server) as default_client:
        nodes = CoreV1Api(default_client).list_node().items
    # Then the retry succeeds transparently
    assert [n.metadata.name for n in nodes] == ["n1"]


def test_dropped_patch_is_not_retried_by_urllib3(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a dropped PATCH (not idempotent for urllib3, so never retried on a read error)
    server.add_node(make_node("n1"))
    server.inject("PATCH", r"^/api/v1/nodes/n1$", drop=True)
    # When the node is patched with the default client
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.patch_node("n1", {"spec": {"unschedulable": True}})
    # Then the request was recorded once but not applied
    assert len([c for c in server.calls if c.method == "PATCH"]) == 1
    assert "unschedulable" not in server.get_node("n1")["spec"]


# --------------------------------------------------------------------------- records and concurrency


def test_calls_are_recorded_with_query_body_and_headers(server: FakeKubeApiServer, core: CoreV1Api) -> None:
    # Given a node and a clean call record
    server.add_node(make_node("n1"))
    server.clear_calls()
    # When the client lists with selectors and patches the node
    core.list_node(label_selector="pool=gpu", limit=50)
    core.patch_node("n1", {"metadata": {"labels": {"pool": "gpu"}}})
    # Then both calls are recorded as received
    listed, patched = server.calls
    assert listed == RecordedCall(
        method="GET",
        path="/api/v1/nodes",
        query={"labelSelector": "pool=gpu", "limit": "50"},
        body=None,
        headers=listed.headers,
    )
    assert listed.headers["authorization"] == f"Bearer {TOKEN}"
    assert (patched.method, patched.path) == ("PATCH", "/api/v1/nodes/n1")
    assert patched.body == {"metadata": {"labels": {"pool": "gpu"}}}


def test_concurrent_patches_are_all_applied(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given one node and eight threads sharing one client
    server.add_node(make_node("busy"))
    core = CoreV1Api(api)
    rv_before = server.resource_version

    def annotate(worker: int) -> None:
        for i in range(10):
            core.patch_node("busy", {"metadata": {"annotations": {f"w{worker}-{i}": "x"}}})

    threads = [threading.Thread(target=annotate, args=(w,)) for w in range(8)]
    # When they patch concurrently
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every patch landed and bumped the resourceVersion exactly once
    assert len(server.get_node("busy")["metadata"]["annotations"]) == 80
    assert server.resource_version == rv_before + 80


# --------------------------------------------------------------------------- what kubectl needs

AUTH = {"Authorization": f"Bearer {TOKEN}"}
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io"
)


def test_discovery_lists_the_groups_and_resources_served(server: FakeKubeApiServer) -> None:
    # Given / When the discovery documents are read
    http = urllib3.PoolManager()
    versions = raw_json(http.request("GET", f"{server.url}/api", headers=AUTH))
    core = raw_json(http.request("GET", f"{server.url}/api/v1", headers=AUTH))
    groups = raw_json(http.request("GET", f"{server.url}/apis", headers=AUTH))
    apps = raw_json(http.request("GET", f"{server.url}/apis/apps/v1", headers=AUTH))
    policy = raw_json(http.request("GET", f"{server.url}/apis/policy", headers=AUTH))
    # Then they name what is served, with the eviction subresource of kind policy/v1 Eviction
    assert (versions["kind"], versions["versions"]) == ("APIVersions", ["v1"])
    names = {r["name"]: r for r in core["resources"]}
    assert {"pods", "nodes", "events", "namespaces", "persistentvolumeclaims", "persistentvolumes"} <= set(
        names
    )
    assert (names["pods/eviction"]["group"], names["pods/eviction"]["kind"]) == ("policy", "Eviction")
    assert names["nodes"]["namespaced"] is False and "watch" in names["pods"]["verbs"]
    assert {g["name"] for g in groups["groups"]} == {
        "apps",
        "autoscaling.x-k8s.io",
        "events.k8s.io",
        "policy",
        "resource.k8s.io",
        "scheduling.volcano.sh",
        "scheduling.x-k8s.io",
        "storage.k8s.io",
    }
    assert [r["name"] for r in apps["resources"]] == ["daemonsets", "daemonsets/status"]
    assert (policy["kind"], policy["preferredVersion"]["groupVersion"]) == ("APIGroup", "policy/v1")
    assert http.request("GET", f"{server.url}/apis/nope/v1", headers=AUTH).status == 404


def test_a_table_is_served_when_the_accept_header_asks_for_one(server: FakeKubeApiServer) -> None:
    # Given a cordoned node and a pod on it
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    server.add_node({**make_node("n1"), "spec": {"unschedulable": True}, "status": ready})
    server.add_pod(make_pod("p1", "research", node="n1"))
    http = urllib3.PoolManager()
    headers = {**AUTH, "Accept": TABLE_ACCEPT}
    # When nodes and pods are listed as tables, and one pod is read as one
    nodes = raw_json(http.request("GET", f"{server.url}/api/v1/nodes", headers=headers))
    pods = raw_json(http.request("GET", f"{server.url}/api/v1/pods?limit=500", headers=headers))
    one = raw_json(http.request("GET", f"{server.url}/api/v1/namespaces/research/pods/p1", headers=headers))
    # Then they are meta.k8s.io/v1 Tables whose rows carry the objects' metadata
    assert (nodes["kind"], nodes["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in nodes["columnDefinitions"]][:2] == ["Name", "Status"]
    assert nodes["rows"][0]["cells"][:2] == ["n1", "Ready,SchedulingDisabled"]
    assert [c["name"] for c in pods["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "Node",
    ]
    assert pods["rows"][0]["cells"][:3] == ["p1", "1/1", "Running"] and pods["rows"][0]["cells"][5] == "n1"
    assert pods["rows"][0]["object"]["metadata"]["namespace"] == "research"
    assert one["rows"][0]["cells"][0] == "p1"


def test_watch_streams_added_then_modified_and_deleted_until_its_timeout(server: FakeKubeApiServer) -> None:
    # Given a node, and a watch of the nodes
    server.add_node(make_node("n1"))
    http = urllib3.PoolManager()
    response = http.request(
        "GET",
        f"{server.url}/api/v1/nodes?watch=true&timeoutSeconds=2",
        headers=AUTH,
        preload_content=False,
    )
    lines = response.stream(amt=None)
    buffer = b""

    def next_event() -> dict[str, Any]:
        nonlocal buffer
        while b"\n" not in buffer:
            buffer += next(lines)
        line, buffer = buffer.split(b"\n", 1)
        return json.loads(line)

    # When a node is added, one changed and one deleted
    added = next_event()
    server.add_node(make_node("n2"))
    second = next_event()
    server.update_node("n1", lambda n: n.setdefault("spec", {}).update(unschedulable=True))
    modified = next_event()
    server.delete_node("n2")
    deleted = next_event()
    rest = response.read()  # returns only when the server ends the stream
    # Then each is one WatchEvent, and the stream ends at the timeout
    assert (added["type"], added["object"]["metadata"]["name"], added["object"]["kind"]) == (
        "ADDED",
        "n1",
        "Node",
    )
    assert (second["type"], second["object"]["metadata"]["name"]) == ("ADDED", "n2")
    assert (modified["type"], modified["object"]["spec"]["unschedulable"]) == ("MODIFIED", True)
    assert (deleted["type"], deleted["object"]["metadata"]["name"]) == ("DELETED", "n2")
    assert rest == b""


def test_a_watch_from_a_resource_version_sends_only_later_changes(server: FakeKubeApiServer) -> None:
    # Given two pods, the second written after the resourceVersion the client has seen
    server.add_pod(make_pod("old"))
    seen = server.resource_version
    server.add_pod(make_pod("new"))
    # When the watch starts from that resourceVersion
    http = urllib3.PoolManager()
    body = http.request(
        "GET",
        f"{server.url}/api/v1/pods?watch=1&resourceVersion={seen}&timeoutSeconds=1",
        headers=AUTH,
    ).data
    # Then only the later pod is sent
    events = [json.loads(line) for line in body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("MODIFIED", "new")]


def test_tokenless_loopback_requests_pass_only_with_the_flag_and_skip_rbac(server: FakeKubeApiServer) -> None:
    # Given a ClusterRole that grants the token's user nothing
    server.enforce_cluster_role({"kind": "ClusterRole", "rules": []})
    http = urllib3.PoolManager()
    # When requests come without a token, with and without the flag, and with the token
    refused = http.request("GET", f"{server.url}/api/v1/nodes").status
    server.allow_anonymous_loopback = True
    anonymous = http.request("GET", f"{server.url}/api/v1/nodes").status
    with_token = http.request("GET", f"{server.url}/api/v1/nodes", headers=AUTH).status
    wrong = http.request("GET", f"{server.url}/api/v1/nodes", headers={"Authorization": "Bearer x"}).status
    # Then only the flag lets the tokenless one in; the token's identity stays RBAC-enforced
    assert (refused, anonymous, with_token, wrong) == (401, 200, 403, 401)


# --------------------------------------------------------------------------- custom resources

PROVREQ = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")


def make_provisioning_request(name: str, namespace: str = "research") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "podSets": [{"podTemplateRef": {"name": "ps"}, "count": 2}],
        },
    }


def test_provisioning_requests_are_served_with_a_status_subresource(api: ApiClient) -> None:
    # Given a ProvisioningRequest created through the custom objects API
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(
        *PROVREQ[:2], "research", PROVREQ[2], make_provisioning_request("r")
    )
    assert created["metadata"]["generation"] == 1
    # When its status is merge-patched through the status subresource
    condition = {
        "type": "Provisioned",
        "status": "True",
        "reason": "CapacityIsFound",
        "message": "",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-12-02T12:00:00Z",
    }
    patched = custom.patch_namespaced_custom_object_status(
        *PROVREQ[:2], "research", PROVREQ[2], "r", {"status": {"conditions": [condition]}}
    )
    # Then the status is stored, the generation does not move, and a list shows it
    assert patched["status"]["conditions"] == [condition]
    assert patched["metadata"]["generation"] == 1
    listed = custom.list_cluster_custom_object(*PROVREQ)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["r"]
    assert listed["items"][0]["status"]["conditions"][0]["reason"] == "CapacityIsFound"


def test_a_spec_change_bumps_the_generation_and_a_main_write_keeps_the_status(
    server: FakeKubeApiServer, api: ApiClient
) -> None:
    # Given a request with a status
    server.add_provisioning_request(
        {**make_provisioning_request("r"), "status": {"conditions": [{"type": "Accepted", "status": "True"}]}}
    )
    custom = client.CustomObjectsApi(api)
    # When its spec is patched through the main resource
    patched = custom.patch_namespaced_custom_object(
        *PROVREQ[:2],
        "research",
        PROVREQ[2],
        "r",
        {"spec": {"parameters": {"noRetry": "true"}}, "status": None},
    )
    # Then the generation grows and the status is kept
    assert patched["metadata"]["generation"] == 2
    assert patched["status"]["conditions"] == [{"type": "Accepted", "status": "True"}]


def test_a_strategic_merge_patch_of_a_custom_resource_is_refused(server: FakeKubeApiServer) -> None:
    server.add_provisioning_request(make_provisioning_request("r"))
    http = urllib3.PoolManager()
    response = http.request(
        "PATCH",
        f"{server.url}/apis/autoscaling.x-k8s.io/v1/namespaces/research/provisioningrequests/r/status",
        body=b'{"status": {}}',
        headers={**AUTH, "Content-Type": "application/strategic-merge-patch+json"},
    )
    assert response.status == 415


def test_pod_templates_and_both_pod_group_kinds_are_listed(server: FakeKubeApiServer, api: ApiClient) -> None:
    # Given a PodTemplate and a coscheduling and a Volcano PodGroup of the same name
    server.add_pod_template(
        {
            "metadata": {"name": "ps", "namespace": "research"},
            "template": {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}},
        }
    )
    for api_version in ("scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1"):
        server.add_pod_group(
            {
                "apiVersion": api_version,
                "metadata": {"name": "g", "namespace": "research"},
                "spec": {"minMember": 4},
            }
        )
    custom = client.CustomObjectsApi(api)
    # When they are listed
    templates = CoreV1Api(api).list_pod_template_for_all_namespaces()
    cosched = custom.list_cluster_custom_object("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    volcano = custom.list_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "podgroups")
    # Then each is served from its own API group
    assert [t.metadata.name for t in templates.items] == ["ps"]
    assert [(g["metadata"]["name"], g["spec"]["minMember"]) for g in cosched["items"]] == [("g", 4)]
    assert [g["metadata"]["name"] for g in volcano["items"]] == ["g"]
