"""NodeAffinity: nodeSelector and required node affinity (kubernetes.io "Assign Pods to Nodes",
plugins/nodeaffinity): nodeSelectorTerms are ORed, matchExpressions within a term ANDed, and
nodeSelector and affinity must both hold."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.node_affinity import REASON, node_affinity

ZONE = "topology.kubernetes.io/zone"


def _pod(node_selector: dict[str, str] | None = None, terms: list[list[dict[str, Any]]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "nginx", "image": "nginx"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
                }
            }
        }
    return pod_from_json({"metadata": {"name": "with-node-affinity", "namespace": "default"}, "spec": spec})


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expr["values"] = list(values)
    return expr


def test_node_selector_needs_every_label() -> None:
    # Given the documented pod with nodeSelector disktype=ssd
    pod = _pod({"disktype": "ssd"})
    # When judged against an ssd node, an hdd node and an unlabelled node
    reasons = [
        node_affinity(pod.scheduling, labels) for labels in ({"disktype": "ssd"}, {"disktype": "hdd"}, {})
    ]
    # Then only the ssd node passes, with the scheduler's words for the others
    assert reasons == [None, REASON, REASON]
    assert REASON == "node(s) didn't match Pod's node affinity/selector"


def test_pod_without_selector_or_affinity_matches_any_node() -> None:
    # Given a plain pod
    pod = _pod()
    # When judged against any node
    # Then it passes
    assert node_affinity(pod.scheduling, {"foo": "bar"}) is None


@pytest.mark.parametrize(
    ("expression", "labels", "passes"),
    [
        (_expr(ZONE, "In", "antarctica-east1", "antarctica-west1"), {ZONE: "antarctica-west1"}, True),
        (_expr(ZONE, "In", "antarctica-east1", "antarctica-west1"), {ZONE: "us-west-2a"}, False),
        (_expr(ZONE, "In", "antarctica-east1"), {}, False),
        (_expr("disktype", "NotIn", "hdd"), {"disktype": "ssd"}, True),
        (_expr("disktype", "NotIn", "hdd"), {"disktype": "hdd"}, False),
        (_expr("disktype", "NotIn", "hdd"), {}, True),  # NotIn holds when the label is absent
        (_expr("gpu", "Exists"), {"gpu": ""}, True),
        (_expr("gpu", "Exists"), {}, False),
        (_expr("spot", "DoesNotExist"), {}, True),
        (_expr("spot", "DoesNotExist"), {"spot": "true"}, False),
        (_expr("gpu-count", "Gt", "4"), {"gpu-count": "8"}, True),
        (_expr("gpu-count", "Gt", "8"), {"gpu-count": "8"}, False),  # strictly greater
        (_expr("gpu-count", "Lt", "8"), {"gpu-count": "4"}, True),
        (_expr("gpu-count", "Lt", "4"), {"gpu-count": "4"}, False),
        (_expr("gpu-count", "Gt", "4"), {"gpu-count": "eight"}, False),  # not an integer
        (_expr("gpu-count", "Gt", "4"), {}, False),
    ],
    ids=[
        "in-match",
        "in-other-value",
        "in-missing",
        "notin-other",
        "notin-listed",
        "notin-missing",
        "exists",
        "exists-missing",
        "doesnotexist",
        "doesnotexist-present",
        "gt",
        "gt-equal",
        "lt",
        "lt-equal",
        "gt-not-integer",
        "gt-missing",
    ],
)
def test_operators_follow_the_documentation(
    expression: dict[str, Any], labels: dict[str, str], passes: bool
) -> None:
    # Given a pod requiring one expression
    pod = _pod(terms=[[expression]])
    # When judged against a node with `labels`
    reason = node_affinity(pod.scheduling, labels)
    # Then it passes exactly when the operator holds
    assert (reason is None) is passes


def test_expressions_of_one_term_are_anded() -> None:
    # Given a pod requiring gpu Exists AND zone In [us-west-2a] in one term
    pod = _pod(terms=[[_expr("gpu", "Exists"), _expr(ZONE, "In", "us-west-2a")]])
    # When judged against nodes satisfying both, and only one
    both = node_affinity(pod.scheduling, {"gpu": "a100", ZONE: "us-west-2a"})
    one = node_affinity(pod.scheduling, {"gpu": "a100", ZONE: "us-west-2b"})
    # Then only the node satisfying both passes
    assert (both, one) == (None, REASON)


def test_node_selector_terms_are_ored() -> None:
    # Given a pod whose two terms each name one zone
    pod = _pod(terms=[[_expr(ZONE, "In", "us-west-2a")], [_expr(ZONE, "In", "us-west-2b")]])
    # When judged against nodes of each zone and a third
    reasons = [node_affinity(pod.scheduling, {ZONE: z}) for z in ("us-west-2a", "us-west-2b", "us-west-2c")]
    # Then a node satisfying either term passes
    assert reasons == [None, None, REASON]


def test_node_selector_and_affinity_must_both_hold() -> None:
    # Given a pod with nodeSelector disktype=ssd and affinity to us-west-2a
    pod = _pod({"disktype": "ssd"}, [[_expr(ZONE, "In", "us-west-2a")]])
    # When judged against nodes satisfying one or both
    only_selector = node_affinity(pod.scheduling, {"disktype": "ssd", ZONE: "us-west-2b"})
    only_affinity = node_affinity(pod.scheduling, {"disktype": "hdd", ZONE: "us-west-2a"})
    both = node_affinity(pod.scheduling, {"disktype": "ssd", ZONE: "us-west-2a"})
    # Then only the node satisfying both passes
    assert (only_selector, only_affinity, both) == (REASON, REASON, None)


def test_term_with_empty_match_expressions_matches_no_node() -> None:
    # Given a pod whose only node selector term has an empty matchExpressions list
    pod = _pod(terms=[[]])
    # When judged against a node
    reason = node_affinity(pod.scheduling, {"foo": "bar"})
    # Then, as in kube-scheduler, no node matches
    assert reason == REASON
