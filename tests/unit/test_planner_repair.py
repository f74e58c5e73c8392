"""Node health repair: which signals make a node unhealthy, and what the plan does about it.

Common setting: one group of 8-GPU nodes (a100, behind research-a100, max 16), nodes created two
hours ago, the default repair policy (10 min toleration, 30 min for Ready, pause above 20 %).
Inputs are `kubectl get node -o json` and `aws ec2 describe-instance-status` shapes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from shared.domain.model import ScalerState
from shared.domain.plan import Outcome, RepairAction
from shared.formats.lifecycle import instance_statuses_from_describe
from shared.planner import plan
from shared.planner.health import GPUS_LOST, health_clock_key
from shared.planner.repair import REPAIR_TAINT_KEY
from tests.builders import GPU_TAINT, GPU_TOLERATION, NOW, asg, config, iso, node, pod, snapshot
from tests.native import needs_sources

A100 = "research-a100"
HEALTH_TAINT = {"key": REPAIR_TAINT_KEY, "effect": "NoSchedule"}


def with_condition(
    obj: dict[str, Any], kind: str, status: str, since: timedelta | None, **extra: str
) -> dict[str, Any]:
    """`obj` with one more status.conditions entry, changed `since` ago (None: no lastTransitionTime)."""
    condition: dict[str, Any] = {"type": kind, "status": status, **extra}
    if since is not None:
        condition["lastTransitionTime"] = iso(NOW - since)
    obj["status"]["conditions"].append(condition)
    return obj


def nodes(count: int) -> list[dict[str, Any]]:
    return [node(f"n{i}", f"i-{i}") for i in range(count)]


def group(count: int, **kw: Any) -> list[dict[str, Any]]:
    return [asg(A100, desired=count, instances=[f"i-{i}" for i in range(count)], **kw)]


def run(
    node_list: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None = None,
    asgs: list[dict[str, Any]] | None = None,
    state: ScalerState | None = None,
    statuses: dict[str, Any] | None = None,
    **policy: Any,
) -> Any:
    snap = snapshot(pods or [], node_list, asgs or group(len(node_list)), state)
    if statuses is not None:
        snap = replace(snap, instance_statuses=instance_statuses_from_describe(statuses))
    return plan(snap, config(policy={"cordon_settle_seconds": 30, **policy}), NOW)


def actions(result: Any) -> dict[str, tuple[str, str]]:
    return {d.node: (d.action.value, d.condition) for d in result.repair}


def impaired_status(instance_id: str, since: datetime | None = None) -> dict[str, Any]:
    """One entry of describe-instance-status: the system reachability check failed (`since`: its
    ImpairedSince, absent when None)."""
    failed: dict[str, Any] = {"Name": "reachability", "Status": "failed"}
    if since is not None:
        failed["ImpairedSince"] = iso(since)
    return {
        "InstanceId": instance_id,
        "AvailabilityZone": "us-west-2a",
        "InstanceState": {"Code": 16, "Name": "running"},
        "SystemStatus": {"Status": "impaired", "Details": [failed]},
        "InstanceStatus": {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]},
    }


def test_an_idle_node_with_broken_gpu_hardware_past_its_toleration_is_replaced() -> None:
    # Given n0 whose node monitoring agent reports AcceleratedHardwareReady=False for 11 minutes
    fleet = nodes(5)
    with_condition(
        fleet[0], "AcceleratedHardwareReady", "False", timedelta(minutes=11), reason="NvidiaXID79Error"
    )

    result = run(fleet)

    # Then n0 is replaced: terminated (the group, above min size, needs no replacement) and nothing else
    assert actions(result) == {"n0": ("replace", "AcceleratedHardwareReady=False")}
    assert [(t.node, t.instance_id, t.decrement, t.cause) for t in result.terminate] == [
        ("n0", "i-0", True, "repair")
    ]
    assert result.group("a100").desired == 4


def test_a_broken_node_at_min_size_is_replaced_by_the_group() -> None:
    # Given the same broken node in a group at its min size of 5
    fleet = nodes(5)
    with_condition(fleet[0], "AcceleratedHardwareReady", "False", timedelta(minutes=11))

    result = run(fleet, asgs=group(5, min_size=5))

    # Then it is terminated without lowering desired: the ASG launches its replacement
    assert [(t.node, t.decrement) for t in result.terminate] == [("n0", False)]
    assert result.group("a100").desired == 5


def test_within_its_toleration_a_node_waits_and_its_room_is_never_counted() -> None:
    # Given n0 (idle, 8 free GPUs) whose KernelReady turned False 2 minutes ago, and a pending 8-GPU pod
    fleet = nodes(2)
    with_condition(fleet[0], "KernelReady", "False", timedelta(minutes=2))
    busy = pod("busy", gpus=8, node="n1", tolerations=[GPU_TOLERATION])
    waiting = pod("train", gpus=8, tolerations=[GPU_TOLERATION])

    result = run(fleet, [busy, waiting])

    # Then n0 waits (28 more minutes: a system condition's 30, as Karpenter's default repair policy),
    # and the pod does not wait on it: a new node is bought
    assert actions(result) == {"n0": ("wait", "KernelReady=False")}
    assert "tolerated 1680s more" in result.repair[0].reason
    assert not result.terminate
    assert result.pods[-1].outcome is Outcome.SCALE_UP
    assert result.group("a100").desired == 3


def test_a_busy_unhealthy_node_is_cordoned_never_evicted_nor_terminated() -> None:
    # Given n0 with lost GPUs (6 of 8 allocatable) seen 20 minutes ago, still running a job
    fleet = nodes(5)
    fleet[0]["status"]["allocatable"] = {**fleet[0]["status"]["allocatable"], "nvidia.com/gpu": "6"}
    job = pod("job", gpus=2, node="n0", tolerations=[GPU_TOLERATION])
    seen = ScalerState(instances_first_seen={health_clock_key("i-0", GPUS_LOST): NOW - timedelta(minutes=20)})

    result = run(fleet, [job], state=seen)

    # Then it is cordoned (and tainted by the controller), and nothing is terminated
    assert actions(result) == {"n0": ("cordon", GPUS_LOST)}
    assert "2 of 8 nvidia.com/gpu not allocatable" in result.repair[0].reason
    assert not result.terminate
    # and the first sighting is kept for the next run
    assert result.instances_first_seen[health_clock_key("i-0", GPUS_LOST)] == NOW - timedelta(minutes=20)


def test_gpus_lost_are_timed_from_their_first_sighting() -> None:
    # Given a node whose device plugin dropped a GPU, never seen before
    fleet = nodes(5)
    fleet[0]["status"]["allocatable"] = {**fleet[0]["status"]["allocatable"], "nvidia.com/gpu": "7"}

    result = run(fleet)

    # Then it waits from now, and the sighting is stored
    assert actions(result) == {"n0": ("wait", GPUS_LOST)}
    assert result.instances_first_seen[health_clock_key("i-0", GPUS_LOST)] == NOW


def test_a_health_cordoned_node_that_emptied_is_replaced() -> None:
    # Given n0 cordoned and tainted for health an hour ago, its last job gone
    cordoned = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(hours=1))}
    fleet = nodes(5)
    fleet[0] = node("n0", "i-0", unschedulable=True, annotations=cordoned, taints=[GPU_TAINT, HEALTH_TAINT])
    with_condition(fleet[0], "StorageReady", "False", timedelta(hours=1))

    result = run(fleet)

    assert actions(result) == {"n0": ("replace", "StorageReady=False")}
    assert [t.node for t in result.terminate] == ["n0"]
    # and scale-down does not uncordon it meanwhile
    assert not result.uncordon


def test_repair_pauses_when_too_much_of_a_group_is_unhealthy() -> None:
    # Given 2 of 5 idle nodes broken (more than 20 % of 5, rounded up: 1)
    fleet = nodes(5)
    for broken in fleet[:2]:
        with_condition(broken, "AcceleratedHardwareReady", "False", timedelta(hours=1))

    result = run(fleet)

    # Then nothing is terminated for health, the group is listed for the alarm
    assert {a for a, _ in actions(result).values()} == {"paused"}
    assert result.repair_paused == ("a100",)
    assert not result.terminate


def test_cordons_still_happen_while_repair_is_paused() -> None:
    fleet = nodes(5)
    for broken in fleet[:2]:
        with_condition(broken, "NetworkingReady", "False", timedelta(hours=1))
    job = pod("job", gpus=1, node="n1", tolerations=[GPU_TOLERATION])

    result = run(fleet, [job])

    assert actions(result) == {
        "n0": ("paused", "NetworkingReady=False"),
        "n1": ("cordon", "NetworkingReady=False"),
    }


def test_a_recovered_node_the_scaler_cordoned_for_health_is_uncordoned() -> None:
    cordoned = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(hours=1))}
    fleet = nodes(3)
    fleet[0] = node("n0", "i-0", unschedulable=True, annotations=cordoned, taints=[GPU_TAINT, HEALTH_TAINT])
    job = pod("job", gpus=1, node="n0", tolerations=[GPU_TOLERATION])

    result = run(fleet, [job])

    assert actions(result) == {"n0": ("uncordon", "")}
    assert [a.node for a in result.uncordon] == ["n0"]
    assert [(m.node, m.key) for m in result.unmark] == [("n0", REPAIR_TAINT_KEY)]


def test_a_condition_that_flaps_never_reaches_its_toleration() -> None:
    # Given Ready flapping: False again for 5 minutes after being True (its transition time moves)
    fleet = nodes(5)
    fleet[0]["status"]["conditions"] = []
    with_condition(fleet[0], "Ready", "False", timedelta(minutes=5))

    result = run(fleet)

    assert actions(result) == {"n0": ("wait", "Ready=False")}
    assert not result.terminate


def test_a_booting_node_is_not_judged_by_its_ready_condition() -> None:
    # Given a node registered 3 minutes ago, not Ready yet
    fleet = nodes(2)
    fleet[1] = node("n1", "i-1", ready=False, created=NOW - timedelta(minutes=3))

    result = run(fleet)

    assert not result.repair


def test_operator_conditions_count_with_their_own_toleration() -> None:
    fleet = nodes(5)
    with_condition(fleet[0], "GpuXidError", "True", timedelta(minutes=2), reason="Xid79")
    extra = [{"type": "GpuXidError", "status": "True", "toleration_seconds": 60}]

    result = run(fleet, repair={"extra_conditions": extra})

    assert actions(result) == {"n0": ("replace", "GpuXidError=True")}
    assert "(Xid79)" in result.repair[0].reason


def test_an_instance_the_asg_marks_unhealthy_is_left_to_the_asg() -> None:
    fleet = nodes(5)
    asgs = group(5)
    asgs[0]["Instances"][0]["HealthStatus"] = "Unhealthy"

    result = run(fleet, asgs=asgs)

    assert actions(result) == {"n0": ("wait", "AsgUnhealthy")}
    assert not result.terminate


def test_impaired_ec2_status_checks_are_a_signal_and_other_groups_instances_are_ignored() -> None:
    fleet = nodes(5)
    statuses = {
        "InstanceStatuses": [
            impaired_status("i-0", NOW - timedelta(hours=1)),
            {
                "InstanceId": "i-0other",
                "InstanceState": {"Code": 16, "Name": "running"},
                "SystemStatus": {"Status": "ok"},
                "InstanceStatus": {"Status": "ok"},
            },
        ]
    }

    result = run(fleet, statuses=statuses)

    assert actions(result) == {
        "n0": ("replace", "InstanceStatusImpaired"),
        "": ("ignored", "instance-status"),
    }
    assert "i-0other" in result.repair[0].reason


def test_bad_input_gets_a_reason_and_no_action_while_other_nodes_go_on() -> None:
    # Given n0 with a condition status nobody defines, n1 with a transition in the future,
    # n2 with no status.capacity, and n3 really broken
    fleet = nodes(6)
    with_condition(fleet[0], "AcceleratedHardwareReady", "Maybe", timedelta(hours=1))
    with_condition(fleet[1], "KernelReady", "False", timedelta(hours=-1))
    del fleet[2]["status"]["capacity"]
    with_condition(fleet[3], "ContainerRuntimeReady", "False", timedelta(hours=1))

    result = run(fleet)

    found = {d.node: (d.action, d.reason) for d in result.repair}
    assert found["n0"] == (
        RepairAction.IGNORED,
        "condition AcceleratedHardwareReady has status 'Maybe', not True, False or Unknown",
    )
    assert found["n1"][0] is RepairAction.IGNORED and "in the future" in found["n1"][1]
    assert found["n2"][0] is RepairAction.IGNORED and "status.capacity is missing" in found["n2"][1]
    assert found["n3"][0] is RepairAction.REPLACE
    assert [t.node for t in result.terminate] == ["n3"]


def test_unknown_monitoring_agent_conditions_are_no_signal() -> None:
    fleet = nodes(3)
    with_condition(fleet[0], "AcceleratedHardwareReady", "Unknown", timedelta(hours=1))

    assert not run(fleet).repair


def test_with_repair_switched_off_the_room_is_still_not_counted_but_nothing_is_done() -> None:
    # Given (EKS auto repair in charge) a broken idle node, and a pending 8-GPU pod
    fleet = nodes(5)
    with_condition(fleet[0], "AcceleratedHardwareReady", "False", timedelta(hours=1))
    waiting = pod("train", gpus=8, tolerations=[GPU_TOLERATION])

    result = run(fleet, [waiting], repair={"enabled": False})

    assert actions(result) == {"n0": ("wait", "AcceleratedHardwareReady=False")}
    assert "repair is switched off" in result.repair[0].reason
    assert not result.terminate and not result.uncordon
    # the pod fits one of the healthy idle nodes, never the broken one
    assert result.pods[0].outcome is Outcome.EXISTING and "n0" not in result.pods[0].reason


@needs_sources
def test_the_fast_verdict_on_settled_nodes_is_the_full_reading(monkeypatch: Any) -> None:
    # node_health answers HEALTHY without reading further when the Node object shows nothing under
    # the default watch list; every shape of node must get the verdict the full reading gives.
    from shared.planner import health

    fleet = nodes(12)
    with_condition(fleet[1], "Ready", "False", timedelta(minutes=30))
    with_condition(fleet[2], "AcceleratedHardwareReady", "False", None)
    with_condition(fleet[3], "AcceleratedHardwareReady", "Unknown", None)
    with_condition(fleet[4], "KernelReady", "Maybe", None)  # bad input
    with_condition(fleet[5], "GpuXidError", "True", timedelta(minutes=2))
    with_condition(fleet[6], "MemoryPressure", "False", None)
    fleet[7]["status"]["capacity"] = {**fleet[7]["status"]["allocatable"], "nvidia.com/gpu": "8"}
    fleet[7]["status"]["allocatable"]["nvidia.com/gpu"] = "7"  # a GPU lost
    fleet[8]["status"].pop("capacity", None)  # GPUs and no capacity: cannot tell
    fleet[9]["status"]["conditions"] = []
    with_condition(fleet[10], "Ready", "True", timedelta(minutes=1))
    asgs = group(12)
    asgs[0]["Instances"][11]["HealthStatus"] = "Unhealthy"
    statuses = {"InstanceStatuses": [impaired_status("i-0")]}
    for policy in ({}, {"repair": {"extra_conditions": [{"type": "MemoryPressure", "status": "False"}]}}):
        fast = run(fleet, asgs=asgs, statuses=statuses, **policy)
        monkeypatch.setattr(health, "_calm", lambda node: False)
        full = run(fleet, asgs=asgs, statuses=statuses, **policy)
        monkeypatch.undo()
        assert fast == full
        assert actions(fast)  # the fleet does have signals: the comparison is not of two empty plans


def _went_unknown(name: str, instance: str, minutes: int) -> dict[str, Any]:
    """A node that ran for two days, whose kubelet stopped reporting `minutes` ago (Ready=Unknown)."""
    broken = node(name, instance, created=NOW - timedelta(days=2))
    broken["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "lastTransitionTime": iso(NOW - timedelta(minutes=minutes)),
        }
    ]
    return broken


def test_a_node_that_ran_then_went_not_ready_is_repaired_not_replaced_as_a_failed_launch() -> None:
    # Given an idle node that ran for two days and went Ready=Unknown 25 minutes ago: past the
    # provisioning deadline (20 min) counted from the change, within the Ready toleration (30 min)
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    fleet = [busy, _went_unknown("n1", "i-1", 25)]
    # When planned
    result = run(fleet, [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])])
    # Then it is a broken machine, not a launch that failed: nothing is terminated yet and the group
    # does not back off (EKS and Karpenter node repair wait 30 minutes for Ready False/Unknown)
    assert not result.terminate
    assert not result.group("a100").enter_backoff
    # When its toleration is over (31 minutes): repair replaces it, still without a capacity backoff
    later = run(
        [busy, _went_unknown("n1", "i-1", 31)], [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    )
    assert [t.node for t in later.terminate] == ["n1"]
    assert not later.group("a100").enter_backoff


def _broken_after(minutes_up: int, minutes_down: int) -> dict[str, Any]:
    """A node created `minutes_up + minutes_down` ago that was Ready, then NotReady `minutes_down` ago."""
    broken = node("n1", "i-1", created=NOW - timedelta(minutes=minutes_up + minutes_down), ready=False)
    broken["status"]["conditions"][0]["lastTransitionTime"] = iso(NOW - timedelta(minutes=minutes_down))
    return broken


def test_a_node_that_broke_within_its_first_minutes_is_repaired_not_a_failed_launch() -> None:
    # Given a node Ready 15 minutes after launch, then NotReady for 25 (its transition 15 minutes after
    # registration: it was Ready in between; a launch that never came up keeps its registration time)
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    job = [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    result = run([busy, _broken_after(15, 25)], job)
    # Then it is no failed launch: not terminated as one, and the group does not back off
    assert not result.terminate and not result.group("a100").enter_backoff
    # And once the Ready toleration is over repair replaces it, still without a backoff
    later = run([busy, _broken_after(15, 31)], job)
    assert [t.node for t in later.terminate] == ["n1"] and not later.group("a100").enter_backoff


def test_with_repair_off_a_node_that_ran_then_died_is_still_replaced_without_backoff() -> None:
    # Given repair switched off and an idle node NotReady for three hours after running two days
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    job = [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    # When planned
    result = run([busy, _broken_after(2 * 24 * 60, 180)], job, repair={"enabled": False})
    # Then scale-down replaces it (as before repair existed): no capacity backoff, it was no launch
    (termination,) = result.terminate
    assert termination.node == "n1" and not termination.decrement
    assert "it ran, then broke (repair is off)" in termination.reason
    assert not result.group("a100").enter_backoff


def _kubelet_conditions(ready: str, ready_since: datetime, others_since: datetime) -> list[dict[str, Any]]:
    """A node's conditions as `kubectl get node -o json` prints them: the kubelet's three pressure
    conditions beside Ready, each with its own lastTransitionTime."""
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    ]
    found: list[dict[str, Any]] = [
        {"type": kind, "status": "False", "reason": reason, "lastTransitionTime": iso(others_since)}
        for kind, reason in pressure
    ]
    ready_condition = {"type": "Ready", "status": ready, "reason": "KubeletNotReady"}
    return [*found, {**ready_condition, "lastTransitionTime": iso(ready_since)}]


def test_a_node_never_ready_whose_kubelet_came_back_not_ready_is_still_a_failed_launch() -> None:
    # Given a node registered two hours ago and never Ready, whose kubelet went silent (the node
    # lifecycle controller set every condition Unknown) and came back still NotReady 10 minutes in:
    # Ready=False since then, a transition after registration, and its pressure conditions changed
    # in the same status update
    created = NOW - timedelta(hours=2)
    back = created + timedelta(minutes=10)
    never = node("n1", "i-1", created=created, ready=False)
    never["status"]["conditions"] = _kubelet_conditions("False", back, back + timedelta(seconds=1))
    # When planned, repair on or off
    # Then it is replaced as a failed launch and the group backs off, as for Ready=Unknown
    _replaced_as_failed_launch(never)


def test_a_node_whose_kubelet_reported_it_not_ready_after_running_is_no_failed_launch() -> None:
    # Given a node Ready 15 minutes after launch, then NotReady for 25 as its kubelet reports (its
    # pressure conditions unchanged since registration: the kubelet never went silent)
    created = NOW - timedelta(minutes=40)
    broken = node("n1", "i-1", created=created, ready=False)
    broken["status"]["conditions"] = _kubelet_conditions("False", NOW - timedelta(minutes=25), created)
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    job = [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    # When planned with repair off (NotReady longer than the provisioning deadline)
    result = run([busy, broken], job, repair={"enabled": False})
    # Then it is replaced as a machine that broke: no capacity backoff
    assert [t.node for t in result.terminate] == ["n1"]
    assert "it ran, then broke (repair is off)" in result.terminate[0].reason
    assert not result.group("a100").enter_backoff


def test_a_node_never_ready_since_its_launch_is_a_failed_launch() -> None:
    # Given a node whose Ready condition never changed since its registration, 25 minutes ago
    never = node("n1", "i-1", created=NOW - timedelta(minutes=25), ready=False)
    never["status"]["conditions"][0]["lastTransitionTime"] = iso(NOW - timedelta(minutes=25))
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    job = [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    # Then it is replaced as a failed launch past the provisioning deadline, and the group backs off
    result = run([busy, never], job)
    assert [t.node for t in result.terminate] == ["n1"]
    assert "the launch failed" in result.terminate[0].reason
    assert result.group("a100").enter_backoff


def _replaced_as_failed_launch(never: dict[str, Any]) -> None:
    """Planned beside a busy node, repair on and off: `never` is replaced as a failed launch and its
    group backs off."""
    busy = node("n0", "i-0", created=NOW - timedelta(days=2))
    job = [pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])]
    for repair in (True, False):
        result = run([busy, never], job, repair={"enabled": repair})
        assert [t.node for t in result.terminate] == ["n1"]
        assert result.group("a100").enter_backoff
        if not repair:
            assert "the launch failed" in result.terminate[0].reason


def test_a_node_never_ready_whose_kubelet_stopped_reporting_is_still_a_failed_launch() -> None:
    # Given a node registered NotReady two hours ago whose kubelet died 10 minutes in, never Ready: the
    # node lifecycle controller set Ready=Unknown then (a transition after its registration)
    never = node("n1", "i-1", created=NOW - timedelta(hours=2), ready=False)
    never["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "lastTransitionTime": iso(NOW - timedelta(hours=2) + timedelta(minutes=10)),
        }
    ]
    # When planned, repair on or off
    # Then it is replaced as a failed launch and the group backs off (Unknown within the
    # provisioning deadline of its registration does not prove it ever ran)
    _replaced_as_failed_launch(never)
