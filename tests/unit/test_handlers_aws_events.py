"""The AWS-events handler on real EventBridge event shapes, with the controller on in-memory fakes."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.aws_events import handler as aws_events
from functions.aws_events.events import MalformedEventError
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


def test_launch_unsuccessful_of_a_same_named_group_in_another_region_is_ignored(world: FakeWorld) -> None:
    # Given a launch failure of an ASG named as ours, in a region none of our groups is in
    other = event("launch_unsuccessful.json")
    other["region"] = "eu-west-1"
    # When it arrives (a bus that forwards other regions' events)
    response = aws_events.handler(other, FakeLambdaContext())
    # Then it is not ours: no backoff, nothing written
    assert response["status"] == "ignored" and "eu-west-1" in response["detail"]
    assert world.write_calls() == []


@pytest.mark.parametrize("field", ["StatusMessage", "Cause"])
def test_launch_unsuccessful_with_a_null_message_still_backs_off(world: FakeWorld, field: str) -> None:
    # Given a launch failure whose message field is null (only its wording is read)
    # When it arrives
    response = aws_events.handler(
        replaced("launch_unsuccessful.json", ("detail", field), None), FakeLambdaContext()
    )
    # Then the group backs off as for any failed launch
    assert response["ok"] and response["actions"][0]["kind"] == "backoff"
    assert world.state.backoff_until("a100") is not None


def test_spot_interruption_cordons_the_node(world: FakeWorld) -> None:
    response = aws_events.handler(event("spot_interruption.json"), FakeLambdaContext())
    assert world.cluster.is_cordoned(NODE)
    assert world.cluster.evicted == []
    assert response["trigger"] == f"spot-interruption {INSTANCE}"
    # The hold is stored before the cordon: a node is never cordoned for a hold that was not stored
    assert [a["kind"] for a in response["actions"]][:2] == ["drain", "cordon"]


def test_an_interruptible_reservation_warning_holds_the_node_like_a_spot_warning(world: FakeWorld) -> None:
    # Given the owner of an interruptible Capacity Reservation reclaims it: two minutes' notice (EC2 user
    # guide, "Monitor interruptible Capacity Reservations with EventBridge and CloudTrail")
    # When the warning arrives
    response = aws_events.handler(event("reservation_interruption.json"), FakeLambdaContext())
    # Then the node is held and cordoned (its pods' room is bought ahead), nothing evicted
    assert world.cluster.is_cordoned(NODE)
    assert world.cluster.evicted == []
    assert response["trigger"] == f"reservation-interruption {INSTANCE}"
    assert [a["kind"] for a in response["actions"]][:2] == ["drain", "cordon"]


def test_rebalance_recommendation_marks_the_node_for_rotation_without_cordon_or_eviction(
    world: FakeWorld,
) -> None:
    response = aws_events.handler(event("rebalance_recommendation.json"), FakeLambdaContext())
    assert not world.cluster.is_cordoned(NODE)
    assert world.cluster.evicted == []
    taints = [(t["key"], t.get("value"), t["effect"]) for t in world.cluster.nodes[NODE]["spec"]["taints"]]
    assert ("backlog-scaler/rotation", "rebalance", "NoSchedule") in taints
    assert response["status"] == "completed"
    # And the reconcile of the same invocation keeps it for rotation, replaced once its job ends
    rotate = [a for a in response["actions"] if a["kind"] == "terminate"]
    assert rotate == [] and world.fleet.terminated == []


@pytest.mark.parametrize(
    "name", ["spot_interruption.json", "reservation_interruption.json", "rebalance_recommendation.json"]
)
def test_a_warning_for_an_instance_of_an_untagged_group_leaves_its_node_alone(name: str) -> None:
    # Given the group's ASG is tagged for another cluster (the scaler leaves such a group alone whole:
    # no run would ever lift a hold or a mark put on its node)
    w = FakeWorld(
        config=make_config(
            node_groups=[{"name": "a100", "asg_name": A100, "allocatable": SHAPE, "taints": [GPU_TAINT]}]
        ),
        cluster=FakeCluster([pod("job", node=NODE)], [node(NODE, INSTANCE)]),
        fleet=FakeFleet([asg(A100, desired=1, instances=[INSTANCE], cluster="someone-else")]),
    )
    w.clock.set(datetime(2026, 12, 2, 12, 0, 5, tzinfo=UTC))
    aws_events.set_dependencies(w.controller())
    try:
        # When a spot, reservation or rebalance warning names its instance
        response = aws_events.handler(event(name), FakeLambdaContext())
    finally:
        aws_events.set_dependencies(None)
    # Then nothing is held, cordoned or marked, and the reason names the missing tag
    assert response["status"] == "ignored"
    assert "is not tagged backlog-scaler/cluster=" in response["detail"]
    assert not w.cluster.is_cordoned(NODE)
    assert w.cluster.nodes[NODE]["spec"].get("taints", []) == node(NODE, INSTANCE)["spec"].get("taints", [])
    assert w.state.intents == {}


def log_lines(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    """The handler's log records with this message."""
    return [record for record in caplog.records if record.getMessage() == message]


@pytest.mark.parametrize(
    "bad",
    [
        {**event("spot_interruption.json"), "detail-type": "EC2 Instance State-change Notification"},
        {"version": "0", "source": "aws.ec2"},  # no detail-type
        {**event("spot_interruption.json"), "detail-type": 7},
        {**event("spot_interruption.json"), "detail-type": "x" * 1_000_000},
        ["EC2 Spot Instance Interruption Warning"],
        "EC2 Spot Instance Interruption Warning",
        None,
        {},
    ],
    ids=["other-detail-type", "no-detail-type", "number", "1MB", "array", "string", "null", "empty"],
)
def test_unknown_shapes_are_ignored_with_one_log_line(
    world: FakeWorld, caplog: pytest.LogCaptureFixture, bad: Any
) -> None:
    # Given an event this function does not handle
    # When it arrives
    response = aws_events.handler(bad, FakeLambdaContext())
    # Then it is ignored: no exception, one bounded log line, nothing read or written
    assert response["ok"] is True and response["status"] == "ignored"
    (line,) = log_lines(caplog, "event ignored")
    assert len(line.detail) < 2_000  # type: ignore[attr-defined]
    assert world.write_calls() == [] and world.cluster.calls == [] and world.fleet.calls == []


def replaced(name: str, path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """The fixture `name` with the value at `path` replaced."""
    bad = event(name)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return bad


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (replaced("spot_interruption.json", ("detail", "instance-id"), "not-an-instance"), "detail"),
        (replaced("spot_interruption.json", ("detail", "instance-id"), 1234), "detail"),
        (replaced("spot_interruption.json", ("detail", "instance-id"), ["i-0a1b2c3d4e5f60001"]), "detail"),
        (replaced("spot_interruption.json", ("detail", "instance-id"), "i-" + "0" * 1_000_000), "detail"),
        (replaced("spot_interruption.json", ("detail", "instance-action"), True), "detail"),
        (replaced("spot_interruption.json", ("detail",), "terminate"), "detail"),
        (replaced("spot_interruption.json", ("source",), "aws.autoscaling"), "source"),
        (replaced("spot_interruption.json", ("time",), 1_796_212_800), "time"),
        (replaced("spot_interruption.json", ("time",), "2026-12-02T12:00:00"), "time"),  # no zone
        (replaced("spot_interruption.json", ("resources",), ["arn"] * 10_000), "resources"),
        (replaced("spot_interruption.json", ("account",), 123456789012), "account"),
        (replaced("rebalance_recommendation.json", ("detail", "instance-id"), None), "detail"),
        (replaced("launch_unsuccessful.json", ("detail", "AutoScalingGroupName"), 42), "detail"),
        (replaced("launch_unsuccessful.json", ("detail", "AutoScalingGroupName"), "a" * 300), "detail"),
        (replaced("launch_unsuccessful.json", ("detail", "StatusMessage"), ["capacity"]), "detail"),
        (replaced("launch_unsuccessful.json", ("detail", "StartTime"), False), "detail"),
    ],
)
def test_wrong_types_in_known_shapes_are_refused_by_name_and_do_nothing(
    world: FakeWorld, caplog: pytest.LogCaptureFixture, bad: dict[str, Any], field: str
) -> None:
    # Given a handled event with a field of the wrong JSON type or size
    # When it arrives: refused with an error naming the field (raised, so that the event reaches the
    # on-failure queue and its alarm instead of being dropped)
    with pytest.raises(MalformedEventError) as refused:
        aws_events.handler(bad, FakeLambdaContext())
    # Then one warning names the field, echoes little of the value, and nothing is done
    assert refused.value.fields[0] == field and len(str(refused.value)) < 2_000
    (line,) = log_lines(caplog, "malformed event refused")
    assert line.levelname == "WARNING" and line.fields[0] == field  # type: ignore[attr-defined]
    assert len(line.error) < 2_000  # type: ignore[attr-defined]
    assert world.write_calls() == [] and world.cluster.calls == [] and world.fleet.calls == []


def test_long_status_message_is_bounded_not_refused(world: FakeWorld) -> None:
    # Given a launch failure whose message is far longer than any AWS writes
    long = replaced(
        "launch_unsuccessful.json", ("detail", "StatusMessage"), "insufficient capacity " * 10_000
    )
    # When it arrives
    response = aws_events.handler(long, FakeLambdaContext())
    # Then the group still backs off, and the reason carries a bounded part of the message
    assert response["ok"] and response["actions"][0]["kind"] == "backoff"
    assert len(response["actions"][0]["reason"]) < 3_000
