"""The status ConfigMap each reconcile keeps (shared.controller.status), over the in-memory fakes."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from shared.constants import DEFAULT_STATUS_NAMESPACE, STATUS_CONFIGMAP, STATUS_DATA_KEY
from shared.controller.status import MAX_UNHELPED_PODS, STATUS_REFRESH_SECONDS, needs_write
from shared.domain.errors import AuthError, ClusterReadError, LeaseHeldError, NotFoundError
from shared.domain.operations import DrainIntent
from shared.local.status_cli import status_to_table
from tests.builders import NOW, asg, config, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"
KEY = f"{DEFAULT_STATUS_NAMESPACE}/{STATUS_CONFIGMAP}"


def status_world(pods: list[dict[str, Any]]) -> FakeWorld:
    """One a100 group: one Ready node (i-1) and one instance still booting (i-2)."""
    w = FakeWorld(
        config=config(),
        cluster=FakeCluster(pods, [node("n1", "i-1")]),
        fleet=FakeFleet([asg(A100, desired=2, instances=["i-1", "i-2"])]),
    )
    w.cluster.config_maps[KEY] = {}  # created by the applied manifests
    return w


def stored(w: FakeWorld) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(w.cluster.config_maps[KEY][STATUS_DATA_KEY])
    return document


def patches(w: FakeWorld) -> int:
    return len(w.cluster.calls_of("patch_config_map"))


def test_a_run_writes_groups_unhelped_pods_and_the_run() -> None:
    # Given a pod larger than any node beside the group
    w = status_world([pod("huge", gpus=16)])

    # When the controller reconciles
    w.controller().reconcile("schedule")

    # Then the status says what the run saw and decided, and why
    status = stored(w)
    assert status["run"]["trigger"] == "schedule"
    assert status["run"]["result"] == "ok"
    assert status["run"]["at"] == "2026-12-02T12:00:00Z"
    assert status["pendingPods"] == 1
    [group] = status["groups"]
    assert (group["name"], group["desired"], group["ready"], group["booting"]) == ("a100", 2, 1, 1)
    assert group["backoffUntil"] is None and group["marked"] == 0 and group["why"]
    assert status["unhelped"]["total"] == 1
    [unhelped] = status["unhelped"]["pods"]
    assert (unhelped["pod"], unhelped["code"]) == ("research/huge", "LargerThanAnyNode")
    assert "16 GPUs" in unhelped["reason"]
    assert status["drains"] == []


def test_an_unchanged_status_is_not_written_again_until_the_refresh() -> None:
    w = status_world([pod("huge", gpus=16)])
    controller = w.controller()
    controller.reconcile("schedule")
    assert patches(w) == 1

    # When the next run, of another trigger, sees the same picture: nothing is written
    w.clock.advance(60)
    controller.reconcile("webhook")
    assert patches(w) == 1

    # When a pod arrives: the content changed, the status is written at once
    w.cluster.add_pod(pod("other", gpus=16))
    w.clock.advance(60)
    controller.reconcile("schedule")
    assert patches(w) == 2 and stored(w)["unhelped"]["total"] == 2

    # When nothing changes for the refresh interval: written again, so run.at says the scaler lives
    w.clock.advance(STATUS_REFRESH_SECONDS)
    controller.reconcile("schedule")
    assert patches(w) == 3
    assert stored(w)["run"]["at"] == (
        NOW + timedelta(seconds=120 + STATUS_REFRESH_SECONDS)
    ).isoformat().replace("+00:00", "Z")


def test_unhelped_pods_are_bounded_and_counted() -> None:
    w = status_world([pod(f"huge-{i:03d}", gpus=16) for i in range(MAX_UNHELPED_PODS + 7)])
    w.controller().reconcile("schedule")
    unhelped = stored(w)["unhelped"]
    assert unhelped["total"] == MAX_UNHELPED_PODS + 7
    assert len(unhelped["pods"]) == MAX_UNHELPED_PODS


def test_drains_in_progress_are_listed() -> None:
    # Given a stored forced scale-down of n1
    w = status_world([])
    w.state.intents["a100"] = DrainIntent(
        "a100", ("n1",), NOW - timedelta(minutes=1), NOW + timedelta(hours=1), requested_by="ops"
    )
    w.controller().reconcile("schedule")
    [drain] = stored(w)["drains"]
    assert (drain["group"], drain["nodes"], drain["force"], drain["requestedBy"]) == (
        "a100",
        ["n1"],
        False,
        "ops",
    )


@pytest.mark.parametrize(
    "error", [NotFoundError("HTTP 404"), AuthError("HTTP 403"), LeaseHeldError("taken")], ids=type
)
def test_a_failed_status_write_never_fails_the_run(error: Exception) -> None:
    # Given a status write that fails (ConfigMap never created, RBAC missing, lease lost at the end)
    # (three 8-GPU pods: one node's worth more than the Ready node and the booting one hold)
    w = status_world([pod(f"train-{i}", gpus=8) for i in range(3)])
    w.cluster.fail_next("patch_config_map", error)

    # When the controller reconciles
    result = w.controller().reconcile("schedule")

    # Then the run did its work and is ok; the failure is a warning in the log, not an error
    assert result.ok and result.changed
    assert any(level == "warning" and "status ConfigMap" in message for level, message, _ in w.reporter.logs)


def test_a_failed_read_of_the_status_writes_it_anyway() -> None:
    w = status_world([])
    w.cluster.fail_next("get_config_map", ClusterReadError("HTTP 500"))
    w.controller().reconcile("schedule")
    assert patches(w) == 1


def test_a_dry_run_writes_its_status_marked_as_such() -> None:
    # Given a dry run (shadow mode) with a pod that needs a node
    w = status_world([pod(f"train-{i}", gpus=8) for i in range(3)])
    w.controller(dry_run=True).reconcile("schedule")
    # Then nothing of the cluster changed, and the status says what it would do, marked dry run
    assert w.fleet.desired(A100) == 2
    status = stored(w)
    assert status["run"]["dryRun"] is True
    assert status["run"]["actions"] == {"dry-run": 1}
    assert status["groups"][0]["why"].startswith("+1 node")


def test_needs_write_compares_content_not_the_run_time() -> None:
    document = {"run": {"at": "2026-01-01T12:00:00Z", "trigger": "schedule", "result": "ok"}, "groups": []}
    later = {**document, "run": {**document["run"], "at": "2026-01-01T12:01:00Z", "trigger": "webhook"}}
    text = {STATUS_DATA_KEY: json.dumps(document)}
    at = NOW.replace(month=1, day=1, minute=1)
    assert not needs_write(text, later, at)
    assert needs_write(text, {**later, "groups": [{"name": "a100"}]}, at)
    assert needs_write({STATUS_DATA_KEY: "not json"}, later, at)
    assert needs_write(None, later, at)


def test_the_table_prints_every_group_and_pod() -> None:
    w = status_world([pod("huge", gpus=16)])
    w.controller().reconcile("schedule")
    table = status_to_table(stored(w), w.clock.now() + timedelta(minutes=2))
    lines = table.splitlines()
    assert lines[0].startswith("cluster ") and "last run 2m00s ago (schedule)" in lines[0]
    header = next(line for line in lines if line.startswith("GROUP"))
    assert header.split() == ["GROUP", "DESIRED", "READY", "BOOTING", "MIN/MAX", "BACKOFF", "MARKED", "WHY"]
    row = lines[lines.index(header) + 1].split()
    assert row[:7] == ["a100", "2", "1", "1", "0/16", "-", "0"]
    assert any(line.startswith("research/huge") and "LargerThanAnyNode" in line for line in lines)
