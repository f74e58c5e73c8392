"""The scheduler's newest rules: pod-level resources, pods stuck terminating, stale nominations.

- Pod-level resources (PodLevelResources, on by default since Kubernetes 1.34): k8s.io/component-helpers
  resource.PodRequests replaces the containers' aggregate by `spec.resources.requests` for each
  supported resource it names (cpu, memory, hugepages-*; applyPodLevelResources), then adds overhead.
- Pods stuck terminating: cluster-autoscaler's drain.IsPodLongTerminating treats a pod as deleted once
  deletionTimestamp + terminationGracePeriodSeconds + PodLongTerminatingExtraThreshold (30 s) is past.
- Nominations: kube-scheduler's defaultpreemption PodEligibleToPreemptOthers holds a nomination only
  while the nominated node is in its snapshot.
"""

from __future__ import annotations

from datetime import timedelta

from shared.domain.model import NodeState, ScalerState
from shared.domain.plan import Outcome, ReasonCode, Termination
from shared.domain.safety import busy_pods, cordon_blocker, termination_blocker
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.planner import plan
from tests.builders import NOW, asg, config, iso, node, pod, snapshot

GIB = 1024**3
A100 = "research-a100"


def one_group(instances: list[str]) -> list[dict[str, object]]:
    return [asg(A100, desired=len(instances), instances=instances)]


# ------------------------------------------------------------------------------- pod-level resources


def test_pod_level_requests_replace_the_containers_sum_for_cpu_and_memory_and_overhead_is_added() -> None:
    # Given containers asking 6 cpu / 48Gi / 1 GPU, pod-level requests of 40 cpu / 300Gi, and overhead
    raw = pod("wide", gpus=1, pod_requests={"cpu": "40", "memory": "300Gi"}, overhead={"cpu": "250m"})
    # When it is parsed
    requests = pod_from_json(raw).requests
    # Then cpu and memory are the pod-level ones (plus overhead), the GPU stays the containers' sum
    assert requests.get("cpu") == 40_250
    assert requests.get("memory") == 300 * GIB
    assert requests.gpus == 1


def test_pod_level_requests_name_only_cpu_memory_and_hugepages() -> None:
    # Given pod-level requests that also name resources PodLevelResources does not support
    raw = pod(
        "odd",
        gpus=1,
        pod_requests={"hugepages-2Mi": "1Gi", "ephemeral-storage": "900Gi", "nvidia.com/gpu": "4"},
    )
    requests = pod_from_json(raw).requests
    # Then hugepages are taken; ephemeral-storage and GPUs stay the containers' (none / 1)
    assert requests.get("hugepages-2Mi") == GIB
    assert requests.get("ephemeral-storage") == 0
    assert requests.gpus == 1
    # and cpu / memory, not named at pod level, stay the containers' sum
    assert requests.get("cpu") == 6_000


def test_a_pod_whose_pod_level_cpu_fits_no_node_buys_nothing() -> None:
    # Given a pod whose containers fit a 95-cpu node but whose pod-level request is 120 cpu
    snap = snapshot([pod("huge", gpus=1, pod_requests={"cpu": "120"})], [], one_group([]))
    # When planned
    result = plan(snap, config(), NOW)
    # Then no node is bought for it: it is larger than any node, as the scheduler would find
    (outcome,) = result.pods
    assert outcome.code is ReasonCode.TOO_LARGE
    assert result.group("a100").desired == 0


def test_room_is_counted_with_the_pod_level_requests_of_the_pods_already_there() -> None:
    # Given a node whose running pod asks 2 cpu in its containers but 90 cpu at pod level
    running = pod("big-cpu", gpus=1, node="n1", pod_requests={"cpu": "90"})
    waiting = pod("waiting", gpus=1, cpu="10")
    snap = snapshot([running, waiting], [node("n1", "i-1")], one_group(["i-1"]))
    # When planned
    result = plan(snap, config(), NOW)
    # Then the 5 cpu left are not room for the 10-cpu pod: a node is bought
    outcome = next(p for p in result.pods if p.pod == "research/waiting")
    assert outcome.outcome is Outcome.SCALE_UP
    assert result.group("a100").desired == 2


# ---------------------------------------------------------------------------------- stuck terminating


def test_a_pod_stuck_terminating_past_its_grace_and_the_margin_keeps_no_node_busy() -> None:
    # Given pods deleted with a 30 s grace: 61 s ago, exactly 60 s ago, and 45 s ago
    stuck = pod_from_json(pod("stuck", node="n1", deleted=NOW - timedelta(seconds=61), grace_seconds=30))
    edge = pod_from_json(pod("edge", node="n1", deleted=NOW - timedelta(seconds=60), grace_seconds=30))
    going = pod_from_json(pod("going", node="n1", deleted=NOW - timedelta(seconds=45), grace_seconds=30))
    # Then only the first is past deletionTimestamp + grace + 30 s (IsPodLongTerminating: Before(now))
    assert [p.name for p in busy_pods([stuck, edge, going], None, NOW)] == ["edge", "going"]


def test_the_grace_period_defaults_to_30_seconds_and_a_long_one_is_waited_for() -> None:
    # Given one pod with no terminationGracePeriodSeconds, one with an hour, both deleted 2 minutes ago
    default = pod_from_json(pod("default", node="n1", deleted=NOW - timedelta(minutes=2)))
    patient = pod_from_json(pod("patient", node="n1", deleted=NOW - timedelta(minutes=2), grace_seconds=3600))
    # Then the first is stuck (v1.DefaultTerminationGracePeriodSeconds = 30), the second still busy
    assert default.termination_grace_seconds == 30
    assert [p.name for p in busy_pods([default, patient], None, NOW)] == ["patient"]


def test_a_node_whose_only_pod_is_stuck_terminating_is_scaled_down() -> None:
    # Given a node idle for 30 minutes but for a pod deleted an hour ago (a hung GPU driver)
    stuck = pod("hung", gpus=8, node="n1", deleted=NOW - timedelta(hours=1))
    state = ScalerState(nodes={"n1": NodeState(idle_since=NOW - timedelta(minutes=30))})
    result = plan(snapshot([stuck], [node("n1", "i-1")], one_group(["i-1"]), state), config(), NOW)
    # Then it is cordoned like any idle node
    assert [a.node for a in result.cordon] == ["n1"]


def test_the_revalidation_lets_a_stuck_pod_go_but_not_a_live_one() -> None:
    # Given a cordoned node to terminate, re-read with a stuck pod, then with a live one
    cordoned = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=5))}
    fresh = node_from_json(node("n1", "i-1", unschedulable=True, annotations=cordoned))
    stuck = pod_from_json(pod("hung", node="n1", deleted=NOW - timedelta(hours=1)))
    live = pod_from_json(pod("job", node="n1"))
    termination = Termination("n1", "i-1", "a100", "idle")
    # Then the stuck pod blocks nothing and the live one blocks termination and cordon alike
    assert termination_blocker(termination, -10, NOW, None, fresh, (stuck,)) is None
    assert (
        termination_blocker(termination, -10, NOW, None, fresh, (stuck, live)) == "it now runs research/job"
    )
    uncordoned = node_from_json(node("n1", "i-1"))
    assert cordon_blocker(-10, NOW, None, uncordoned, (stuck,)) is None


def test_a_pending_pod_being_deleted_is_not_backlog() -> None:
    # Given a pending, unschedulable pod already deleted (its owner will create a replacement)
    snap = snapshot([pod("leaving", deleted=NOW - timedelta(seconds=5))], [], one_group([]))
    result = plan(snap, config(), NOW)
    # Then nothing is bought for it and it is not reported as pending
    assert result.pods == ()
    assert result.group("a100").desired == 0


# -------------------------------------------------------------------------------------- nominations


def test_a_nomination_to_a_node_that_no_longer_exists_is_ignored() -> None:
    # Given a pod nominated to a node that left the cluster
    snap = snapshot([pod("urgent", gpus=8, nominated="gone-node")], [], one_group([]))
    result = plan(snap, config(), NOW)
    # Then it is an ordinary pending pod: a node is bought
    (outcome,) = result.pods
    assert (outcome.outcome, outcome.code) == (Outcome.SCALE_UP, ReasonCode.PLACED)
    assert result.group("a100").desired == 1


def test_a_nomination_to_a_node_being_deleted_is_ignored() -> None:
    # Given a full node being deleted, and a pod nominated to it
    deleting = node("n1", "i-1", deleted=NOW - timedelta(minutes=1))
    running = pod("victim", gpus=8, node="n1")
    snap = snapshot([running, pod("urgent", gpus=8, nominated="n1")], [deleting], one_group(["i-1"]))
    result = plan(snap, config(), NOW)
    # Then the pod is planned as any other pending pod
    outcome = next(p for p in result.pods if p.pod == "research/urgent")
    assert outcome.code is not ReasonCode.NOMINATED
    assert outcome.outcome is Outcome.SCALE_UP


def test_a_nomination_to_a_live_node_still_holds() -> None:
    snap = snapshot(
        [pod("victim", gpus=8, node="n1", priority=-5), pod("urgent", gpus=8, nominated="n1")],
        [node("n1", "i-1")],
        one_group(["i-1"]),
    )
    result = plan(snap, config(), NOW)
    outcome = next(p for p in result.pods if p.pod == "research/urgent")
    assert outcome.code is ReasonCode.NOMINATED
    assert outcome.reason.startswith("nominated for n1")


def test_pod_level_requests_shapes_are_cached_apart() -> None:
    # Given two pods alike but for their pod-level cpu (the parser caches request shapes)
    small = pod_from_json(pod("a", gpus=1, pod_requests={"cpu": "8"})).requests
    large = pod_from_json(pod("b", gpus=1, pod_requests={"cpu": "16"})).requests
    # Then each has its own requests
    assert (small.get("cpu"), large.get("cpu")) == (8_000, 16_000)
