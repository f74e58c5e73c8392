"""The reconcile handler on every trigger it accepts, with the controller on in-memory fakes."""

from __future__ import annotations

import copy
import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.reconcile import handler as reconcile
from shared.domain.errors import ClusterReadError, InputError
from tests.builders import asg, pod
from tests.builders import config as make_config
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld

EVENTS = Path(__file__).resolve().parents[1] / "events"
A100 = "research-a100"


def event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    w = FakeWorld(
        config=make_config(),
        cluster=FakeCluster([pod("train", gpus=8)]),
        fleet=FakeFleet([asg(A100, desired=0)]),
    )
    reconcile.set_dependencies(w.controller())
    yield w
    reconcile.set_dependencies(None)


def test_schedule_runs_one_reconcile_and_returns_its_result(world: FakeWorld) -> None:
    response = reconcile.handler(event("schedule.json"), FakeLambdaContext())
    assert response["ok"] and response["trigger"] == "schedule" and response["status"] == "completed"
    assert world.fleet.desired(A100) == 1
    assert [a["kind"] for a in response["actions"]] == ["set-desired"]


def test_direct_invoke_names_its_trigger(world: FakeWorld) -> None:
    assert reconcile.handler({}, FakeLambdaContext())["trigger"] == "manual"
    assert reconcile.handler({"trigger": "smoke-test"}, FakeLambdaContext())["trigger"] == "smoke-test"


def test_sqs_batch_runs_one_reconcile_for_all_its_messages(world: FakeWorld) -> None:
    response = reconcile.handler(event("sqs_batch.json"), FakeLambdaContext())
    assert response == {"batchItemFailures": []}
    assert world.state.acquisitions == 1
    assert world.fleet.desired(A100) == 1


def test_malformed_message_is_a_partial_failure_and_the_rest_still_reconciles(world: FakeWorld) -> None:
    batch = event("sqs_batch.json")
    batch["Records"][1]["body"] = '{"source": "telepathy"}'
    response = reconcile.handler(batch, FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": batch["Records"][1]["messageId"]}]}
    assert world.fleet.desired(A100) == 1


def test_message_for_another_cluster_is_refused(world: FakeWorld) -> None:
    batch = event("sqs_batch.json")
    batch["Records"] = batch["Records"][:1]
    batch["Records"][0]["body"] = batch["Records"][0]["body"].replace('"research"', '"other"')
    response = reconcile.handler(batch, FakeLambdaContext())
    assert len(response["batchItemFailures"]) == 1
    assert world.state.acquisitions == 0  # nothing valid: no reconcile


def test_failed_reconcile_hands_every_message_back(world: FakeWorld) -> None:
    world.cluster.fail_next("list_pods", ClusterReadError("HTTP 500"))
    batch = event("sqs_batch.json")
    response = reconcile.handler(batch, FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in batch["Records"]]}
    assert world.fleet.desired(A100) == 0


def test_failed_scheduled_reconcile_raises(world: FakeWorld) -> None:
    world.cluster.fail_next("list_nodes", ClusterReadError("timeout"))
    with pytest.raises(ClusterReadError):
        reconcile.handler(event("schedule.json"), FakeLambdaContext())


@pytest.mark.parametrize(
    "bad",
    [
        {"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2"},
        {"trigger": ""},
        {"unexpected": 1},
        {"Records": [{"eventSource": "aws:s3"}]},
    ],
)
def test_unknown_events_are_refused_clearly(world: FakeWorld, bad: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="event: "):
        reconcile.handler(copy.deepcopy(bad), FakeLambdaContext())
    assert world.state.acquisitions == 0


def test_logs_carry_the_correlation_id_and_metrics_are_emf(
    world: FakeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the real Powertools reporter (JSON logs; EMF on stdout)
    from functions.common.powertools import logger
    from shared.observability import PowertoolsReporter

    world.reporter = PowertoolsReporter(logger=logger, cluster="research")  # type: ignore[assignment]
    reconcile.set_dependencies(world.controller())
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        reconcile.handler(event("schedule.json"), FakeLambdaContext())
    finally:
        handler.setStream(previous)
    logs = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert logs and all(line["correlation_id"] == "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa" for line in logs)
    assert any(line.get("action", {}).get("kind") == "set-desired" for line in logs)
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    blobs = [line["_aws"]["CloudWatchMetrics"][0] for line in emf]
    assert {tuple(blob["Dimensions"][0]) for blob in blobs} == {("Cluster",), ("Cluster", "Group")}
    assert all(blob["Namespace"] == "BacklogScaler" for blob in blobs)
    assert {line.get("Group") for line in emf} == {None, "a100"}


@pytest.mark.parametrize(
    "field, value",
    [("cluster", "x" * 101), ("reason", "r" * 1025), ("cluster", 7), ("reason", ["a"]), ("source", True)],
)
def test_a_wake_up_with_a_wrong_type_or_an_oversized_field_is_refused(
    world: FakeWorld, field: str, value: Any
) -> None:
    # Given a batch whose only message has one field of the wrong type or over its bound
    batch = event("sqs_batch.json")
    batch["Records"] = batch["Records"][:1]
    body = json.loads(batch["Records"][0]["body"])
    body[field] = value
    batch["Records"][0]["body"] = json.dumps(body)
    # When the reconcile handles it
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then the message goes back to the queue and nothing is reconciled
    assert len(response["batchItemFailures"]) == 1
    assert world.state.acquisitions == 0
