"""Node objects of instances that are gone (a termination whose response was lost): which to delete."""

from __future__ import annotations

from shared.formats.aws import asg_from_json
from shared.formats.kubernetes import node_from_json
from shared.planner.leftovers import leftover_nodes
from tests.builders import NOW, asg, iso, node

CORDONED = {"backlog-scaler/cordoned-at": iso(NOW)}
GROUPS = {"research-a100": "a100"}


def test_only_notready_scaler_cordoned_nodes_of_gone_or_terminating_instances_are_left_over() -> None:
    # Given nodes of a group whose i-2 is terminating and whose i-9 is gone
    group = asg_from_json(
        asg("research-a100", desired=2, instances=["i-1", "i-2"], lifecycle={"i-2": "Terminating:Wait"})
    )
    nodes = [
        node_from_json(node("kept-live", "i-1", ready=False, unschedulable=True, annotations=CORDONED)),
        node_from_json(node("terminating", "i-2", ready=False, unschedulable=True, annotations=CORDONED)),
        node_from_json(node("gone", "i-9", ready=False, unschedulable=True, annotations=CORDONED)),
        node_from_json(node("gone-but-ready", "i-8", unschedulable=True, annotations=CORDONED)),
        node_from_json(node("gone-not-ours", "i-7", ready=False, unschedulable=True)),
    ]
    # When the leftovers are listed
    actions = leftover_nodes(nodes, [group], GROUPS)
    # Then only the NotReady nodes the scaler cordoned, whose instance is leaving or gone, are deleted
    assert [(a.node, a.group) for a in actions] == [("gone", ""), ("terminating", "a100")]
    assert "i-2 is terminating" in actions[1].reason and "no longer in any group" in actions[0].reason
