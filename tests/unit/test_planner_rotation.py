"""Node rotation without eviction: drift, lifetime and EC2 scheduled events, and capacity bought ahead
for the pods of nodes about to go (Spot interruption warnings, scheduled events).

Common setting: one a100 group of 8-GPU nodes created two hours ago, launched from version 2 of
launch template lt-0abc; the group launches `$Default`, which DescribeLaunchTemplates says is 3 (every
node drifted) unless a test says otherwise. Attrition is off (its marks are not the subject).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.plan import RotationCause
from shared.formats.lifecycle import instance_statuses_from_describe, launch_templates_from_describe
from shared.planner import plan
from shared.planner.rotation import ROTATION_TAINT_KEY
from tests.builders import GPU_TAINT, GPU_TOLERATION, NOW, asg, config, iso, node, pod, snapshot
from tests.native import needs_sources

A100 = "research-a100"
TEMPLATE = "lt-0abc1234567890def"
ROTATION_MARK = {"key": ROTATION_TAINT_KEY, "effect": "NoSchedule"}


def group(
    count: int, *, launched: str = "2", group_version: str = "$Default", **kw: Any
) -> list[dict[str, Any]]:
    """The group as describe-auto-scaling-groups shows it, with its and its instances' launch templates."""
    described = asg(A100, desired=count, instances=[f"i-{i}" for i in range(count)], **kw)
    described["LaunchTemplate"] = {
        "LaunchTemplateId": TEMPLATE,
        "LaunchTemplateName": "gpu",
        "Version": group_version,
    }
    for instance in described["Instances"]:
        instance["LaunchTemplate"] = {
            "LaunchTemplateId": TEMPLATE,
            "LaunchTemplateName": "gpu",
            "Version": launched,
        }
    return [described]


def templates(default: int = 3, latest: int = 4) -> Any:
    return launch_templates_from_describe(
        {
            "LaunchTemplates": [
                {
                    "LaunchTemplateId": TEMPLATE,
                    "LaunchTemplateName": "gpu",
                    "CreateTime": "2026-11-01T00:00:00Z",
                    "DefaultVersionNumber": default,
                    "LatestVersionNumber": latest,
                }
            ]
        }
    )


def run(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None = None,
    asgs: list[dict[str, Any]] | None = None,
    *,
    known: Any = None,
    **policy: Any,
) -> Any:
    snap = snapshot(pods or [], nodes, asgs or group(len(nodes)))
    snap = replace(snap, launch_templates=templates() if known is None else known)
    cfg = config(policy={"cordon_settle_seconds": 30, "attrition": {"enabled": False}, **policy})
    return plan(snap, cfg, NOW)


def rotations(result: Any) -> dict[str, tuple[str, str]]:
    return {d.node: (d.cause.value, d.action) for d in result.rotate}


def test_an_idle_drifted_node_is_replaced_and_the_group_keeps_its_size() -> None:
    result = run([node("n0", "i-0")])

    assert rotations(result) == {"n0": ("drift", "replace")}
    assert (
        "version 2 of lt-0abc1234567890def, the group now launches version 3 ($Default)"
        in result.rotate[0].reason
    )
    assert [(t.node, t.decrement, t.cause) for t in result.terminate] == [("n0", False, "rotation")]
    assert result.group("a100").desired == 1


def test_a_busy_drifted_node_is_marked_never_evicted() -> None:
    job = pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])

    result = run([node("n0", "i-0")], [job])

    assert rotations(result) == {"n0": ("drift", "mark")}
    assert [(m.node, m.key, m.effect) for m in result.mark] == [("n0", ROTATION_TAINT_KEY, "NoSchedule")]
    assert not result.terminate


def test_a_marked_node_is_replaced_once_it_empties() -> None:
    result = run([node("n0", "i-0", taints=[GPU_TAINT, ROTATION_MARK])])

    assert rotations(result) == {"n0": ("drift", "replace")}
    assert [t.node for t in result.terminate] == ["n0"]


def test_at_most_max_in_flight_nodes_of_a_group_rotate_at_a_time() -> None:
    nodes = [node(f"n{i}", f"i-{i}", created=NOW - timedelta(hours=3 - i)) for i in range(3)]

    result = run(nodes)

    # Then the oldest goes; the others wait their turn
    assert rotations(result) == {"n0": ("drift", "replace"), "n1": ("drift", "wait"), "n2": ("drift", "wait")}
    assert [t.node for t in result.terminate] == ["n0"]


def test_a_drifted_node_at_min_size_is_replaced_without_lowering_desired() -> None:
    result = run([node("n0", "i-0")], asgs=group(1, min_size=1))

    assert [(t.node, t.decrement) for t in result.terminate] == [("n0", False)]
    assert result.group("a100").desired == 1


def test_latest_and_a_rolled_back_default_are_resolved() -> None:
    # Given the group launches $Latest (4) and the nodes came from 4: nothing to do; and a mark left
    # from before the rollback is lifted
    nodes = [node("n0", "i-0", taints=[GPU_TAINT, ROTATION_MARK])]

    result = run(nodes, asgs=group(1, launched="4", group_version="$Latest"))

    assert not result.rotate and not result.terminate
    assert [(m.node, m.key) for m in result.unmark] == [("n0", ROTATION_TAINT_KEY)]


def test_a_symbolic_version_that_cannot_be_resolved_is_not_judged() -> None:
    assert not run([node("n0", "i-0")], known={}).rotate


def test_nodes_older_than_their_lifetime_rotate() -> None:
    asgs = group(1, launched="3")

    result = run([node("n0", "i-0")], asgs=asgs, max_node_lifetime_seconds=3600)

    assert rotations(result) == {"n0": ("lifetime", "replace")}


@pytest.mark.parametrize("gpus", [8, 4], ids=["full", "half-free"])
def test_a_scheduled_retirement_marks_the_node_and_buys_room_for_its_pods_ahead(gpus: int) -> None:
    # Given EC2 scheduled the retirement of n0, which runs a Job's pod (all 8 GPUs, or 4 with 4 free:
    # the free half of the leaving node is no room for the pod's replacement), in a group of one node
    status = {
        "InstanceStatuses": [
            {
                "InstanceId": "i-0",
                "InstanceState": {"Code": 16, "Name": "running"},
                "SystemStatus": {"Status": "ok"},
                "InstanceStatus": {"Status": "ok"},
                "Events": [
                    {
                        "Code": "instance-retirement",
                        "Description": "The instance is running on degraded hardware",
                        "NotBefore": iso(NOW + timedelta(days=2)),
                    }
                ],
            }
        ]
    }
    job = pod("job", gpus=gpus, node="n0", tolerations=[GPU_TOLERATION])
    snap = snapshot([job], [node("n0", "i-0")], group(1, launched="3"))
    snap = replace(
        snap, launch_templates=templates(), instance_statuses=instance_statuses_from_describe(status)
    )

    result = plan(snap, config(policy={"attrition": {"enabled": False}}), NOW)

    # Then it is marked (maintenance is not paced) and a node is bought for the pod's recreation now
    assert rotations(result) == {"n0": (RotationCause.MAINTENANCE.value, "mark")}
    assert result.group("a100").desired == 2
    assert [p.pod for p in result.pods] == []  # the stand-in is no pod to report


def test_a_spot_interruption_buys_room_for_controller_owned_pods_before_they_are_gone() -> None:
    # Given n0 held cordoned for a Spot interruption warning, running a Job's pod and a bare pod
    # (no controller recreates the bare one)
    job = pod("job", gpus=4, node="n0", tolerations=[GPU_TOLERATION])
    bare = pod("bare", gpus=4, node="n0", tolerations=[GPU_TOLERATION], owner_kind=None)
    held = node("n0", "i-0", unschedulable=True)
    snap = replace(snapshot([job, bare], [held], group(1, launched="3")), launch_templates=templates())

    result = plan(replace(snap, interrupted=frozenset({"n0"})), config(), NOW)

    # Then one node is bought (for the Job's pod), nothing is evicted or terminated for it
    assert result.group("a100").desired == 2
    assert not result.terminate


def test_a_node_marked_at_a_rebalance_recommendation_is_replaced_once_empty() -> None:
    rebalance = {"key": ROTATION_TAINT_KEY, "value": "rebalance", "effect": "NoSchedule"}
    job = pod("job", gpus=8, node="n0", tolerations=[GPU_TOLERATION])
    nodes = [node("n0", "i-0", taints=[GPU_TAINT, rebalance])]

    busy = run(nodes, [job], asgs=group(1, launched="3"))
    idle = run(nodes, asgs=group(1, launched="3"))

    assert rotations(busy) == {"n0": ("rebalance", "mark")} and not busy.mark and not busy.unmark
    assert rotations(idle) == {"n0": ("rebalance", "replace")}
    assert [(t.node, t.decrement) for t in idle.terminate] == [("n0", False)]


@needs_sources
def test_without_templates_lifetime_or_statuses_only_marked_nodes_are_judged(monkeypatch: Any) -> None:
    # A group that names no launch template or configuration, no lifetime, no EC2 statuses: nothing
    # but a mark can make a node due, so only marked nodes are judged; the plan is the full one.
    from shared.planner import rotation

    rebalance = {"key": ROTATION_TAINT_KEY, "value": "rebalance", "effect": "NoSchedule"}
    fleet = [
        node("n0", "i-0", taints=[GPU_TAINT, rebalance]),
        node("n1", "i-1", taints=[GPU_TAINT, ROTATION_MARK]),  # no longer due: lifted
        node("n2", "i-2", taints=[GPU_TAINT]),
    ]
    plain = [asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])]
    configured = [asg(A100, desired=3, instances=["i-0", "i-1", "i-2"])]
    configured[0]["Instances"][2]["LaunchConfigurationName"] = "old-gpu"  # drifted: judged in full
    for asgs in (plain, configured):
        fast = run(fleet, asgs=asgs)
        monkeypatch.setattr(rotation, "_may_be_due", lambda *args: True)
        full = run(fleet, asgs=asgs)
        monkeypatch.undo()
        assert fast == full
        assert rotations(fast)["n0"] == ("rebalance", "replace")
        assert [m.node for m in fast.unmark] == ["n1"]
    assert rotations(run(fleet, asgs=configured))["n2"][0] == "drift"


def test_an_instance_launched_from_its_types_override_template_has_not_drifted() -> None:
    # Given a mixed-instances group whose p4de override launches from a template of its own (version
    # 7 its default), and an idle p4de instance launched from that template's version 7
    override = "lt-0p4de00000000000"
    described = group(1, launched="3")[0]
    spec = described.pop("LaunchTemplate")
    described["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": spec,
            "Overrides": [
                {"InstanceType": "p4d.24xlarge"},
                {
                    "InstanceType": "p4de.24xlarge",
                    "LaunchTemplateSpecification": {"LaunchTemplateId": override, "Version": "$Default"},
                },
            ],
        }
    }
    instance = described["Instances"][0]
    instance["InstanceType"] = "p4de.24xlarge"
    instance["LaunchTemplate"] = {"LaunchTemplateId": override, "LaunchTemplateName": "p4de", "Version": "7"}
    known = {
        **templates(),
        **launch_templates_from_describe(
            {
                "LaunchTemplates": [
                    {
                        "LaunchTemplateId": override,
                        "LaunchTemplateName": "p4de",
                        "CreateTime": "2026-11-01T00:00:00Z",
                        "DefaultVersionNumber": 7,
                        "LatestVersionNumber": 7,
                    }
                ]
            }
        ),
    }
    # When planned
    result = run([node("n0", "i-0")], asgs=[described], known=known)
    # Then it is current: the group launches p4de from that template now (no rotation, no churn)
    assert rotations(result) == {}
    # And once the override moves to version 8, it has drifted
    known[override] = replace(known[override], default_version=8, latest_version=8)
    drifted = run([node("n0", "i-0")], asgs=[described], known=known)
    assert rotations(drifted) == {"n0": ("drift", "replace")}
