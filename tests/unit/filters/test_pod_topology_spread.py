"""PodTopologySpread, DoNotSchedule constraints (kubernetes.io "Pod Topology Spread Constraints",
plugins/podtopologyspread/filtering.go), judged through the planner's Simulation: the documented
zoneA/zoneB cluster, minDomains, nodeAffinityPolicy / nodeTaintsPolicy and missing labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.model import Pod, Taint, TaintEffect
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.framework import SimNode
from shared.planner.filters.pod_topology_spread import MISSING_LABEL, SKEW, DomainCounts
from shared.planner.simulation import Simulation
from tests.unit.filters.simulated import judge, simulation

FOO = {"foo": "bar"}


def _constraint(max_skew: int, key: str, **extra: Any) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": dict(FOO)},
        **extra,
    }


def _pod(
    name: str,
    labels: Mapping[str, str] = FOO,
    *,
    node: str | None = None,
    namespace: str = "default",
    spread: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.1"}], **spec}
    if spread:
        body["topologySpreadConstraints"] = spread
    if node:
        body["nodeName"] = node
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return pod_from_json(
        {"metadata": meta, "spec": body, "status": {"phase": "Running" if node else "Pending"}}
    )


def _node(name: str, zone: str | None, taints: tuple[Taint, ...] = ()) -> SimNode:
    labels = {"node": name} if zone is None else {"node": name, "zone": zone}
    return SimNode(name, labels, taints, [4000, 0, 0, 110])


def _documented_cluster() -> tuple[list[SimNode], list[Pod]]:
    """4 nodes, zoneA = node1 + node2, zoneB = node3 + node4; foo=bar pods on node1, node2, node3."""
    nodes = [
        _node("node1", "zoneA"),
        _node("node2", "zoneA"),
        _node("node3", "zoneB"),
        _node("node4", "zoneB"),
    ]
    return nodes, [_pod(f"p{i}", node=f"node{i}") for i in (1, 2, 3)]


def test_max_skew_one_sends_the_pod_to_the_emptier_zone() -> None:
    # Given the documented cluster (zoneA 2 pods, zoneB 1) and mypod with maxSkew 1 per zone
    nodes, bound = _documented_cluster()
    pod = _pod("mypod", spread=[_constraint(1, "zone")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then only zoneB passes: zoneA would become 3/1
    assert verdicts == {"node1": SKEW, "node2": SKEW, "node3": None, "node4": None}


def test_max_skew_two_admits_either_zone() -> None:
    # Given the documented cluster and maxSkew 2
    nodes, bound = _documented_cluster()
    pod = _pod("mypod", spread=[_constraint(2, "zone")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    # Then 3/1 is within the skew: every node passes
    assert set(judge(sim, pod).values()) == {None}


def test_two_constraints_must_both_hold() -> None:
    # Given the documented cluster and constraints per zone and per node, both maxSkew 1
    nodes, bound = _documented_cluster()
    pod = _pod("mypod", spread=[_constraint(1, "zone"), _constraint(1, "node")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then only node4 satisfies both (zoneB, and the node without a pod)
    assert verdicts == {"node1": SKEW, "node2": SKEW, "node3": SKEW, "node4": None}


def test_node_missing_the_topology_label_is_rejected_and_its_pods_not_counted() -> None:
    # Given the plugin's case: node-b lacks "zone" (a typo), pods spread a1 / b1 / x1 / y1
    nodes = [
        _node("node-a", "zone1"),
        _node("node-b", None),
        _node("node-x", "zone2"),
        _node("node-y", "zone2"),
    ]
    bound = [_pod(f"p-{n}", node=f"node-{n[0]}") for n in ("a1", "b1", "x1", "y1")]
    pod = _pod("p", spread=[_constraint(1, "zone")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then zones count 1/2 (node-b's pod is not counted), and node-b itself is missing the label
    assert verdicts == {"node-a": None, "node-b": MISSING_LABEL, "node-x": SKEW, "node-y": SKEW}


def test_pods_in_another_namespace_do_not_count() -> None:
    # Given the plugin's case: on zone1 only pods of other namespaces, on zone2 two pods of ours
    nodes = [
        _node("node-a", "zone1"),
        _node("node-b", "zone1"),
        _node("node-x", "zone2"),
        _node("node-y", "zone2"),
    ]
    bound = [
        _pod("p-a1", node="node-a", namespace="ns1"),
        _pod("p-b1", node="node-a", namespace="ns2"),
        _pod("p-x1", node="node-x"),
        _pod("p-y1", node="node-y"),
    ]
    pod = _pod("p", spread=[_constraint(1, "zone")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then zone1 counts 0 and zone2 2: only zone1 passes
    assert verdicts == {"node-a": None, "node-b": None, "node-x": SKEW, "node-y": SKEW}


def test_pod_not_matching_its_own_selector_adds_nothing_to_the_skew() -> None:
    # Given the plugin's case: per-node counts 2/1/0/3 and an incoming pod without foo=bar
    nodes = [
        _node("node-a", "zone1"),
        _node("node-b", "zone1"),
        _node("node-x", "zone2"),
        _node("node-y", "zone2"),
    ]
    counts = {"node-a": 2, "node-b": 1, "node-y": 3}
    bound = [_pod(f"{n}-{i}", node=n) for n, c in counts.items() for i in range(c)]
    pod = _pod("p", {"bar": ""}, spread=[_constraint(1, "node")])
    sim = simulation(nodes, bound, [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then count - min <= 1 holds on node-b and node-x only
    assert verdicts == {"node-a": SKEW, "node-b": None, "node-x": None, "node-y": SKEW}


def test_min_domains_forces_a_new_domain_while_too_few_exist() -> None:
    # Given one foo=bar pod in each of zoneA and zoneB and a constraint with minDomains 3
    nodes = [_node("node1", "zoneA"), _node("node2", "zoneB")]
    bound = [_pod("p1", node="node1"), _pod("p2", node="node2")]
    pod = _pod("mypod", spread=[_constraint(1, "zone", minDomains=3)])
    sim = simulation(nodes, bound, [pod])
    # When the existing nodes are judged
    # Then the global minimum is 0 (fewer than 3 domains), so both zones would have skew 2
    assert judge(sim, pod) == {"node1": SKEW, "node2": SKEW}
    # And when a node of a third zone is added (as a new node the plan would buy), it passes
    sim.add_node(_node("node3", "zoneC"))
    assert judge(sim, pod)["node3"] is None


def test_without_min_domains_the_same_spread_admits_either_zone() -> None:
    # Given one pod in each zone and no minDomains
    nodes = [_node("node1", "zoneA"), _node("node2", "zoneB")]
    bound = [_pod("p1", node="node1"), _pod("p2", node="node2")]
    pod = _pod("mypod", spread=[_constraint(1, "zone")])
    sim = simulation(nodes, bound, [pod])
    # When judged
    # Then 2/1 is within the skew
    assert judge(sim, pod) == {"node1": None, "node2": None}


def _zone_c_excluded(policy: str | None) -> tuple[Simulation, Pod]:
    """zoneA 2 pods, zoneB 1 pod, zoneC empty; the pod's node affinity excludes zoneC."""
    nodes = [
        _node("node1", "zoneA"),
        _node("node2", "zoneA"),
        _node("node3", "zoneB"),
        _node("node5", "zoneC"),
    ]
    bound = [_pod("p1", node="node1"), _pod("p2", node="node2"), _pod("p3", node="node3")]
    extra = {} if policy is None else {"nodeAffinityPolicy": policy}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["zoneC"]}]}
                ]
            }
        }
    }
    pod = _pod("mypod", spread=[_constraint(1, "zone", **extra)], affinity=affinity)
    return simulation(nodes, bound, [pod]), pod


def test_node_affinity_policy_honor_leaves_excluded_zones_out_of_the_minimum() -> None:
    # Given the documented node-affinity example with the default policy (Honor)
    sim, pod = _zone_c_excluded(None)
    # When zoneB's node is judged
    # Then the minimum is zoneB's 1 (zoneC is not eligible), so zoneB passes
    assert judge(sim, pod)["node3"] is None


def test_node_affinity_policy_ignore_counts_excluded_zones() -> None:
    # Given the same cluster with nodeAffinityPolicy Ignore
    sim, pod = _zone_c_excluded("Ignore")
    # When zoneB's node is judged
    # Then empty zoneC sets the minimum to 0 and zoneB would have skew 2
    assert judge(sim, pod)["node3"] == SKEW


def _tainted_zone_c(policy: str | None) -> tuple[Simulation, Pod]:
    """zoneA 1 pod, zoneB empty; zoneC (empty) has a taint the pod does not tolerate."""
    taint = (Taint("dedicated", "batch", TaintEffect.NO_SCHEDULE),)
    nodes = [_node("node1", "zoneA"), _node("node2", "zoneB"), _node("node3", "zoneC", taint)]
    bound = [_pod("p1", node="node1"), _pod("p2", node="node2")]
    extra = {} if policy is None else {"nodeTaintsPolicy": policy}
    pod = _pod("mypod", spread=[_constraint(1, "zone", **extra)])
    return simulation(nodes, bound, [pod]), pod


def test_node_taints_policy_ignore_counts_tainted_domains_by_default() -> None:
    # Given one pod in zoneA and zoneB each and an untolerated taint on zoneC, default policy (Ignore)
    sim, pod = _tainted_zone_c(None)
    # When zoneA's node is judged
    # Then tainted, empty zoneC holds the minimum at 0
    assert judge(sim, pod)["node1"] == SKEW


def test_node_taints_policy_honor_leaves_untolerated_domains_out() -> None:
    # Given the same cluster with nodeTaintsPolicy Honor
    sim, pod = _tainted_zone_c("Honor")
    # When zoneA's node is judged
    # Then zoneC is not eligible, the minimum is 1 and zoneA passes
    assert judge(sim, pod)["node1"] is None


def test_schedule_anyway_never_filters() -> None:
    # Given the documented cluster and a ScheduleAnyway constraint
    nodes, bound = _documented_cluster()
    pod = _pod("mypod", spread=[_constraint(1, "zone", whenUnsatisfiable="ScheduleAnyway")])
    sim = simulation(nodes, bound, [pod])
    # When the pod is prepared
    # Then there is no spread state to filter with, and every node passes
    assert sim.state(pod).spread is None
    assert set(judge(sim, pod).values()) == {None}


def test_recorded_pod_raises_its_zone_count_until_rolled_back() -> None:
    # Given the documented cluster (2/1) and two more replicas with maxSkew 1 per zone
    nodes, bound = _documented_cluster()
    first, second = (
        _pod("mypod-1", spread=[_constraint(1, "zone")]),
        _pod("mypod-2", spread=[_constraint(1, "zone")]),
    )
    sim = simulation(nodes, bound, [first, second])
    sim.checkpoint()
    # When the first is recorded in zoneB (2/2)
    sim.record(first, sim.nodes["node4"])
    # Then the second may go to either zone
    assert set(judge(sim, second).values()) == {None}
    # And after a rollback (2/1) zoneA is closed again
    sim.rollback()
    assert judge(sim, second) == {"node1": SKEW, "node2": SKEW, "node3": None, "node4": None}


def test_recorded_plain_pod_matching_the_selector_is_counted() -> None:
    # Given the documented cluster, a spread pod, and a plain foo=bar pod (no constraints of its own)
    nodes, bound = _documented_cluster()
    spread = _pod("mypod", spread=[_constraint(1, "zone")])
    plain = _pod("plain")
    sim = simulation(nodes, bound, [spread, plain])
    # When the plain pod is recorded in zoneB (2/2)
    assert sim.watched(plain)
    sim.record(plain, sim.nodes["node3"])
    # Then zoneA is open to the spread pod
    assert set(judge(sim, spread).values()) == {None}


def test_decrement_below_the_minimum_lowers_it() -> None:
    # Given two domains counting 1 each (minimum 1)
    counts = DomainCounts()
    for zone in ("zoneA", "zoneB"):
        counts.add_domain(zone)
        counts.increment(zone)
    # When one is decremented (a rollback), while the other still holds the old minimum
    counts.increment("zoneA", -1)
    # Then the minimum follows it down
    assert counts.global_min(None) == 0
