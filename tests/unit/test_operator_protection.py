"""Operators' word on nodes: instance scale-in protection and Karpenter's node-level do-not-disrupt.

- AWS: "Use instance scale-in protection" (Auto Scaling user guide): ProtectedFromScaleIn stops the
  group's own scale-in, not TerminateInstanceInAutoScalingGroup, so the scaler honours it itself. It
  counts only where the operator set it on one instance (it differs from the group's
  NewInstancesProtectedFromScaleIn); a group that protects every new instance says nothing about one.
- Karpenter: `karpenter.sh/do-not-disrupt: "true"` on a Node blocks its voluntary disruption, as on a pod.
"""

from __future__ import annotations

from datetime import timedelta

from shared.controller.force_scale_down import ForceScaleDownRequest
from shared.domain.model import NodeState, ScalerState
from shared.domain.plan import Termination
from shared.domain.safety import protection, scale_in_protection, termination_blocker
from shared.formats.aws import asg_from_json
from shared.formats.kubernetes import node_from_json
from shared.planner import plan
from shared.planner.force_scale_down import candidates_of, choose
from tests.builders import NOW, asg, config, iso, node, snapshot
from tests.fakes.memory import FakeCluster, FakeFleet, FakeWorld

A100 = "research-a100"
CORDONED = {"backlog-scaler/cordoned-at": iso(NOW - timedelta(minutes=2))}
PROTECTED = "instance i-1 is protected from scale-in"


def idle(*names: str) -> ScalerState:
    return ScalerState(nodes={n: NodeState(idle_since=NOW - timedelta(minutes=30)) for n in names})


def test_the_describe_output_says_which_instances_the_operator_protected() -> None:
    # Given DescribeAutoScalingGroups output with one protected instance, in a group not protecting new ones
    group = asg_from_json(asg(A100, desired=2, instances=["i-1", "i-2"], protected=["i-1"]))
    # Then the instance's flag and the group's default are read, and only i-1 is protected
    assert [i.protected_from_scale_in for i in group.instances] == [True, False]
    assert group.new_instances_protected is False
    assert scale_in_protection("i-1", group) == PROTECTED
    assert scale_in_protection("i-2", group) is None


def test_an_idle_node_on_an_instance_the_operator_protected_is_never_cordoned() -> None:
    # Given two idle nodes; the operator protected the first one's instance
    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    group = asg(A100, desired=2, instances=["i-1", "i-2"], protected=["i-1"])
    cfg = config(policy={"max_scale_in_fraction": 1.0})
    # When planned
    result = plan(snapshot([], nodes, [group], idle("n1", "n2")), cfg, NOW)
    # Then only the unprotected node is cordoned
    assert [a.node for a in result.cordon] == ["n2"]


def test_a_cordoned_node_whose_instance_became_protected_is_uncordoned_not_terminated() -> None:
    nodes = [node("n1", "i-1", unschedulable=True, annotations=CORDONED)]
    group = asg(A100, desired=1, instances=["i-1"], protected=["i-1"])
    result = plan(snapshot([], nodes, [group], idle("n1")), config(), NOW)
    assert result.terminate == ()
    assert [(a.node, a.reason) for a in result.uncordon] == [("n1", PROTECTED)]


def test_when_the_group_protects_every_new_instance_scale_down_goes_on() -> None:
    # Given a group whose every instance is protected because the group protects new instances
    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    group = asg(
        A100, desired=2, instances=["i-1", "i-2"], protected=["i-1", "i-2"], new_instances_protected=True
    )
    cfg = config(policy={"max_scale_in_fraction": 1.0})
    result = plan(snapshot([], nodes, [group], idle("n1", "n2")), cfg, NOW)
    # Then protection is the group's default, says nothing about one node: both idle nodes are cordoned
    assert [a.node for a in result.cordon] == ["n1", "n2"]


def test_an_instance_that_never_registered_and_is_protected_is_not_replaced() -> None:
    state = ScalerState(instances_first_seen={"i-1": NOW - timedelta(minutes=25)})
    group = asg(A100, desired=1, instances=["i-1"], protected=["i-1"])
    result = plan(snapshot([], [], [group], state), config(), NOW)
    assert result.terminate == ()


def test_the_revalidation_refuses_to_terminate_a_protected_instance() -> None:
    fresh = node_from_json(node("n1", "i-1", unschedulable=True, annotations=CORDONED))
    group = asg_from_json(asg(A100, desired=1, instances=["i-1"], protected=["i-1"]))
    termination = Termination("n1", "i-1", "a100", "idle")
    assert termination_blocker(termination, -10, NOW, group, fresh, ()) == PROTECTED


def test_a_node_annotated_do_not_disrupt_is_protected_as_the_pod_annotation_is() -> None:
    # Given an idle node carrying Karpenter's node-level do-not-disrupt
    annotated = node("n1", "i-1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    result = plan(
        snapshot([], [annotated], [asg(A100, desired=1, instances=["i-1"])], idle("n1")), config(), NOW
    )
    # Then it is neither cordoned nor marked for attrition
    assert result.cordon == () and result.mark == ()
    assert protection(node_from_json(annotated), [], None) == "annotated karpenter.sh/do-not-disrupt"


# --------------------------------------------------------------------------------- forced scale-down


def forced_choice(request: ForceScaleDownRequest, *, new_instances_protected: bool = False) -> list[str]:
    """The nodes a forced scale-down of two idle nodes (n1 on a protected instance) chooses."""
    group = asg_from_json(
        asg(
            A100,
            desired=2,
            instances=["i-1", "i-2"],
            protected=["i-1"] + (["i-2"] if new_instances_protected else []),
            new_instances_protected=new_instances_protected,
        )
    )
    nodes = [node_from_json(node("n1", "i-1")), node_from_json(node("n2", "i-2"))]
    candidates = candidates_of(group, nodes, [], -10, now=NOW, force=request.force)
    return sorted(c.name for c in choose(request, group, candidates).chosen)


def test_forced_scale_down_refuses_a_protected_instance_unless_the_payload_says_force() -> None:
    # By target: the protected node is passed over, unless forced
    assert forced_choice(ForceScaleDownRequest(group="a100", target=0)) == ["n2"]
    assert forced_choice(ForceScaleDownRequest(group="a100", target=0, force=True)) == ["n1", "n2"]
    # By name: refused with the reason, unless forced
    named = ForceScaleDownRequest(group="a100", nodes=("n1", "n2"))
    assert forced_choice(named) == ["n2"]
    assert forced_choice(named.model_copy(update={"force": True})) == ["n1", "n2"]


def test_forced_scale_down_refusal_names_the_protection() -> None:
    group = asg_from_json(asg(A100, desired=1, instances=["i-1"], protected=["i-1"]))
    candidates = candidates_of(group, [node_from_json(node("n1", "i-1"))], [], -10, now=NOW)
    choice = choose(ForceScaleDownRequest(group="a100", nodes=("n1",)), group, candidates)
    assert choice.chosen == ()
    assert [(r.target, r.reason) for r in choice.refused] == [("n1", f"{PROTECTED}: say force to remove it")]


def test_forced_scale_down_in_a_group_protecting_all_new_instances_goes_on() -> None:
    request = ForceScaleDownRequest(group="a100", target=0)
    assert forced_choice(request, new_instances_protected=True) == ["n1", "n2"]


def test_a_forced_scale_down_through_the_controller_leaves_the_protected_instance_running() -> None:
    # Given two idle nodes, the first on an instance the operator protected
    group = asg(A100, desired=2, instances=["i-1", "i-2"], protected=["i-1"])
    nodes = [node("n1", "i-1"), node("n2", "i-2")]
    world = FakeWorld(config=config(), cluster=FakeCluster([], nodes), fleet=FakeFleet([group]))
    # When the operator asks for 0 without force
    report = world.controller().force_scale_down({"group": "a100", "target": 0})
    # Then only the unprotected instance is terminated, and the report says why the other stays
    assert world.fleet.terminated == ["i-2"]
    assert {"target": "n1", "reason": PROTECTED} in report.to_json()["refused"]
