"""NodePorts: a hostPort conflicts with one in use on the node for the same protocol and port
when either binds 0.0.0.0 or both bind the same IP (framework/types.go HostPortInfo.CheckConflict)."""

from __future__ import annotations

from collections.abc import Iterable

from shared.domain.constraints import HostPort
from shared.planner.filters.framework import Reason

REASON = "node(s) didn't have free ports for the requested pod ports"
_ANY = ("", "0.0.0.0")


def port_key(port: HostPort) -> tuple[str, str, int]:
    """(protocol, host IP, port) with the wildcard IP spelled ""."""
    return (port.protocol or "TCP", "" if port.host_ip in _ANY else port.host_ip, port.port)


def conflicts(wanted: Iterable[HostPort], used: set[tuple[str, str, int]]) -> bool:
    """Whether any wanted host port is taken on a node whose ports in use are `used`."""
    for port in wanted:
        protocol, ip, number = port_key(port)
        if (protocol, ip, number) in used:
            return True
        if ip == "":
            if any(p == protocol and n == number for p, _, n in used):
                return True
        elif (protocol, "", number) in used:
            return True
    return False


def node_ports(wanted: tuple[HostPort, ...], used: set[tuple[str, str, int]]) -> Reason:
    """None when none of the pod's host ports is in use on the node."""
    return REASON if wanted and conflicts(wanted, used) else None
