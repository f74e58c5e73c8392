"""ProvisioningRequests: check-capacity and best-effort-atomic-scale-up, booking, consumption, conditions."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from shared.domain.model import NodeState, ScalerState
from shared.domain.plan import Outcome
from shared.domain.provisioning import RequestOutcome
from shared.planner import plan
from tests.builders import NOW, asg, config, node, pod, snapshot
from tests.builders_provisioning import (
    CHECK,
    condition,
    pod_template,
    provisioning_request,
    with_objects,
)

A100 = "research-a100"
PROVISIONED_AT = NOW - timedelta(minutes=3)


def _conditions(update: object) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in update.conditions}  # type: ignore[attr-defined]


def _idle_nodes(count: int) -> tuple[list[dict[str, object]], dict[str, object]]:
    return [node(f"n{i}", f"i-{i}") for i in range(count)], asg(
        A100, desired=count, instances=[f"i-{i}" for i in range(count)]
    )


def test_atomic_request_that_fits_scales_up_and_is_provisioned() -> None:
    # Given a Kueue-style request for 2 pods of 8 GPUs and an empty a100 group
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps-main"), provisioning_request("llm", [("ps-main", 2)])],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then 2 nodes are bought, the answer says so, and Accepted + Provisioned=True are written
    assert result.group("a100").desired == 2
    assert "provisioning request research/llm" in result.group("a100").reason
    [answer] = result.provisioning_requests
    assert (answer.request, answer.outcome, answer.group, answer.nodes) == (
        "research/llm",
        RequestOutcome.PROVISIONED,
        "a100",
        2,
    )
    [update] = result.provisioning_updates
    assert _conditions(update) == {
        "Accepted": ("True", "Accepted"),
        "Provisioned": ("True", "CapacityIsProvisioned"),
    }
    assert all(c.observed_generation == 1 and c.last_transition_time == NOW for c in update.conditions)
    assert result.pods == ()  # the request's pods are not pods of the cluster


def test_atomic_request_that_cannot_fit_whole_buys_nothing_and_is_not_provisioned() -> None:
    # Given a request for 4 x 8 GPUs and a group that may add only 3 nodes (13 busy of max 16)
    nodes = [node(f"n{i}", f"i-{i}") for i in range(13)]
    busy = [pod(f"busy-{i}", gpus=8, node=f"n{i}") for i in range(13)]
    snap = with_objects(
        snapshot(busy, nodes, [asg(A100, desired=13, instances=[f"i-{i}" for i in range(13)])]),
        [pod_template("ps"), provisioning_request("llm-4x8", [("ps", 4)])],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought and Provisioned=False says what is missing (it may fit later)
    assert result.group("a100").desired == 13
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.NOT_PROVISIONED
    expected = "provisioning request research/llm-4x8: needs 4 a100 nodes, group can add 3 (max 16)"
    assert answer.reason == expected
    [update] = result.provisioning_updates
    assert _conditions(update)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert {c.type: c.message for c in update.conditions}["Provisioned"] == expected


def test_atomic_request_larger_than_the_group_can_ever_be_waits_as_cluster_autoscaler_leaves_it() -> None:
    # Given a request for 20 x 8 GPUs and a group of max 16
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps"), provisioning_request("huge", [("ps", 20)])],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought and, as cluster-autoscaler's best-effort-atomic class answers every
    # scale-up it cannot make, Provisioned=False/CapacityIsNotFound says why, with no Failed: the
    # next run tries again (the max size may be raised); only the week's expiry fails it
    assert result.group("a100").desired == 0
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.NOT_PROVISIONED
    [update] = result.provisioning_updates
    conditions = _conditions(update)
    assert conditions["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "Failed" not in conditions
    message = {c.type: c.message for c in update.conditions}["Provisioned"]
    assert "needs 20 a100 nodes, more than the group's max size 16" in message
    # And the next run tries again, buys nothing, and writes nothing while its answer holds
    [request] = snap.provisioning_requests
    answered = replace(snap, provisioning_requests=(replace(request, conditions=update.conditions),))
    again = plan(answered, config(), NOW + timedelta(minutes=1))
    assert again.group("a100").desired == 0
    assert again.provisioning_requests == result.provisioning_requests
    assert again.provisioning_updates == ()


def test_check_capacity_request_fits_free_room_and_buys_nothing() -> None:
    # Given two idle a100 nodes and a check-capacity request for 2 x 8 GPUs
    nodes, group = _idle_nodes(2)
    snap = with_objects(
        snapshot([], nodes, [group]),
        [pod_template("ps"), provisioning_request("probe", [("ps", 2)], class_name=CHECK)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then it is provisioned with CapacityIsFound, and the nodes it counts on are not scaled down
    [answer] = result.provisioning_requests
    assert (answer.outcome, answer.nodes) == (RequestOutcome.PROVISIONED, 2)
    [update] = result.provisioning_updates
    assert _conditions(update)["Provisioned"] == ("True", "CapacityIsFound")
    assert result.cordon == ()


def test_check_capacity_request_never_scales_up() -> None:
    # Given an empty group and a check-capacity request
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps"), provisioning_request("probe", [("ps", 1)], class_name=CHECK)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought and the answer is Provisioned=False
    assert result.group("a100").desired == 0
    [update] = result.provisioning_updates
    assert _conditions(update)["Provisioned"] == ("False", "CapacityIsNotFound")


def test_check_capacity_with_no_retry_fails_when_capacity_is_not_found() -> None:
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [
            pod_template("ps"),
            provisioning_request("probe", [("ps", 1)], class_name=CHECK, parameters={"noRetry": "true"}),
        ],
    )
    result = plan(snap, config(), NOW)
    [update] = result.provisioning_updates
    assert _conditions(update)["Failed"] == ("True", "CapacityIsNotFound")


def test_booked_capacity_is_held_from_other_pods_and_scale_down() -> None:
    # Given two idle nodes booked by a Provisioned request whose pods have not arrived, and an
    # unrelated pending 8-GPU pod
    nodes, group = _idle_nodes(2)
    provisioned = [
        condition(
            "Accepted", "True", "Accepted", message="ProvisioningRequest is accepted by backlog-scaler"
        ),
        condition("Provisioned", "True", "CapacityIsFound", at=PROVISIONED_AT),
    ]
    snap = with_objects(
        snapshot([pod("other", gpus=8)], nodes, [group]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=provisioned)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then the other pod gets a new node instead of the booked room, no node is cordoned, and the
    # request is reported booked without any write
    [other] = result.pods
    assert other.outcome is Outcome.SCALE_UP
    assert result.cordon == ()
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.BOOKED
    assert result.provisioning_updates == ()


def test_consuming_pods_use_the_booking() -> None:
    # Given a Provisioned request for 2 pods booked on two idle nodes, and its 2 pods now pending,
    # one with each of the two annotation keys cluster-autoscaler reads
    nodes, group = _idle_nodes(2)
    provisioned = [condition("Provisioned", "True", "CapacityIsProvisioned", at=PROVISIONED_AT)]
    consumers = [
        pod("w0", gpus=8, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "llm"}),
        pod(
            "w1", gpus=8, annotations={"cluster-autoscaler.kubernetes.io/consume-provisioning-request": "llm"}
        ),
    ]
    snap = with_objects(
        snapshot(consumers, nodes, [group]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=provisioned)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then both pods fit the booked room and nothing is bought
    assert {p.pod: p.outcome for p in result.pods} == {
        "research/w0": Outcome.EXISTING,
        "research/w1": Outcome.EXISTING,
    }
    assert result.group("a100").desired == 2


def test_booking_expires_after_the_booking_time() -> None:
    # Given a request Provisioned 11 minutes ago whose pods never came
    nodes, group = _idle_nodes(2)
    provisioned = [condition("Provisioned", "True", "CapacityIsProvisioned", at=NOW - timedelta(minutes=11))]
    snap = with_objects(
        snapshot([], nodes, [group]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=provisioned)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then BookingExpired=True is written and the room is no longer held
    [update] = result.provisioning_updates
    assert _conditions(update)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert _conditions(update)["Provisioned"] == ("True", "CapacityIsProvisioned")  # kept as it was


def test_a_repeated_run_writes_nothing() -> None:
    # Given a request answered Provisioned=False in a first run
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps"), provisioning_request("probe", [("ps", 1)], class_name=CHECK)],
    )
    first = plan(snap, config(), NOW)
    [update] = first.provisioning_updates
    [request] = snap.provisioning_requests
    answered = replace(snap, provisioning_requests=(replace(request, conditions=update.conditions),))
    # When planning again a minute later
    again = plan(answered, config(), NOW + timedelta(minutes=1))
    # Then the answer is the same and nothing is written
    assert again.provisioning_requests == first.provisioning_requests
    assert again.provisioning_updates == ()


def test_a_new_generation_is_answered_again() -> None:
    # Given a request answered at generation 1 whose spec changed (generation 2)
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps"), provisioning_request("probe", [("ps", 1)], class_name=CHECK)],
    )
    [update] = plan(snap, config(), NOW).provisioning_updates
    [request] = snap.provisioning_requests
    bumped = replace(request, conditions=update.conditions, generation=2)
    # When planning again
    [again] = plan(replace(snap, provisioning_requests=(bumped,)), config(), NOW).provisioning_updates
    # Then the conditions carry the new observedGeneration
    assert {c.observed_generation for c in again.conditions} == {2}


def test_missing_pod_template_is_not_provisioned() -> None:
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]), [provisioning_request("llm", [("gone", 2)])]
    )
    result = plan(snap, config(), NOW)
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.NOT_PROVISIONED
    assert answer.reason == "PodTemplate research/gone not found"
    assert result.group("a100").desired == 0


def test_requests_of_other_classes_are_left_alone() -> None:
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [
            pod_template("ps"),
            provisioning_request("dws", [("ps", 2)], class_name="queued-provisioning.gke.io"),
        ],
    )
    result = plan(snap, config(), NOW)
    assert result.provisioning_requests == ()
    assert result.group("a100").desired == 0


def test_failed_requests_are_not_retried() -> None:
    failed = [condition("Failed", "True", "GangDoesNotFit", message="too big")]
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=0)]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=failed)],
    )
    result = plan(snap, config(), NOW)
    assert [a.outcome for a in result.provisioning_requests] == [RequestOutcome.FAILED]
    assert result.provisioning_updates == ()
    assert result.group("a100").desired == 0


def test_request_never_provisioned_within_a_week_expires() -> None:
    snap = with_objects(
        snapshot([], [], [asg(A100, desired=16)]),
        [pod_template("ps"), provisioning_request("old", [("ps", 2)], created=NOW - timedelta(days=8))],
    )
    [update] = plan(snap, config(), NOW).provisioning_updates
    assert _conditions(update)["Failed"] == ("True", "Expired")


def test_atomic_request_and_booking_together_hold_what_was_bought() -> None:
    # Given the request was provisioned by buying 2 nodes that are still launching
    provisioned = [
        condition(
            "Accepted", "True", "Accepted", message="ProvisioningRequest is accepted by backlog-scaler"
        ),
        condition("Provisioned", "True", "CapacityIsProvisioned", at=PROVISIONED_AT),
    ]
    snap = with_objects(
        snapshot([pod("other", gpus=8)], [], [asg(A100, desired=2)]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=provisioned)],
    )
    # When planning the next run, with another 8-GPU pod pending
    result = plan(snap, config(), NOW)
    # Then the launching nodes stay the request's and the other pod gets a third node
    assert result.group("a100").desired == 3
    assert [a.outcome for a in result.provisioning_requests] == [RequestOutcome.BOOKED]


def test_a_booked_check_capacity_request_never_buys_to_keep_its_booking() -> None:
    # Given a check-capacity request Provisioned a minute ago whose room is now taken by running pods
    nodes, group = _idle_nodes(1)
    busy = pod("busy", gpus=8, node="n0")
    provisioned = [condition("Provisioned", "True", "CapacityIsFound", at=NOW - timedelta(minutes=1))]
    snap = with_objects(
        snapshot([busy], nodes, [group]),
        [
            pod_template("ps"),
            provisioning_request("probe", [("ps", 1)], class_name=CHECK, conditions=provisioned),
        ],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then nothing is bought; the booking is reported lost
    assert result.group("a100").desired == 1
    [answer] = result.provisioning_requests
    assert answer.outcome is RequestOutcome.BOOKED
    assert answer.reason.startswith("booked capacity lost")


def test_the_booking_is_released_once_every_pod_has_arrived() -> None:
    # Given a Provisioned request whose two pods now run on the two nodes it booked
    nodes, group = _idle_nodes(2)
    consume = {"autoscaling.x-k8s.io/consume-provisioning-request": "llm"}
    running = [pod(f"w{i}", gpus=8, node=f"n{i}", annotations=consume) for i in range(2)]
    provisioned = [condition("Provisioned", "True", "CapacityIsProvisioned", at=PROVISIONED_AT)]
    snap = with_objects(
        snapshot(running, nodes, [group]),
        [pod_template("ps"), provisioning_request("llm", [("ps", 2)], conditions=provisioned)],
    )
    # When planning
    result = plan(snap, config(), NOW)
    # Then the booking ends now: a finished pod is not listed, its room must not be held again
    [update] = result.provisioning_updates
    assert _conditions(update)["BookingExpired"] == ("True", "CapacityIsConsumed")
    assert [a.outcome for a in result.provisioning_requests] == [RequestOutcome.PROVISIONED]


def test_a_request_too_big_for_the_group_keeps_none_of_its_idle_nodes() -> None:
    # Given a group at its max size of 16 whose nodes have been idle for 30 minutes, and a waiting
    # request for 20 x 8 GPUs that the group could not hold even empty
    nodes, group = _idle_nodes(16)
    snap = with_objects(
        snapshot([], nodes, [group]), [pod_template("ps"), provisioning_request("huge", [("ps", 20)])]
    )
    idle = NOW - timedelta(minutes=30)
    snap = replace(snap, state=ScalerState(nodes={n.name: NodeState(idle_since=idle) for n in snap.nodes}))
    # When planning
    result = plan(snap, config(), NOW)
    # Then the request waits, and scale-down goes on as if it were not there (one node per run: the
    # scale-in budget of 10 % of 16)
    assert [a.outcome for a in result.provisioning_requests] == [RequestOutcome.NOT_PROVISIONED]
    assert len(result.cordon) == 1
