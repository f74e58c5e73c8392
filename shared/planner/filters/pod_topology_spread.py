"""PodTopologySpread, DoNotSchedule constraints (plugins/podtopologyspread/filtering.go).

Per constraint the simulation keeps the number of matching pods per domain over the eligible
nodes (nodes that have every topology key of the pod's constraints and, per nodeAffinityPolicy
(default Honor) and nodeTaintsPolicy (default Ignore), match the pod's node affinity and
tolerate its taints), and the global minimum. A node passes when
    count(domain) + (1 if the pod matches the selector) - min <= maxSkew
where min is 0 while fewer than minDomains domains exist. ScheduleAnyway never filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.domain.constraints import HOSTNAME, SpreadConstraint
from shared.planner.filters.framework import Reason

MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SKEW = "node(s) didn't match pod topology spread constraints"


@dataclass
class DomainCounts:
    """Matching pods per domain of one constraint, with the minimum kept incrementally."""

    counts: dict[str, int] = field(default_factory=dict)
    histogram: dict[int, int] = field(default_factory=dict)  # count -> number of domains
    minimum: int = 0

    def add_domain(self, value: str) -> None:
        if value not in self.counts:
            self.counts[value] = 0
            self.histogram[0] = self.histogram.get(0, 0) + 1
            self.minimum = 0

    def add_domains(self, values: set[str]) -> None:
        """Many domains at once (each with no matching pod yet)."""
        fresh = values - self.counts.keys()
        if fresh:
            self.counts.update(dict.fromkeys(fresh, 0))
            self.histogram[0] = self.histogram.get(0, 0) + len(fresh)
            self.minimum = 0

    def increment(self, value: str, by: int = 1) -> None:
        old = self.counts[value]
        new = old + by
        self.counts[value] = new
        self.histogram[old] -= 1
        self.histogram[new] = self.histogram.get(new, 0) + 1
        if self.histogram[old] == 0:
            del self.histogram[old]
            if old == self.minimum or new < self.minimum:
                self.minimum = min(self.histogram)
        self.minimum = min(self.minimum, new)  # a decrement (rollback) can go below the minimum

    def global_min(self, min_domains: int | None) -> int:
        if min_domains is not None and len(self.counts) < min_domains:
            return 0
        return self.minimum if self.counts else 0


@dataclass(frozen=True)
class SpreadState:
    """PreFilter result: each hard constraint with its live counts and whether the pod self-matches."""

    keys: tuple[str, ...]
    constraints: tuple[tuple[SpreadConstraint, DomainCounts, int], ...]


def pod_topology_spread(state: SpreadState, labels: Mapping[str, str]) -> Reason:
    """None when placing the pod on this node keeps every hard constraint within its max skew."""
    for key in state.keys:
        if key not in labels:
            return MISSING_LABEL
    for constraint, domains, self_match in state.constraints:
        value = labels[constraint.topology_key]
        skew = domains.counts.get(value, 0) + self_match - domains.global_min(constraint.min_domains)
        if skew > constraint.max_skew:
            return SKEW
    return None


def allowed_domains(state: SpreadState) -> list[tuple[str, set[str]]]:
    """Per hard constraint on a key other than the hostname, the known domains where placing the
    pod keeps the skew within bounds (a shortcut for the Filter: same answer, one set per domain)."""
    out: list[tuple[str, set[str]]] = []
    for constraint, domains, self_match in state.constraints:
        if constraint.topology_key == HOSTNAME:
            continue
        floor = domains.global_min(constraint.min_domains)
        values = {
            v for v, count in domains.counts.items() if count + self_match - floor <= constraint.max_skew
        }
        out.append((constraint.topology_key, values))
    return out
