"""The applier's one error policy and its fencing, over the in-memory fakes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from shared import constants
from shared.controller.applier import FENCE_EVERY, Applier, Ports
from shared.controller.lease import LeaseGuard
from shared.domain.errors import (
    AuthError,
    ClusterActionError,
    ClusterReadError,
    ConflictError,
    EvictionBlockedError,
    FleetActionError,
    LeaseHeldError,
    NotFoundError,
    ReadError,
    ThrottledError,
)
from shared.domain.operations import ClusterEvent, ObjectRef
from shared.domain.provisioning import ConditionUpdate
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.reporting import ActionStatus
from tests.builders import NOW, asg, node, pod
from tests.fakes.memory import FakeClock, FakeCluster, FakeFleet, MemoryStateStore, RecordingReporter


class Fixture:
    def __init__(self) -> None:
        self.cluster = FakeCluster(
            [pod("a", node="n1"), pod("b", node="n1")], [node("n1", "i-1"), node("n2", "i-2")]
        )
        self.fleet = FakeFleet([asg("research-a100", desired=2, instances=["i-1", "i-2"])])
        self.state = MemoryStateStore()
        self.clock = FakeClock(NOW)
        self.reporter = RecordingReporter()
        lease = self.state.acquire_lease("run", NOW, 120)
        self.guard = LeaseGuard(self.state, self.clock, lease, 120)
        self.applier = Applier(
            Ports(self.cluster, self.fleet, self.state), self.reporter, guard=self.guard, dry_run=False
        )

    def evict(self, name: str) -> bool:
        return self.applier.evict(pod_from_json(self.cluster.pods[f"research/{name}"]), "a100", "drain of n1")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (EvictionBlockedError("HTTP 429: disruption budget"), ActionStatus.BLOCKED),
        (ConflictError("HTTP 409"), ActionStatus.FAILED),
        (NotFoundError("HTTP 404"), ActionStatus.FAILED),
        (AuthError("HTTP 403: NamespaceTerminating"), ActionStatus.FAILED),
        (ClusterActionError("HTTP 500"), ActionStatus.FAILED),
        (ThrottledError("slow down"), ActionStatus.FAILED),
        (ClusterReadError("dropped"), ActionStatus.FAILED),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_a_failed_write_is_isolated_to_its_object(error: Exception, status: ActionStatus) -> None:
    # Given the first of two evictions fails
    f = Fixture()
    f.cluster.fail_next("evict", error)
    # When both are applied / Then the first has the policy's status, the second is done
    assert not f.evict("a") and f.evict("b")
    assert [r.status for r in f.applier.records] == [status, ActionStatus.DONE]
    failures = 1 if status is ActionStatus.FAILED else 0
    assert f.applier.failures == failures and len(f.applier.errors) == failures
    assert f.reporter.metric_values(constants.METRIC_ACTION_FAILURES) == [1] * failures


def test_a_lost_lease_ends_the_run_before_the_next_destructive_batch() -> None:
    # Given a run that terminated one instance, then another run took the lease
    f = Fixture()
    assert f.applier.terminate("i-2", "n2", "a100", "idle", decrement=True, region="")
    f.state.take_over()
    # When it starts its cordons / Then the fence stops it before any write
    with pytest.raises(LeaseHeldError):
        f.applier.cordon(node_from_json(f.cluster.nodes["n1"]), "a100", "idle", NOW, retry_conflict=False)
    assert not f.cluster.is_cordoned("n1")
    assert f.fleet.terminated == ["i-2"]


@pytest.mark.parametrize(
    "write",
    [
        lambda f: f.applier.uncordon("n1", "a100", "a pending pod fits"),
        lambda f: f.applier.unmark("n1", "scaler/attrition", "a100", "room is needed"),
        lambda f: f.applier.answer_request(
            ConditionUpdate("research", "req", "uid-1", (), "Provisioned"), "a100", "capacity is there"
        ),
        lambda f: f.applier.record_events(
            [ClusterEvent(ObjectRef("Pod", "a", "research", "uid-a"), "TriggeredScaleUp", "a100 grows")]
        ),
    ],
    ids=["uncordon", "unmark", "provisioning-request", "events"],
)
def test_a_write_that_gives_back_is_fenced_too(write: Callable[[Fixture], object]) -> None:
    # Given another run took the lease (a stale run's uncordon would undo the new owner's cordon)
    f = Fixture()
    f.state.take_over()
    # When the stale run makes a non-destructive write / Then the fence stops it before the call
    with pytest.raises(LeaseHeldError):
        write(f)
    writes = [c.method for c in (*f.cluster.calls, *f.fleet.calls) if not c.method.startswith("get")]
    assert writes == [] and f.cluster.events == []


def test_a_lease_that_cannot_be_confirmed_counts_as_lost() -> None:
    # Given the store cannot answer when the run confirms its lease before a batch
    f = Fixture()
    f.state.fail_next("renew_lease", ReadError("DynamoDB throttled"))
    # When the run starts evicting / Then it stops as if the lease were lost: nothing is evicted
    with pytest.raises(LeaseHeldError, match="could not confirm the lease"):
        f.evict("a")
    assert f.cluster.evicted == []


def test_the_fence_is_confirmed_once_per_batch_and_every_few_writes_within_one() -> None:
    f = Fixture()
    for index in range(FENCE_EVERY + 1):
        f.cluster.add_pod(pod(f"p{index}", node="n1"))
        f.evict(f"p{index}")
    f.applier.cordon(node_from_json(f.cluster.nodes["n2"]), "a100", "idle", NOW, retry_conflict=False)
    # One confirmation for the first evictions, one after FENCE_EVERY of them, one for the cordon
    assert len(f.state.calls_of("renew_lease")) == 3


def test_deleting_the_node_of_a_terminated_instance_is_fenced_on_its_own() -> None:
    # Given another run takes the lease while this run's termination is in flight
    f = Fixture()
    f.fleet.before("terminate_instance", lambda *_: f.state.take_over())
    # When the run follows the termination up by deleting the Node / Then the fence stops it first
    with pytest.raises(LeaseHeldError):
        f.applier.terminate("i-2", "n2", "a100", "idle", decrement=True, region="")
    assert f.fleet.terminated == ["i-2"]
    assert "n2" in f.cluster.nodes and f.cluster.calls_of("delete_node") == []


def test_a_run_of_terminations_confirms_once_more_per_node_deleted() -> None:
    # Given two idle nodes terminated in one batch
    f = Fixture()
    assert f.applier.terminate("i-1", "n1", "a100", "idle", decrement=True, region="")
    assert f.applier.terminate("i-2", "n2", "a100", "idle", decrement=True, region="")
    # Then the batch was confirmed once, and once before each Node delete (which fenced the next
    # termination too)
    assert len(f.state.calls_of("renew_lease")) == 3
    assert f.fleet.terminated == ["i-1", "i-2"] and f.cluster.nodes == {}


def test_after_a_failed_read_nothing_destructive_happens() -> None:
    f = Fixture()
    f.applier.forbid_destructive(AuthError("get node: HTTP 403"))
    assert not f.evict("a")
    assert not f.applier.terminate("i-1", "n1", "a100", "idle", decrement=True, region="")
    assert f.applier.uncordon("n1", "a100", "a pod fits")  # giving capacity back is never destructive
    assert f.cluster.evicted == [] and f.fleet.terminated == []
    assert [r.status for r in f.applier.records][:2] == [ActionStatus.SKIPPED, ActionStatus.SKIPPED]


def test_a_lease_about_to_end_is_renewed_before_a_write() -> None:
    f = Fixture()
    f.clock.advance(100)  # 20 s left of 120
    f.applier.uncordon("n1", "a100", "a pod fits")
    assert f.guard.lease.expires_at == NOW + timedelta(seconds=220)


def test_a_set_desired_denied_on_one_group_is_reported_not_raised() -> None:
    f = Fixture()
    f.fleet.fail_next("set_desired_capacity", AuthError("AccessDenied: not authorized"))
    group = f.fleet.groups["research-a100"]
    assert not f.applier.set_desired(group, 1, "a100", "2 -> 1")
    assert f.applier.records[0].status is ActionStatus.FAILED
    assert "AuthError: AccessDenied" in f.applier.records[0].detail
    f.fleet.fail_next("terminate_instance", FleetActionError("ValidationError"))
    assert not f.applier.terminate("i-1", "n1", "a100", "idle", decrement=True, region="")
    assert f.applier.failures == 2


def test_a_dry_run_calls_nothing() -> None:
    f = Fixture()
    dry = Applier(Ports(f.cluster, f.fleet, f.state), f.reporter, guard=None, dry_run=True)
    assert dry.evict(pod_from_json(f.cluster.pods["research/a"]), "a100", "drain")
    assert dry.terminate("i-1", "n1", "a100", "idle", decrement=True, region="")
    assert [c.method for c in f.cluster.calls + f.fleet.calls] == []
    assert {r.status for r in dry.records} == {ActionStatus.DRY_RUN}
