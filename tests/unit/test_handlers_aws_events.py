"""The AWS-events handler on real EventBridge event shapes, with the controller on in-memory fakes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.aws_events import handler as aws_events
from shared.domain.errors import InputError
from tests.builders import GPU_TAINT, asg, node, pod
from tests.builders import config as make_config
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld

EVENTS = Path(__file__).resolve().parents[1] / "events"
A100, H100 = "research-a100", "research-h100"
NODE = "ip-10-0-1-12.us-west-2.compute.internal"
INSTANCE = "i-0a1b2c3d4e5f60001"
SHAPE = {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"}


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    # a100 preferred; one busy a100 node; a pending 8-GPU pod; a launch of a100 just failed
    cfg = make_config(
        node_groups=[
            {"name": "a100", "asg_name": A100, "allocatable": SHAPE, "labels": {"gpu": "a100"},
             "taints": [GPU_TAINT], "priority": 10},
            {"name": "h100", "asg_name": H100, "allocatable": SHAPE, "labels": {"gpu": "h100"},
             "taints": [GPU_TAINT]},
        ]
    )  # fmt: skip
    w = FakeWorld(
        config=cfg,
        cluster=FakeCluster([pod("job", node=NODE), pod("train", gpus=8)], [node(NODE, INSTANCE)]),
        fleet=FakeFleet([asg(A100, desired=2, instances=[INSTANCE]), asg(H100, desired=0)]),
    )
    w.clock.set(datetime(2026, 12, 2, 12, 0, 5, tzinfo=UTC))
    aws_events.set_dependencies(w.controller())
    yield w
    aws_events.set_dependencies(None)


def test_launch_unsuccessful_backs_off_and_spills_to_the_next_group(world: FakeWorld) -> None:
    response = aws_events.handler(event("launch_unsuccessful.json"), FakeLambdaContext())
    failed_at = datetime(2026, 12, 2, 11, 59, 27, 890000, tzinfo=UTC)
    assert world.state.backoff_until("a100") == failed_at + timedelta(minutes=5)
    assert world.fleet.desired(A100) == 1  # the launch that failed is cancelled, the running node kept
    assert world.fleet.desired(H100) == 1
    assert response["ok"] and response["actions"][0]["kind"] == "backoff"
    assert "sufficient p4d.24xlarge capacity" in response["actions"][0]["reason"]
    assert response["actions"][0]["reason"].startswith("InsufficientInstanceCapacity")


def test_launch_unsuccessful_of_another_group_is_ignored(world: FakeWorld) -> None:
    other = event("launch_unsuccessful.json")
    other["detail"]["AutoScalingGroupName"] = "someone-else"
    response = aws_events.handler(other, FakeLambdaContext())
    assert response["status"] == "ignored"
    assert world.write_calls() == []


def test_spot_interruption_cordons_the_node(world: FakeWorld) -> None:
    response = aws_events.handler(event("spot_interruption.json"), FakeLambdaContext())
    assert world.cluster.is_cordoned(NODE)
    assert world.cluster.evicted == []
    assert response["trigger"] == f"spot-interruption {INSTANCE}"
    assert [a["kind"] for a in response["actions"]][:2] == ["cordon", "drain"]


def test_rebalance_recommendation_only_reconciles(world: FakeWorld) -> None:
    response = aws_events.handler(event("rebalance_recommendation.json"), FakeLambdaContext())
    assert not world.cluster.is_cordoned(NODE)
    assert response["status"] == "completed"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"detail-type": "EC2 Instance State-change Notification"},
            "does not match any of the expected tags",
        ),
        ({"detail": {"instance-action": "terminate"}}, "detail.instance-id"),
        ({"detail": {"instance-id": "not-an-instance"}}, "detail.instance-id"),
        ({"source": "aws.autoscaling"}, "source"),
    ],
)
def test_malformed_or_unknown_events_are_refused_by_name(
    world: FakeWorld, change: dict[str, Any], message: str
) -> None:
    bad = {**event("spot_interruption.json"), **change}
    with pytest.raises(InputError, match=message):
        aws_events.handler(bad, FakeLambdaContext())
    assert world.write_calls() == []
