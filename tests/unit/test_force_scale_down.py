"""Forced scale-down: validation, the choice of nodes, min size, drain start and its continuation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from shared.config import PolicyConfig
from shared.controller.force_scale_down import (
    INTERRUPTION_REQUESTER,
    MAX_GRACE_SECONDS,
    ForceScaleDownRequest,
    InvalidRequestError,
    merge_intents,
    parse_force_scale_down,
)
from shared.domain.errors import ActionError, LeaseHeldError
from shared.domain.model import AsgState
from shared.domain.operations import (
    MAX_DRAIN_NODES,
    MAX_GROUP_NAME_LENGTH,
    MAX_INTENT_NODES,
    MAX_NODE_NAME_LENGTH,
    MAX_REQUESTED_BY_LENGTH,
    DrainIntent,
    NodeDrain,
)
from shared.formats.aws import asg_from_json
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.planner.force_scale_down import candidates_of, choose, rank
from shared.reporting import ActionKind, ActionStatus
from tests.builders import NOW, asg, config, node, pod
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"


def fleet_world(*, min_size: int = 0) -> FakeWorld:
    """Four a100 nodes: busy with two pods, busy with one 1-GPU pod, idle and old, idle and new."""
    nodes = [
        node("busy-2", "i-1", created=NOW - timedelta(hours=5)),
        node("busy-1", "i-2", created=NOW - timedelta(hours=4)),
        node("idle-old", "i-3", created=NOW - timedelta(hours=3)),
        node("idle-new", "i-4", created=NOW - timedelta(hours=1)),
    ]
    pods = [
        pod("a", gpus=4, node="busy-2"),
        pod("b", gpus=4, node="busy-2"),
        pod("c", gpus=1, node="busy-1"),
        *(
            pod(f"plugin-{n}", gpus=0, node=n, owner_kind="DaemonSet")
            for n in ("busy-2", "busy-1", "idle-old", "idle-new")
        ),
    ]
    group = asg(A100, desired=4, instances=["i-1", "i-2", "i-3", "i-4"], min_size=min_size)
    return FakeWorld(config=config(), cluster=FakeCluster(pods, nodes), fleet=FakeFleet([group]))


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"target": 0}, "group"),
        ({"group": "a100"}, "nodes"),
        ({"group": "a100", "target": -1}, "target"),
        ({"group": "a100", "target": "two"}, "target"),
        ({"group": "a100", "target": 1, "nodes": ["n1"]}, "nodes"),
        ({"group": "a100", "nodes": []}, "nodes"),
        ({"group": "a100", "nodes": ["n1", "n1"]}, "nodes"),
        ({"group": "a100", "target": 0, "grace_seconds": -5}, "grace_seconds"),
        ({"group": "a100", "target": 0, "force": "maybe"}, "force"),
        ({"group": "a100", "target": 0, "tagret": 0}, "tagret"),
        ({"group": "v100", "target": 0}, "group"),
        # the interruption hold's requester: a drain stored under it would evict nothing after its pass
        ({"group": "a100", "nodes": ["n1"], "requested_by": "spot-interruption"}, "requested_by"),
    ],
)
def test_invalid_payload_names_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_force_scale_down(payload, config())
    assert caught.value.fields == (field,)
    assert f"request: {field}" in str(caught.value)


def test_payload_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="expected a JSON object"):
        parse_force_scale_down(["a100"], config())


def test_valid_payload_gets_defaults() -> None:
    request = parse_force_scale_down({"group": "a100", "target": 0}, config())
    assert (request.grace_seconds, request.force, request.dry_run) == (300, False, None)


def test_invalid_request_does_nothing() -> None:
    w = fleet_world()
    with pytest.raises(InvalidRequestError):
        w.controller().force_scale_down({"group": "a100", "target": -1})
    assert w.cluster.calls == [] and w.write_calls() == []


# ------------------------------------------------------------------------------------------ choice


def test_nodes_are_chosen_idle_first_then_least_busy_then_newest() -> None:
    w = fleet_world()
    group = asg_from_json(asg(A100, desired=4, instances=["i-1", "i-2", "i-3", "i-4"]))
    candidates = candidates_of(group, w.cluster.list_nodes(), w.cluster.list_pods(), -10, now=NOW)
    assert [c.name for c in rank(candidates)] == ["idle-new", "idle-old", "busy-1", "busy-2"]
    request = ForceScaleDownRequest(group="a100", target=1)
    assert [c.name for c in choose(request, group, candidates).chosen] == ["idle-new", "idle-old", "busy-1"]


def test_instances_that_never_registered_are_chosen_first() -> None:
    group = asg_from_json(asg(A100, desired=2, instances=["i-1", "i-booting"]))
    candidates = candidates_of(group, [node_from_json(node("n1", "i-1"))], [], -10, now=NOW)
    chosen = choose(ForceScaleDownRequest(group="a100", target=1), group, candidates).chosen
    assert [c.instance.instance_id for c in chosen] == ["i-booting"]


def test_fewer_gpus_breaks_a_tie_in_pod_count() -> None:
    group = asg_from_json(asg(A100, desired=2, instances=["i-1", "i-2"]))
    nodes = [node_from_json(node("big", "i-1")), node_from_json(node("small", "i-2"))]
    pods = [pod_from_json(pod("x", gpus=8, node="big")), pod_from_json(pod("y", gpus=1, node="small"))]
    assert [c.name for c in rank(candidates_of(group, nodes, pods, -10, now=NOW))] == ["small", "big"]


def test_target_never_goes_below_min_size_and_says_what_was_refused() -> None:
    w = fleet_world(min_size=3)
    report = w.controller().force_scale_down({"group": "a100", "target": 0})
    assert [c.to_json()["node"] for c in report.chosen] == ["idle-new"]
    reasons = " ".join(r.reason for r in report.refused)
    assert "below the group's min size 3" in reasons
    assert w.fleet.desired(A100) == 3


def test_named_nodes_beyond_min_size_are_refused() -> None:
    w = fleet_world(min_size=3)
    report = w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1", "busy-2"]})
    assert [c.name for c in report.chosen] == ["busy-1"]
    assert [r.target for r in report.refused] == ["busy-2"]


def test_nodes_not_in_the_group_are_named_and_nothing_is_done() -> None:
    w = fleet_world()
    with pytest.raises(InvalidRequestError) as caught:
        w.controller().force_scale_down({"group": "a100", "nodes": ["idle-new", "ip-10-0-0-1", "ghost"]})
    assert caught.value.fields == ("nodes",)
    assert "ip-10-0-0-1, ghost" in str(caught.value)
    assert w.cluster.calls_of("cordon") == [] and w.fleet.terminated == []
    assert w.state.lease is None  # released


def test_protected_nodes_are_not_chosen_for_a_target() -> None:
    w = fleet_world()
    w.cluster.node_obj("idle-new")["metadata"]["annotations"] = {"backlog-scaler/scale-down-disabled": "true"}
    report = w.controller().force_scale_down({"group": "a100", "target": 3})
    assert [c.name for c in report.chosen] == ["idle-old"]
    assert ("idle-new", "scale-down disabled by annotation") in [(r.target, r.reason) for r in report.refused]


# ------------------------------------------------------------------------------------------ acting


def test_target_cordons_terminates_idle_nodes_and_drains_busy_ones() -> None:
    # Given four nodes and a target of one
    w = fleet_world()
    report = w.controller().force_scale_down({"group": "a100", "target": 1, "requested_by": "alice"})
    # Then the idle nodes are terminated now (with decrement), the busy one is cordoned and evicted
    assert sorted(report.terminated) == ["idle-new", "idle-old"]
    assert all(c.kwargs["decrement"] for c in w.fleet.calls_of("terminate_instance"))
    assert report.draining == ("busy-1",)
    assert w.cluster.is_cordoned("busy-1") and w.cluster.evicted == ["research/c"]
    # And the drain is stored for the reconcile runs to finish
    intent = w.state.intents["a100"]
    assert intent.nodes == ("busy-1",) and intent.requested_by == "alice"
    assert report.intent_expires_at == NOW + timedelta(seconds=300) + timedelta(hours=1)
    assert report.desired_after == 2 and w.fleet.desired(A100) == 2
    assert report.ok
    # And the report is JSON-able
    body = report.to_json()
    assert body["ok"] and body["draining"] == ["busy-1"] and body["request"]["target"] == 1
    # And one notification tells the operators
    assert len(w.notifier.messages) == 1


def test_the_drain_is_stored_before_its_first_cordon() -> None:
    # Given a request to drain a busy node
    w = fleet_world()
    w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1"]})
    # Then the intent was written before the node was cordoned or its pod evicted
    order = [c.method for c in w.calls_in_order() if c.method in ("put_drain_intent", "cordon", "evict")]
    assert order[:3] == ["put_drain_intent", "cordon", "evict"]


@pytest.mark.parametrize(
    "error",
    [ActionError("ProvisionedThroughputExceededException"), ActionError("Item size has exceeded 400 KB")],
    ids=["throttled", "too-large"],
)
def test_a_drain_that_could_not_be_stored_does_not_start(error: ActionError) -> None:
    # Given the store refuses the drain intent
    w = fleet_world()
    w.state.fail_next("put_drain_intent", error)
    report = w.controller().force_scale_down({"group": "a100", "target": 1})
    # Then nothing is cordoned, evicted or terminated, nothing is reported draining, and it says why
    assert report.draining == () and report.terminated == () and report.intent_expires_at is None
    assert w.cluster.calls_of("cordon") == [] and w.cluster.evicted == [] and w.fleet.terminated == []
    assert not report.ok and w.state.intents == {}
    # And the next reconcile has nothing to undo
    w.clock.advance(60)
    result = w.controller().reconcile("schedule")
    assert [a for a in result.actions if a.kind in (ActionKind.UNCORDON, ActionKind.TERMINATE)] == []


def test_a_drain_update_that_could_not_be_stored_keeps_the_stored_superset() -> None:
    # Given a drain of an idle and a busy node (a PDB keeps its pod); the update after the first pass fails
    w = fleet_world()
    w.cluster.block_evictions("research/c")
    failed: list[int] = []

    def fail_the_first_update(_lease: object, intent: DrainIntent) -> None:
        if intent.revision and not failed:
            failed.append(intent.revision)
            w.state.fail_next("put_drain_intent", ActionError("throttled"))

    w.state.before("put_drain_intent", fail_the_first_update)
    report = w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1", "idle-old"]})
    # Then the idle node is gone, the busy one drains, and what the report calls draining is stored
    assert report.terminated == ("idle-old",) and report.draining == ("busy-1",)
    assert set(report.draining) <= set(w.state.intents["a100"].nodes)
    # And the next reconcile drops the gone node from the stored drain, never touching it again
    w.clock.advance(60)
    w.controller().reconcile("schedule")
    assert w.state.intents["a100"].nodes == ("busy-1",)


def test_reconcile_finishes_the_drain_started_by_a_forced_scale_down() -> None:
    w = fleet_world()
    w.cluster.block_evictions("research/c", times=1)
    report = w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1"]})
    assert report.blocked == ("research/c",)
    controller = w.controller()
    for _ in range(3):
        w.clock.advance(60)
        controller.reconcile("schedule")
    assert "busy-1" not in w.cluster.nodes and w.fleet.terminated == ["i-2"]
    assert w.state.intents == {}
    assert w.fleet.desired(A100) == 3


def test_force_with_zero_grace_deletes_pods_through_pdbs_at_once() -> None:
    w = fleet_world()
    w.cluster.block_evictions("research/c")
    report = w.controller().force_scale_down(
        {"group": "a100", "nodes": ["busy-1"], "force": True, "grace_seconds": 0}
    )
    assert w.cluster.deleted_pods == ["research/c"]
    assert [(a.kind, a.status) for a in report.actions if a.target == "research/c"] == [
        (ActionKind.DELETE_POD, ActionStatus.DONE)
    ]


def test_dry_run_request_changes_nothing_and_reports_the_plan() -> None:
    w = fleet_world()
    report = w.controller().force_scale_down({"group": "a100", "target": 1, "dry_run": True})
    assert w.write_calls() == []
    assert report.dry_run and sorted(report.terminated) == ["idle-new", "idle-old"]
    assert {a.status for a in report.actions} == {ActionStatus.DRY_RUN}
    assert (ActionKind.EVICT, "research/c") in {(a.kind, a.target) for a in report.actions}


def test_dry_run_function_cannot_be_made_live_by_a_request() -> None:
    w = fleet_world()
    report = w.controller(dry_run=True).force_scale_down({"group": "a100", "target": 1, "dry_run": False})
    assert report.dry_run and w.write_calls() == []


def test_pending_launches_are_cancelled_down_to_the_target() -> None:
    # Given desired 6 with 4 instances (2 still launching) and a target of 4
    w = fleet_world()
    w.fleet.set_desired_capacity(w.fleet.groups[A100], 6)
    report = w.controller().force_scale_down({"group": "a100", "target": 4})
    assert report.chosen == () and report.desired_after == 4
    assert w.fleet.desired(A100) == 4


def test_a_second_request_adds_to_the_drain_in_progress() -> None:
    w = fleet_world()
    w.cluster.block_evictions("research/c")
    w.cluster.block_evictions("research/a")
    w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1"]})
    report = w.controller().force_scale_down({"group": "a100", "nodes": ["busy-2"]})
    assert w.state.intents["a100"].nodes == ("busy-1", "busy-2")
    assert report.draining == ("busy-1", "busy-2")


def test_target_counts_nodes_already_draining() -> None:
    w = fleet_world()
    w.cluster.block_evictions("research/c")
    w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1"]})
    report = w.controller().force_scale_down({"group": "a100", "target": 2})
    assert [c.name for c in report.chosen] == ["idle-new"]


def test_lease_held_by_a_long_run_is_waited_for_then_reported() -> None:
    w = fleet_world()
    w.state.acquire_lease("reconcile", NOW, 3600)
    with pytest.raises(LeaseHeldError):
        w.controller().force_scale_down({"group": "a100", "target": 0})
    assert len(w.clock.slept) == 4 and w.cluster.calls_of("cordon") == []


def test_lease_freed_while_waiting_is_taken() -> None:
    w = fleet_world()
    w.state.acquire_lease("reconcile", NOW, 3)
    report = w.controller().force_scale_down({"group": "a100", "target": 3})
    assert report.terminated == ("idle-new",)


def test_existing_hold_of_an_interrupted_node_is_kept() -> None:
    w = fleet_world()
    w.state.intents["a100"] = DrainIntent(
        "a100", ("busy-2",), NOW, NOW + timedelta(minutes=10), 0, False, "spot-interruption"
    )
    w.cluster.block_evictions("research/c")
    w.controller().force_scale_down({"group": "a100", "nodes": ["busy-1"]})
    intent = w.state.intents["a100"]
    assert intent.nodes == ("busy-1", "busy-2") and intent.requested_by == "operator"


# ------------------------------------------------------------------------------------------ bounds


def big_group(instances: int, *, max_size: int = 5_000) -> AsgState:
    ids = [f"i-{n:017x}" for n in range(instances)]
    return asg_from_json(asg(A100, desired=instances, instances=ids, max_size=max_size))


@pytest.mark.parametrize("target", [2, 3])
def test_a_target_that_removes_nothing_says_so(target: int) -> None:
    # Given a group of 2 instances, desired 2 (a replayed request, or one above the group's size)
    group = big_group(2)
    # When a target at or above both is chosen for
    choice = choose(
        ForceScaleDownRequest(group="a100", target=target), group, candidates_of(group, [], [], None, now=NOW)
    )
    # Then nothing is chosen and the one refusal, for the group, says there is nothing to do
    assert choice.chosen == ()
    assert [(r.target, r.reason.split(":")[0]) for r in choice.refused] == [("a100", "nothing to do")]


def test_a_target_that_only_cancels_launches_is_not_nothing_to_do() -> None:
    # Given desired 3 with 2 instances (one still launching) and a target of 2
    group = replace(big_group(2), desired=3)
    # When it is chosen for, Then no node is chosen and no refusal says "nothing to do": the launch
    # not made yet is cancelled
    choice = choose(
        ForceScaleDownRequest(group="a100", target=2), group, candidates_of(group, [], [], None, now=NOW)
    )
    assert choice.chosen == () and choice.refused == ()


def test_target_above_the_groups_max_size_is_refused_by_the_choice() -> None:
    group = big_group(2, max_size=4)
    with pytest.raises(InvalidRequestError, match="above the max size 4") as caught:
        choose(
            ForceScaleDownRequest(group="a100", target=5), group, candidates_of(group, [], [], None, now=NOW)
        )
    assert caught.value.fields == ("target",)


def test_a_target_drains_at_most_the_bound_with_the_drain_in_progress() -> None:
    # Given a group of 1,200 instances of which 300 are draining already
    group = big_group(1_200)
    candidates = candidates_of(group, [], [], None, now=NOW)
    draining = frozenset(c.name for c in candidates[:300])
    # When a target of 0 is chosen for
    choice = choose(ForceScaleDownRequest(group="a100", target=0), group, candidates, draining=draining)
    # Then the drain never holds more than MAX_DRAIN_NODES, and the refusal says why
    assert len(choice.chosen) == MAX_DRAIN_NODES - 300
    assert any(f"at most {MAX_DRAIN_NODES} nodes drain at once" in r.reason for r in choice.refused)


def test_named_nodes_beyond_the_bound_with_the_drain_in_progress_are_refused() -> None:
    group = big_group(1)
    request = ForceScaleDownRequest(group="a100", nodes=tuple(f"n{i}" for i in range(600)))
    draining = frozenset(f"d{i}" for i in range(500))
    with pytest.raises(InvalidRequestError, match="1100 nodes would drain") as caught:
        choose(request, group, candidates_of(group, [], [], None, now=NOW), draining=draining)
    assert caught.value.fields == ("nodes",)


def test_drain_intent_refuses_what_would_not_fit_in_one_item() -> None:
    # Too many nodes is judged where the intent would be written (an older version stored more)
    big = DrainIntent("a100", tuple(f"n{i}" for i in range(MAX_INTENT_NODES + 1)), NOW, NOW)
    assert big.oversize == f"{MAX_INTENT_NODES + 1} nodes, at most {MAX_INTENT_NODES} fit in one stored item"
    assert DrainIntent("a100", tuple(f"n{i}" for i in range(MAX_INTENT_NODES)), NOW, NOW).oversize is None
    with pytest.raises(ValueError, match="node name"):
        DrainIntent("a100", ("n" * (MAX_NODE_NAME_LENGTH + 1),), NOW, NOW)
    with pytest.raises(ValueError, match="requested_by"):
        DrainIntent("a100", (), NOW, NOW, requested_by="x" * (MAX_REQUESTED_BY_LENGTH + 1))


def dynamodb_item_size(item: dict[str, Any]) -> int:
    """An upper bound of an item's size by DynamoDB's rules: names plus values; lists cost 3 bytes
    plus 1 per element; numbers at most one byte per digit plus one; booleans 1."""

    def value_size(value: dict[str, Any]) -> int:
        ((kind, inner),) = value.items()
        if kind == "S":
            return len(inner.encode())
        if kind == "N":
            return len(inner) + 1
        if kind == "BOOL":
            return 1
        if kind == "L":
            return 3 + sum(1 + value_size(v) for v in inner)
        raise AssertionError(f"unexpected attribute type {kind}")

    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


@pytest.mark.usefixtures("fake_aws")
def test_worst_case_drain_intent_fits_in_one_dynamodb_item() -> None:
    # Given the largest intent the bounds allow: the longest group name, MAX_INTENT_NODES names of
    # 253 characters, each with terms of its own (a deletion time to the microsecond), and a
    # requester of 256 four-byte characters
    from shared.adapters.aws.state_store import DynamoDbStateStore, create_table

    group = "g" * MAX_GROUP_NAME_LENGTH
    nodes = tuple(f"{n:05d}".ljust(MAX_NODE_NAME_LENGTH, "n") for n in range(MAX_INTENT_NODES))
    intent = DrainIntent(
        group, nodes, NOW, NOW + timedelta(days=1), MAX_GRACE_SECONDS, True, "\U0001f600" * 256
    ).with_terms(
        {
            n: NodeDrain(delete_after=NOW + timedelta(seconds=i, microseconds=123457))
            for i, n in enumerate(nodes)
        }
    )
    assert len(intent.terms) == MAX_INTENT_NODES
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "state")
        store = DynamoDbStateStore("state", "c" * 63, PolicyConfig(), client, clock=lambda: NOW)
        # When it is stored
        stored = store.put_drain_intent(store.acquire_lease("run", NOW, 60), intent)
        # Then it is read back whole, and its item is within DynamoDB's 400 KB with room to spare
        assert stored == replace(intent, revision=1)
        assert store.drain_intents() == (stored,)
        (item,) = [i for i in client.scan(TableName="state")["Items"] if i["sk"]["S"].startswith("DRAIN#")]
    size = dynamodb_item_size(item)
    assert 375_000 < size < 390_000 < 400 * 1000


def test_each_node_of_a_merged_drain_keeps_the_terms_of_its_own_request() -> None:
    # Given an operator's drain of n1, forced after an hour, and a later request for n2 without force
    first = DrainIntent("a100", ("n1",), NOW, NOW + timedelta(hours=2), 3600, True, "alice")
    later = NOW + timedelta(minutes=1)
    second = DrainIntent("a100", ("n2",), later, later + timedelta(hours=1), 0, False, "bob")
    # When the second joins the drain in progress
    merged = merge_intents(first, second)
    # Then n1 is still deleted only after its own hour, and n2's pods are never deleted (no force)
    assert merged.nodes == ("n1", "n2")
    assert merged.terms_of("n1") == NodeDrain(delete_after=NOW + timedelta(hours=1))
    assert merged.terms_of("n2") == NodeDrain(delete_after=None)
    # And the drain in progress is reported as it was requested
    assert (merged.requested_by, merged.force, merged.grace_seconds) == ("alice", True, 3600)
    # And the other order gives each node the same terms
    reverse = merge_intents(second, first)
    assert [reverse.terms_of(n) for n in reverse.nodes] == [merged.terms_of(n) for n in merged.nodes]


def test_a_hold_neither_shortens_nor_forces_a_drain_and_an_operator_turns_a_hold_into_a_drain() -> None:
    # Given an operator's drain of n1 (no force) and a spot-interruption hold of n1 and n2 a minute later
    drain = DrainIntent("a100", ("n1",), NOW, NOW + timedelta(hours=1), 600, False, "alice")
    at = NOW + timedelta(minutes=1)
    hold = DrainIntent(
        "a100", ("n1", "n2"), at, at + timedelta(minutes=10), 0, requested_by=INTERRUPTION_REQUESTER
    )
    # When the hold joins the drain: n1 is still drained as asked, n2 only held
    merged = merge_intents(drain, hold)
    assert merged.terms_of("n1") == NodeDrain(hold_only=False, delete_after=None)
    assert merged.held == ("n2",)
    # When an operator then forces n2: it is drained, forced from its own request on
    forced = DrainIntent("a100", ("n2",), at, at + timedelta(hours=1), 0, True, "bob")
    assert merge_intents(merged, forced).terms_of("n2") == NodeDrain(delete_after=at)
    # And a hold that comes first is reported as the operator's drain once one joins it
    assert merge_intents(hold, drain).requested_by == "alice"
    assert merge_intents(hold, drain).held == ("n2",)


def test_an_operator_naming_a_node_held_for_a_spot_warning_drains_it() -> None:
    # Given busy-2 held (cordoned, nothing evicted) for a spot interruption warning
    w = fleet_world()
    w.state.intents["a100"] = DrainIntent(
        "a100", ("busy-2",), NOW, NOW + timedelta(minutes=10), 0, False, INTERRUPTION_REQUESTER
    )
    # When an operator names it in a forced scale-down
    report = w.controller().force_scale_down({"group": "a100", "nodes": ["busy-2"], "grace_seconds": 0})
    # Then it is chosen and drained (its job pods evicted), and stored as the operator's drain
    assert [c.name for c in report.chosen] == ["busy-2"]
    assert sorted(w.cluster.evicted) == ["research/a", "research/b"]
    intent = w.state.intents["a100"]
    assert intent.held == () and intent.nodes == ("busy-2",) and intent.requested_by != INTERRUPTION_REQUESTER


def test_a_target_counts_a_held_node_as_leaving() -> None:
    # Given busy-2 held for a spot warning (EC2 takes it within two minutes)
    w = fleet_world()
    w.state.intents["a100"] = DrainIntent(
        "a100", ("busy-2",), NOW, NOW + timedelta(minutes=10), 0, False, INTERRUPTION_REQUESTER
    )
    # When an operator asks for 2 nodes: one more leaves besides it, not two
    report = w.controller().force_scale_down({"group": "a100", "target": 2})
    assert "busy-2" not in [c.name for c in report.chosen]
    assert len(report.chosen) == 1
    # And the held node stays held
    assert w.state.intents["a100"].held == ("busy-2",)


@pytest.mark.usefixtures("fake_aws")
def test_the_terms_of_each_node_are_stored_and_read_back() -> None:
    # Given a merged drain: n1 forced after its grace, n2 without force, n3 only held
    from shared.adapters.aws.state_store import DynamoDbStateStore, create_table

    drain = DrainIntent("a100", ("n1",), NOW, NOW + timedelta(hours=2), 90, True, "alice")
    second = DrainIntent("a100", ("n2",), NOW, NOW + timedelta(hours=1), 0, False, "bob")
    hold = DrainIntent("a100", ("n3",), NOW, NOW, 0, requested_by=INTERRUPTION_REQUESTER)
    intent = merge_intents(merge_intents(drain, second), hold)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "state")
        store = DynamoDbStateStore("state", "c1", PolicyConfig(), client, clock=lambda: NOW)
        # When it is stored and read back
        stored = store.put_drain_intent(store.acquire_lease("run", NOW, 60), intent)
        (read,) = store.drain_intents()
    # Then every node keeps its terms
    assert read == stored == replace(intent, revision=1)
    assert [read.terms_of(n) for n in read.nodes] == [
        NodeDrain(delete_after=NOW + timedelta(seconds=90)),
        NodeDrain(),
        NodeDrain(hold_only=True),
    ]


@pytest.mark.usefixtures("fake_aws")
def test_an_intent_a_previous_version_stored_with_1500_nodes_loads_and_is_not_grown() -> None:
    # Given a drain intent item as the previous version wrote it: 1,500 nodes (its bound), no terms
    from shared.adapters.aws.state_store import PK, SK, DynamoDbStateStore, _epoch, create_table

    nodes = [f"ip-10-0-{i // 250}-{i % 250}.us-west-2.compute.internal" for i in range(1500)]
    item = {
        PK: {"S": "CLUSTER#c1"},
        SK: {"S": "DRAIN#a100"},
        "group": {"S": "a100"},
        "nodes": {"L": [{"S": n} for n in nodes]},
        "requested_at": {"N": _epoch(NOW)},
        "expires_at": {"N": _epoch(NOW + timedelta(hours=1))},
        "grace_seconds": {"N": "60"},
        "force": {"BOOL": False},
        "requested_by": {"S": "alice"},
        "revision": {"N": "3"},
    }
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "state")
        client.put_item(TableName="state", Item=item)
        store = DynamoDbStateStore("state", "c1", PolicyConfig(), client, clock=lambda: NOW)
        # When it is read: it loads (its drain goes on; nodes leave it as they finish)
        (intent,) = store.drain_intents()
        assert intent.nodes == tuple(nodes) and intent.revision == 3
        # Then a hold that would grow it past the bound is refused by name, and the item is unchanged
        hold = DrainIntent("a100", ("n-new",), NOW, NOW, requested_by=INTERRUPTION_REQUESTER)
        with pytest.raises(ActionError, match="1501 nodes, at most 1400"):
            store.put_drain_intent(store.acquire_lease("run", NOW, 60), merge_intents(intent, hold))
        assert store.drain_intents() == (intent,)


def test_a_spot_hold_merged_into_an_operator_drain_keeps_the_drain_going() -> None:
    # Given an operator's drain of n1 and a spot-interruption hold of n2 on the same group
    drain = DrainIntent("a100", ("n1",), NOW, NOW + timedelta(hours=1), requested_by="alice")
    hold = DrainIntent("a100", ("n2",), NOW, NOW + timedelta(minutes=10), requested_by=INTERRUPTION_REQUESTER)
    # When they merge, in either order
    merged = [merge_intents(drain, hold), merge_intents(hold, drain)]
    # Then both nodes are kept and the operator stays the requester (a hold alone only cordons)
    assert {m.nodes for m in merged} == {("n1", "n2")}
    assert {m.requested_by for m in merged} == {"alice"}
