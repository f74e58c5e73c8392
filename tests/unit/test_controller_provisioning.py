"""ProvisioningRequests through the controller over in-memory fakes: read, answer, write once."""

from __future__ import annotations

from shared.domain.errors import ClusterActionError, FleetActionError
from shared.reporting import ActionKind, ActionStatus
from tests.builders import asg, config
from tests.builders_provisioning import pod_template, provisioning_request
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"


def _world() -> FakeWorld:
    cluster = FakeCluster()
    cluster.add_pod_template(pod_template("llm-main"))
    cluster.add_custom(provisioning_request("llm", [("llm-main", 2)]))
    return FakeWorld(config=config(), cluster=cluster, fleet=FakeFleet([asg(A100, desired=0)]))


def _answers(result: object) -> list[tuple[str, ActionStatus]]:
    return [(a.target, a.status) for a in result.actions if a.kind is ActionKind.ANSWER_REQUEST]  # type: ignore[attr-defined]


def test_a_request_is_answered_after_its_scale_up_and_only_once() -> None:
    # Given a request for 2 x 8 GPUs and an empty group
    w = _world()
    # When the controller reconciles twice
    first = w.controller().reconcile("schedule")
    second = w.controller().reconcile("schedule")
    # Then the group grew, then the conditions were written, once
    assert w.fleet.desired(A100) == 2
    order = [
        c.method
        for c in w.calls_in_order()
        if c.method in ("set_desired_capacity", "set_provisioning_request_conditions")
    ]
    assert order == ["set_desired_capacity", "set_provisioning_request_conditions"]
    assert _answers(first) == [("research/llm", ActionStatus.DONE)]
    assert _answers(second) == []
    conditions = w.cluster.provisioning_request("research/llm")["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {"Accepted": "True", "Provisioned": "True"}


def test_no_provisioned_answer_over_a_failed_scale_up() -> None:
    # Given the group cannot be grown this run
    w = _world()
    w.fleet.fail_next("set_desired_capacity", FleetActionError("AccessDenied"))
    # When the controller reconciles
    result = w.controller().reconcile("schedule")
    # Then the request is not told Provisioned: the next run answers it
    assert _answers(result) == [("research/llm", ActionStatus.SKIPPED)]
    assert "status" not in w.cluster.provisioning_request("research/llm")


def test_a_failed_status_write_is_isolated_to_its_request() -> None:
    w = _world()
    w.cluster.fail_next("set_provisioning_request_conditions", ClusterActionError("HTTP 500"))
    result = w.controller().reconcile("schedule")
    assert w.fleet.desired(A100) == 2  # the scale-up stands
    assert _answers(result) == [("research/llm", ActionStatus.FAILED)]


def test_a_dry_run_writes_no_condition() -> None:
    w = _world()
    result = w.controller(dry_run=True).reconcile("schedule")
    assert _answers(result) == [("research/llm", ActionStatus.DRY_RUN)]
    assert "status" not in w.cluster.provisioning_request("research/llm")
