"""RBAC from one table: the adapter's permission table is exact, and what the fake API server enforces.

Each `KubernetesCluster` method runs against the fake API server enforcing the ClusterRole generated
from `shared.adapters.kubernetes.rbac.PERMISSIONS`; taking any one entry out of the table makes the
methods it names fail with the real API server's 403, so no entry is spare and none is missing.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.adapters.kubernetes import rbac
from shared.adapters.kubernetes.auth import build_transport
from shared.adapters.kubernetes.cluster import ClusterOptions, KubernetesCluster
from shared.adapters.kubernetes.rbac import (
    PERMISSIONS,
    Permission,
    cluster_role,
    status_config_map,
    status_role,
)
from shared.adapters.kubernetes.transport import RestTransport
from shared.constants import DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP
from shared.domain.errors import AuthError
from shared.domain.model import Taint, TaintEffect
from shared.domain.operations import ClusterEvent, ObjectRef
from shared.domain.provisioning import Condition, ConditionUpdate
from shared.local.kube_api_server import FakeKubeApiServer
from tests.builders import node, pod
from tests.builders_provisioning import pod_template, provisioning_request

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
NODE, NAMESPACE, POD = "gpu-0", "research", "train-0"
EVENT = ClusterEvent(ObjectRef("Node", NODE), "ScaleDown", "cordoned: idle")
MARK = Taint("backlog-scaler/attrition", "", TaintEffect.PREFER_NO_SCHEDULE)
ANSWER = ConditionUpdate(
    NAMESPACE, "llm", "", (Condition("Accepted", "True", "Accepted", "accepted", 1, NOW),), "Accepted=True"
)

# One call of every public adapter method, by name (the names the table's `used_by` holds).
CALLS: dict[str, Callable[[KubernetesCluster], object]] = {
    "list_pods": lambda c: c.list_pods(),
    "list_pods_on_node": lambda c: c.list_pods_on_node(NODE),
    "list_nodes": lambda c: c.list_nodes(),
    "list_daemonsets": lambda c: c.list_daemonsets(),
    "list_persistent_volume_claims": lambda c: c.list_persistent_volume_claims(),
    "list_persistent_volumes": lambda c: c.list_persistent_volumes(),
    "list_storage_classes": lambda c: c.list_storage_classes(),
    "list_namespaces": lambda c: c.list_namespaces(),
    "list_pod_disruption_budgets": lambda c: c.list_pod_disruption_budgets(),
    "get_node": lambda c: c.get_node(NODE),
    "cordon": lambda c: c.cordon(NODE, NOW),
    "uncordon": lambda c: c.uncordon(NODE),
    "taint_node": lambda c: c.taint_node(NODE, MARK),
    "untaint_node": lambda c: c.untaint_node(NODE, "nvidia.com/gpu"),  # the builder's node has it
    "can_evict": lambda c: c.can_evict(NAMESPACE, POD),
    "evict": lambda c: c.evict(NAMESPACE, POD),
    "delete_pod": lambda c: c.delete_pod(NAMESPACE, POD, grace_seconds=0),
    "delete_node": lambda c: c.delete_node(NODE),
    "record_events": lambda c: c.record_events([EVENT]),
    "list_provisioning_requests": lambda c: c.list_provisioning_requests(),
    "list_pod_templates": lambda c: c.list_pod_templates(),
    "list_pod_groups": lambda c: c.list_pod_groups(),
    "set_provisioning_request_conditions": lambda c: c.set_provisioning_request_conditions(ANSWER),
    "list_resource_slices": lambda c: c.list_resource_slices(),
    "list_device_classes": lambda c: c.list_device_classes(),
    "list_resource_claims": lambda c: c.list_resource_claims(),
    "list_resource_claim_templates": lambda c: c.list_resource_claim_templates(),
    "get_config_map": lambda c: c.get_config_map(DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP),
    "patch_config_map": lambda c: c.patch_config_map(DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP, {"k": "v"}),
}


@pytest.fixture
def server(kube_api_server: FakeKubeApiServer) -> FakeKubeApiServer:
    kube_api_server.add_node(node(NODE, "i-0"))
    kube_api_server.add_pod(pod(POD, namespace=NAMESPACE, node=NODE))
    kube_api_server.add_pod_template(pod_template("ps", namespace=NAMESPACE))
    kube_api_server.add_provisioning_request(provisioning_request("llm", [("ps", 2)], namespace=NAMESPACE))
    kube_api_server.add_config_map(status_config_map(DEFAULT_STATUS_NAMESPACE))  # as the manifests create it
    return kube_api_server


@pytest.fixture
def cluster(server: FakeKubeApiServer) -> Iterator[KubernetesCluster]:
    api: RestTransport = build_transport(server.url)
    yield KubernetesCluster(api, ClusterOptions(throttle_retries=0), sleep=lambda _: None, clock=lambda: NOW)
    api.close()


def without(permission: Permission) -> tuple[Permission, ...]:
    return tuple(p for p in PERMISSIONS if p != permission)


def test_the_table_names_every_public_method_of_the_adapter() -> None:
    methods = {
        name
        for name, member in inspect.getmembers(KubernetesCluster, inspect.isfunction)
        if not name.startswith("_")
    }
    assert {name for p in PERMISSIONS for name in p.used_by} == methods == set(CALLS)
    assert len({(p.group, p.resource, p.verb) for p in PERMISSIONS}) == len(PERMISSIONS)


@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_adapter_method_works_under_the_generated_role(
    server: FakeKubeApiServer, cluster: KubernetesCluster, method: str
) -> None:
    # Given the fake API server enforcing the generated ClusterRole (conftest)
    # When the method runs
    result = CALLS[method](cluster)

    # Then it reached the API server and was let through (a 403 would have raised, or written no event)
    assert [c for c in server.calls if c.path.startswith(("/api/", "/apis/"))]
    if method == "record_events":
        assert result == 1
        assert len(server.events()) == 1


@pytest.mark.parametrize(
    "permission", PERMISSIONS, ids=lambda p: f"{p.group or 'core'}:{p.resource}:{p.verb}"
)
def test_each_permission_is_needed_by_the_methods_it_names(
    server: FakeKubeApiServer, cluster: KubernetesCluster, permission: Permission
) -> None:
    # Given the roles generated from a copy of the table less this one entry
    rest = without(permission)
    server.enforce_cluster_role(
        cluster_role(permissions=rest), roles=[status_role(DEFAULT_STATUS_NAMESPACE, permissions=rest)]
    )
    denied = (
        f'User "backlog-scaler" cannot {permission.verb} resource "{permission.resource}" '
        f'in API group "{permission.group}"'
    )

    for method in permission.used_by:
        if method == "record_events":
            # When events are recorded (best effort: never raises), Then none is written
            assert CALLS[method](cluster) == 0
            assert server.events() == []
            continue
        # When the method runs, Then it fails as on a cluster without the rule: the real server's 403
        with pytest.raises(AuthError, match="403") as raised:
            CALLS[method](cluster)
        assert denied in str(raised.value)


@pytest.mark.parametrize(
    ("namespace", "name"), [(DEFAULT_STATUS_NAMESPACE, "other"), (NAMESPACE, STATUS_CONFIGMAP)]
)
def test_the_status_role_reaches_the_status_config_map_alone(
    server: FakeKubeApiServer, cluster: KubernetesCluster, namespace: str, name: str
) -> None:
    # Given another ConfigMap: of another name, or of the status's name in another namespace
    server.add_config_map(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    )

    # When the adapter reads or patches it, Then the generated roles refuse, as RBAC resourceNames do
    with pytest.raises(AuthError, match="403"):
        cluster.get_config_map(namespace, name)
    with pytest.raises(AuthError, match="403"):
        cluster.patch_config_map(namespace, name, {"k": "v"})


def test_the_table_is_pure_and_cdk_imports_it_without_the_kubernetes_client() -> None:
    # Given the table's module: it imports no I/O library
    tree = ast.parse(Path(rbac.__file__).read_text())
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert not {m for m in imported if m.split(".")[0] in ("kubernetes", "boto3", "botocore", "urllib3")}

    # When the CDK manifests are built in a fresh interpreter, Then the kubernetes client is never loaded
    code = (
        "import sys; from cdk.manifests import rbac_manifest; rbac_manifest('research'); "
        "sys.exit(1 if any(m.split('.')[0] == 'kubernetes' for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, timeout=60).returncode == 0
