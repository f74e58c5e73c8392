"""InterPodAffinity: required pod affinity and anti-affinity, and existing pods' anti-affinity
against the incoming pod (kubernetes.io "Assign Pods to Nodes: Inter-pod affinity and
anti-affinity", plugins/interpodaffinity/filtering.go), judged through the planner's Simulation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.framework import SimNode
from shared.planner.filters.inter_pod_affinity import AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from tests.unit.filters.simulated import judge, simulation

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _term(topology_key: str, key: str, *values: str, **extra: Any) -> dict[str, Any]:
    selector = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {"labelSelector": selector, "topologyKey": topology_key, **extra}


def _pod(
    name: str,
    labels: Mapping[str, str],
    *,
    namespace: str = "default",
    node: str | None = None,
    affinity: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app:1"}]}
    rules: dict[str, Any] = {}
    if affinity:
        rules["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        rules["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if rules:
        spec["affinity"] = rules
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return pod_from_json(
        {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}}
    )


def _node(name: str, zone: str | None) -> SimNode:
    labels = {HOST: name} if zone is None else {HOST: name, ZONE: zone}
    return SimNode(name, labels, (), [4000, 0, 0, 110])


def _nodes() -> list[SimNode]:
    return [_node("n1", "zoneA"), _node("n2", "zoneA"), _node("n3", "zoneB")]


def test_affinity_admits_only_the_domain_of_a_matching_pod() -> None:
    # Given the documented pod with affinity to security=S1 per zone, and an S1 pod on n1 (zoneA)
    s1 = _pod("s1", {"security": "S1"}, node="n1")
    pod = _pod("with-pod-affinity", {"app": "web"}, affinity=[_term(ZONE, "security", "S1")])
    sim = simulation(_nodes(), [s1], [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then both zoneA nodes pass and zoneB does not
    assert verdicts == {"n1": None, "n2": None, "n3": AFFINITY}


def test_anti_affinity_rejects_the_whole_domain_of_a_matching_pod() -> None:
    # Given a pod with anti-affinity to security=S2 per zone, and an S2 pod on n1 (zoneA)
    s2 = _pod("s2", {"security": "S2"}, node="n1")
    pod = _pod("p", {"app": "web"}, anti=[_term(ZONE, "security", "S2")])
    sim = simulation(_nodes(), [s2], [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then zoneA is closed to it, zoneB open
    assert verdicts == {"n1": ANTI_AFFINITY, "n2": ANTI_AFFINITY, "n3": None}


def test_existing_pods_anti_affinity_rejects_the_incoming_pod() -> None:
    # Given a bound pod on n1 that refuses app=web pods on its host, and a plain app=web pod
    guard = _pod("guard", {"app": "db"}, node="n1", anti=[_term(HOST, "app", "web")])
    web = _pod("web", {"app": "web"})
    sim = simulation(_nodes(), [guard], [web])
    # When every node is judged
    verdicts = judge(sim, web)
    # Then n1 is closed by the existing pod's rule (symmetry), the others open
    assert not sim.is_plain(web)
    assert verdicts == {"n1": EXISTING_ANTI_AFFINITY, "n2": None, "n3": None}


def test_missing_topology_key_fails_affinity_but_passes_anti_affinity() -> None:
    # Given a node without a zone label, an S1 pod and an S2 pod elsewhere
    nodes = [_node("n1", "zoneA"), _node("bare", None)]
    bound = [_pod("s1", {"security": "S1"}, node="n1"), _pod("s2", {"security": "S2"}, node="n1")]
    with_affinity = _pod("a", {"app": "web"}, affinity=[_term(ZONE, "security", "S1")])
    with_anti = _pod("b", {"app": "web"}, anti=[_term(ZONE, "security", "S2")])
    sim = simulation(nodes, bound, [with_affinity, with_anti])
    # When the bare node is judged for each
    affinity = judge(sim, with_affinity)["bare"]
    anti = judge(sim, with_anti)["bare"]
    # Then affinity needs the key to exist on the node, anti-affinity is satisfied without it
    assert (affinity, anti) == (AFFINITY, None)


def test_terms_default_to_the_pods_own_namespace() -> None:
    # Given an S1 pod in namespace "other", and an incoming pod in "default" with affinity to S1
    s1 = _pod("s1", {"security": "S1"}, namespace="other", node="n1")
    pod = _pod("p", {"app": "web"}, affinity=[_term(ZONE, "security", "S1")])
    sim = simulation(_nodes(), [s1], [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then the pod in another namespace does not count
    assert set(verdicts.values()) == {AFFINITY}


@pytest.mark.parametrize(
    ("extra", "namespace_labels", "matches"),
    [
        ({"namespaces": ["other"]}, {"team": "ml"}, True),
        ({"namespaceSelector": {}}, {"team": "ml"}, True),  # empty selector: every namespace
        ({"namespaceSelector": {"matchLabels": {"team": "ml"}}}, {"team": "ml"}, True),
        ({"namespaceSelector": {"matchLabels": {"team": "ml"}}}, {"team": "web"}, False),
    ],
    ids=[
        "namespaces-list",
        "empty-namespace-selector",
        "namespace-selector-match",
        "namespace-selector-miss",
    ],
)
def test_namespaces_and_namespace_selector_widen_the_term(
    extra: dict[str, Any], namespace_labels: dict[str, str], matches: bool
) -> None:
    # Given an S1 pod in namespace "other" (labelled `namespace_labels`), and an incoming pod whose
    # affinity term names namespaces or selects them by label
    s1 = _pod("s1", {"security": "S1"}, namespace="other", node="n1")
    pod = _pod("p", {"app": "web"}, affinity=[_term(ZONE, "security", "S1", **extra)])
    namespaces = {"other": {"kubernetes.io/metadata.name": "other", **namespace_labels}, "default": {}}
    sim = simulation(_nodes(), [s1], [pod], namespaces)
    # When zoneA's empty node is judged
    verdict = judge(sim, pod)["n2"]
    # Then it passes exactly when the term reaches the S1 pod's namespace
    assert verdict == (None if matches else AFFINITY)


def test_existing_pod_must_match_all_affinity_terms() -> None:
    # Given a pod requiring S1 in its zone AND app=cache on its host; n1 has a pod matching both,
    # n3 one matching only app=cache
    both = _pod("both", {"security": "S1", "app": "cache"}, node="n1")
    half = _pod("half", {"app": "cache"}, node="n3")
    pod = _pod("p", {"app": "web"}, affinity=[_term(ZONE, "security", "S1"), _term(HOST, "app", "cache")])
    sim = simulation(_nodes(), [both, half], [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then only n1 satisfies both terms (n2 shares the zone but not the host)
    assert verdicts == {"n1": None, "n2": AFFINITY, "n3": AFFINITY}


def test_first_pod_of_a_self_affine_series_may_go_anywhere_the_key_exists() -> None:
    # Given no pods at all and a database replica with affinity to app=db per zone (it matches itself),
    # and a node without a zone label
    nodes = [*_nodes(), _node("bare", None)]
    first, second = (_pod(f"db-{i}", {"app": "db"}, affinity=[_term(ZONE, "app", "db")]) for i in (1, 2))
    sim = simulation(nodes, [], [first, second])
    # When the first is judged
    verdicts = judge(sim, first)
    # Then every node with a zone passes
    assert verdicts == {"n1": None, "n2": None, "n3": None, "bare": AFFINITY}
    # And once it is placed on n3, the second replica must follow it to zoneB
    sim.checkpoint()
    sim.record(first, sim.nodes["n3"])
    assert judge(sim, second) == {"n1": AFFINITY, "n2": AFFINITY, "n3": None, "bare": AFFINITY}
    # And a rollback makes it the first of the series again
    sim.rollback()
    assert judge(sim, second) == {"n1": None, "n2": None, "n3": None, "bare": AFFINITY}


def test_pod_not_matching_its_own_affinity_waits_for_a_matching_pod() -> None:
    # Given no pods and a pod with affinity to app=db that is not itself app=db
    pod = _pod("p", {"app": "web"}, affinity=[_term(ZONE, "app", "db")])
    sim = simulation(_nodes(), [], [pod])
    # When every node is judged
    verdicts = judge(sim, pod)
    # Then no node passes
    assert set(verdicts.values()) == {AFFINITY}


def test_matching_pod_on_a_node_without_the_key_does_not_block_the_first_pod_rule() -> None:
    # Given an app=db pod on a node without a zone label, and a self-affine app=db replica per zone
    bound = [_pod("db-0", {"app": "db"}, node="bare")]
    pod = _pod("db-1", {"app": "db"}, affinity=[_term(ZONE, "app", "db")])
    sim = simulation([*_nodes(), _node("bare", None)], bound, [pod])
    # When a node with a zone is judged
    verdict = judge(sim, pod)["n1"]
    # Then, as in kube-scheduler, no pod counts in any zone and the first-pod rule admits it
    assert verdict is None


def test_recorded_anti_affine_pod_closes_its_host_until_rolled_back() -> None:
    # Given two replicas that refuse each other per host
    first, second = (_pod(f"web-{i}", {"app": "web"}, anti=[_term(HOST, "app", "web")]) for i in (1, 2))
    sim = simulation(_nodes(), [], [first, second])
    sim.checkpoint()
    # When the first is recorded on n1
    sim.record(first, sim.nodes["n1"])
    # Then the second is refused there (by its own rule and by the placed pod's)
    verdicts = judge(sim, second)
    assert verdicts["n1"] in (ANTI_AFFINITY, EXISTING_ANTI_AFFINITY)
    assert (verdicts["n2"], verdicts["n3"]) == (None, None)
    # And a rollback opens n1 again
    sim.rollback()
    assert judge(sim, second) == {"n1": None, "n2": None, "n3": None}


def test_recorded_pod_with_anti_affinity_repels_a_plain_pod() -> None:
    # Given a pending guard refusing app=web per zone, and a plain app=web pod
    guard = _pod("guard", {"app": "db"}, anti=[_term(ZONE, "app", "web")])
    web = _pod("web", {"app": "web"})
    sim = simulation(_nodes(), [], [guard, web])
    assert judge(sim, web) == {"n1": None, "n2": None, "n3": None}
    # When the guard is recorded on n1
    sim.record(guard, sim.nodes["n1"])
    # Then the plain pod is refused in zoneA by the placed pod's rule
    assert not sim.is_plain(web)
    assert judge(sim, web) == {"n1": EXISTING_ANTI_AFFINITY, "n2": EXISTING_ANTI_AFFINITY, "n3": None}


def test_web_store_is_co_located_with_redis_cache_one_per_node() -> None:
    # Given the documented example on three nodes: three redis-cache replicas (app=store, anti-affinity
    # to app=store per host) and three web-store replicas (app=web-server, affinity to app=store and
    # anti-affinity to app=web-store per host), plus a fourth web-store replica
    caches = [
        _pod(f"redis-cache-{i}", {"app": "store"}, anti=[_term(HOST, "app", "store")]) for i in range(3)
    ]
    webs = [
        _pod(
            f"web-server-{i}",
            {"app": "web-store"},
            affinity=[_term(HOST, "app", "store")],
            anti=[_term(HOST, "app", "web-store")],
        )
        for i in range(4)
    ]
    nodes = [_node(f"worker-{i}", "zoneA") for i in range(3)]
    sim = simulation(nodes, [], [*caches, *webs])
    # When each pod in turn is placed on the first node that passes
    placed: dict[str, str | None] = {}
    for pod in [*caches, *webs]:
        verdicts = judge(sim, pod)
        name = next((n for n, reason in verdicts.items() if reason is None), None)
        placed[pod.name] = name
        if name is not None:
            sim.record(pod, sim.nodes[name])
    # Then every node runs one cache and one web server, and the fourth web server has nowhere to go
    assert placed == {
        "redis-cache-0": "worker-0",
        "redis-cache-1": "worker-1",
        "redis-cache-2": "worker-2",
        "web-server-0": "worker-0",
        "web-server-1": "worker-1",
        "web-server-2": "worker-2",
        "web-server-3": None,
    }
