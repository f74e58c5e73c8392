"""The planner with DRA (resource.k8s.io/v1): pods whose GPUs come through ResourceClaims scale a
group up like any other, from zero too, and bad DRA input unhelps only the pod it concerns."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.dra import DraObjects
from shared.domain.errors import ConfigError
from shared.domain.model import PodMemory, ScalerState
from shared.domain.plan import Outcome, Plan, ReasonCode
from shared.formats.dra import (
    device_class_from_json,
    resource_claim_from_json,
    resource_claim_template_from_json,
    resource_slice_from_json,
)
from shared.planner import plan
from tests.builders import NOW, a100_group, asg, config, node, snapshot
from tests.builders_dra import (
    claim_spec,
    claim_template,
    device_class,
    dra_pod,
    from_template,
    gpu_device,
    gpu_slice,
    request,
    resource_claim,
    slice_spec,
)

SLICES = [slice_spec([gpu_device(i) for i in range(8)], pool="gpus")]


def _dra(objects: list[dict[str, Any]]) -> DraObjects:
    return DraObjects(
        tuple(resource_slice_from_json(o) for o in objects if o["kind"] == "ResourceSlice"),
        tuple(device_class_from_json(o) for o in objects if o["kind"] == "DeviceClass"),
        tuple(resource_claim_from_json(o) for o in objects if o["kind"] == "ResourceClaim"),
        tuple(resource_claim_template_from_json(o) for o in objects if o["kind"] == "ResourceClaimTemplate"),
    )


def _plan(
    pods: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    nodes: list[dict[str, Any]] | None = None,
    group: dict[str, Any] | None = None,
    desired: int = 0,
) -> Plan:
    nodes = nodes or []
    instances = [f"i-{i}" for i in range(len(nodes))]
    groups_asg = [asg("research-a100", desired=desired, instances=instances)]
    snap = replace(snapshot(pods, nodes, groups_asg), dra=_dra(objects))
    groups = [a100_group(price_per_hour=32.77, max_size=16, **(group or {}))]
    return plan(snap, config(node_groups=groups), NOW)


def _outcome(result: Plan, name: str) -> tuple[str, str]:
    found = next(p for p in result.pods if p.pod.endswith(f"/{name}"))
    return str(found.outcome), found.reason


def test_pods_claiming_one_gpu_each_scale_a_group_up_from_zero_with_its_configured_slices() -> None:
    # Given 12 pending pods, each with a one-GPU claim from a template, and a group at zero whose
    # config declares the 8 GPUs its driver publishes per node
    pods = [dra_pod(f"train-{i}", [from_template()]) for i in range(12)]
    result = _plan(pods, [device_class(), claim_template()], group={"resource_slices": SLICES})
    # Then two new nodes are bought (8 devices each) and every pod waits for one
    assert result.group("a100").desired == 2
    assert {_outcome(result, f"train-{i}")[0] for i in range(12)} == {str(Outcome.SCALE_UP)}


def test_a_group_without_known_devices_is_not_bought_for_dra_pods_and_the_reason_says_why() -> None:
    pods = [dra_pod("train-0", [from_template()])]
    result = _plan(pods, [device_class(), claim_template()])
    assert result.group("a100").desired == 0
    found = next(p for p in result.pods if p.pod.endswith("/train-0"))
    assert found.outcome != Outcome.SCALE_UP
    assert "node_groups[].resource_slices" in found.reason


def test_free_devices_of_a_registered_node_serve_pods_before_new_nodes() -> None:
    # Given a registered node publishing 8 GPUs, 6 of them allocated to running pods' claims
    objects = [device_class(), claim_template(), gpu_slice("gpu-node-1", 8)]
    taken = tuple(f"gpu-{i}" for i in range(6))
    objects.append(resource_claim("running", allocated_on="gpu-node-1", devices=taken))
    pods = [dra_pod(f"train-{i}", [from_template()]) for i in range(4)]
    nodes = [node("gpu-node-1", "i-0", gpus=0)]
    # When four pods want a GPU each
    result = _plan(pods, objects, nodes, desired=1)
    # Then two run on the free devices and two need one new node, which has the registered
    # node's slices (node name replaced)
    outcomes = sorted(_outcome(result, f"train-{i}")[0] for i in range(4))
    assert outcomes.count(str(Outcome.SCALE_UP)) == 2
    assert result.group("a100").desired == 2


def test_bad_dra_input_unhelps_only_its_pod() -> None:
    # Given one pod whose template's selector does not compile, one whose template is missing,
    # and one sound pod
    bad = claim_template("bad", claim_spec(request(selectors=("device.attributes[",))))
    pods = [
        dra_pod("broken", [from_template(template="bad")]),
        dra_pod("orphan", [from_template(template="gone")]),
        dra_pod("fine", [from_template()]),
    ]
    result = _plan(pods, [device_class(), claim_template(), bad], group={"resource_slices": SLICES})
    # Then the sound pod buys a node and the others say what is wrong, naming the object
    assert _outcome(result, "fine")[0] == str(Outcome.SCALE_UP)
    broken = next(p for p in result.pods if p.pod.endswith("/broken"))
    assert broken.code == ReasonCode.UNVERIFIABLE and "device.attributes[" in broken.reason
    assert 'resourceclaimtemplate "ml/bad"' in broken.reason
    assert 'resourceclaimtemplate "ml/gone" not found' in _outcome(result, "orphan")[1]


@pytest.mark.parametrize(
    ("slices", "message"),
    [
        ([{**SLICES[0], "nodeName": "x"}], "drop nodeName"),
        ([{"driver": "gpu.nvidia.com", "devices": []}], "missing field 'pool'"),
        ([slice_spec([gpu_device(0), gpu_device(0)], pool="gpus")], 'duplicate device name "gpu-0"'),
    ],
)
def test_configured_slices_are_validated_at_load(slices: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(node_groups=[a100_group(resource_slices=slices)])


def test_a_dra_fit_the_scheduler_refutes_is_a_model_error_once() -> None:
    # Given a registered node with free devices by the planner's model, where a DRA pod has been
    # counted for 6 minutes without the scheduler binding it (its driver disagrees, say)
    objects = [device_class(), claim_template(), gpu_slice("gpu-node-1", 8)]
    memory = PodMemory(uid="uid-stuck", counted_on="gpu-node-1", counted_since=NOW - timedelta(minutes=6))
    snap = snapshot(
        [dra_pod("stuck", [from_template()])],
        [node("gpu-node-1", "i-0", gpus=0)],
        [asg("research-a100", desired=1, instances=["i-0"])],
        ScalerState(pods={"ml/stuck": memory}),
    )
    groups = [a100_group(price_per_hour=32.77, max_size=16, resource_slices=SLICES)]
    result = plan(replace(snap, dra=_dra(objects)), config(node_groups=groups), NOW)
    # Then it is a model error on that node, the node is no longer counted, and a node is bought
    assert [(e.pod, e.node) for e in result.model_errors] == [("ml/stuck", "gpu-node-1")]
    assert _outcome(result, "stuck")[0] == str(Outcome.SCALE_UP)
    assert result.pod_memory["ml/stuck"].distrusted == ("gpu-node-1",)


def _bought_20_minutes_ago(objects: list[dict[str, Any]]) -> Plan:
    """A DRA pod the scaler bought an a100 node for 20 minutes ago (on the config's slices); the node
    registered 15 minutes ago and has been Ready since. The planner does not count the pod on it."""
    memory = PodMemory(uid="uid-stuck", bought={"a100": NOW - timedelta(minutes=20)})
    fresh = node("gpu-node-1", "i-0", gpus=0, created=NOW - timedelta(minutes=15))
    snap = snapshot(
        [dra_pod("stuck", [from_template()])],
        [fresh],
        [asg("research-a100", desired=1, instances=["i-0"])],
        ScalerState(pods={"ml/stuck": memory}),
    )
    groups = [a100_group(price_per_hour=32.77, max_size=16, resource_slices=SLICES)]
    return plan(replace(snap, dra=_dra(objects)), config(node_groups=groups), NOW)


def test_a_node_bought_for_a_dra_pod_that_publishes_no_devices_is_not_bought_again() -> None:
    # Given the node bought for the pod publishes no ResourceSlices (its DRA driver is not running)
    result = _bought_20_minutes_ago([device_class(), claim_template()])
    # Then the node it bought cannot hold the pod's claim: the group is refused for the pod, and no
    # second node is bought on the template's (the config's) devices
    assert result.group("a100").desired == 1
    assert result.pod_memory["ml/stuck"].refused["a100"] > NOW
    assert _outcome(result, "stuck")[0] == str(Outcome.UNHELPED)


def test_a_node_bought_for_a_dra_pod_that_publishes_its_devices_holds_it() -> None:
    # Given the node publishes the 8 GPUs the config said it would
    result = _bought_20_minutes_ago([device_class(), claim_template(), gpu_slice("gpu-node-1", 8)])
    # Then the group is not refused for the pod, which is counted on the capacity bought for it
    assert "a100" not in result.pod_memory["ml/stuck"].refused
    assert result.group("a100").desired == 1
    assert _outcome(result, "stuck")[0] != str(Outcome.UNHELPED)
