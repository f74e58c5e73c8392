"""NodePorts: a hostPort conflicts with one in use on the node for the same protocol and port when
either binds 0.0.0.0 (or no hostIP) or both bind the same IP (plugins/nodeports, HostPortInfo)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.model import Pod
from shared.formats.kubernetes import pod_from_json
from shared.planner.filters.framework import SimNode
from shared.planner.filters.node_ports import REASON, node_ports, port_key
from shared.planner.filters.volume_binding import Volumes
from shared.planner.simulation import Simulation

DIMS = ("cpu", "memory", "nvidia.com/gpu", "pods")


def _ports(*specs: str) -> list[dict[str, Any]]:
    """ContainerPorts from "PROTOCOL/hostIP/port" (as the plugin's tests spell them)."""
    ports = []
    for spec in specs:
        protocol, host_ip, port = spec.split("/")
        raw: dict[str, Any] = {"containerPort": int(port), "hostPort": int(port), "protocol": protocol}
        if host_ip:
            raw["hostIP"] = host_ip
        ports.append(raw)
    return ports


def _pod(*ports: str, name: str = "p", init: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app:1", "ports": _ports(*ports)}]}
    if init is not None:
        spec["initContainers"] = init
    return pod_from_json({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def _used(*ports: str) -> set[tuple[str, str, int]]:
    return {port_key(p) for p in _pod(*ports).constraints.host_ports}


@pytest.mark.parametrize(
    ("wanted", "used", "conflict"),
    [
        (["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
        (["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
        (["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
        (["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
        (["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], True),
        (["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
        (["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
        (["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
        (["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
        (["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], True),
        (["TCP//8001"], ["TCP/0.0.0.0/8001"], True),  # no hostIP is 0.0.0.0
        (["TCP/127.0.0.1/8001"], ["TCP//8001"], True),
    ],
    ids=[
        "other-port",
        "same-udp-port",
        "same-tcp-port",
        "different-host-ip",
        "different-protocol",
        "second-udp-port-conflict",
        "first-tcp-port-conflict",
        "wanted-wildcard-vs-specific-ip",
        "one-of-two-wanted-is-wildcard",
        "used-wildcard-vs-specific-ip",
        "wildcard-of-other-protocol",
        "udp-wildcard-in-use",
        "empty-host-ip-is-wildcard",
        "used-empty-host-ip-is-wildcard",
    ],
)
def test_host_port_conflicts_follow_the_plugin_table(
    wanted: list[str], used: list[str], conflict: bool
) -> None:
    # Given a pod wanting `wanted` and a node with `used` host ports in use
    pod = _pod(*wanted)
    # When the filter judges the node
    reason = node_ports(pod.constraints.host_ports, _used(*used))
    # Then it is rejected exactly on a conflict
    assert reason == (REASON if conflict else None)


def test_pod_without_host_ports_never_conflicts() -> None:
    # Given a pod with only a containerPort (no hostPort)
    raw = {"containers": [{"name": "main", "image": "app:1", "ports": [{"containerPort": 8080}]}]}
    pod = pod_from_json({"metadata": {"name": "p"}, "spec": raw})
    # When judged against a node using port 8080 on every IP
    reason = node_ports(pod.constraints.host_ports, _used("TCP/0.0.0.0/8080"))
    # Then it passes
    assert reason is None


def test_sidecar_host_port_conflicts_but_a_regular_init_container_does_not() -> None:
    # Given a node using TCP 8001 on every IP, a pod whose sidecar takes hostPort 8001, and a pod whose
    # regular init container declares it (it has exited before the containers start)
    used = _used("TCP/0.0.0.0/8001")
    port = [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]
    sidecar = _pod(init=[{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always", "ports": port}])
    regular = _pod(init=[{"name": "setup", "image": "setup:1", "ports": port}])
    # When the filter judges the node for each
    reasons = [node_ports(p.constraints.host_ports, used) for p in (sidecar, regular)]
    # Then only the sidecar's port conflicts
    assert reasons == [REASON, None]


def _simulation(*nodes: SimNode) -> Simulation:
    sim = Simulation({}, {}, Volumes.of((), (), ()))
    for node in nodes:
        sim.add_node(node)
    return sim


def test_recorded_pod_takes_its_ports_and_rollback_frees_them() -> None:
    # Given two empty nodes and two replicas of a pod with hostPort 8080
    node_a = SimNode("node-a", {}, (), [4000, 0, 0, 110])
    node_b = SimNode("node-b", {}, (), [4000, 0, 0, 110])
    sim = _simulation(node_a, node_b)
    first, second = _pod("TCP//8080", name="ingress-1"), _pod("TCP//8080", name="ingress-2")
    sim.prepare([first, second])
    sim.checkpoint()
    # When the first is placed on node-a
    sim.record(first, node_a)
    # Then the second conflicts on node-a only
    state = sim.state(second)
    assert sim.dynamic(second, state, node_a, (), DIMS) == REASON
    assert sim.dynamic(second, state, node_b, (), DIMS) is None
    # And after a rollback node-a is free again
    sim.rollback()
    assert sim.dynamic(second, sim.state(second), node_a, (), DIMS) is None
    assert node_a.ports == set()


def test_rollback_keeps_ports_that_were_in_use_before() -> None:
    # Given a node already using TCP 0.0.0.0:8080 (a bound pod), and a pending pod wanting it too
    node = SimNode("node-a", {}, (), [4000, 0, 0, 110], ports=_used("TCP/0.0.0.0/8080"))
    sim = _simulation(node)
    pod = _pod("TCP//8080")
    sim.prepare([pod])
    sim.checkpoint()
    # When the pod is recorded there anyway (e.g. a gang tried) and rolled back
    sim.record(pod, node)
    sim.rollback()
    # Then the bound pod's port is still in use
    assert node.ports == {("TCP", "", 8080)}
