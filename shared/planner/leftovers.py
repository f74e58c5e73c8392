"""Node objects left behind by instances that are gone.

The scaler deletes a terminated instance's Node right after the termination so the scheduler stops
counting it. When the termination's response was lost (the instance went, the call "failed"), that
delete never happened: the next run finds the Node here and removes it. The rule mirrors the
cloud-node-lifecycle controller of the Kubernetes cloud provider (k8s.io/cloud-provider,
controllers/nodelifecycle): a Node that is NotReady and whose instance the cloud no longer runs is
deleted. Here "no longer runs" is read from the groups' ASGs, so the rule only acts on nodes it can
vouch for: cordoned by the scaler (only its groups' nodes carry that annotation), NotReady (the kubelet
stopped), and whose instance is in no group or leaving one.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.domain.model import AsgState, Node
from shared.domain.plan import NodeAction

# An instance in these Auto Scaling lifecycle states is on its way out of the group for good.
_LEAVING_PREFIX = "Terminat"  # Terminating, Terminating:Wait, Terminating:Proceed, Terminated


def leftover_nodes(
    nodes: Iterable[Node], asgs: Iterable[AsgState], groups: dict[str, str]
) -> tuple[NodeAction, ...]:
    """Nodes of instances that are gone, to delete; sorted by name.

    `asgs` must be every configured group's ASG (the caller passes none when one could not be read:
    an instance missing from a group that was not read is not gone). `groups` maps ASG name to group.
    """
    # Readiness first: a field, where cordoned_by_scaler is a property call (every node of every run).
    suspects = [n for n in nodes if not n.ready and n.cordoned_by_scaler and n.instance_id]
    if not suspects:
        return ()  # most runs: no NotReady node the scaler cordoned, no instance to look up
    owner: dict[str, str] = {}
    leaving: set[str] = set()
    for asg in asgs:
        for instance in asg.instances:
            owner[instance.instance_id] = groups.get(asg.name, "")
            if instance.lifecycle_state.startswith(_LEAVING_PREFIX):
                leaving.add(instance.instance_id)
    out = []
    for node in suspects:
        if node.instance_id in owner and node.instance_id not in leaving:
            continue  # its instance is still a member of a group: NotReady alone is repair, not this
        state = "terminating" if node.instance_id in leaving else "no longer in any group"
        reason = f"NotReady and its instance {node.instance_id} is {state}: the Node was left behind"
        out.append(NodeAction(node.name, owner.get(node.instance_id or "", ""), reason))
    return tuple(sorted(out, key=lambda a: a.node))
