"""A pod's constraints beyond node labels and room, parsed from `kubectl get pods -o json`: host
ports, required pod (anti-)affinity, topology spread, PVCs and DRA claims, and the scheduler's status."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.constraints import NO_CONSTRAINTS, HostPort, SpreadConstraint
from shared.domain.errors import InputError
from shared.domain.labels import LabelSelector, Requirement
from shared.domain.model import Pod
from shared.formats.kubernetes import pods_from_list
from tests.builders import pod

WEB_LABELS = {"app": "web", "pod-template-hash": "5d8f7c9b4", "tenant": "blue"}


def _parse(*raws: dict[str, Any]) -> tuple[Pod, ...]:
    return pods_from_list({"apiVersion": "v1", "kind": "List", "items": list(raws)}, "pods.json")


def _web_pod(name: str = "web-5d8f7c9b4-x2x7k", **spec: Any) -> dict[str, Any]:
    raw = pod(name, gpus=0, namespace="shop", labels=dict(WEB_LABELS), owner_kind="ReplicaSet")
    raw["spec"].update(spec)
    return raw


def _app_selector(app: str = "web") -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


# --- host ports ---


def test_host_ports_come_from_containers_and_sidecars_with_defaults() -> None:
    # Given a pod whose container exposes one host port (protocol and hostIP defaulted) and one plain
    # containerPort, a sidecar with a UDP host port on one IP, and a regular init container with a port
    raw = _web_pod()
    raw["spec"]["containers"][0]["ports"] = [
        {"containerPort": 8080, "hostPort": 80, "name": "http"},
        {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
    ]
    raw["spec"]["initContainers"] = [
        {
            "name": "dns-proxy",
            "image": "proxy:1",
            "restartPolicy": "Always",
            "ports": [{"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
        },
        {"name": "setup", "image": "setup:1", "ports": [{"containerPort": 7000, "hostPort": 7000}]},
    ]
    # When parsed
    (parsed,) = _parse(raw)
    # Then the container's and the sidecar's host ports are there, the regular init container's not
    assert parsed.constraints.host_ports == (HostPort(80, "TCP", ""), HostPort(53, "UDP", "10.0.0.1"))
    assert not parsed.constraints.is_plain


def test_a_non_integer_host_port_is_reported_with_the_item() -> None:
    raw = _web_pod()
    raw["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": "80"}]
    with pytest.raises(
        InputError, match=r"pods.json: items\[0\]: malformed Pod: hostPort: expected an integer"
    ):
        _parse(raw)


# --- required pod affinity and anti-affinity ---


def test_required_affinity_terms_without_namespaces_mean_the_pods_own_namespace() -> None:
    # Given required affinity to the cache pods and anti-affinity to its own app, neither naming
    # namespaces, and a preferred term that only scores
    raw = _web_pod(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": _app_selector("cache"), "topologyKey": "topology.kubernetes.io/zone"}
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": _app_selector("db"),
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            },
        }
    )
    # When parsed
    (parsed,) = _parse(raw)
    # Then each required term is there, resolved to namespace "shop"; the preferred term is not
    (affinity,) = parsed.constraints.affinity
    assert affinity.selector == LabelSelector(match_labels=(("app", "cache"),))
    assert affinity.topology_key == "topology.kubernetes.io/zone"
    assert affinity.namespaces == frozenset({"shop"}) and affinity.namespace_selector is None
    (anti,) = parsed.constraints.anti_affinity
    assert anti.selector == LabelSelector(match_expressions=(Requirement("app", "In", ("web",)),))
    assert anti.namespaces == frozenset({"shop"})
    assert anti.selects("shop", {"app": "web"}, None) and not anti.selects("other", {"app": "web"}, None)


@pytest.mark.parametrize(
    ("term", "namespaces", "namespace_selector"),
    [
        ({"namespaces": ["a", "b"]}, {"a", "b"}, None),
        ({"namespaceSelector": {}}, set(), LabelSelector()),  # {} selects every namespace
        (
            {"namespaces": ["a"], "namespaceSelector": {"matchLabels": {"team": "ml"}}},
            {"a"},
            LabelSelector(match_labels=(("team", "ml"),)),
        ),
        ({"namespaces": [], "namespaceSelector": None}, {"shop"}, None),  # neither: own namespace
    ],
)
def test_affinity_term_namespaces_are_resolved_as_the_api_defines(
    term: dict[str, Any], namespaces: set[str], namespace_selector: LabelSelector | None
) -> None:
    # Given an anti-affinity term with these namespace fields
    raw = _web_pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": _app_selector(), "topologyKey": "kubernetes.io/hostname", **term}
                ]
            }
        }
    )
    # When parsed
    ((anti,),) = (p.constraints.anti_affinity for p in _parse(raw))
    # Then the term's namespaces are as the scheduler reads them
    assert anti.namespaces == frozenset(namespaces)
    assert anti.namespace_selector == namespace_selector


def test_a_null_label_selector_stays_none_and_selects_no_pod() -> None:
    raw = _web_pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": None,
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["app"],
                    }
                ]
            }
        }
    )
    ((anti,),) = (p.constraints.anti_affinity for p in _parse(raw))
    assert anti.selector is None
    assert not anti.selects("shop", {"app": "web"}, None)


def test_match_and_mismatch_label_keys_merge_the_pods_own_values_into_the_selector() -> None:
    # Given anti-affinity per rollout (matchLabelKeys pod-template-hash, and a key the pod lacks) and
    # affinity to other tenants' pods (mismatchLabelKeys tenant)
    raw = _web_pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": _app_selector(),
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash", "not-on-the-pod"],
                    }
                ]
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": _app_selector(),
                        "topologyKey": "topology.kubernetes.io/zone",
                        "mismatchLabelKeys": ["tenant"],
                    }
                ]
            },
        }
    )
    # When parsed
    (parsed,) = _parse(raw)
    # Then the pod's values are ANDed in as In / NotIn requirements, as the API server does
    (anti,) = parsed.constraints.anti_affinity
    assert anti.selector is not None
    assert anti.selector.match_expressions == (Requirement("pod-template-hash", "In", ("5d8f7c9b4",)),)
    assert not anti.selects("shop", {"app": "web", "pod-template-hash": "old"}, None)
    (affinity,) = parsed.constraints.affinity
    assert affinity.selector is not None
    assert affinity.selector.match_expressions == (Requirement("tenant", "NotIn", ("blue",)),)


def test_label_keys_the_api_server_already_merged_are_not_added_twice() -> None:
    # Given a pod as stored: the API server appended the matchLabelKeys requirement at creation
    merged = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["5d8f7c9b4"]}],
    }
    raw = _web_pod(
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": merged,
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash"],
                    }
                ]
            }
        }
    )
    ((anti,),) = (p.constraints.anti_affinity for p in _parse(raw))
    assert anti.selector is not None
    assert anti.selector.match_expressions == (Requirement("pod-template-hash", "In", ("5d8f7c9b4",)),)


# --- topology spread ---


def test_topology_spread_constraints_of_both_kinds_with_api_defaults() -> None:
    # Given a hard zone spread with minDomains and matchLabelKeys, and a soft hostname spread
    raw = _web_pod(
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": _app_selector(),
                "matchLabelKeys": ["pod-template-hash"],
                "minDomains": 3,
            },
            {
                "maxSkew": 2,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": _app_selector(),
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            },
        ]
    )
    # When parsed
    (parsed,) = _parse(raw)
    # Then both are kept, policies defaulted to Honor / Ignore, the label key merged as In
    hard, soft = parsed.constraints.spread
    assert hard == SpreadConstraint(
        max_skew=1,
        topology_key="topology.kubernetes.io/zone",
        when_unsatisfiable="DoNotSchedule",
        selector=LabelSelector(
            match_labels=(("app", "web"),),
            match_expressions=(Requirement("pod-template-hash", "In", ("5d8f7c9b4",)),),
        ),
        min_domains=3,
        node_affinity_policy="Honor",
        node_taints_policy="Ignore",
    )
    assert (soft.max_skew, soft.is_hard, soft.min_domains) == (2, False, None)
    assert (soft.node_affinity_policy, soft.node_taints_policy) == ("Ignore", "Honor")
    assert parsed.constraints.hard_spread == (hard,)


def test_a_pod_with_only_soft_spread_stays_on_the_plain_path() -> None:
    raw = _web_pod(
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
        ]
    )
    (parsed,) = _parse(raw)
    assert parsed.constraints.spread[0].selector is None
    assert parsed.constraints.is_plain


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"whenUnsatisfiable": "Sometimes"}, "whenUnsatisfiable: expected DoNotSchedule or ScheduleAnyway"),
        ({"maxSkew": "1"}, "maxSkew: expected an integer"),
        ({"nodeTaintsPolicy": "Always"}, "nodeTaintsPolicy: expected one of"),
        ({"topologyKey": None}, "topologyKey: expected a label key"),
    ],
)
def test_malformed_spread_constraints_are_reported_with_the_item(
    change: dict[str, Any], expected: str
) -> None:
    constraint = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    raw = _web_pod(topologySpreadConstraints=[{**constraint, **change}])
    with pytest.raises(InputError, match=r"pods.json: items\[1\]: malformed Pod: ") as caught:
        _parse(_web_pod("ok"), raw)
    assert expected in str(caught.value)


# --- volumes and DRA claims ---


def test_claims_come_from_pvc_volumes_and_generic_ephemeral_volumes() -> None:
    # Given a StatefulSet-style PVC volume, a generic ephemeral scratch volume, config and token
    # volumes, and a DRA resource claim from a template
    raw = _web_pod(
        "trainer-0",
        volumes=[
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-trainer-0"}},
            {
                "name": "scratch",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": "gp3",
                            "resources": {"requests": {"storage": "100Gi"}},
                        }
                    }
                },
            },
            {"name": "config", "configMap": {"name": "trainer"}},
            {
                "name": "kube-api-access-abcde",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
        ],
        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    )
    # When parsed
    (parsed,) = _parse(raw)
    # Then the ephemeral volume's PVC is named <pod>-<volume>, and the other volumes claim nothing
    assert parsed.constraints.claims == ("data-trainer-0", "trainer-0-scratch")
    assert parsed.constraints.resource_claims == ("gpu",)


def test_a_pvc_volume_without_claim_name_is_reported() -> None:
    raw = _web_pod(volumes=[{"name": "data", "persistentVolumeClaim": {}}])
    with pytest.raises(InputError, match=r"items\[0\]: malformed Pod: missing field 'claimName'"):
        _parse(raw)


# --- interning and status ---


def test_equal_constraint_sets_are_one_object_and_plain_pods_share_no_constraints() -> None:
    # Given two replicas with the same anti-affinity and shared PVC, and a plain pod
    spec = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": _app_selector(), "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "models"}}],
    }
    # When parsed
    a, b, plain = _parse(_web_pod("web-a", **spec), _web_pod("web-b", **spec), pod("train-0"))
    # Then the planner's id-keyed caches see one constraint set
    assert a.constraints is b.constraints
    assert plain.constraints is NO_CONSTRAINTS


def test_owner_nomination_and_scheduler_message_are_read() -> None:
    # Given a pending pod of a Job, nominated to a node after preemption
    raw = pod("train-0")
    raw["status"]["nominatedNodeName"] = "ip-10-0-1-5.us-west-2.compute.internal"
    # When parsed
    (parsed,) = _parse(raw)
    # Then the controller's name, the nomination and the scheduler's words are kept
    assert (parsed.owner_kind, parsed.owner_name) == ("Job", "train-0-owner")
    assert parsed.nominated_node == "ip-10-0-1-5.us-west-2.compute.internal"
    assert parsed.scheduler_message == "0/3 nodes are available: insufficient nvidia.com/gpu"
