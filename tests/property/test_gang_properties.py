"""Property: a gang or an atomic ProvisioningRequest is never partly bought (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.plan import Outcome
from shared.domain.provisioning import RequestOutcome
from shared.planner import plan
from tests.builders import NOW, asg, config, node, pod, snapshot
from tests.builders_provisioning import (
    ATOMIC,
    CHECK,
    pod_group,
    pod_template,
    provisioning_request,
    with_objects,
)

A100 = "research-a100"
MARKERS = ("kueue", "volcano", "coscheduling")


def _cluster(busy: int, idle: int, launching: int, extra: list[dict[str, Any]]) -> Any:
    registered = busy + idle
    nodes = [node(f"n{i}", f"i-{i}") for i in range(registered)]
    pods = [pod(f"busy-{i}", gpus=8, node=f"n{i}") for i in range(busy)] + extra
    group = asg(A100, desired=registered + launching, instances=[f"i-{i}" for i in range(registered)])
    return snapshot(pods, nodes, [group])


def _marked(marker: str, name: str, size: int) -> dict[str, Any]:
    if marker == "kueue":
        return {
            "labels": {"kueue.x-k8s.io/pod-group-name": name},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": str(size)},
        }
    if marker == "volcano":
        return {"annotations": {"scheduling.k8s.io/group-name": name}}
    return {"labels": {"scheduling.x-k8s.io/pod-group": name}}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    busy=st.integers(0, 16),
    idle=st.integers(0, 3),
    launching=st.integers(0, 2),
    marker=st.sampled_from(MARKERS),
    size=st.integers(2, 8),
    created=st.integers(1, 8),
    gpus=st.sampled_from((2, 4, 8)),
)
def test_a_gang_is_never_partly_bought(
    busy: int, idle: int, launching: int, marker: str, size: int, created: int, gpus: int
) -> None:
    # Given a gang of `size` members (`created` of them exist) in a group with some room
    created = min(created, size)
    members = [pod(f"g-{i}", gpus=gpus, **_marked(marker, "g", size)) for i in range(created)]
    snap = _cluster(min(busy, 16 - idle - launching), idle, launching, members)
    snap = with_objects(snap, [pod_group("g", size, volcano=marker == "volcano")])
    before = snap.asgs[A100].desired
    # When planning
    result = plan(snap, config(), NOW)
    # Then either every member is placed, or none is and nothing is bought for it
    outcomes = [p for p in result.pods if p.pod.startswith("research/g-")]
    placed = [p for p in outcomes if p.outcome is not Outcome.UNHELPED]
    assert len(placed) in (0, len(outcomes))
    if not placed:
        assert result.group("a100").desired <= before
    assert all(":" not in p.pod for p in result.pods)  # stand-ins are never reported


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    busy=st.integers(0, 16),
    idle=st.integers(0, 3),
    count=st.integers(1, 20),
    gpus=st.sampled_from((4, 8)),
    check=st.booleans(),
)
def test_an_atomic_request_is_never_partly_bought(
    busy: int, idle: int, count: int, gpus: int, check: bool
) -> None:
    # Given a ProvisioningRequest of `count` pods in a group with `busy` busy and `idle` idle nodes
    busy = min(busy, 16 - idle)
    objects = [
        pod_template("ps", gpus=gpus),
        provisioning_request("r", [("ps", count)], class_name=CHECK if check else ATOMIC),
    ]
    snap = with_objects(_cluster(busy, idle, 0, []), objects)
    before = snap.asgs[A100].desired
    # When planning
    result = plan(snap, config(), NOW)
    # Then it is provisioned whole, or nothing is bought; check-capacity never buys
    [answer] = result.provisioning_requests
    desired = result.group("a100").desired
    if answer.outcome is not RequestOutcome.PROVISIONED or check:
        assert desired <= before
    else:
        nodes_needed = -(-count * gpus // 8)
        assert desired - before >= max(0, nodes_needed - idle)
    assert answer.outcome in (
        RequestOutcome.PROVISIONED,
        RequestOutcome.NOT_PROVISIONED,
        RequestOutcome.FAILED,
    )
