"""The Kubernetes manifests printed for the operator: exact RBAC, a webhook that never blocks pods."""

from __future__ import annotations

from pathlib import Path

import yaml

from cdk.manifests import (
    ADMISSION_ROUTE,
    ADMISSION_TOKEN_PLACEHOLDER,
    EVENTS_ROUTE,
    WEBHOOK_URL_PLACEHOLDER,
    admission_webhook_manifest,
    rbac_manifest,
    rbac_manifest_filename,
)
from shared.constants import RBAC_GROUP, WEBHOOK_PATH
from tests.infra.conftest import Synthesized


def test_rbac_grants_exactly_what_the_functions_do() -> None:
    role, binding = yaml.safe_load_all(rbac_manifest("research"))
    assert role["kind"] == "ClusterRole"
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    expected = (
        {("", "pods", verb) for verb in ("get", "list", "watch", "delete")}  # delete: forced drains
        | {("", "pods/eviction", "create")}
        | {("", "nodes", verb) for verb in ("get", "list", "watch", "patch", "delete")}
        | {(group, "events", verb) for group in ("", "events.k8s.io") for verb in ("create", "patch")}
        # What the scheduler's filters read: listed once per run, never watched or fetched one by one.
        | {
            ("", resource, "list")
            for resource in ("persistentvolumeclaims", "persistentvolumes", "namespaces")
        }
        | {("apps", "daemonsets", "list"), ("storage.k8s.io", "storageclasses", "list")}
    )
    assert granted == expected
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RBAC_GROUP}
    ]


def test_admission_webhook_never_blocks_pod_creation() -> None:
    (config,) = yaml.safe_load_all(admission_webhook_manifest("research", url="https://example.test/webhook"))
    assert config["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 2
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["clientConfig"] == {"url": "https://example.test/webhook"}
    (rule,) = hook["rules"]
    assert rule["operations"] == ["CREATE"]
    assert rule["resources"] == ["pods"]


def test_rbac_manifest_is_a_stack_output_and_a_file(synthesized: Synthesized) -> None:
    cluster = synthesized.config.cluster_name
    assert synthesized.template_json["Outputs"]["RbacManifest"]["Value"] == rbac_manifest(cluster)
    written = synthesized.assembly_dir / rbac_manifest_filename(cluster)
    assert written.name == f"backlog-scaler-{cluster}-rbac.yaml"
    assert written.read_text() == rbac_manifest(cluster)


def test_admission_manifest_output_carries_the_deployed_webhook_url(synthesized: Synthesized) -> None:
    # Given the output is the manifest joined around the API endpoint (known only at deploy time)
    before, endpoint, after = synthesized.template_json["Outputs"]["AdmissionWebhookManifest"]["Value"][
        "Fn::Join"
    ][1]
    assert endpoint["Fn::GetAtt"][1] == "ApiEndpoint"
    # When CloudFormation resolves it, Then it is the manifest with the webhook URL in clientConfig
    rendered = f"{before}https://abc.execute-api.us-west-2.amazonaws.com{after}"
    expected = admission_webhook_manifest(
        synthesized.config.cluster_name,
        url=(
            f"https://abc.execute-api.us-west-2.amazonaws.com{WEBHOOK_PATH}{ADMISSION_ROUTE}/"
            f"{ADMISSION_TOKEN_PLACEHOLDER}"
        ),
    )
    assert rendered == expected
    assert WEBHOOK_URL_PLACEHOLDER not in rendered


def test_the_webhook_function_serves_the_routes_the_manifests_name() -> None:
    handler = (Path(__file__).resolve().parents[2] / "functions" / "webhook" / "handler.py").read_text()
    for route in (ADMISSION_ROUTE, f"{ADMISSION_ROUTE}/<token>", EVENTS_ROUTE):
        assert f'@app.post("{route}")' in handler
    assert "strip_prefixes=[WEBHOOK_PATH]" in handler
