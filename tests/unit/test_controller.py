"""The controller over in-memory fakes: gather -> plan -> re-validate -> apply -> report."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.constants import TAG_CLUSTER
from shared.controller import Controller, InterruptionKind, ReconcileResult, RunStatus
from shared.controller.force_scale_down import INTERRUPTION_REQUESTER
from shared.domain.errors import (
    ActionError,
    AuthError,
    ClusterReadError,
    FleetActionError,
    FleetReadError,
    InvalidRequestError,
    ReadError,
)
from shared.domain.model import AsgInstance, AsgState, DaemonSet, PodMemory, Snapshot
from shared.domain.operations import DrainIntent, EventType, FailureKind, ScalingFailure
from shared.domain.plan import ModelError, Plan, Termination
from shared.domain.resources import Resources
from shared.domain.safety import cordon_blocker, desired_to_set, termination_blocker
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.planner import plan
from shared.reporting import ActionKind, ActionStatus
from tests.builders import GPU_TAINT, NOW, asg, config, iso, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"
H100 = "research-h100"
CORDONED_LONG_AGO = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=5))}


def two_groups(**policy: Any) -> Any:
    """a100 (preferred: higher priority) and h100, both able to run any GPU pod."""
    shape = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}
    return config(
        node_groups=[
            {"name": "a100", "asg_name": A100, "allocatable": shape, "labels": {"gpu": "a100"},
             "taints": [GPU_TAINT], "priority": 10, "max_size": 16},
            {"name": "h100", "asg_name": H100, "allocatable": shape, "labels": {"gpu": "h100"},
             "taints": [GPU_TAINT], "priority": 0, "max_size": 16},
        ],
        policy={"cordon_settle_seconds": 30, **policy},
    )  # fmt: skip


def world(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]], groups: list[dict[str, Any]], cfg: Any = None
) -> FakeWorld:
    return FakeWorld(config=cfg or config(), cluster=FakeCluster(pods, nodes), fleet=FakeFleet(groups))


def idle_world(*, cordoned: bool = False, extra_pods: list[dict[str, Any]] | None = None) -> FakeWorld:
    """One a100 node, idle for 30 minutes (cordoned by the scaler 5 minutes ago when asked)."""
    annotations = CORDONED_LONG_AGO if cordoned else None
    w = world(
        [pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet"), *(extra_pods or [])],
        [node("n1", "i-1", unschedulable=cordoned, annotations=annotations)],
        [asg(A100, desired=1, instances=["i-1"])],
    )
    w.state.idle_since = {"n1": NOW - timedelta(minutes=30)}
    return w


def statuses(result: ReconcileResult, kind: ActionKind) -> list[tuple[str, ActionStatus]]:
    return [(a.target, a.status) for a in result.actions if a.kind is kind]


# ------------------------------------------------------------------------------------------ ownership


def test_a_group_whose_asg_lacks_the_cluster_tag_is_left_alone_and_said_so() -> None:
    # Given an idle node long past the idle threshold, in a group whose ASG is tagged for another
    # cluster (IAM would refuse its termination), and a pending pod for the group
    w = world(
        [pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet"), pod("train", gpus=8)],
        [node("n1", "i-1")],
        [asg(A100, desired=1, instances=["i-1"], cluster="someone-else")],
    )
    w.state.idle_since = {"n1": NOW - timedelta(minutes=30)}
    # When the scaler runs
    result = w.controller().reconcile("schedule")
    # Then none of the group's nodes is touched (no cordon that a refused termination would leave
    # behind), its desired stays, and a failed action names the missing tag (the ActionFailures alarm)
    assert w.cluster.calls_of("cordon") == [] and not w.cluster.is_cordoned("n1")
    assert w.fleet.desired(A100) == 1
    (failed,) = [a for a in result.actions if a.status is ActionStatus.FAILED]
    assert failed.target == A100 and "not tagged backlog-scaler/cluster=research" in failed.detail


def test_a_forced_scale_down_of_a_group_whose_asg_lacks_the_cluster_tag_is_refused_before_any_write() -> None:
    # Given a group whose ASG is tagged for another cluster
    w = world([], [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"], cluster="someone-else")])
    # When an operator forces it down
    with pytest.raises(InvalidRequestError, match="not tagged backlog-scaler/cluster=research"):
        w.controller().force_scale_down({"group": "a100", "target": 0})
    # Then nothing was written but the lease taken and given back
    assert [c for c in w.write_calls() if "lease" not in c] == []


# ------------------------------------------------------------------------------------------ scale-up


def test_pending_pod_raises_desired_tells_the_pod_and_notifies_once() -> None:
    # Given one pending 4-GPU pod and an empty a100 group
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    # When the controller reconciles
    result = w.controller().reconcile("schedule")
    # Then desired is 1, the pod hears it triggered a scale-up, the group's growth is remembered
    assert w.fleet.desired(A100) == 1
    assert statuses(result, ActionKind.SET_DESIRED) == [(A100, ActionStatus.DONE)]
    assert [(e.reason, e.type) for e in w.cluster.events] == [("TriggeredScaleUp", EventType.NORMAL)]
    assert w.state.groups["a100"].last_scale_up == NOW
    assert len(w.notifier.messages) == 1 and "set-desired" in w.notifier.messages[0][0]
    assert result.ok and result.status is RunStatus.COMPLETED and result.pending_pods == 1
    # And the lease is released
    assert w.state.lease is None


def test_repeated_run_changes_nothing_and_tells_nobody_again() -> None:
    w = world([pod("train", gpus=4), pod("huge", gpus=16)], [], [asg(A100, desired=0)])
    controller = w.controller()
    controller.reconcile("schedule")
    w.clock.advance(60)
    # When it runs again on the same picture (the instance is still launching)
    again = controller.reconcile("schedule")
    # Then there is nothing to do and no event is repeated
    assert not again.changed
    assert w.fleet.desired(A100) == 1
    assert sorted(e.reason for e in w.cluster.events) == ["LargerThanAnyNode", "TriggeredScaleUp"]
    assert len(w.notifier.messages) == 1


def test_unhelped_pod_gets_a_new_event_only_when_its_reason_changes() -> None:
    # Given a 16-GPU pod (larger than any node): a Warning naming the reason
    w = world([pod("huge", gpus=16)], [], [asg(A100, desired=0)])
    controller = w.controller()
    controller.reconcile("schedule")
    assert [(e.reason, e.type) for e in w.cluster.events] == [("LargerThanAnyNode", EventType.WARNING)]
    assert "16 GPUs" in w.cluster.events[0].message
    # When it runs again a minute later: no duplicate
    w.clock.advance(60)
    controller.reconcile("schedule")
    assert len(w.cluster.events) == 1
    # When an hour has passed: told again
    w.clock.advance(3600)
    controller.reconcile("schedule")
    assert len(w.cluster.events) == 2


def test_metrics_of_a_run() -> None:
    w = world(
        [pod("train", gpus=4, created=NOW - timedelta(minutes=7)), pod("huge", gpus=16)],
        [],
        [asg(A100, desired=0)],
    )
    w.controller().reconcile("schedule")
    r = w.reporter
    assert r.metric_values("PendingPods") == [2]
    assert r.metric_values("PendingGpus") == [20]
    assert r.metric_values("OldestPendingPodAge") == [420.0]
    assert r.metric_values("UnhelpedPods") == [1]
    assert r.metric_values("DesiredNodes", "a100") == [1]
    assert r.metric_values("ScaleUps", "a100") == [1]
    assert r.metric_values("ScaleDowns", "a100") == [0]
    assert len(r.metric_values("ReconcileDuration")) == 1
    assert r.flushes == 1


# ------------------------------------------------------------------------------------------ gather


@pytest.mark.parametrize(
    ("fake", "method", "error"),
    [
        ("cluster", "list_pods", ClusterReadError("HTTP 500")),
        ("cluster", "list_nodes", ClusterReadError("timeout")),
        ("fleet", "describe_groups", FleetReadError("Throttling")),
        ("fleet", "failed_activities", FleetReadError("Throttling")),
        ("state", "load", ReadError("dynamodb down")),
        ("state", "drain_intents", ReadError("dynamodb down")),
        ("cluster", "list_pods", AuthError("HTTP 401")),
        ("cluster", "list_daemonsets", ClusterReadError("HTTP 500")),
        ("cluster", "list_persistent_volume_claims", ClusterReadError("timeout")),
        ("cluster", "list_persistent_volumes", ClusterReadError("HTTP 503")),
        ("cluster", "list_storage_classes", AuthError("HTTP 403")),
        ("cluster", "list_namespaces", ClusterReadError("HTTP 500")),
    ],
)
def test_any_read_failure_changes_nothing_and_raises(fake: str, method: str, error: Exception) -> None:
    # Given a node due for termination, one due for a cordon and a pending pod (all three would act)
    w = idle_world(cordoned=True)
    w.cluster.add_node(node("n2", "i-2", labels={"gpu": "a100"}))
    w.cluster.add_pod(pod("train", gpus=4, node_selector={"gpu": "h100"}))
    w.fleet.add_group(asg(A100, desired=2, instances=["i-1", "i-2"]))
    w.state.idle_since["n2"] = NOW - timedelta(hours=1)
    getattr(w, fake).fail_next(method, error)
    # When one read fails
    with pytest.raises(type(error)):
        w.controller().reconcile("schedule")
    # Then nothing was written but the lease (taken, then given back)
    assert w.write_calls() == ["acquire_lease", "release_lease"]
    assert w.notifier.messages == []
    assert any("gathering failed" in m for m in w.reporter.messages("error"))


def test_instance_shape_read_failure_changes_nothing() -> None:
    cfg = config(
        node_groups=[
            {"name": "a100", "asg_name": A100, "instance_type": "p4d.24xlarge", "labels": {"gpu": "a100"}}
        ]
    )
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)], cfg)
    w.fleet.fail_next("instance_types", FleetReadError("ec2 unavailable"))
    with pytest.raises(FleetReadError):
        w.controller().reconcile("schedule")
    assert w.fleet.calls_of("set_desired_capacity") == []


def test_scale_from_zero_uses_the_instance_type_shape() -> None:
    cfg = config(
        node_groups=[
            {"name": "a100", "asg_name": A100, "instance_type": "p4d.24xlarge", "labels": {"gpu": "a100"}}
        ]
    )
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=0)], cfg)
    w.fleet.add_instance_type(
        "p4d.24xlarge",
        Resources.of({"cpu": 96_000, "memory": 1152 * 2**30, "nvidia.com/gpu": 8, "pods": 737}),
    )
    w.controller().reconcile("schedule")
    assert w.fleet.desired(A100) == 1


def test_groups_with_config_allocatable_still_read_their_instance_type_architecture() -> None:
    # Given a cheaper Graviton (g5g, arm64) group and an x86 (g5) group, both shaped by the config,
    # and a pod that runs on amd64 only (cluster-autoscaler's buildGenericLabels labels the template
    # node with the instance type's kubernetes.io/arch)
    shape = {"cpu": "3", "memory": "7Gi", "nvidia.com/gpu": "1", "pods": "58"}
    groups = [
        {"name": "t4g", "asg_name": "research-t4g", "instance_type": "g5g.xlarge", "allocatable": shape,
         "taints": [GPU_TAINT], "price_per_hour": 0.42},
        {"name": "a10g", "asg_name": "research-a10g", "instance_type": "g5.xlarge", "allocatable": shape,
         "taints": [GPU_TAINT], "price_per_hour": 1.006},
    ]  # fmt: skip
    x86 = pod("x86-only", gpus=1, cpu="2", memory="4Gi", node_selector={"kubernetes.io/arch": "amd64"})
    w = world(
        [x86],
        [],
        [asg("research-t4g", desired=0), asg("research-a10g", desired=0)],
        config(node_groups=groups),
    )
    gpu = Resources.of({"cpu": 4000, "memory": 8 * 2**30, "nvidia.com/gpu": 1, "pods": 58})
    w.fleet.add_instance_type("g5g.xlarge", gpu, "arm64")
    w.fleet.add_instance_type("g5.xlarge", gpu, "amd64")
    # When the reconcile runs
    w.controller().reconcile("schedule")
    # Then the x86 group grows, not the cheaper arm64 one
    assert (w.fleet.desired("research-a10g"), w.fleet.desired("research-t4g")) == (1, 0)


def test_scheduler_inputs_are_read_once_each_and_reach_the_planner() -> None:
    # Given a cluster with a DaemonSet, a claim, a volume, a storage class and a labelled namespace
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    w.cluster.add_daemonset(DaemonSet("kube-system", "agent", pod_from_json(pod("agent", gpus=0))))
    w.cluster.add_pvc(PersistentVolumeClaim("research", "data", storage_class="gp3"))
    w.cluster.add_pv(PersistentVolume("pv-1"))
    w.cluster.add_storage_class(StorageClass("gp3", binding_mode="WaitForFirstConsumer"))
    w.cluster.add_namespace("research", {"team": "llm"})
    snapshots: list[Snapshot] = []

    def planning(snapshot: Snapshot, cfg: Any, now: Any) -> Plan:
        snapshots.append(snapshot)
        return plan(snapshot, cfg, now)

    # When the controller reconciles
    w.controller(planner=planning).reconcile("schedule")

    # Then each listing was one call, and the planner saw everything it returned
    for listing in (
        "list_daemonsets",
        "list_persistent_volume_claims",
        "list_persistent_volumes",
        "list_storage_classes",
        "list_namespaces",
    ):
        assert len(w.cluster.calls_of(listing)) == 1, listing
    (snapshot,) = snapshots
    assert [d.key for d in snapshot.daemonsets] == ["kube-system/agent"]
    assert [c.key for c in snapshot.pvcs] == ["research/data"]
    assert [v.name for v in snapshot.pvs] == ["pv-1"]
    assert [c.name for c in snapshot.storage_classes] == ["gp3"]
    assert snapshot.namespaces == {"research": {"team": "llm", "kubernetes.io/metadata.name": "research"}}


def planned(**changes: Any) -> Callable[[Snapshot, Any, Any], Plan]:
    """A planner whose plan carries `changes` (pod memory, model errors) on top of its own decisions."""
    return lambda snapshot, cfg, now: replace(plan(snapshot, cfg, now), **changes)


def test_pod_memory_is_saved_when_it_changed_and_only_then() -> None:
    # Given a plan that remembers one pod counted on a node, and one pod it knows nothing about
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    counted = PodMemory(uid="u1", counted_on="n1", counted_since=NOW)
    controller = w.controller(
        planner=planned(pod_memory={"research/train": counted, "research/new": PodMemory(uid="u2")})
    )

    # When the controller reconciles
    controller.reconcile("schedule")

    # Then the memory is stored under the lease, without the record that holds nothing
    assert w.state.pod_memory == {"research/train": counted}
    (save,) = w.state.calls_of("save_pod_memory")
    assert save.args[0].owner.startswith("test/")
    # And a second run that remembers the same writes nothing more
    w.clock.advance(60)
    controller.reconcile("schedule")
    assert len(w.state.calls_of("save_pod_memory")) == 1
    assert w.state.load().pods == {"research/train": counted}


def test_pod_memory_is_forgotten_when_the_plan_no_longer_holds_it() -> None:
    # Given a pod remembered by an earlier run, and a plan that no longer remembers anything
    w = world([], [], [asg(A100, desired=0)])
    w.state.pod_memory = {"research/gone": PodMemory(uid="u1", distrusted=("n1",))}

    # When the controller reconciles / Then the stored memory is replaced by the empty one
    w.controller(planner=planned(pod_memory={})).reconcile("schedule")
    assert w.state.pod_memory == {}
    assert len(w.state.calls_of("save_pod_memory")) == 1


def test_dry_run_does_not_store_pod_memory() -> None:
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    memory = {"research/train": PodMemory(uid="u1", counted_on="n1", counted_since=NOW)}
    w.controller(dry_run=True, planner=planned(pod_memory=memory)).reconcile("schedule")
    assert w.state.calls_of("save_pod_memory") == []


def test_failed_pod_memory_save_is_reported_and_the_run_goes_on() -> None:
    # Given a store that fails the pod memory write
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    memory = {"research/train": PodMemory(uid="u1", counted_on="n1", counted_since=NOW)}
    w.state.fail_next("save_pod_memory", ActionError("throttled"))

    # When the controller reconciles
    result = w.controller(planner=planned(pod_memory=memory)).reconcile("schedule")

    # Then the error is in the result and the scale-up still happened
    assert any("save pod memory" in e for e in result.errors)
    assert w.fleet.desired(A100) == 1


def test_model_errors_are_logged_and_counted() -> None:
    # Given a plan with a fit the scheduler refuted
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    since = NOW - timedelta(minutes=3)
    error = ModelError("research/train", "n1", since, "0/1 nodes are available: 1 Insufficient memory.")

    # When the controller reconciles
    result = w.controller(planner=planned(model_errors=(error,))).reconcile("schedule")

    # Then it is logged as a warning with every fact, and counted in the result
    warnings = [fields for level, message, fields in w.reporter.logs if message == "model error"]
    assert warnings == [
        {
            "pod": "research/train",
            "node": "n1",
            "since": since.isoformat(),
            "scheduler_message": error.message,
        }
    ]
    assert [level for level, message, _ in w.reporter.logs if message == "model error"] == ["warning"]
    assert result.model_errors == 1 and result.to_json()["model_errors"] == 1


@pytest.mark.parametrize(("priority", "busy"), [(-100, False), (-10, True), (0, True)])
def test_only_pods_at_or_above_the_priority_cutoff_block_a_cordon_or_termination(
    priority: int, busy: bool
) -> None:
    # Given a cordoned node of the scaler running one pod of the given priority (cutoff -10)
    fresh = node_from_json(node("n1", "i-1", unschedulable=True, annotations=CORDONED_LONG_AGO))
    pods = [pod_from_json(pod("low", node="n1", phase="Running", priority=priority))]
    termination = Termination("n1", "i-1", "a100", "idle")

    # When the blockers are asked / Then only a pod that keeps the node busy blocks
    expected = "it now runs research/low" if busy else None
    assert termination_blocker(termination, -10, NOW, None, fresh, pods) == expected
    assert cordon_blocker(-10, NOW, None, replace(fresh, unschedulable=False), pods) == expected
    # And without a cutoff every live pod keeps the node busy
    assert termination_blocker(termination, None, NOW, None, fresh, pods) == "it now runs research/low"


def test_lease_held_by_another_run_skips_without_reading() -> None:
    w = world([pod("train", gpus=4)], [], [asg(A100, desired=0)])
    w.state.acquire_lease("other-run", NOW, 120)
    result = w.controller().reconcile("schedule")
    assert result.status is RunStatus.LEASE_HELD and "other-run" in result.detail
    assert w.cluster.calls == [] and w.fleet.calls == []


# ------------------------------------------------------------------------------------------ scale-down


def test_idle_node_is_cordoned_then_terminated_with_decrement_on_a_later_run() -> None:
    # Given a node idle for 30 minutes
    w = idle_world()
    controller = w.controller()
    # When the controller runs: the node is cordoned (conflict-safe, with its resourceVersion)
    first = controller.reconcile("schedule")
    assert statuses(first, ActionKind.CORDON) == [("n1", ActionStatus.DONE)]
    assert w.cluster.calls_of("cordon")[0].kwargs["resource_version"]
    assert w.fleet.terminated == []
    # When it runs again after the settle time: terminated with decrement, Node deleted
    w.clock.advance(60)
    second = controller.reconcile("schedule")
    assert statuses(second, ActionKind.TERMINATE) == [("n1", ActionStatus.DONE)]
    assert w.fleet.calls_of("terminate_instance")[0].kwargs["decrement"] is True
    assert w.fleet.desired(A100) == 0
    assert "n1" not in w.cluster.nodes
    # And desired is never set through SetDesiredCapacity for a scale-down
    assert w.fleet.calls_of("set_desired_capacity") == []
    assert w.state.groups["a100"].last_scale_down == NOW + timedelta(seconds=60)
    assert w.reporter.metric_values("ScaleDowns", "a100") == [0, 1]


def test_cordon_is_skipped_when_the_node_got_a_pod_after_planning() -> None:
    # Given a node due for a cordon, and a pod bound to it between planning and acting
    w = idle_world()
    w.cluster.before("get_node", lambda name: w.cluster.add_pod(pod("late", node=name)))
    result = w.controller().reconcile("schedule")
    # Then the cordon is skipped, with the reason
    [skipped] = [a for a in result.actions if a.kind is ActionKind.CORDON]
    assert skipped.status is ActionStatus.SKIPPED and "research/late" in skipped.detail
    assert w.cluster.calls_of("cordon") == []
    assert not w.cluster.is_cordoned("n1")


def test_termination_is_skipped_when_the_node_got_a_pod_after_planning() -> None:
    w = idle_world(cordoned=True)
    w.cluster.before("get_node", lambda name: w.cluster.add_pod(pod("late", node=name)))
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.TERMINATE) == [("n1", ActionStatus.SKIPPED)]
    assert w.fleet.calls_of("terminate_instance") == []
    assert w.fleet.desired(A100) == 1


def test_a_termination_whose_response_was_lost_has_its_node_removed_by_the_next_run() -> None:
    # Given an idle cordoned node whose termination goes through but whose response is lost
    w = idle_world(cordoned=True)
    w.fleet.fail_after_next("terminate_instance", FleetActionError("TerminateInstance: read timeout"))
    first = w.controller().reconcile("schedule")
    assert statuses(first, ActionKind.TERMINATE) == [("n1", ActionStatus.FAILED)]
    assert w.fleet.terminated == ["i-1"] and "n1" in w.cluster.nodes

    # When the kubelet has stopped (the Node turns NotReady) and the next run comes
    w.clock.advance(60)
    w.cluster.node_obj("n1")["status"]["conditions"] = [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": iso(w.clock.now())}
    ]
    second = w.controller().reconcile("schedule")

    # Then it finds the instance gone and removes the Node object, terminating nothing twice
    assert statuses(second, ActionKind.DELETE_NODE) == [("n1", ActionStatus.DONE)]
    assert "n1" not in w.cluster.nodes
    assert w.fleet.terminated == ["i-1"] and len(w.fleet.calls_of("terminate_instance")) == 1


def test_a_ready_node_whose_instance_left_the_groups_is_not_deleted() -> None:
    # Given a cordoned node whose instance is in no group, but whose kubelet still reports Ready
    w = world(
        [], [node("n1", "i-9", unschedulable=True, annotations=CORDONED_LONG_AGO)], [asg(A100, desired=0)]
    )
    # When the controller reconciles / Then the Node stays (a Ready kubelet runs somewhere)
    w.controller().reconcile("schedule")
    assert "n1" in w.cluster.nodes and w.cluster.calls_of("delete_node") == []


def test_termination_is_skipped_when_someone_uncordoned_the_node() -> None:
    w = idle_world(cordoned=True)
    w.cluster.before("get_node", lambda name: w.cluster.uncordon(name))
    result = w.controller().reconcile("schedule")
    [skipped] = [a for a in result.actions if a.kind is ActionKind.TERMINATE]
    assert skipped.status is ActionStatus.SKIPPED and "no longer cordoned" in skipped.detail
    assert w.fleet.terminated == []


def test_re_read_failure_before_a_termination_skips_it() -> None:
    w = idle_world(cordoned=True)
    w.cluster.fail_next("get_node", ClusterReadError("HTTP 500"))
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.TERMINATE) == [("n1", ActionStatus.SKIPPED)]
    assert w.fleet.terminated == []


def test_cordon_conflict_is_reported_and_retried_next_run() -> None:
    w = idle_world()
    w.cluster.before("cordon", lambda name, at: w.cluster._touch(w.cluster.node_obj(name)))
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.CORDON) == [("n1", ActionStatus.FAILED)]
    assert "409" in result.failed[0].detail
    assert not w.cluster.is_cordoned("n1")
    w.cluster.clear_faults()
    w.clock.advance(60)
    w.controller().reconcile("schedule")
    assert w.cluster.is_cordoned("n1")


def test_failed_termination_is_reported_and_does_not_stop_the_run() -> None:
    w = idle_world(cordoned=True)
    w.fleet.fail_next("terminate_instance", FleetActionError("ValidationError"))
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.TERMINATE) == [("n1", ActionStatus.FAILED)]
    assert not result.ok and "terminate n1" in result.errors[0]
    assert "n1" in w.cluster.nodes  # the Node object stays while its instance runs


def test_crash_between_cordon_and_terminate_terminates_nothing_wrongly() -> None:
    # Given an idle node; the run dies right after the cordon went through (and never releases the lease)
    w = idle_world()
    w.cluster.fail_after_next("cordon", RuntimeError("Lambda timed out"))
    w.state.fail_next("release_lease", RuntimeError("Lambda timed out"))
    with pytest.raises(RuntimeError):
        w.controller().reconcile("schedule")
    assert w.cluster.is_cordoned("n1") and w.fleet.terminated == []
    # When a pod had been bound just before the cordon, and the next runs come
    w.cluster.add_pod(pod("bound-before-cordon", node="n1"))
    w.clock.advance(60)
    held = w.controller().reconcile("schedule")
    assert held.status is RunStatus.LEASE_HELD  # the dead run's lease has not expired yet
    w.clock.advance(120)
    result = w.controller().reconcile("schedule")
    # Then the busy node is uncordoned, never terminated
    assert statuses(result, ActionKind.UNCORDON) == [("n1", ActionStatus.DONE)]
    assert w.fleet.terminated == [] and not w.cluster.is_cordoned("n1")


def test_crash_between_cordon_and_terminate_is_finished_by_the_next_run() -> None:
    w = idle_world()
    w.cluster.fail_after_next("cordon", RuntimeError("Lambda timed out"))
    with pytest.raises(RuntimeError):
        w.controller().reconcile("schedule")
    # When the node stays idle: the next run after the settle time terminates it
    w.clock.advance(60)
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.TERMINATE) == [("n1", ActionStatus.DONE)]
    assert w.fleet.desired(A100) == 0


# ------------------------------------------------------------------------------------------ desired


def group_state(desired: int, live: int, *, min_size: int = 0, max_size: int = 16) -> AsgState:
    instances = tuple(AsgInstance(f"i-{n}") for n in range(live))
    return AsgState("g", min_size, max_size, desired, instances)


@pytest.mark.parametrize(
    ("target", "desired", "live", "expected"),
    [
        (5, 3, 3, 5),  # raise freely
        (20, 3, 3, 16),  # within max
        (3, 5, 3, 3),  # cancel launches that have not happened
        (1, 5, 3, 3),  # ... but never below the live instances
        (1, 3, 3, None),  # lowering below live would let the ASG pick a random instance
        (3, 3, 3, None),
    ],
)
def test_desired_is_raised_freely_and_lowered_only_to_cancel_launches(
    target: int, desired: int, live: int, expected: int | None
) -> None:
    assert desired_to_set(target, group_state(desired, live)) == expected


def test_config_max_below_running_instances_never_lowers_desired() -> None:
    # Given 3 busy nodes in a group the config now caps at 2
    cfg = config(node_groups=[{
        "name": "a100", "asg_name": A100, "labels": {"gpu": "a100"}, "taints": [GPU_TAINT], "max_size": 2,
        "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"},
    }])  # fmt: skip
    names = ["n1", "n2", "n3"]
    w = world(
        [pod(f"job-{n}", node=n) for n in names],
        [node(n, f"i-{n}") for n in names],
        [asg(A100, desired=3, instances=[f"i-{n}" for n in names])],
        cfg,
    )
    w.controller().reconcile("schedule")
    assert w.fleet.calls_of("set_desired_capacity") == []
    assert w.fleet.desired(A100) == 3


def test_pending_pod_that_fits_a_cordoned_idle_node_uncordons_it_instead_of_buying_one() -> None:
    w = idle_world(cordoned=True, extra_pods=[pod("train", gpus=8)])
    result = w.controller().reconcile("schedule")
    assert w.fleet.terminated == [] and w.fleet.calls_of("set_desired_capacity") == []
    assert statuses(result, ActionKind.UNCORDON) == [("n1", ActionStatus.DONE)]


def test_termination_and_scale_up_in_one_run_set_desired_from_what_is_left() -> None:
    # Given two groups: an idle cordoned a100 node, and a pod that only h100 can run
    w = world(
        [pod("train", gpus=8, node_selector={"gpu": "h100"})],
        [node("n1", "i-1", unschedulable=True, annotations=CORDONED_LONG_AGO)],
        [asg(A100, desired=1, instances=["i-1"]), asg(H100, desired=0)],
        two_groups(),
    )
    w.state.idle_since = {"n1": NOW - timedelta(minutes=30)}
    result = w.controller().reconcile("schedule")
    assert w.fleet.terminated == ["i-1"] and w.fleet.desired(A100) == 0
    assert w.fleet.desired(H100) == 1
    # And desired was set from a describe made after the termination
    describes = [c.method for c in w.fleet.calls if c.method in ("describe_groups", "terminate_instance")]
    assert describes == ["describe_groups", "terminate_instance", "describe_groups"]
    assert [c.args[1] for c in w.fleet.calls_of("set_desired_capacity")] == [1]
    assert {g.name: g.desired for g in result.groups} == {"a100": 0, "h100": 1}


def test_access_denied_on_one_group_is_isolated_reported_and_notified() -> None:
    # Given a pod pending for each group, and a100's SetDesiredCapacity denied (no cluster tag)
    w = world(
        [
            pod("train-a", gpus=8, node_selector={"gpu": "a100"}),
            pod("train-h", gpus=8, node_selector={"gpu": "h100"}),
        ],
        [],
        [asg(A100, desired=0), asg(H100, desired=0)],
        two_groups(),
    )
    w.fleet.before(
        "set_desired_capacity",
        lambda group, _desired: (
            group.name == A100 and w.fleet.fail_next("set_desired_capacity", AuthError("denied"))
        ),
    )
    result = w.controller().reconcile("schedule")
    # Then h100 grows in the same run, and a100's failure is in the result, the metric and the message
    assert w.fleet.desired(H100) == 1 and w.fleet.desired(A100) == 0
    assert [(a.kind, a.target) for a in result.failed] == [(ActionKind.SET_DESIRED, A100)]
    assert not result.ok and result.to_json()["failed"][0]["status"] == "failed"
    assert sum(w.reporter.metric_values("ActionFailures")) == 1
    (subject, lines) = w.notifier.messages[0]
    assert "1 FAILED" in subject and any(A100 in line and "failed" in line for line in lines)
    # And only the pod whose group grew hears it triggered a scale-up
    assert [e.target.name for e in w.cluster.events if e.reason == "TriggeredScaleUp"] == ["train-h"]


def test_why_a_group_did_not_shrink_reaches_its_reason() -> None:
    # Given two idle a100 nodes at the group's min size
    w = world(
        [],
        [node("n1", "i-1"), node("n2", "i-2")],
        [asg(A100, desired=2, instances=["i-1", "i-2"], min_size=2)],
    )
    w.state.idle_since = {"n1": NOW - timedelta(hours=1), "n2": NOW - timedelta(hours=1)}
    result = w.controller().reconcile("schedule")
    # Then nothing is cordoned and the report says why
    assert w.cluster.calls_of("cordon") == []
    (group,) = result.groups
    assert group.reason == "2 idle node(s) kept: at min size 2"


# ------------------------------------------------------------------------------------------ capacity


def test_capacity_failure_backs_off_and_spills_the_backlog_to_the_next_group_in_the_same_run() -> None:
    # Given a100 asked for one node that failed to launch (no capacity), and the pod still pending
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=1), asg(H100, desired=0)], two_groups())
    failure = ScalingFailure(
        A100, "act-1", NOW - timedelta(minutes=1), FailureKind.INSUFFICIENT_CAPACITY, "no p4d"
    )
    w.fleet.add_failure(failure)
    # When the controller reconciles once
    result = w.controller().reconcile("schedule")
    # Then a100 backs off 5 minutes from the failure, its desired goes back to what runs (0),
    # and the pod is served by h100 in the same run
    assert w.state.backoff_until("a100") == failure.at + timedelta(minutes=5)
    assert w.fleet.desired(A100) == 0
    assert w.fleet.desired(H100) == 1
    assert statuses(result, ActionKind.BACKOFF) == [("a100", ActionStatus.DONE)]
    assert w.reporter.metric_values("CapacityFailures", "a100") == [1]


def test_the_same_failure_episode_is_counted_once() -> None:
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=1), asg(H100, desired=0)], two_groups())
    for minute in (3, 2, 1):  # the ASG retried three times before desired was set back
        w.fleet.add_failure(
            ScalingFailure(A100, f"act-{minute}", NOW - timedelta(minutes=minute), FailureKind.SPOT_CAPACITY)
        )
    controller = w.controller()
    controller.reconcile("schedule")
    w.clock.advance(60)
    controller.reconcile("schedule")
    assert w.state.groups["a100"].failures == 1
    assert w.state.backoff_until("a100") == NOW - timedelta(minutes=1) + timedelta(minutes=5)


def test_failures_that_backoff_cannot_help_are_not_backed_off() -> None:
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=0)])
    w.fleet.add_failure(ScalingFailure(A100, "a", NOW - timedelta(minutes=1), FailureKind.OTHER, "bad AMI"))
    w.controller().reconcile("schedule")
    assert w.state.backoff_until("a100") is None
    assert w.fleet.desired(A100) == 1


def test_launch_unsuccessful_event_backs_off_at_once_then_reconciles() -> None:
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=1), asg(H100, desired=0)], two_groups())
    result = w.controller().handle_capacity_event(
        A100, NOW, FailureKind.INSUFFICIENT_CAPACITY, "We currently do not have sufficient p4d capacity"
    )
    assert w.state.backoff_until("a100") == NOW + timedelta(minutes=5)
    assert w.fleet.desired(A100) == 0 and w.fleet.desired(H100) == 1
    assert result.actions[0].kind is ActionKind.BACKOFF and result.actions[0].status is ActionStatus.DONE
    # And a second event of the same episode does not double the backoff
    again = w.controller().handle_capacity_event(A100, NOW + timedelta(seconds=20), FailureKind.OTHER, "")
    assert again.actions[0].status is ActionStatus.SKIPPED
    assert w.state.groups["a100"].failures == 1


def test_launch_unsuccessful_event_of_another_group_is_ignored() -> None:
    w = world([], [], [asg(A100, desired=0)])
    result = w.controller().handle_capacity_event("someone-elses-asg", NOW, FailureKind.OTHER, "")
    assert result.status is RunStatus.IGNORED
    assert w.write_calls() == []


# ------------------------------------------------------------------------------------------ dry run


def test_dry_run_reports_every_action_and_changes_nothing() -> None:
    # Given a run that would terminate, cordon, scale up and back off
    w = world(
        [pod("train", gpus=8, node_selector={"gpu": "h100"}), pod("huge", gpus=16)],
        [
            node("n1", "i-1", unschedulable=True, annotations=CORDONED_LONG_AGO),
            node("n2", "i-2"),
        ],
        [asg(A100, desired=2, instances=["i-1", "i-2"]), asg(H100, desired=0)],
        two_groups(max_scale_in_fraction=1.0),
    )
    w.state.idle_since = {"n1": NOW - timedelta(minutes=30), "n2": NOW - timedelta(minutes=30)}
    w.fleet.add_failure(ScalingFailure(A100, "a", NOW, FailureKind.INSUFFICIENT_CAPACITY))
    # When the controller runs in dry-run mode
    result = w.controller(dry_run=True).reconcile("schedule")
    # Then nothing was written anywhere, the lease included, but the scaler's own status (shadow mode)
    assert w.write_calls() == ["patch_config_map"]
    assert w.cluster.events == [] and w.notifier.messages == []
    # And the result lists what it would have done
    assert result.dry_run
    would = {(a.kind, a.target) for a in result.actions if a.status is ActionStatus.DRY_RUN}
    assert {
        (ActionKind.BACKOFF, "a100"),
        (ActionKind.TERMINATE, "n1"),
        (ActionKind.DELETE_NODE, "n1"),
        (ActionKind.CORDON, "n2"),
        (ActionKind.SET_DESIRED, H100),
    } <= would


def test_config_dry_run_cannot_be_turned_off_by_the_environment() -> None:
    w = world([pod("train", gpus=8)], [], [asg(A100, desired=0)], config(dry_run=True))
    assert w.controller(dry_run=False).dry_run


# ------------------------------------------------------------------------------------------ concurrency


def test_twenty_concurrent_reconciles_act_exactly_once() -> None:
    # Given an idle node due for a cordon and a pod that needs an h100 node
    w = world(
        [pod("train", gpus=8, node_selector={"gpu": "h100"})],
        [node("n1", "i-1")],
        [asg(A100, desired=1, instances=["i-1"]), asg(H100, desired=0)],
        two_groups(),
    )
    w.state.idle_since = {"n1": NOW - timedelta(minutes=30)}
    controllers = [w.controller(owner=f"lambda-{i}") for i in range(20)]
    barrier = threading.Barrier(20)
    results: list[ReconcileResult] = []

    def run(controller: Controller) -> None:
        barrier.wait()
        results.append(controller.reconcile("sqs"))

    threads = [threading.Thread(target=run, args=(c,)) for c in controllers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one set of actions happened: one cordon, one desired change, one notification
    assert len(results) == 20
    assert len(w.cluster.calls_of("cordon")) == 1
    assert [c.args[1] for c in w.fleet.calls_of("set_desired_capacity")] == [1]
    assert len(w.notifier.messages) == 1
    acted = [r for r in results if r.changed]
    assert len(acted) == 1
    assert all(r.status in (RunStatus.LEASE_HELD, RunStatus.COMPLETED) for r in results)


def test_a_lost_lease_stops_the_run_before_its_next_write() -> None:
    # Given a run whose lease is taken over (expired and re-acquired) while it plans
    w = idle_world(cordoned=True)
    w.cluster.add_node(node("n2", "i-2"))
    w.fleet.add_group(asg(A100, desired=2, instances=["i-1", "i-2"]))
    w.state.idle_since["n2"] = NOW - timedelta(hours=1)

    def steal(*_: object) -> None:
        w.clock.advance(200)
        w.state.acquire_lease("thief", w.clock.now(), 120)

    w.cluster.before("list_pods_on_node", steal)
    result = w.controller().reconcile("schedule")
    # Then it stops: no termination, no cordon, and says why
    assert w.fleet.terminated == [] and w.cluster.calls_of("cordon") == []
    assert any("LeaseHeldError" in e for e in result.errors)


def test_a_lease_taken_after_planning_leaves_the_old_run_no_write_of_any_kind() -> None:
    # Given a plan that uncordons an idle node for a pending pod, records its pod Events and saves
    # state, and another run that takes the lease the moment this run has planned
    w = idle_world(cordoned=True, extra_pods=[pod("train", gpus=8)])
    taken: list[int] = []

    def plan_then_lose_the_lease(snapshot: Snapshot, cfg: Any, now: Any) -> Plan:
        decided = plan(snapshot, cfg, now)
        assert decided.uncordon  # the write a stale run must not make
        w.state.take_over()
        taken.append(len(w.calls_in_order()))
        return decided

    # When the old run goes on to apply its plan
    result = w.controller(planner=plan_then_lose_the_lease).reconcile("schedule")

    # Then after the take-over it only asked the store whether the lease was still its own, and gave
    # back nothing it no longer held: no uncordon, no Event, no state write
    after = [c.method for c in w.calls_in_order()[taken[0] :]]
    assert set(after) <= {"renew_lease", "release_lease"}, after
    assert w.cluster.is_cordoned("n1") and w.cluster.events == []
    assert w.state.lease is not None and w.state.lease.owner == "thief"
    assert any("lease was lost" in e for e in result.errors)


# ------------------------------------------------------------------------------------------ drains


def drain_world(*, force: bool = False, grace: int = 300) -> FakeWorld:
    """n1 under a forced drain: cordoned, running one job pod and a DaemonSet pod."""
    w = world(
        [pod("job", node="n1"), pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet")],
        [node("n1", "i-1", unschedulable=True, annotations=CORDONED_LONG_AGO), node("n2", "i-2")],
        [asg(A100, desired=2, instances=["i-1", "i-2"])],
    )
    w.cluster.add_pod(pod("other", node="n2"))
    w.state.intents["a100"] = DrainIntent(
        "a100", ("n1",), NOW, NOW + timedelta(hours=2), grace_seconds=grace, force=force, requested_by="ops"
    )
    return w


def test_drain_blocked_by_a_pdb_is_retried_then_finished() -> None:
    # Given a drain whose pod a PodDisruptionBudget protects once
    w = drain_world()
    w.cluster.block_evictions("research/job", times=1)
    controller = w.controller()
    # When the first run tries: blocked, the intent stays, the node stays cordoned
    first = controller.reconcile("schedule")
    assert statuses(first, ActionKind.EVICT) == [("research/job", ActionStatus.BLOCKED)]
    assert "a100" in w.state.intents and w.cluster.is_cordoned("n1")
    assert first.ok  # a blocked eviction is not an error
    # When the next run tries: evicted
    w.clock.advance(60)
    second = controller.reconcile("schedule")
    assert statuses(second, ActionKind.EVICT) == [("research/job", ActionStatus.DONE)]
    # When the node is empty (only the DaemonSet pod left): terminated with decrement, intent deleted
    w.clock.advance(60)
    third = controller.reconcile("schedule")
    assert statuses(third, ActionKind.TERMINATE) == [("n1", ActionStatus.DONE)]
    assert w.fleet.desired(A100) == 1 and w.fleet.terminated == ["i-1"]
    assert w.state.intents == {}
    assert w.fleet.calls_of("set_desired_capacity") == []


def test_drained_node_is_hidden_from_the_planner() -> None:
    # Given a busy node under a drain (the planner would otherwise uncordon a busy node it cordoned)
    w = drain_world()
    w.cluster.block_evictions("research/job")
    result = w.controller().reconcile("schedule")
    assert statuses(result, ActionKind.UNCORDON) == []
    assert w.cluster.is_cordoned("n1")


def test_forced_drain_deletes_pods_after_the_grace() -> None:
    w = drain_world(force=True, grace=300)
    w.cluster.block_evictions("research/job")
    controller = w.controller()
    controller.reconcile("schedule")
    assert w.cluster.deleted_pods == []
    w.clock.advance(301)
    result = controller.reconcile("schedule")
    assert statuses(result, ActionKind.DELETE_POD) == [("research/job", ActionStatus.DONE)]


def test_expired_drain_is_given_up_and_its_node_left_cordoned() -> None:
    w = drain_world()
    w.cluster.block_evictions("research/job")
    w.clock.set(NOW + timedelta(hours=2))
    result = w.controller().reconcile("schedule")
    assert w.state.intents == {}
    assert statuses(result, ActionKind.DRAIN) == [("a100", ActionStatus.FAILED)]
    assert w.cluster.calls_of("uncordon") == [] and w.cluster.is_cordoned("n1")
    assert w.fleet.terminated == []


def test_node_uncordoned_by_someone_else_leaves_the_drain() -> None:
    w = drain_world()
    w.cluster.uncordon("n1")
    result = w.controller().reconcile("schedule")
    assert w.state.intents == {}
    assert w.cluster.evicted == []
    assert (ActionKind.DRAIN, ActionStatus.SKIPPED) in {(a.kind, a.status) for a in result.actions}


# ------------------------------------------------------------------------------------------ interruptions


def test_spot_interruption_cordons_the_node_and_holds_it_without_evicting() -> None:
    # Given a busy a100 node whose instance gets a spot interruption warning
    w = world([pod("job", node="n1")], [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])])
    result = w.controller().handle_interruption("i-1", NOW, InterruptionKind.SPOT_INTERRUPTION)
    # Then the node is cordoned, held by a drain intent that evicts nothing, and not uncordoned
    assert w.cluster.is_cordoned("n1")
    assert w.state.intents["a100"].requested_by == INTERRUPTION_REQUESTER
    assert w.cluster.evicted == [] and w.cluster.calls_of("uncordon") == []
    assert result.trigger == "spot-interruption i-1"
    # When EC2 reclaims the instance: the hold ends
    w.fleet.groups[A100] = AsgState(A100, 0, 16, 1, (), tags={TAG_CLUSTER: "research"})
    w.cluster.remove_pod("research/job")
    w.clock.advance(120)
    w.controller().reconcile("schedule")
    assert w.state.intents == {}


def test_spot_warning_during_an_operators_drain_holds_its_node_and_leaves_the_drain_as_asked() -> None:
    # Given n1 under an operator's drain, forced after an hour, its pod kept by a PodDisruptionBudget,
    # and n2 busy in the same group
    w = drain_world(force=True, grace=3600)
    w.cluster.block_evictions("research/job")
    w.cluster.block_evictions("research/other")
    w.clock.advance(60)
    # When a Spot interruption warning comes for n2
    w.controller().handle_interruption("i-2", w.clock.now(), InterruptionKind.SPOT_INTERRUPTION)
    # Then n2 is held (cordoned, its room bought ahead, nothing evicted) and n1's pod is not deleted
    intent = w.state.intents["a100"]
    assert intent.nodes == ("n1", "n2") and intent.held == ("n2",)
    assert w.cluster.is_cordoned("n2")
    assert w.cluster.deleted_pods == [] and "research/other" not in w.cluster.evicted
    assert w.fleet.desired(A100) == 3
    # When the next runs come, still within n1's hour: n1's pod is only evicted, never deleted
    w.clock.advance(600)
    w.controller().reconcile("schedule")
    assert w.cluster.deleted_pods == []
    # When n1's hour is over: its pod is deleted; n2's never is
    w.clock.set(NOW + timedelta(hours=1, minutes=1))
    w.controller().reconcile("schedule")
    assert w.cluster.deleted_pods == ["research/job"]


def test_spot_interruption_of_an_instance_of_another_group_is_ignored() -> None:
    w = world([], [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])])
    result = w.controller().handle_interruption("i-999", NOW, InterruptionKind.SPOT_INTERRUPTION)
    assert result.status is RunStatus.IGNORED
    assert w.write_calls() == []


def test_rebalance_recommendation_just_reconciles() -> None:
    w = world([pod("job", node="n1")], [node("n1", "i-1")], [asg(A100, desired=1, instances=["i-1"])])
    result = w.controller().handle_interruption("i-1", NOW, InterruptionKind.REBALANCE_RECOMMENDATION)
    assert result.status is RunStatus.COMPLETED
    assert not w.cluster.is_cordoned("n1")


def test_drain_of_a_group_whose_asg_is_missing_pauses_and_touches_nothing() -> None:
    w = drain_world()
    del w.fleet.groups[A100]
    result = w.controller().reconcile("schedule")
    assert w.state.intents["a100"].nodes == ("n1",)
    assert w.cluster.evicted == [] and "n1" in w.cluster.nodes
    assert (ActionKind.DRAIN, ActionStatus.SKIPPED) in {(a.kind, a.status) for a in result.actions}


def test_drain_read_failure_keeps_the_node_for_the_next_run() -> None:
    w = drain_world()
    w.cluster.before(
        "get_node", lambda name: w.cluster.fail_next("list_pods_on_node", ClusterReadError("500"))
    )
    w.controller().reconcile("schedule")
    assert w.state.intents["a100"].nodes == ("n1",) and w.cluster.evicted == []


def test_a_long_run_renews_its_lease_before_writing() -> None:
    # Given a run that spends 100 of its lease's 120 seconds before its first write
    w = idle_world(cordoned=True)
    w.cluster.before("get_node", lambda name: w.clock.advance(100))
    result = w.controller().reconcile("schedule")
    # Then it renews the lease (the same one: owner and fencing token) and finishes the work
    assert statuses(result, ActionKind.TERMINATE) == [("n1", ActionStatus.DONE)]
    (acquired,) = w.state.calls_of("acquire_lease")
    renewals = w.state.calls_of("renew_lease")
    assert renewals and {c.args[0].owner for c in renewals} == {acquired.args[0]}
    assert result.ok
