"""The Kubernetes manifests printed for the operator: exact RBAC, a webhook that never blocks pods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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
from functions.webhook.payloads import admission_reason, parse_admission
from shared.adapters.kubernetes.rbac import PERMISSIONS, cluster_role, policy_rules
from shared.constants import PROVISIONING_API_GROUP, RBAC_GROUP, SERVICE_NAME, STATUS_CONFIGMAP, WEBHOOK_PATH
from tests.builders import admission_review
from tests.infra.conftest import Synthesized


def _granted(rules: list[dict[str, list[str]]]) -> list[tuple[str, str, str, str]]:
    return [
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", [""])
    ]


def test_rbac_grants_exactly_the_adapters_permission_table() -> None:
    # Given the manifests the CDK app prints
    role, binding, config_map, status, status_binding = yaml.safe_load_all(rbac_manifest("research", "ops"))

    # Then the ClusterRole and the status Role are generated from the adapter's table: every pair of
    # it, and nothing else; the pairs on one named object only in the Role, on that object
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == cluster_role()["rules"]
    assert status["kind"] == "Role"
    assert status["metadata"]["namespace"] == "ops"
    granted = _granted(role["rules"]) + _granted(status["rules"])
    assert sorted(granted) == sorted((p.group, p.resource, p.verb, p.resource_name) for p in PERMISSIONS)
    assert len(granted) == len(set(granted))  # no pair granted twice
    assert all(name == "" for *_, name in _granted(role["rules"]))
    assert {name for *_, name in _granted(status["rules"])} == {STATUS_CONFIGMAP}
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RBAC_GROUP}]
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == subjects
    assert status_binding["kind"] == "RoleBinding"
    assert status_binding["metadata"]["namespace"] == "ops"
    assert status_binding["roleRef"]["name"] == status["metadata"]["name"]
    assert status_binding["subjects"] == subjects
    # The ConfigMap the Role names exists once applied, and without data: a re-apply keeps the status
    assert config_map["kind"] == "ConfigMap"
    assert (config_map["metadata"]["namespace"], config_map["metadata"]["name"]) == ("ops", STATUS_CONFIGMAP)
    assert "data" not in config_map


def test_synthesized_cluster_role_is_the_one_generated_from_the_table(synthesized: Synthesized) -> None:
    # Given the RBAC manifest of the synthesized stack (its output) and the file next to the templates
    cluster = synthesized.config.cluster_name
    output = synthesized.template_json["Outputs"]["RbacManifest"]["Value"]
    written = (synthesized.assembly_dir / rbac_manifest_filename(cluster)).read_text()

    # Then both hold the ClusterRole generated from the table, labelled for the cluster
    for manifest in (output, written):
        role = next(yaml.safe_load_all(manifest))
        assert role == cluster_role(SERVICE_NAME, labels=role["metadata"]["labels"])
        assert role["metadata"]["labels"]["app.kubernetes.io/instance"] == cluster


def test_generated_rules_are_sorted_whatever_the_table_order() -> None:
    rules = policy_rules(PERMISSIONS)
    assert policy_rules(reversed(PERMISSIONS)) == rules
    assert policy_rules(sorted(PERMISSIONS, key=lambda p: (p.verb, p.resource))) == rules
    assert [r["apiGroups"] for r in rules] == sorted(r["apiGroups"] for r in rules)
    assert all(r["resources"] == sorted(r["resources"]) and r["verbs"] == sorted(r["verbs"]) for r in rules)


def test_admission_webhook_never_blocks_pod_creation() -> None:
    (config,) = yaml.safe_load_all(admission_webhook_manifest("research", url="https://example.test/webhook"))
    assert config["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 2
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["clientConfig"] == {"url": "https://example.test/webhook"}
    pods, requests = hook["rules"]
    assert pods["operations"] == requests["operations"] == ["CREATE"]
    assert pods["resources"] == ["pods"]
    assert (requests["apiGroups"], requests["resources"]) == (
        ["autoscaling.x-k8s.io"],
        ["provisioningrequests"],
    )


def _container(where: str, *names: str) -> dict[str, Any]:
    return {"name": "main", "resources": {where: {name: "1" for name in ("cpu", *names)}}}


# Pods as the API server hands them to a matchCondition: containers, init containers, DRA claims.
_PODS = {
    "nvidia-gpu": {"containers": [_container("limits", "nvidia.com/gpu")]},
    "mig-slice": {"containers": [_container("limits", "nvidia.com/mig-1g.5gb")]},
    "neuron": {"containers": [_container("requests", "aws.amazon.com/neuron")]},
    "neuroncore": {"containers": [_container("limits", "aws.amazon.com/neuroncore")]},
    "gaudi": {"containers": [_container("limits", "habana.ai/gaudi")]},
    "amd-gpu": {"containers": [{"name": "a"}, _container("requests", "amd.com/gpu")]},
    "init-container": {
        "containers": [{"name": "main"}],
        "initContainers": [_container("limits", "nvidia.com/gpu")],
    },
    "dra-claim": {
        "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
    },
    "cpu-only": {"containers": [_container("requests")]},
    "efa-only": {"containers": [_container("limits", "vpc.amazonaws.com/efa")]},
    "no-resources": {"containers": [{"name": "main"}]},
    "differently-cased": {"containers": [_container("limits", "NVIDIA.COM/GPU")]},
    "empty-claims": {"containers": [{"name": "main"}], "resourceClaims": []},
}


def _match_condition() -> Any:
    """The manifest's matchCondition compiled by the CEL project's own runtime, with the variables the
    API server declares (`object` dynamically typed: apiserver/pkg/admission/plugin/cel/compile.go)."""
    from cel_expr_python import cel

    (config,) = yaml.safe_load_all(admission_webhook_manifest("research"))
    ((condition,),) = [hook["matchConditions"] for hook in config["webhooks"]]
    env = cel.NewEnv(variables={"object": cel.Type.DYN, "request": cel.Type.DYN})
    return env.compile(condition["expression"])


@pytest.mark.parametrize("name", sorted(_PODS))
def test_the_admission_match_condition_sends_exactly_the_pods_the_webhook_wakes_for(name: str) -> None:
    # Given a pod's creation, as the API server evaluates the matchCondition and as the webhook reads it
    spec = _PODS[name]
    pod = {"metadata": {"name": "train-0", "namespace": "research"}, "spec": spec}
    review = admission_review(pod)
    # When the API server decides whether to call the webhook
    sent = _match_condition().eval(data={"object": pod, "request": {"resource": {"group": ""}}})
    # Then it calls it exactly for the pods the webhook enqueues a wake-up for (one rule, one home)
    woken = admission_reason(parse_admission(json.dumps(review).encode())) is not None
    assert (sent.type().name(), sent.value()) == ("BOOL", woken)


def test_the_admission_match_condition_sends_every_provisioning_request() -> None:
    # Given a ProvisioningRequest (no spec.containers: the pod side of the condition errs)
    request = {"spec": {"podSets": [{"podTemplateRef": {"name": "t"}, "count": 2}]}}
    # When the API server evaluates the condition, Then the left side sends it
    sent = _match_condition().eval(
        data={"object": request, "request": {"resource": {"group": PROVISIONING_API_GROUP}}}
    )
    assert (sent.type().name(), sent.value()) == ("BOOL", True)


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
