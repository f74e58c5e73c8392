"""What the planner remembers across runs cannot go stale (issue 25): a group's template is rebuilt
as soon as an input it reads changes, and values derived from a frozen object are derived anew for
any other object, however equal."""

from __future__ import annotations

from dataclasses import replace

from shared.domain.model import Taint, TaintEffect
from shared.domain.resources import Resources
from shared.planner.memo import identity_memo
from shared.planner.template import build_template
from tests.builders import asg, node, snapshot
from tests.unit.test_planner_template import P4D, P4D_LABELS, typed_config


def test_a_template_follows_a_registered_node_that_changed() -> None:
    # Given a group known by its instance type, whose only node advertises 8 GPUs and 95 CPUs
    snap = snapshot([], [node("n1", "i-1", labels=P4D_LABELS)], [asg("research-a100", desired=1)])
    group, config, types = snap.asgs["research-a100"], typed_config(), {"p4d.24xlarge": P4D}
    first = build_template(config, "a100", group, list(snap.nodes), types, ())
    # When the next run reads the same node advertising fewer CPUs (same name, same instance)
    smaller = replace(snap.nodes[0], allocatable=snap.nodes[0].allocatable - Resources.of({"cpu": 15000}))
    second = build_template(config, "a100", group, [smaller], types, ())
    # Then the template is the smaller node's, not the one remembered
    assert first.allocatable is not None and second.allocatable is not None
    assert first.allocatable.get("cpu") == 95000
    assert second.allocatable.get("cpu") == 80000


def test_a_template_of_the_same_inputs_is_the_one_built_before() -> None:
    # Given a group's template built from its registered node
    snap = snapshot([], [node("n1", "i-1", labels=P4D_LABELS)], [asg("research-a100", desired=1)])
    group, config, types = snap.asgs["research-a100"], typed_config(), {"p4d.24xlarge": P4D}
    first = build_template(config, "a100", group, list(snap.nodes), types, ())
    # When the next run reads equal inputs (a new list of the same node, a resized ASG: sizes are
    # not what a template reads)
    second = build_template(config, "a100", replace(group, desired=3), list(snap.nodes), dict(types), ())
    # Then the template is not built again
    assert second is first


def test_an_identity_memo_derives_anew_for_an_equal_but_other_object() -> None:
    # Given a memo that counts its derivations
    calls: list[tuple[Taint, ...]] = []

    def derive(taints: tuple[Taint, ...]) -> int:
        calls.append(taints)
        return len(taints)

    memo = identity_memo(derive, limit=2)
    taints = (Taint("a", "", TaintEffect.NO_SCHEDULE),)
    # When it is asked twice of one object, then of an equal copy, then of more objects than its limit
    assert memo(taints) == 1 and memo(taints) == 1
    copy = tuple(list(taints))
    assert memo(copy) == 1
    assert memo(()) == 0 and memo(taints) == 1
    # Then it derived once per distinct object, and again once its limit made it start over
    assert len(calls) == 4
