"""TaintToleration: every NoSchedule / NoExecute taint of the node must be tolerated; PreferNoSchedule
only scores (kubernetes.io "Taints and Tolerations", plugins/tainttoleration)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.model import Pod, Taint
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.planner.filters.taint_toleration import taint_toleration


def _pod(tolerations: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return pod_from_json({"metadata": {"name": "nginx", "namespace": "default"}, "spec": spec})


def _taints(*taints: dict[str, str]) -> tuple[Taint, ...]:
    node = node_from_json({"metadata": {"name": "node1"}, "spec": {"taints": list(taints)}})
    return node.taints


KEY1_NO_SCHEDULE = {"key": "key1", "value": "value1", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "key1", "operator": "Equal", "value": "value1", "effect": "NoSchedule"},
        {"key": "key1", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "key1", "value": "value1", "effect": "NoSchedule"},  # operator defaults to Equal
        {"key": "key1", "operator": "Equal", "value": "value1"},  # empty effect matches all effects
        {"operator": "Exists"},  # empty key with Exists matches every key, value and effect
    ],
    ids=["equal", "exists", "default-operator", "empty-effect", "empty-key-exists"],
)
def test_documented_tolerations_tolerate_the_taint(toleration: dict[str, str]) -> None:
    # Given a node tainted key1=value1:NoSchedule and a pod with one of the documented tolerations
    pod = _pod([toleration])
    # When the filter judges the node
    reason = taint_toleration(pod.scheduling, _taints(KEY1_NO_SCHEDULE))
    # Then the pod may go there
    assert reason is None


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "key1", "operator": "Equal", "value": "value2", "effect": "NoSchedule"},
        {"key": "key1", "operator": "Exists", "effect": "NoExecute"},
        {"key": "key2", "operator": "Exists"},
    ],
    ids=["other-value", "other-effect", "other-key"],
)
def test_non_matching_tolerations_leave_the_taint_untolerated(toleration: dict[str, str]) -> None:
    # Given a node tainted key1=value1:NoSchedule and a toleration that differs in value, effect or key
    pod = _pod([toleration])
    # When the filter judges the node
    reason = taint_toleration(pod.scheduling, _taints(KEY1_NO_SCHEDULE))
    # Then the scheduler's words name the taint
    assert reason == "node(s) had untolerated taint {key1: value1}"


def test_pod_without_tolerations_is_rejected_by_a_dedicated_node() -> None:
    # Given a node dedicated to user1 (plugin test: "dedicated=user1:NoSchedule") and a plain pod
    taints = _taints({"key": "dedicated", "value": "user1", "effect": "NoSchedule"})
    # When the filter judges the node
    reason = taint_toleration(_pod().scheduling, taints)
    # Then the taint is untolerated
    assert reason == "node(s) had untolerated taint {dedicated: user1}"


def test_every_hard_taint_must_be_tolerated() -> None:
    # Given the documentation's node with three taints, and a pod tolerating only the first two
    taints = _taints(
        {"key": "key1", "value": "value1", "effect": "NoSchedule"},
        {"key": "key1", "value": "value1", "effect": "NoExecute"},
        {"key": "key2", "value": "value2", "effect": "NoSchedule"},
    )
    pod = _pod(
        [
            {"key": "key1", "operator": "Equal", "value": "value1", "effect": "NoSchedule"},
            {"key": "key1", "operator": "Equal", "value": "value1", "effect": "NoExecute"},
        ]
    )
    # When the filter judges the node
    reason = taint_toleration(pod.scheduling, taints)
    # Then the untolerated third taint keeps the pod off
    assert reason == "node(s) had untolerated taint {key2: value2}"


def test_no_execute_taint_filters_like_no_schedule() -> None:
    # Given a node with a NoExecute taint and a pod without tolerations
    taints = _taints({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
    # When the filter judges the node
    reason = taint_toleration(_pod().scheduling, taints)
    # Then the pod is kept off (an empty value is shown empty)
    assert reason == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"


def test_prefer_no_schedule_never_filters() -> None:
    # Given a node with only a PreferNoSchedule taint, a plain pod and one whose toleration does not match
    taints = _taints({"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"})
    plain = _pod()
    unmatched = _pod([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}])
    # When the filter judges the node
    reasons = [taint_toleration(p.scheduling, taints) for p in (plain, unmatched)]
    # Then both may go there: the taint only scores
    assert reasons == [None, None]


def test_untainted_node_admits_every_pod() -> None:
    # Given a node without taints
    # When the filter judges a plain pod
    reason = taint_toleration(_pod().scheduling, ())
    # Then it passes
    assert reason is None


SLA_950 = {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("operator", "value", "tolerated"),
    [
        ("Gt", "750", True),  # the taint's 950 above 750
        ("Gt", "950", False),
        ("Lt", "951", True),  # the taint's 950 below 951
        ("Lt", "800", False),
        ("Gt", "0750", False),  # not canonical decimal (content.IsDecimalInteger): no match
        ("Lt", "9223372036854775808", False),  # past int64: no match
        ("Gt", "-5", True),
    ],
)
def test_lt_and_gt_tolerations_compare_the_taints_number(operator: str, value: str, tolerated: bool) -> None:
    # Given a node tainted sla=950:NoSchedule and a pod tolerating it with Lt / Gt (Kubernetes 1.35,
    # TaintTolerationComparisonOperators; k8s.io/api core/v1 toleration_test.go's cases)
    pod = _pod(
        [{"key": "node.kubernetes.io/sla", "operator": operator, "value": value, "effect": "NoSchedule"}]
    )
    # When the filter judges the node (these compared as Equal: "950" != value, never tolerated)
    reason = taint_toleration(pod.scheduling, _taints(SLA_950))
    # Then the taint's value is compared as a number with the toleration's
    assert (reason is None) is tolerated
