"""What a pod demands of other pods and of volumes: label selectors, inter-pod (anti-)affinity,
topology spread, host ports, PVCs and DRA claims. Frozen and hashable, so the parsers intern equal
constraint sets and the planner evaluates each distinct set once.

The field names follow the Kubernetes API (core/v1 PodAffinityTerm, TopologySpreadConstraint,
ContainerPort); semantics live in the planner's filters (`shared.planner.filters`), named after
the kube-scheduler plugins they mirror.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.domain.dra import PodResourceClaim
from shared.domain.labels import LabelSelector

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # label the API server puts on every Namespace


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required (anti-)affinity term, namespaces already resolved.

    `namespaces` empty and `namespace_selector` None never happens after parsing: the API's
    "neither given" means the pod's own namespace, which the parser writes into `namespaces`.
    """

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None
    # The hash the dataclass would compute, computed once (as Resources does): the simulation
    # keys its counters by term and looks one up for every bound pod with anti-affinity and
    # every placement, and the nested selectors made each hash a dozen calls.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.selector, self.topology_key, self.namespaces, self.namespace_selector)
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[PodAffinityTerm], tuple[object, ...]]:
        # Rebuilt from its fields on unpickling: a string's hash differs between processes.
        return (PodAffinityTerm, (self.selector, self.topology_key, self.namespaces, self.namespace_selector))

    def selects_namespace(self, namespace: str, namespace_labels: Mapping[str, str] | None) -> bool:
        """The union of `namespaces` and the namespaces `namespace_selector` matches."""
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        labels = namespace_labels if namespace_labels is not None else {NAMESPACE_NAME: namespace}
        return self.namespace_selector.matches(labels)

    def selects(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether a pod with `labels` in `namespace` is one this term is about."""
        return (
            self.selector is not None
            and self.selects_namespace(namespace, namespace_labels)
            and self.selector.matches(labels)
        )


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint; matchLabelKeys already merged into `selector` by the parser."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # Honor | Ignore
    node_taints_policy: str = "Ignore"  # Honor | Ignore

    @property
    def is_hard(self) -> bool:
        """Only DoNotSchedule constraints filter nodes; ScheduleAnyway ones only score."""
        return self.when_unsatisfiable == "DoNotSchedule"


@dataclass(frozen=True, slots=True)
class HostPort:
    """One container port with a hostPort (hostIP "" means 0.0.0.0)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """Everything beyond node labels, taints and room that decides where a pod may run."""

    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()  # requiredDuringScheduling podAffinity
    anti_affinity: tuple[PodAffinityTerm, ...] = ()  # requiredDuringScheduling podAntiAffinity
    spread: tuple[SpreadConstraint, ...] = ()  # DoNotSchedule and ScheduleAnyway
    claims: tuple[str, ...] = ()  # PVC names in the pod's namespace (incl. generic ephemeral volumes)
    resource_claims: tuple[str, ...] = ()  # DRA: spec.resourceClaims names
    resource_claim_sources: tuple[PodResourceClaim, ...] = ()  # DRA: the same, with their sources
    # No constraint that depends on other pods, ports or volumes: the class-based fast path.
    # Computed once (the planner asks for every pod, many times).
    is_plain: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        plain = not (
            self.host_ports
            or self.affinity
            or self.anti_affinity
            or self.hard_spread
            or self.claims
            or self.resource_claims
        )
        object.__setattr__(self, "is_plain", plain)

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.is_hard)


NO_CONSTRAINTS = PodConstraints()
