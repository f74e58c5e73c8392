"""The force-scale-down handler: a manual invoke's payload in, a JSON report (or refusal) out."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.force_scale_down import handler as force
from shared.domain.errors import ClusterReadError
from tests.builders import asg, node, pod
from tests.builders import config as make_config
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld

EVENTS = Path(__file__).resolve().parents[1] / "events"
A100 = "research-a100"
BUSY = "ip-10-0-1-12.us-west-2.compute.internal"
IDLE = "ip-10-0-1-13.us-west-2.compute.internal"


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    w = FakeWorld(
        config=make_config(),
        cluster=FakeCluster(
            [pod("job", node=BUSY)], [node(BUSY, "i-0a1b2c3d4e5f60001"), node(IDLE, "i-0a1b2c3d4e5f60002")]
        ),
        fleet=FakeFleet([asg(A100, desired=2, instances=["i-0a1b2c3d4e5f60001", "i-0a1b2c3d4e5f60002"])]),
    )
    force.set_dependencies(w.controller())
    yield w
    force.set_dependencies(None)


def test_target_payload_returns_the_report(world: FakeWorld) -> None:
    response = force.handler(event("force_scale_down_target.json"), FakeLambdaContext())
    assert response["ok"] is True
    assert response["terminated"] == [IDLE] and response["draining"] == []
    assert response["request"]["requested_by"] == "alice@example.com"
    assert world.fleet.desired(A100) == 1
    json.dumps(response)  # JSON-able as Lambda returns it


def test_nodes_payload_with_force_and_no_grace_deletes_the_pods(world: FakeWorld) -> None:
    world.cluster.block_evictions("research/job")
    response = force.handler(event("force_scale_down_nodes.json"), FakeLambdaContext())
    assert response["ok"] and response["draining"] == [BUSY]
    assert world.cluster.deleted_pods == ["research/job"]
    assert world.state.intents["a100"].force
    assert response["intent_expires_at"] == "2026-12-02T13:00:00+00:00"  # grace 0 + one hour to give up


def test_invalid_payload_is_answered_with_the_field(world: FakeWorld) -> None:
    response = force.handler(event("force_scale_down_invalid.json"), FakeLambdaContext())
    assert response["ok"] is False and response["field"] == "target" and not response["retryable"]
    assert "request: target: Input should be greater than or equal to 0" in response["error"]
    assert world.write_calls() == []


def test_unknown_nodes_are_answered_by_name(world: FakeWorld) -> None:
    response = force.handler({"group": "a100", "nodes": [BUSY, "ip-10-9-9-9"]}, FakeLambdaContext())
    assert response["ok"] is False and response["field"] == "nodes" and "ip-10-9-9-9" in response["error"]
    assert world.cluster.calls_of("cordon") == []


def test_read_failure_is_answered_as_retryable(world: FakeWorld) -> None:
    world.cluster.fail_next("list_nodes", ClusterReadError("HTTP 503"))
    response = force.handler({"group": "a100", "target": 0}, FakeLambdaContext())
    assert response == {
        "ok": False,
        "error": "HTTP 503",
        "error_type": "ClusterReadError",
        "field": None,
        "fields": [],
        "retryable": True,
    }
    assert world.cluster.calls_of("cordon") == [] and world.state.lease is None


LEASE = {"acquire_lease", "release_lease"}


@pytest.mark.parametrize(
    ("name", "field", "shown"),
    [
        ("force_scale_down_bool_as_int.json", "target", "Input should be a valid integer (got False)"),
        ("force_scale_down_string_bool.json", "dry_run", "Input should be a valid boolean (got 'false')"),
    ],
)
def test_wrong_json_types_are_refused_and_nothing_is_written(
    world: FakeWorld, name: str, field: str, shown: str
) -> None:
    # Given a payload whose boolean or integer is of another JSON type
    # When it is invoked
    response = force.handler(event(name), FakeLambdaContext())
    # Then the field is named, its value shown, and nothing is written (not even the lease)
    assert response["ok"] is False and response["field"] == field and not response["retryable"]
    assert f"request: {field}: {shown}" in response["error"]
    assert world.write_calls() == []


MEGABYTE = "x" * 1_000_000


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"target": "0"}, "target"),
        ({"target": 1.0}, "target"),
        ({"target": True}, "target"),
        ({"target": 10**30}, "target"),
        ({"target": 0, "force": 1}, "force"),
        ({"target": 0, "force": "true"}, "force"),
        ({"target": 0, "grace_seconds": "600"}, "grace_seconds"),
        ({"target": 0, "grace_seconds": 86_401}, "grace_seconds"),
        ({"target": 0, "grace_seconds": False}, "grace_seconds"),
        ({"target": 0, "requested_by": MEGABYTE}, "requested_by"),
        ({"target": 0, "requested_by": 7}, "requested_by"),
        ({"nodes": [f"n{i}" for i in range(1_001)]}, "nodes"),
        ({"nodes": ["n" * 254]}, "nodes"),
        ({"nodes": [MEGABYTE]}, "nodes"),
        ({"nodes": [7]}, "nodes"),
        ({"nodes": "ip-10-0-1-13"}, "nodes"),
        ({"nodes": [0] * 2_000_000}, "nodes"),
        ({"group": MEGABYTE, "target": 0}, "group"),
        ({"group": ["a100"], "target": 0}, "group"),
        ({"target": 0, "tagret": MEGABYTE}, "tagret"),
        ({"target": 0, **{f"extra{i}": i for i in range(100_000)}}, "extra0"),
    ],
)
def test_bad_values_are_refused_by_field_with_a_bounded_echo(
    world: FakeWorld, change: dict[str, Any], field: str
) -> None:
    # Given a payload with one field of the wrong type or beyond its bound, however large
    payload = {"group": "a100", **change}
    # When it is invoked
    response = force.handler(payload, FakeLambdaContext())
    # Then the field is named, at most a short preview of the value is echoed, and nothing is written
    assert response["ok"] is False and response["field"] == field
    assert len(response["error"]) < 2_000 and len(json.dumps(response)) < 3_000
    assert world.write_calls() == []


def test_target_above_the_groups_max_is_refused_before_any_write(world: FakeWorld) -> None:
    # Given a target above the ASG's max size (16), which only the ASG tells
    # When it is invoked
    response = force.handler(event("force_scale_down_above_max.json"), FakeLambdaContext())
    # Then it is refused naming target, and only the lease was taken (and given back) to read the group
    assert response["ok"] is False and response["field"] == "target"
    assert "above the max size 16" in response["error"]
    assert set(world.write_calls()) <= LEASE and world.state.lease is None
    assert world.cluster.calls_of("cordon") == [] and world.fleet.desired(A100) == 2


def test_target_at_the_groups_max_is_accepted(world: FakeWorld) -> None:
    response = force.handler({"group": "a100", "target": 16}, FakeLambdaContext())
    assert response["ok"] is True and response["chosen"] == []


def test_target_above_the_groups_desired_says_there_is_nothing_to_do(world: FakeWorld) -> None:
    # Given a group of 2 nodes (desired 2, max 16) and a target of 5: a forced scale-down never adds
    # When it is invoked
    response = force.handler({"group": "a100", "target": 5}, FakeLambdaContext())
    # Then the report says why nothing was done, naming the counts, and nothing was written
    assert response["ok"] is True and response["chosen"] == [] and response["actions"] == []
    assert response["refused"] == [
        {
            "target": "a100",
            "reason": "nothing to do: target 5 is not below the group's 2 node(s) nor its desired "
            "capacity 2; a forced scale-down only removes nodes",
        }
    ]
    assert set(world.write_calls()) <= LEASE and world.fleet.desired(A100) == 2
