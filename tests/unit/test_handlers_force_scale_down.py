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
