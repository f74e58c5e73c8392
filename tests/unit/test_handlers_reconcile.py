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
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.reconcile import handler as reconcile
from shared.constants import METRIC_DISCARDED_WAKE_UPS
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


def test_malformed_message_is_discarded_with_a_log_line_and_a_metric_and_the_rest_reconciles(
    world: FakeWorld,
) -> None:
    # Given a batch whose second message is not a wake-up (no retry can make it one)
    batch = event("sqs_batch.json")
    batch["Records"][1]["body"] = '{"source": "telepathy"}'
    # When the reconcile handles it
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then it is acknowledged, not retried: it would hold up the cluster's FIFO message group
    assert response == {"batchItemFailures": []}
    # ... it leaves an error line naming it and a metric an alarm watches
    assert world.reporter.metric_values(METRIC_DISCARDED_WAKE_UPS) == [1]
    (line,) = [fields for level, _, fields in world.reporter.logs if level == "error"]
    assert line["message_id"] == batch["Records"][1]["messageId"] and "source" in line["error"]
    assert line["body"] == '{"source": "telepathy"}'
    # ... and the valid wake-up still reconciles
    assert world.fleet.desired(A100) == 1


def test_a_malformed_first_message_does_not_hold_back_the_valid_one_after_it(world: FakeWorld) -> None:
    # Given a FIFO batch whose first message is not JSON and whose second is a valid wake-up
    batch = event("sqs_batch.json")
    batch["Records"][0]["body"] = "not json"
    # When the reconcile handles it
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then the first is discarded (logged, counted) and the second answered by one reconcile
    assert response == {"batchItemFailures": []}
    assert world.reporter.metric_values(METRIC_DISCARDED_WAKE_UPS) == [1]
    assert world.state.acquisitions == 1 and world.fleet.desired(A100) == 1


def test_a_record_that_fails_hands_back_itself_and_every_later_record(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a record handler that fails on the first record of the batch (a bug, not a bad message)
    batch = event("sqs_batch.json")
    first = batch["Records"][0]["messageId"]

    def fails_on_the_first(record: SQSRecord) -> bool:
        if record.message_id == first:
            raise RuntimeError("bug")
        return True

    monkeypatch.setattr(reconcile, "record_handler", fails_on_the_first)
    # When the reconcile handles the batch
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then, as a FIFO consumer must, it stops there and returns that record and every later one
    # (AWS Lambda developer guide, partial batch responses with FIFO queues); nothing is reconciled
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in batch["Records"]]}
    assert world.state.acquisitions == 0


def test_message_for_another_cluster_is_discarded(world: FakeWorld) -> None:
    # Given a batch whose only message names another cluster
    batch = event("sqs_batch.json")
    batch["Records"] = batch["Records"][:1]
    batch["Records"][0]["body"] = batch["Records"][0]["body"].replace('"research"', '"other"')
    # When the reconcile handles it
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then it is acknowledged with a log line and the metric, and nothing is reconciled
    assert response == {"batchItemFailures": []}
    assert world.reporter.metric_values(METRIC_DISCARDED_WAKE_UPS) == [1]
    assert any("'other'" in fields["error"] for _, _, fields in world.reporter.logs)
    assert world.state.acquisitions == 0  # nothing valid: no reconcile
    assert world.reporter.flushes == 1  # the metric is published without a reconcile


def test_failed_reconcile_hands_every_message_back(world: FakeWorld) -> None:
    world.cluster.fail_next("list_pods", ClusterReadError("HTTP 500"))
    batch = event("sqs_batch.json")
    response = reconcile.handler(batch, FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in batch["Records"]]}
    assert world.fleet.desired(A100) == 0


def test_failed_reconcile_hands_back_its_wake_ups_but_not_a_discarded_message_before_them(
    world: FakeWorld,
) -> None:
    # Given a batch whose first message is discarded, and a reconcile that will fail on a read
    world.cluster.fail_next("list_pods", ClusterReadError("HTTP 500"))
    batch = event("sqs_batch.json")
    batch["Records"][0]["body"] = "not json"
    # When the reconcile handles it
    response = reconcile.handler(batch, FakeLambdaContext())
    # Then the valid wake-up goes back to the queue; the discarded message is not counted twice
    assert response == {"batchItemFailures": [{"itemIdentifier": batch["Records"][1]["messageId"]}]}
    assert world.reporter.metric_values(METRIC_DISCARDED_WAKE_UPS) == [1]


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
        {"Records": []},  # Lambda never sends an empty batch
        {"trigger": "sqs"},  # a direct invoke has no messages to answer
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
def test_a_wake_up_with_a_wrong_type_or_an_oversized_field_is_discarded(
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
    # Then the message is discarded (logged and counted) and nothing is reconciled
    assert response == {"batchItemFailures": []}
    assert world.reporter.metric_values(METRIC_DISCARDED_WAKE_UPS) == [1]
    assert world.state.acquisitions == 0
