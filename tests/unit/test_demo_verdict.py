"""The demo's verdict on the ProvisioningRequests of its Kueue stand-in: each must end as the
scenario expects (provisioned, or pending because no group may hold it), and the run goes on while
one that should be provisioned is still pending."""

from __future__ import annotations

from typing import Any, cast

from shared.local.demo.queue import DemoQueue
from shared.local.demo.report import DemoReport, failures_of
from shared.local.demo.scenario import SCENARIOS, DemoJob, DemoRequest


def _report(requests: dict[str, tuple[str, str]], expected: dict[str, str]) -> DemoReport:
    """A run where every job ran and nothing else went wrong, with these requests."""
    report = DemoReport(
        scenario="default",
        jobs=1,
        jobs_ran=1,
        jobs_lost=0,
        jobs_never_started=0,
        waits=[0],
        gpu_hours_provisioned=1.0,
        gpu_hours_used=1.0,
        cost=0.0,
        scale_ups=0,
        nodes_requested=0,
        desired_set_back=0,
        cordons=0,
        uncordons=0,
        terminations=0,
        terminations_skipped=0,
        nodes_deleted=0,
        launch_failures=0,
        backoffs=0,
        backoffs_already_running=0,
        instances_terminated=0,
        busy_terminations=[],
        groups={},
        invocations={},
        invocation_errors=[],
        mean_invocation_ms=0.0,
        simulated_seconds=1.0,
        wall_seconds=1.0,
        speed=1.0,
    )
    report.requests, report.expected = requests, expected
    return report


PENDING = "Provisioned=False (CapacityIsNotFound): needs 6 a100 nodes"


def test_a_request_that_should_be_provisioned_but_stays_pending_fails_the_run() -> None:
    # Given the 2 x 8-GPU request left pending, though the scenario expects it admitted
    report = _report(
        {"llm-prov": ("pending", PENDING), "too-big-prov": ("pending", PENDING)},
        {"llm-prov": "admitted", "too-big-prov": "pending"},
    )
    # When the verdict is given
    failures = failures_of(report)
    # Then the run fails, naming the request and both states; the too-big one pending is as expected
    assert failures == [
        "1 provisioning request(s) answered otherwise: llm-prov ended pending, expected admitted"
    ]


def test_requests_that_end_as_expected_pass() -> None:
    report = _report(
        {"llm-prov": ("admitted", "Provisioned=True"), "too-big-prov": ("pending", PENDING)},
        {"llm-prov": "admitted", "too-big-prov": "pending"},
    )
    assert failures_of(report) == []


def test_a_too_big_request_provisioned_after_all_fails_the_run() -> None:
    report = _report({"too-big-prov": ("admitted", "Provisioned=True")}, {"too-big-prov": "pending"})
    assert failures_of(report) == [
        "1 provisioning request(s) answered otherwise: too-big-prov ended admitted, expected pending"
    ]


def _queue(*requests: DemoRequest) -> DemoQueue:
    return DemoQueue(cast(Any, None), cast(Any, None), lambda _obj: True, requests)


def test_the_run_waits_while_a_request_expected_admitted_is_pending_not_one_expected_pending() -> None:
    # Given two requests both answered Provisioned=False so far
    llm = DemoRequest(DemoJob("llm", 0, 180, 8, pods=2))
    too_big = DemoRequest(DemoJob("too-big", 0, 180, 8, pods=6), expected="pending")
    queue = _queue(llm, too_big)
    for queued in queue.jobs:
        queued.state = "pending"
    # Then the queue is not done: the first may yet be provisioned
    assert not queue.done()
    # And once it is admitted, the second left pending ends the story
    queue.jobs[0].state = "admitted"
    assert queue.done()


def test_the_default_scenario_expects_its_too_big_request_pending_and_the_other_admitted() -> None:
    scenario = SCENARIOS["default"]()
    assert {r.name: r.expected for r in scenario.requests} == {
        "kueue-llm-2x8-prov": "admitted",
        "kueue-too-big-prov": "pending",
    }
