"""The node view every filter judges, and the filter result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.domain.model import Taint

Reason = str | None  # None: the node passes; otherwise the scheduler's words for why not


@dataclass(eq=False, slots=True)
class SimNode:
    """One node as the planner's simulation of the scheduler sees it during a run.

    `free` is the room left, a dense vector in the run's dimension order; it is the same list the
    packing bins hold, so a placement through either path is seen by both. `ports` are the host
    ports in use as (protocol, host_ip, port).
    """

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    free: list[int]
    unschedulable: bool = False
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    group: str = ""  # a new (template) node's group: where its DRA devices come from
    # A new node of a group that may launch in several zones: its labels in each of them
    # (zones.launch_labels); node affinity must hold in every one. Empty: `labels` are its own.
    launches: tuple[Mapping[str, str], ...] = ()
