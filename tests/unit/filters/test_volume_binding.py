"""VolumeBinding + VolumeZone: what a pod's PersistentVolumeClaims demand of a node (kubernetes.io
"Storage Classes" WaitForFirstConsumer + allowedTopologies, "Persistent Volumes" node affinity,
plugins/volumebinding and plugins/volumezone), through the real parsers and the Simulation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json, pv_from_json, pvc_from_json, storage_class_from_json
from shared.planner.filters.framework import Reason, SimNode
from shared.planner.filters.volume_binding import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    UNBOUND_IMMEDIATE,
    ZONE_CONFLICT,
    Volumes,
)
from shared.planner.simulation import Simulation

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _pod(*claims: str, ephemeral: str | None = None) -> Pod:
    volumes: list[dict[str, Any]] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if ephemeral:
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": template}})
    spec = {"containers": [{"name": "main", "image": "db:1"}], "volumes": volumes}
    return pod_from_json({"metadata": {"name": "db-0", "namespace": "data"}, "spec": spec})


def _pvc(
    name: str,
    *,
    volume: str = "",
    storage_class: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    meta: dict[str, Any] = {"name": name, "namespace": "data"}
    if annotations:
        meta["annotations"] = annotations
    phase = "Bound" if volume else "Pending"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def _pv(
    name: str,
    *,
    node_affinity: list[list[dict[str, Any]]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}
    if node_affinity is not None:
        terms = [{"matchExpressions": term} for term in node_affinity]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def _class(
    name: str, mode: str | None = None, zones: list[str] | None = None, default: bool = False
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
    }
    if default:
        raw["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    if mode:
        raw["volumeBindingMode"] = mode
    if zones:
        raw["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return raw


def _verdicts(
    pod: Pod,
    nodes: dict[str, dict[str, str]],
    pvcs: list[dict[str, Any]],
    pvs: Sequence[dict[str, Any]] = (),
    classes: Sequence[dict[str, Any]] = (),
) -> dict[str, Reason]:
    volumes = Volumes.of(
        tuple(pvc_from_json(c) for c in pvcs),
        tuple(pv_from_json(v) for v in pvs),
        tuple(storage_class_from_json(s) for s in classes),
    )
    sim = Simulation({}, {}, volumes)
    for name, labels in nodes.items():
        sim.add_node(SimNode(name, labels, (), [4000, 0, 0, 110]))
    sim.prepare([pod])
    state = sim.state(pod)
    return {name: sim.static(pod, state, node) for name, node in sim.nodes.items()}


ZONED = {"a": {ZONE: "us-west-2a", REGION: "us-west-2"}, "b": {ZONE: "us-west-2b", REGION: "us-west-2"}}


def test_wait_for_first_consumer_class_provisions_where_allowed_topologies_allow() -> None:
    # Given the documented class (WaitForFirstConsumer, allowedTopologies zone In [us-west-2a]) and an
    # unbound claim of it
    sc = _class("standard", "WaitForFirstConsumer", ["us-west-2a"])
    # When nodes of two zones are judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", storage_class="standard")], classes=[sc])
    # Then only the allowed zone passes
    assert verdicts == {"a": None, "b": BIND_CONFLICT}


def test_wait_for_first_consumer_class_without_topologies_provisions_anywhere() -> None:
    # Given a WaitForFirstConsumer class without allowedTopologies and an unbound claim of it
    sc = _class("gp3", "WaitForFirstConsumer")
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", storage_class="gp3")], classes=[sc])
    # Then every node passes
    assert verdicts == {"a": None, "b": None}


@pytest.mark.parametrize("mode", [None, "Immediate"], ids=["default-mode", "immediate"])
def test_unbound_immediate_claim_blocks_every_node(mode: str | None) -> None:
    # Given an unbound claim of an Immediate class (the default mode): the PV controller binds it first
    sc = _class("gp2", mode)
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", storage_class="gp2")], classes=[sc])
    # Then no node passes, with the scheduler's words
    assert verdicts == {"a": UNBOUND_IMMEDIATE, "b": UNBOUND_IMMEDIATE}
    assert UNBOUND_IMMEDIATE == "pod has unbound immediate PersistentVolumeClaims"


def test_missing_claim_blocks_every_node() -> None:
    # Given a pod whose claim does not exist
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [])
    # Then no node passes, naming the claim
    assert verdicts == {
        "a": 'persistentvolumeclaim "data" not found',
        "b": 'persistentvolumeclaim "data" not found',
    }


def test_claim_bound_to_a_missing_volume_blocks_every_node() -> None:
    # Given a claim bound to a PV that is not there
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", volume="pv-gone")])
    # Then no node passes, naming the volume
    assert set(verdicts.values()) == {'persistentvolume "pv-gone" not found'}


def test_claim_without_class_uses_the_default_class() -> None:
    # Given a default WaitForFirstConsumer class limited to us-west-2b, and a claim naming no class
    sc = _class("gp3", "WaitForFirstConsumer", ["us-west-2b"], default=True)
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data")], classes=[sc])
    # Then the default class's topology applies
    assert verdicts == {"a": BIND_CONFLICT, "b": None}


def test_claim_with_empty_class_is_not_provisioned() -> None:
    # Given a default class, and an unbound claim with storageClassName "" (static binding only)
    sc = _class("gp3", "WaitForFirstConsumer", default=True)
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", storage_class="")], classes=[sc])
    # Then it waits for the PV controller everywhere
    assert set(verdicts.values()) == {UNBOUND_IMMEDIATE}


def test_legacy_class_annotation_wins_over_the_field() -> None:
    # Given a claim whose beta annotation names a WaitForFirstConsumer class and whose field an Immediate one
    classes = [_class("wffc", "WaitForFirstConsumer", ["us-west-2a"]), _class("immediate")]
    claim = _pvc(
        "data", storage_class="immediate", annotations={"volume.beta.kubernetes.io/storage-class": "wffc"}
    )
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [claim], classes=classes)
    # Then the annotation's class decides, as GetPersistentVolumeClaimClass reads it first
    assert verdicts == {"a": None, "b": BIND_CONFLICT}


def test_bound_local_volume_pins_the_pod_to_its_node() -> None:
    # Given the documented local PV with node affinity hostname In [example-node], and a claim bound to it
    pv = _pv("example-pv", node_affinity=[[{"key": HOST, "operator": "In", "values": ["example-node"]}]])
    nodes = {"example-node": {HOST: "example-node"}, "other-node": {HOST: "other-node"}}
    # When judged
    verdicts = _verdicts(_pod("data"), nodes, [_pvc("data", volume="example-pv")], [pv])
    # Then only its node passes
    assert verdicts == {"example-node": None, "other-node": NODE_CONFLICT}


def test_pv_node_affinity_terms_are_ored() -> None:
    # Given an EBS-like PV whose two terms name one zone each, bound to the claim
    terms = [[{"key": ZONE, "operator": "In", "values": [z]}] for z in ("us-west-2a", "us-west-2c")]
    pv = _pv("pv-1", node_affinity=terms)
    nodes = {**ZONED, "c": {ZONE: "us-west-2c"}}
    # When judged
    verdicts = _verdicts(_pod("data"), nodes, [_pvc("data", volume="pv-1")], [pv])
    # Then a node satisfying either term passes
    assert verdicts == {"a": None, "b": NODE_CONFLICT, "c": None}


def test_volume_zone_label_with_several_zones_admits_each() -> None:
    # Given a PV labelled with two zones joined by "__" (the legacy multi-zone value), bound to the claim
    pv = _pv("pv-1", labels={ZONE: "us-west-2a__us-west-2b"})
    nodes = {**ZONED, "c": {ZONE: "us-west-2c", REGION: "us-west-2"}}
    # When judged
    verdicts = _verdicts(_pod("data"), nodes, [_pvc("data", volume="pv-1")], [pv])
    # Then both listed zones pass, the third does not
    assert verdicts == {"a": None, "b": None, "c": ZONE_CONFLICT}


def test_volume_zone_region_label_must_match_too() -> None:
    # Given a PV labelled with zone us-west-2a and region us-west-2, and a node in that zone of another region
    pv = _pv("pv-1", labels={ZONE: "us-west-2a", REGION: "us-west-2"})
    nodes = {"a": ZONED["a"], "odd": {ZONE: "us-west-2a", REGION: "us-east-1"}}
    # When judged
    verdicts = _verdicts(_pod("data"), nodes, [_pvc("data", volume="pv-1")], [pv])
    # Then the region mismatch is a zone conflict
    assert verdicts == {"a": None, "odd": ZONE_CONFLICT}


def test_volume_zone_ignores_nodes_without_zone_labels() -> None:
    # Given a zoned PV and a node with no zone or region label at all
    pv = _pv("pv-1", labels={ZONE: "us-west-2a"})
    nodes = {"bare": {HOST: "bare"}, "b": ZONED["b"]}
    # When judged
    verdicts = _verdicts(_pod("data"), nodes, [_pvc("data", volume="pv-1")], [pv])
    # Then the unlabelled node has no zone constraint and passes (volume_zone.go); the other zone does not
    assert verdicts == {"bare": None, "b": ZONE_CONFLICT}


def test_volume_zone_beta_pv_label_matches_the_nodes_ga_label() -> None:
    # Given a PV with the beta zone label and nodes carrying only the GA label
    pv = _pv("pv-1", labels={BETA_ZONE: "us-west-2a"})
    # When judged
    verdicts = _verdicts(_pod("data"), ZONED, [_pvc("data", volume="pv-1")], [pv])
    # Then the beta key is translated to the GA one
    assert verdicts == {"a": None, "b": ZONE_CONFLICT}


def test_every_claim_of_the_pod_must_be_satisfied() -> None:
    # Given one claim bound to a PV in us-west-2a and another provisioned only in us-west-2b
    pv = _pv("pv-1", node_affinity=[[{"key": ZONE, "operator": "In", "values": ["us-west-2a"]}]])
    sc = _class("b-only", "WaitForFirstConsumer", ["us-west-2b"])
    pvcs = [_pvc("data", volume="pv-1"), _pvc("logs", storage_class="b-only")]
    # When judged
    verdicts = _verdicts(_pod("data", "logs"), ZONED, pvcs, [pv], [sc])
    # Then no node serves both
    assert verdicts == {"a": BIND_CONFLICT, "b": NODE_CONFLICT}


def test_generic_ephemeral_volume_is_the_claim_named_after_pod_and_volume() -> None:
    # Given a pod with a generic ephemeral volume "scratch" (its claim is db-0-scratch), provisioned
    # by a WaitForFirstConsumer default class limited to us-west-2a
    sc = _class("gp3", "WaitForFirstConsumer", ["us-west-2a"], default=True)
    pod = _pod(ephemeral="scratch")
    # When judged with, and without, the claim the ephemeral controller creates
    created = _verdicts(pod, ZONED, [_pvc("db-0-scratch")], classes=[sc])
    not_yet = _verdicts(pod, ZONED, [], classes=[sc])
    # Then the claim's class decides, and until it exists the pod waits
    assert created == {"a": None, "b": BIND_CONFLICT}
    assert set(not_yet.values()) == {'persistentvolumeclaim "db-0-scratch" not found'}
