"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate
node.kubernetes.io/unschedulable:NoSchedule (plugins/nodeunschedulable)."""

from __future__ import annotations

from typing import Any

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.node_unschedulable import REASON, node_unschedulable
from shared.planner.simulation import static_reason


def _pod(tolerations: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app:1"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return pod_from_json({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})


def test_schedulable_node_admits_any_pod() -> None:
    # Given a pod without tolerations
    pod = _pod()
    # When judged against a schedulable node
    reason = node_unschedulable(pod.scheduling, unschedulable=False)
    # Then it passes
    assert reason is None


def test_cordoned_node_rejects_a_pod_without_the_toleration() -> None:
    # Given a pod without tolerations
    pod = _pod()
    # When judged against a cordoned node
    reason = node_unschedulable(pod.scheduling, unschedulable=True)
    # Then the scheduler's reason is given
    assert reason == REASON == "node(s) were unschedulable"


def test_cordoned_node_admits_a_pod_tolerating_the_unschedulable_taint() -> None:
    # Given a pod tolerating node.kubernetes.io/unschedulable:NoSchedule (as DaemonSet pods do)
    pod = _pod([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    # When judged against a cordoned node
    reason = node_unschedulable(pod.scheduling, unschedulable=True)
    # Then it passes
    assert reason is None


def test_cordoned_node_admits_a_pod_tolerating_everything() -> None:
    # Given a pod with the empty-key Exists toleration, which tolerates every taint
    pod = _pod([{"operator": "Exists"}])
    # When judged against a cordoned node
    reason = node_unschedulable(pod.scheduling, unschedulable=True)
    # Then it passes
    assert reason is None


def test_cordoned_node_rejects_a_toleration_of_another_effect_or_key() -> None:
    # Given pods tolerating the unschedulable key only for NoExecute, and another key for NoSchedule
    wrong_effect = _pod(
        [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]
    )
    wrong_key = _pod([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}])
    # When judged against a cordoned node
    reasons = [node_unschedulable(p.scheduling, unschedulable=True) for p in (wrong_effect, wrong_key)]
    # Then neither passes
    assert reasons == [REASON, REASON]


def test_static_filters_report_the_cordon_first() -> None:
    # Given a pod without tolerations and a cordoned node that also has an untolerated taint
    pod = _pod()
    # When the static filters judge the node
    reason = static_reason(pod.scheduling, {}, (), unschedulable=True)
    # Then the cordon is the reason, as NodeUnschedulable runs before the other filters
    assert reason == REASON
