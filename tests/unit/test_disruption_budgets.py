"""Which PodDisruptionBudget a move's evictions would run dry (shared.domain.safety.overdrawn_budget):
the Eviction API's rule (pkg/registry/core/pod/storage/eviction.go), on plain data."""

from __future__ import annotations

from shared.domain.labels import LabelSelector, Requirement
from shared.domain.model import DisruptionBudget, Pod
from shared.domain.safety import draws_on, overdrawn_budget
from tests.builders import NOW

GANG = {"train-job": "t1"}
TRAIN_JOB = LabelSelector((("train-job", "t1"),))


def member(name: str, namespace: str = "research", labels: dict[str, str] | None = None) -> Pod:
    return Pod(namespace, name, phase="Running", node_name="small", labels=GANG if labels is None else labels)


def budget(
    allowed: int, selector: LabelSelector | None = TRAIN_JOB, namespace: str = "research", name: str = "train"
) -> DisruptionBudget:
    return DisruptionBudget(namespace, name, selector, allowed)


def test_two_members_under_one_budget_allowing_one_are_refused_and_the_budget_named() -> None:
    # Given two gang members under one budget that allows one disruption
    pods = [member("a-member"), member("b-member")]
    # When the move is judged, Then it is refused: the second eviction would find the budget used up
    assert overdrawn_budget(pods, [budget(1)]) == (
        "PodDisruptionBudget research/train allows 1 disruption now and the move would evict 2 of its"
        " pods (research/a-member, research/b-member)"
    )


def test_two_members_under_one_budget_allowing_two_may_move() -> None:
    assert overdrawn_budget([member("a-member"), member("b-member")], [budget(2)]) is None


def test_a_budget_of_another_namespace_is_ignored() -> None:
    # Given a budget with the same selector, but in another namespace, that allows nothing
    pods = [member("a-member"), member("b-member")]
    # When / Then it does not judge the pods' evictions
    assert overdrawn_budget(pods, [budget(0, namespace="other")]) is None


def test_an_empty_selector_selects_every_pod_of_its_namespace() -> None:
    # Given a budget with the empty selector ({}) allowing one disruption, and pods of any labels
    pods = [member("a-member", labels={}), member("b-member", labels={"app": "x"})]
    everything = budget(1, LabelSelector())
    # When / Then it judges both (policy/v1), but no pod of another namespace
    assert overdrawn_budget(pods, [everything]) is not None
    assert draws_on(everything, pods[0]) and draws_on(everything, pods[1])
    assert not draws_on(everything, member("elsewhere", namespace="other"))


def test_a_null_selector_selects_no_pod() -> None:
    # Given a budget without a selector that allows nothing
    pods = [member("a-member"), member("b-member", labels={})]
    # When / Then it judges no eviction
    assert overdrawn_budget(pods, [budget(0, None)]) is None


def test_pods_under_different_budgets_each_allowing_one_may_move() -> None:
    # Given two pods, each under a budget of its own that allows one disruption
    pods = [member("a-member", labels={"shard": "a"}), member("b-member", labels={"shard": "b"})]
    budgets = [
        budget(1, LabelSelector((), (Requirement("shard", "In", ("a",)),)), name="shard-a"),
        budget(1, LabelSelector((("shard", "b"),)), name="shard-b"),
    ]
    # When / Then each eviction uses its own budget's one disruption
    assert overdrawn_budget(pods, budgets) is None


def test_the_first_overdrawn_budget_by_namespace_and_name_is_named() -> None:
    # Given two budgets over the same pods, both overdrawn, listed out of order
    pods = [member("a-member"), member("b-member")]
    # When / Then the reason names the first by namespace and name: the same reason every run
    reason = overdrawn_budget(pods, [budget(0, name="zeta"), budget(1, name="alpha")])
    assert reason is not None and reason.startswith("PodDisruptionBudget research/alpha allows 1 disruption ")


def test_pods_the_eviction_api_deletes_without_a_budget_draw_on_none() -> None:
    # Given a budget allowing nothing over a Pending, a Succeeded, a Failed and a terminating pod
    nothing = budget(0)
    pods = [
        Pod("research", "pending", phase="Pending", labels=GANG),
        Pod("research", "done", phase="Succeeded", labels=GANG),
        Pod("research", "failed", phase="Failed", labels=GANG),
        Pod("research", "leaving", phase="Running", labels=GANG, deleted_at=NOW),
    ]
    # When / Then none of their evictions asks it (eviction.go deletes them outright)
    assert overdrawn_budget(pods, [nothing]) is None
    # And a running member still does
    assert overdrawn_budget([*pods, member("a-member")], [nothing]) is not None
