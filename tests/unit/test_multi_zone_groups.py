"""Multi-zone groups: EC2 picks the zone of each launch, so a group takes a pod only when a new node
in every zone it may launch into admits it (zone and zone-id labels alike), whatever path places
the pod (plain or through the inter-pod filters); diagnosis and `plan --explain` say the same."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.plan import ReasonCode
from shared.planner import plan
from tests.builders import NOW, asg, node, pod, snapshot
from tests.unit.test_aws_capacity import configured, group, outcome, zone_affinity, zoned

ZONE = "topology.kubernetes.io/zone"
ZONE_ID = "topology.k8s.aws/zone-id"


def with_anti_affinity(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod with a required anti-affinity (to pods it does not select): it is placed through the
    inter-pod filters instead of the plain-pod fast path."""
    obj["spec"].setdefault("affinity", {})["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    return obj


def as_plain(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


PATHS = pytest.mark.parametrize("path", [as_plain, with_anti_affinity], ids=["plain", "inter-pod"])


def code_of(result: Any, name: str) -> ReasonCode:
    return next(p for p in result.pods if p.pod.endswith(f"/{name}")).code


def multi(**fields: Any) -> dict[str, Any]:
    return zoned(asg("research-multi", **{"desired": 0, **fields}), "us-west-2a", "us-west-2b")


# A pod every zone admits


@PATHS
def test_a_pod_every_zone_admits_gets_a_node_with_or_without_inter_pod_rules(path: Any) -> None:
    # Given a group in us-west-2a and us-west-2b, and a pod that requires zone In [both]
    zoned_pod = path(pod("zoned", gpus=4, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
    # When the planner runs
    result = plan(snapshot([zoned_pod], [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then the group grows for it, whether the plain path or the inter-pod filters place it
    assert outcome(result, "zoned")[:2] == ("scale-up", "multi")
    assert result.group("multi").desired == 1


def test_pods_every_zone_admits_share_a_new_node_on_the_inter_pod_path() -> None:
    # Given two 4-GPU pods with an inter-pod rule, each admitted by both zones of the group
    pods = [
        with_anti_affinity(pod(f"p{i}", gpus=4, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
        for i in range(2)
    ]
    # When the planner runs
    result = plan(snapshot(pods, [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then one 8-GPU node is bought for both, as for plain pods: the node opened for the first one
    # admits the second in every zone too
    assert result.group("multi").desired == 1


def _spread_over_hosts(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["app"] = "train"
    obj["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    return obj


@pytest.mark.parametrize(
    "zones", [("us-west-2a",), ("us-west-2a", "us-west-2b")], ids=["one-zone", "two-zones"]
)
def test_new_nodes_every_zone_admits_the_pod_on_count_in_its_hostname_spread(zones: tuple[str, ...]) -> None:
    # Given two registered nodes with one GPU free each, and six 1-GPU pods spread over hostnames
    # (maxSkew 1) that require zone In [us-west-2a, us-west-2b]
    group_asg = zoned(asg("research-multi", desired=2, instances=["i-0", "i-1"]), *zones)
    nodes = [
        node("n0", "i-0", labels={"gpu": "a100", ZONE: "us-west-2a"}),
        node("n1", "i-1", labels={"gpu": "a100", ZONE: zones[-1]}),
    ]
    busy = [pod("b0", gpus=7, node="n0"), pod("b1", gpus=7, node="n1")]
    pending = [
        _spread_over_hosts(pod(f"p{i}", gpus=1, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
        for i in range(6)
    ]
    # When the planner runs
    result = plan(snapshot([*busy, *pending], nodes, [group_asg]), configured(group("multi", 10.0)), NOW)
    # Then a new node of the group counts as a domain of the spread (its node affinity holds in every
    # zone, as the scheduler will find on the node that launches): with the registered nodes at one
    # pod each, a new node takes two of the four pods left (skew 1), so two are bought, whether the
    # group spans one zone or two (not one new node for all four)
    assert result.group("multi").desired == 4
