"""The safety rules, written once (shared.domain.safety), and every caller agreeing with them."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from shared.config import PolicyConfig
from shared.domain.model import Node
from shared.domain.safety import Backoff, busy_pods, is_counted, next_backoff, protection, removable_above_min
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.local.sim.engine import at, epoch_seconds
from shared.planner.force_scale_down import candidates_of
from tests.builders import NOW, asg, node, pod
from tests.fakes.memory import MemoryStateStore

POLICY = PolicyConfig(backoff_initial_seconds=300, backoff_max_seconds=1800, backoff_reset_seconds=3600)
MIRROR = {"kubernetes.io/config.mirror": "abc"}


def test_backoff_doubles_up_to_its_cap() -> None:
    # Given failures a minute apart / When each is counted / Then 5, 10, 20, 30, 30 minutes
    backoff, durations = Backoff(), []
    for minute in range(5):
        failed_at = NOW + timedelta(minutes=minute)
        backoff = next_backoff(backoff, failed_at, POLICY)
        assert backoff.until is not None
        durations.append((backoff.until - failed_at).total_seconds())
    assert durations == [300, 600, 1200, 1800, 1800]


def test_a_failure_exactly_at_the_reset_boundary_still_doubles_and_one_after_it_starts_over() -> None:
    # cluster-autoscaler drops backoff data only once lastFailedExecution + reset is before now
    first = next_backoff(Backoff(), NOW, POLICY)
    at_boundary = next_backoff(first, NOW + timedelta(seconds=3600), POLICY)
    past_boundary = next_backoff(first, NOW + timedelta(seconds=3601), POLICY)
    assert (at_boundary.failures, past_boundary.failures) == (2, 1)


def test_the_same_failure_again_is_counted_once() -> None:
    first = next_backoff(Backoff(), NOW, POLICY)
    assert is_counted(first, NOW) and is_counted(first, NOW - timedelta(seconds=1))
    assert next_backoff(first, NOW, POLICY) == first


@pytest.mark.usefixtures("fake_aws")
def test_the_dynamodb_store_the_fake_and_the_simulator_back_off_alike() -> None:
    # Given one sequence of failures, including the reset boundary and a repeat
    offsets = [0, 60, 60, 3660, 7261, 7300]
    with mock_aws():
        from shared.adapters.aws.state_store import DynamoDbStateStore, create_table

        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "state")
        dynamodb = DynamoDbStateStore("state", "c", POLICY, client, clock=lambda: NOW)
        memory = MemoryStateStore("c", POLICY)
        # When each records them
        stored = [dynamodb.record_capacity_failure(None, "g", NOW + timedelta(seconds=s)) for s in offsets]
        faked = [memory.record_capacity_failure(None, "g", NOW + timedelta(seconds=s)) for s in offsets]
    # Then both answer what the rule answers (the simulator calls the rule on its epoch seconds)
    backoff, expected = Backoff(), []
    for offset in offsets:
        backoff = next_backoff(backoff, at(epoch_seconds(NOW) + offset), POLICY)
        expected.append(backoff.until)
    assert stored == faked == expected


def test_mirror_and_daemonset_pods_never_make_a_node_busy() -> None:
    pods = [
        pod_from_json(pod("static", gpus=0, node="n1", owner_kind="Node", annotations=MIRROR)),
        pod_from_json(pod("plugin", gpus=0, node="n1", owner_kind="DaemonSet")),
        pod_from_json(pod("low", node="n1", priority=-100)),
    ]
    assert busy_pods(pods, -10, NOW) == []
    assert [p.name for p in busy_pods(pods, None, NOW)] == ["low"]


def test_protection_is_the_same_for_the_planner_the_revalidation_and_the_forced_choice() -> None:
    # Given a node running a do-not-disrupt DaemonSet pod, and one annotated scale-down-disabled
    guarded = pod_from_json(
        pod(
            "agent",
            gpus=0,
            node="n1",
            owner_kind="DaemonSet",
            annotations={"karpenter.sh/do-not-disrupt": "true"},
        )
    )
    disabled: Node = node_from_json(
        node("n2", "i-2", annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})
    )
    n1 = node_from_json(node("n1", "i-1"))
    # Then the rule and the forced scale-down's candidates say the same
    assert protection(n1, [guarded], None) == "runs a pod annotated karpenter.sh/do-not-disrupt"
    assert protection(disabled, [], None) == "scale-down disabled by annotation"
    group = asg("research-a100", desired=2, instances=["i-1", "i-2"])
    from shared.formats.aws import asg_from_json

    candidates = candidates_of(asg_from_json(group), [n1, disabled], [guarded], -10, now=NOW)
    assert [c.protection for c in candidates] == [
        protection(n1, [guarded], None),
        protection(disabled, [], None),
    ]


def test_removable_above_min_never_takes_a_group_below_its_min_size() -> None:
    # Given groups counted by desired, nodes or live instances, above, at and below their min size
    # Then only what is above min may go, and never a negative count
    assert [removable_above_min(count, 2) for count in (5, 2, 1, 0)] == [3, 0, 0, 0]
