"""The re-check before a repair termination (`safety.termination_blocker`, `safety.recovered`): the
fresh read must still show some of the health evidence the plan replaced the node for."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from shared.config import RepairConfig
from shared.domain.model import Node, NodeCondition
from shared.domain.plan import HealthEvidence, Termination
from shared.domain.resources import Resources
from shared.domain.safety import recovered, termination_blocker
from shared.formats.kubernetes import node_from_json
from shared.planner.health import evidence, node_health
from tests.builders import NOW, node

EIGHT = Resources.of({"nvidia.com/gpu": 8})
SEVEN = Resources.of({"nvidia.com/gpu": 7})


def fresh(*, accelerated: str | None = "False", allocatable: Resources = SEVEN) -> Node:
    """n1 as the fresh re-read shows it: its AcceleratedHardwareReady status and GPUs allocatable."""
    base = node_from_json(node("n1", "i-1"))
    conditions = tuple(c for c in base.conditions)
    if accelerated is not None:
        conditions += (NodeCondition("AcceleratedHardwareReady", accelerated, NOW - timedelta(hours=1)),)
    return replace(base, conditions=conditions, allocatable=allocatable, capacity=EIGHT)


REPAIR = Termination(
    "n1",
    "i-1",
    "a100",
    "broken",
    cause="repair",
    evidence=HealthEvidence((("AcceleratedHardwareReady", "False"),), lost_devices=True),
)


def blocker(termination: Termination, node_now: Node) -> str | None:
    return termination_blocker(termination, None, NOW, None, node_now, ())


def test_the_evidence_is_what_the_planner_judged_on_the_node() -> None:
    # Given a node with AcceleratedHardwareReady=False for an hour and a GPU dropped
    broken = fresh()
    health = node_health(broken, None, None, RepairConfig(), {}, NOW)
    # Then the evidence of its signals is the condition and the lost devices
    assert evidence(broken, health.signals) == REPAIR.evidence


@pytest.mark.parametrize(
    ("accelerated", "allocatable"),
    [("False", SEVEN), ("False", EIGHT), ("True", SEVEN), ("Unknown", SEVEN)],
    ids=["all-stands", "gpus-back", "condition-cleared", "condition-unknown"],
)
def test_a_node_still_showing_some_evidence_is_replaced(accelerated: str, allocatable: Resources) -> None:
    # One standing signal is enough: the node is still broken
    assert blocker(REPAIR, fresh(accelerated=accelerated, allocatable=allocatable)) is None


def test_a_node_that_recovered_is_not_replaced() -> None:
    # Given the fresh read shows the condition True again and all 8 GPUs allocatable
    healthy = fresh(accelerated="True", allocatable=EIGHT)
    # Then the repair termination is blocked, saying what changed
    assert blocker(REPAIR, healthy) == (
        "it recovered since the plan: AcceleratedHardwareReady=True, its devices allocatable again"
    )
    # and a condition gone from the node counts as cleared too
    assert "AcceleratedHardwareReady=absent" in (
        recovered(REPAIR.evidence, fresh(accelerated=None, allocatable=EIGHT)) or ""
    )


def test_without_evidence_on_the_node_nothing_is_rechecked() -> None:
    # Rotation, or a repair for the ASG's or EC2's word (not on the Node): emptiness decides alone
    healthy = fresh(accelerated="True", allocatable=EIGHT)
    assert blocker(replace(REPAIR, evidence=HealthEvidence()), healthy) is None
    assert blocker(replace(REPAIR, cause="rotation", evidence=HealthEvidence()), healthy) is None
